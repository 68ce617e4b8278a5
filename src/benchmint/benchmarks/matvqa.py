"""MatVQA: single-answer multiple-choice questions on figures of materials papers (matvqa.txt).

Prompts follow the MMMU-Pro chain-of-thought template the paper prints
(A.2) with numbered options ``(1): ...``; answers are option numbers (the
``option_number`` answer kind, whose extraction also reads "The answer is
(2)", which the paper's printed regex misses). The ``full_context`` setting
gives the source paper's full text as context before the question (A.3,
Experiment 2).

Item fields (own JSONL; the release's layout is not known):

========================  ==================================================
``id``                    item id
``question``              question text
``options``               list of option texts (numbered 1, 2, ... in order),
                          or an object number -> text (a JSON string of
                          either is read); 2-9 options
``answer``                the correct option number: 2, "2" or "(2)"
``image``/``images``      the figure(s), file paths relative to the items file
``context``/``context_file``  full_context: the paper's text, or a text file
                          holding it (relative to the items file)
``task``, ``domain``      strata, kept in ``meta`` when present
========================  ==================================================
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from benchmint.benchmarks import layouts
from benchmint.benchmarks.base import (
    Benchmark,
    EvalItem,
    FieldError,
    ImageRef,
    PromptError,
    gold_answer,
    image_refs,
    is_blank,
    item_file,
    item_id,
    json_value,
    need,
    opt_str,
    pick,
    read_item_file,
)

STRATA = ("task", "domain")


def numbered_options(value, name: str) -> list[str]:
    value = json_value(value, name)
    if isinstance(value, Mapping):
        try:
            pairs = sorted((int(str(k).strip("() ")), v) for k, v in value.items())
        except ValueError:
            raise FieldError(name, f'field "{name}": option keys must be numbers, got {sorted(value)}') from None
        if [k for k, _ in pairs] != list(range(1, len(pairs) + 1)):
            raise FieldError(name, f'field "{name}": options must be numbered 1-{len(pairs)}')
        texts = [v for _, v in pairs]
    elif isinstance(value, list):
        texts = value
    else:
        raise FieldError(name, f'field "{name}" must be a list or an object of options, got {type(value).__name__}')
    if not 2 <= len(texts) <= 9:  # one digit per option, as the answer statement is read
        raise FieldError(name, f'field "{name}" has {len(texts)} options, expected 2-9')
    for k, text in enumerate(texts, 1):
        if not isinstance(text, str) or not text.strip():
            raise FieldError(name, f'field "{name}": option {k} has no text')
    return [t.strip() for t in texts]


def _answer_number(value) -> list:
    if isinstance(value, str):
        m = re.fullmatch(r"\s*\(?\s*([0-9]+)\s*\)?\s*", value)
        if m is None:
            raise FieldError("answer", f'field "answer" must be an option number such as 2 or "(2)", got {value!r}')
        return [int(m.group(1))]
    return [value] if not isinstance(value, list) else value


class MatVQA(Benchmark):
    name = "matvqa"
    answer_kind = "option_number"
    graded = True
    settings = ("default", "full_context")
    default_setting = "default"
    strata = STRATA

    def item_from_row(self, row: Mapping, origin: layouts.Origin, location: str) -> EvalItem:
        rid = item_id(row, "id")
        question = opt_str(row, "question")  # eval needs it and the figure (check_item); grading does not
        options = numbered_options(need(row, "options"), "options")
        answer = gold_answer("option_number", _answer_number(need(row, "answer")), "answer")
        if len(answer) != 1 or answer[0] > len(options):
            raise FieldError("answer", f'field "answer" must be one option number 1-{len(options)}, '
                             f"got {json.dumps(row['answer'])}")
        found = pick(row, "image", "images")
        images = image_refs(found[1], found[0], origin) if found else ()
        context = pick(row, "context")
        context_file = pick(row, "context_file")
        if context is not None and not isinstance(context[1], str):
            raise FieldError("context", 'field "context" must be text')
        path = None
        if context is None and context_file is not None:
            path = item_file(context_file[1], "context_file", origin)
        meta = dict(row["meta"]) if isinstance(row.get("meta"), Mapping) else {}
        for key in STRATA:
            if key in row and not is_blank(row[key]):
                meta[key] = row[key]
        return EvalItem(id=rid, answer=answer, meta=meta, images=images,
                        fields={"question": question, "options": options,
                                "context": context[1] if context else None,
                                "context_file": str(path) if path is not None else None},
                        location=location)

    def check_item(self, item: EvalItem, setting: str) -> None:
        if item.fields["question"] is None:
            raise FieldError("question", 'missing field "question"')
        if not item.images:
            raise FieldError("image", 'missing field "image" or "images"')
        if setting == "full_context" and item.fields["context"] is None and item.fields["context_file"] is None:
            raise FieldError("context", 'full_context needs the paper\'s text: missing field "context" '
                             'or "context_file"')

    def template_spec(self, file: str) -> tuple[frozenset[str], bool]:
        names = {"QUESTION", "CHOICES"} | ({"CONTEXT"} if file.startswith("full_context") else set())
        return frozenset(names), True

    def prompt_inputs(self, item: EvalItem, setting: str) -> tuple[str, dict[str, str], tuple[ImageRef, ...]]:
        f = item.fields
        values = {"QUESTION": f["question"],
                  "CHOICES": "\n".join(f"({k}): {text}" for k, text in enumerate(f["options"], 1))}
        if setting == "full_context":
            values["CONTEXT"] = f["context"] if f["context"] is not None else _paper_text(f["context_file"], item)
        return f"{setting}.txt", values, item.images


def _paper_text(path: str, item: EvalItem) -> str:
    try:
        return read_item_file(Path(path)).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"{item.location}: cannot read the paper's text {path}: {exc}") from None
