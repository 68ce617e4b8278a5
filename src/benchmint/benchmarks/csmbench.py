"""CSMBench: materials-science figures at four physical scales, two tasks (csmbench.txt §III-B).

``csmbench-mcq``: caption matching, one correct caption among four (A-D).
``csmbench-open``: the figure and its caption in, a 100-300-word analysis
of the visible features out, graded against the paragraph of the source
article that discusses the figure (the gold answer is kept as its text).

Items come as the Hugging Face ImageFolder configs (``multi_scale`` for the
open task, ``multi_scale_mcq`` for the MCQ; give the config's folder, its
``train`` folder or the download's top folder) or as own JSONL rows with
the same fields:

======================  ====================================================
``id``/``index``        item id (the release's integer index, as text)
``image``/``file_name`` the figure, relative to the metadata/items file (eval
                        needs it; grading does not)
``options``             MCQ: four ``{"label", "caption"}`` objects (or that
                        list as a JSON string), or four caption texts
``answer``/``correct_answer``  MCQ: the correct letter
``caption``/``image_caption``  open: the figure caption (goes into the prompt;
                        grading does not read it)
``answer``/``describe_paragraph``  open: the reference paragraph (text, or a
                        list of texts joined by line breaks)
``scale``, ``source``, ``hybrid``: strata, kept in ``meta`` when present
======================  ====================================================
"""

from __future__ import annotations

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
    need_pick,
    opt_str,
    pick,
)

STRATA = ("scale", "source", "hybrid")


class _CSMBench(Benchmark):
    settings = ("default",)
    default_setting = "default"
    strata = ("scale",)

    def _common(self, row: Mapping, origin: layouts.Origin) -> tuple[str, tuple[ImageRef, ...], dict]:
        rid = item_id(row, "id", "index")
        images: tuple[ImageRef, ...] = ()
        found = pick(row, "image", "file_name")  # eval needs the figure (check_item); grading does not
        if found is not None:
            name, value = found
            images = image_refs(value, name, origin)
            if len(images) != 1:
                raise FieldError(name, f'field "{name}" must hold one figure, got {len(images)}')
        meta = {key: row[key] for key in STRATA if key in row and not is_blank(row[key])}
        return rid, images, meta

    def check_item(self, item: EvalItem, setting: str) -> None:
        if not item.images:
            raise FieldError("image", 'missing field "image" or "file_name" (the figure)')


class CSMBenchMCQ(_CSMBench):
    name = "csmbench-mcq"
    answer_kind = "mcq"
    graded = True  # caption matching: one option, accuracy by scale
    imagefolder_config = "multi_scale_mcq"

    def item_from_row(self, row: Mapping, origin: layouts.Origin, location: str) -> EvalItem:
        rid, images, meta = self._common(row, origin)
        options = letter_options(need(row, "options"), "options", (4, 4))
        name, value = need_pick(row, "answer", "correct_answer")
        answer = gold_answer(self.answer_kind, [value] if isinstance(value, str) else value, name)
        if len(answer) != 1 or answer[0] not in {k for k, _ in options}:
            raise FieldError(name, f'field "{name}" must name one of the options A-D, got {value!r}')
        return EvalItem(id=rid, answer=answer, meta=meta, images=images, fields={"options": options},
                        location=location)

    def template_spec(self, file: str) -> tuple[frozenset[str], bool]:
        return frozenset({"OPTIONS"}), True

    def prompt_inputs(self, item: EvalItem, setting: str) -> tuple[str, dict[str, str], tuple[ImageRef, ...]]:
        options = "\n".join(f"{k}. {text}" for k, text in item.fields["options"])
        return f"{setting}.txt", {"OPTIONS": options}, item.images


class CSMBenchOpen(_CSMBench):
    name = "csmbench-open"
    answer_kind = "free_text"  # open descriptions, graded (similarity, judge)
    graded = True
    imagefolder_config = "multi_scale"

    def item_from_row(self, row: Mapping, origin: layouts.Origin, location: str) -> EvalItem:
        rid, images, meta = self._common(row, origin)
        caption = opt_str(row, "caption", "image_caption")
        name, value = need_pick(row, "answer", "describe_paragraph")
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = "\n".join(value)
        if not isinstance(value, str):
            raise FieldError(name, f'field "{name}" must be text or a list of texts, got {type(value).__name__}')
        return EvalItem(id=rid, answer=value, meta=meta, images=images, fields={"caption": caption},
                        location=location)

    def check_item(self, item: EvalItem, setting: str) -> None:
        super().check_item(item, setting)
        if item.fields["caption"] is None:
            raise FieldError("caption", 'missing field "caption" or "image_caption"')

    def template_spec(self, file: str) -> tuple[frozenset[str], bool]:
        return frozenset({"CAPTION"}), True

    def prompt_inputs(self, item: EvalItem, setting: str) -> tuple[str, dict[str, str], tuple[ImageRef, ...]]:
        return f"{setting}.txt", {"CAPTION": item.fields["caption"]}, item.images
