"""SPM-Bench: multi-select questions on cropped microscopy figures (spm-bench.txt App. A, D).

Each question has options A-F, one or more of them correct (answers are
written ``A, B, D``); the model also reports its confidence and how
difficult it found the question (§4, Figure 8), which ``reply_fields`` reads
from the reply's last ``Confidence:`` and ``Difficulty:`` lines. The reply's
token count comes from the model call itself.

Item fields (own JSONL; no public release exists):

================  ==========================================================
``id``            item id
``question``      question stem
``options``       list of option texts (lettered A, B, ... in order), or an
                  object letter -> text (a JSON string of either is read)
``answer``        the correct letters: a list (``["A", "B", "D"]``) or text
                  (``"A, B, D"``); each must be an option
``image``/``images``  the figure: a file path relative to the items file
``meta`` and ``level``, ``discipline``, ``domain``, ``question_type``,
``bloom_level``, ``technique``: strata, kept in ``meta`` when present
================  ==========================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from benchmint.benchmarks import layouts
from benchmint.benchmarks.base import (
    Benchmark,
    EvalItem,
    FieldError,
    ImageRef,
    gold_answer,
    image_refs,
    is_blank,
    item_id,
    letter_options,
    need,
    opt_str,
    pick,
)

STRATA = ("level", "discipline", "domain", "question_type", "bloom_level", "technique")
_LETTERS = re.compile(r"[A-Za-z](?:\s*[,;]\s*[A-Za-z]|\s+[A-Za-z])*")  # "A, B, D", "A;B", "A B"
# "Confidence: 0.8", "**Difficulty:** 70%": the last such line of a reply counts
_REPORTED = {name: re.compile(rf"^[\s*_#>-]*{name}[\s*_]*[:：=][\s*_]*([0-9]*\.?[0-9]+)\s*(%?)", re.I | re.M)
             for name in ("confidence", "difficulty")}


def _answer_letters(value) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if not _LETTERS.fullmatch(text):
            raise FieldError("answer", f'field "answer" must list option letters such as "A, B, D", got {value!r}')
        return re.findall(r"[A-Za-z]", text)
    return value


def reported_value(text: str, name: str) -> float | None:
    """The number a reply gives on its last ``name:`` line, as 0-1 (a percentage is divided by 100)."""
    if not isinstance(text, str):
        return None
    matches = _REPORTED[name].findall(text)
    if not matches:
        return None
    number, percent = matches[-1]
    value = float(number) / (100.0 if percent else 1.0)
    return value if 0.0 <= value <= 1.0 else None


class SPMBench(Benchmark):
    name = "spm"
    answer_kind = "mcq"
    settings = ("default",)
    default_setting = "default"
    strata = STRATA

    def item_from_row(self, row: Mapping, origin: layouts.Origin, location: str) -> EvalItem:
        rid = item_id(row, "id")
        question = opt_str(row, "question")  # eval needs it and the figure (check_item); scoring does not
        options = letter_options(need(row, "options"), "options", (2, 26))
        answer = gold_answer(self.answer_kind, _answer_letters(need(row, "answer")), "answer")
        letters = {k for k, _ in options}
        stray = [a for a in answer if a not in letters]
        if stray:
            raise FieldError("answer", f'field "answer" names {stray}, not among the options {sorted(letters)}')
        found = pick(row, "image", "images")
        images = image_refs(found[1], found[0], origin) if found else ()
        meta = dict(row["meta"]) if isinstance(row.get("meta"), Mapping) else {}
        for key in STRATA:
            if key in row and not is_blank(row[key]):
                meta[key] = row[key]
        return EvalItem(id=rid, answer=answer, meta=meta, images=images,
                        fields={"question": question, "options": options}, location=location)

    def check_item(self, item: EvalItem, setting: str) -> None:
        if item.fields["question"] is None:
            raise FieldError("question", 'missing field "question"')
        if not item.images:
            raise FieldError("image", 'missing field "image" or "images"')

    def template_spec(self, file: str) -> tuple[frozenset[str], bool]:
        return frozenset({"QUESTION", "OPTIONS"}), True

    def prompt_inputs(self, item: EvalItem, setting: str) -> tuple[str, dict[str, str], tuple[ImageRef, ...]]:
        options = "\n".join(f"{k}. {text}" for k, text in item.fields["options"])
        return f"{setting}.txt", {"QUESTION": item.fields["question"], "OPTIONS": options}, item.images

    def reply_fields(self, text: str) -> dict:
        """The confidence and difficulty the reply reports (None when absent or outside 0-1)."""
        return {"confidence": reported_value(text, "confidence"), "difficulty": reported_value(text, "difficulty")}
