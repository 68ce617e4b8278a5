"""SeePhys: open physics problems with their diagrams, in four settings (seephys.txt §4.1).

TV sends the question with its diagram(s); TC the question with the diagram's
caption appended instead of the image; TO the question alone; VO one
composite image with the question and diagrams rendered into it, and no
question text. The chain-of-thought instruction is English or Chinese by
the item's ``language`` (questions keep their source language, App. C.1;
the templates are English and Chinese, App. D.3), and a significant-figures
sentence is added when the item gives a valid ``sig_figs``. Answers are open
and graded, so the gold answer is kept as its string.

Item fields (own JSONL, the Hugging Face parquet, the VLMEvalKit TSV):

=================  =========================================================
``id``/``index``   item id (an integer index is written as text)
``question``       the problem text; may be empty only on a VO row that is
                   the composite (the VLMEvalKit ``_vo`` TSV)
``answer``         reference answer (text)
``language``       ``English`` or ``Chinese`` (``en``/``zh`` also read); needed
                   by eval (it picks the prompt), not by grade
``images``/``image``  the diagram(s): parquet image structs, file paths
                   relative to the items file, or base64 in a TSV (several
                   as a Python-list string); needed by TV
``composite_image``  the VO composite (file path or image struct); a VO row
                   without it must be a ``_vo`` row: empty question, one image
``caption``        diagram description; needed by TC
``sig_figs``       significant figures of the answer; empty/NaN: none
``subject``, ``level``, ``img_category``, ``vision_relevance``, ``source``:
                   strata, kept in ``meta`` when present
=================  =========================================================
"""

from __future__ import annotations

from collections.abc import Mapping

from benchmint.benchmarks import layouts
from benchmint.benchmarks.base import (
    Benchmark,
    EvalItem,
    FieldError,
    ImageRef,
    image_refs,
    is_blank,
    item_id,
    need,
    opt_str,
    pick,
)

SETTINGS = ("TV", "TC", "TO", "VO")
LANGUAGES = {"english": "en", "en": "en", "chinese": "zh", "zh": "zh"}
STRATA = ("subject", "level", "img_category", "vision_relevance", "source")


def parse_sig_figs(value) -> int | None:
    """A valid significant-figures count, None when absent (empty, NaN); FieldError for anything else."""
    if is_blank(value):
        return None
    if isinstance(value, bool):
        raise FieldError("sig_figs", f'field "sig_figs" must be a whole number, got {value!r}')
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise FieldError("sig_figs", f'field "sig_figs" must be a whole number, got {value!r}') from None
    if number != number:  # "nan" written as text
        return None
    if not number.is_integer() or number < 1:
        raise FieldError("sig_figs", f'field "sig_figs" must be a whole number >= 1, got {value!r}')
    return int(number)


def _level(value):
    # the parquet stores levels as integers, the TSV as their text: one form for the strata
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class SeePhys(Benchmark):
    name = "seephys"
    answer_kind = "quantity"  # open answers, graded (rules, symbolic screen, judge)
    graded = True
    settings = SETTINGS
    default_setting = "TV"
    strata = ("language", *STRATA)

    def item_from_row(self, row: Mapping, origin: layouts.Origin, location: str) -> EvalItem:
        rid = item_id(row, "id", "index")
        answer = need(row, "answer")
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise FieldError("answer", f'field "answer" must be text, got {type(answer).__name__}')
        language = None
        if pick(row, "language") is not None:  # grading reads no language; eval checks it (check_item)
            language = LANGUAGES.get(str(row["language"]).strip().lower())
            if language is None:
                raise FieldError("language", f'field "language" must be English or Chinese, got {row["language"]!r}')
        sig_figs = parse_sig_figs(row.get("sig_figs"))
        question = opt_str(row, "question") or ""
        found = pick(row, "images", "image")
        images = image_refs(found[1], found[0], origin) if found else ()
        composite = pick(row, "composite_image")
        composite_ref = image_refs(composite[1], "composite_image", origin) if composite else None
        if composite_ref is not None and len(composite_ref) != 1:
            raise FieldError("composite_image", 'field "composite_image" must hold one image')
        meta = {"language": "English" if language == "en" else "Chinese"} if language is not None else {}
        for key in STRATA:
            if key in row and not is_blank(row[key]):
                meta[key] = _level(row[key]) if key == "level" else row[key]
        meta["sig_figs"] = sig_figs
        return EvalItem(
            id=rid, answer=answer if isinstance(answer, str) else str(answer), meta=meta, images=images,
            fields={"question": question, "language": language, "sig_figs": sig_figs,
                    "caption": opt_str(row, "caption"), "composite": composite_ref[0] if composite_ref else None},
            location=location)

    def check_item(self, item: EvalItem, setting: str) -> None:
        f = item.fields
        if f["language"] is None:
            raise FieldError("language", 'missing field "language" (English or Chinese: it picks the prompt)')
        if setting == "VO":
            if f["composite"] is None and not (not f["question"].strip() and len(item.images) == 1):
                raise FieldError("composite_image", 'VO needs the composite image: field "composite_image", '
                                 "or a _vo row (empty question, one image)")
            return
        if not f["question"].strip():
            raise FieldError("question", 'missing field "question"')
        if setting == "TV" and not item.images:
            raise FieldError("images", f'{setting} needs the diagram(s): missing field "images" or "image"')
        if setting == "TC" and not f["caption"]:
            raise FieldError("caption", 'TC needs the diagram caption: missing field "caption"')

    def template_files(self, setting: str) -> tuple[str, ...]:
        return (f"{setting}.txt", f"{setting}.zh.txt", "sig_figs.txt", "sig_figs.zh.txt")

    def template_spec(self, file: str) -> tuple[frozenset[str], bool]:
        setting = file.split(".", 1)[0]
        if setting == "sig_figs":
            return frozenset({"SIG_FIGS"}), False
        names = {"TV": {"QUESTION"}, "TC": {"QUESTION", "CAPTION"}, "TO": {"QUESTION"}, "VO": set()}[setting]
        return frozenset(names | {"SIG_FIGS_HINT"}), setting in ("TV", "VO")

    def prompt_inputs(self, item: EvalItem, setting: str) -> tuple[str, dict[str, str], tuple[ImageRef, ...]]:
        f = item.fields
        suffix = ".zh.txt" if f["language"] == "zh" else ".txt"
        hint = ""
        if f["sig_figs"] is not None:
            fragment = self.template("sig_figs" + suffix)
            hint = "".join(p.text for p in fragment.render({"SIG_FIGS": str(f["sig_figs"])}))
        values = {"QUESTION": f["question"], "CAPTION": f["caption"] or "", "SIG_FIGS_HINT": hint}
        if setting == "VO":
            images = (f["composite"],) if f["composite"] is not None else item.images
        elif setting == "TV":
            images = item.images
        else:
            images = ()
        return setting + suffix, values, images
