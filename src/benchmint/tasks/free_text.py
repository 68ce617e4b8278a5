"""Free text (CSMBench's open descriptions, word answers): the reply itself is the answer, graded by similarity or a judge."""

from __future__ import annotations

import re
from typing import Any

from benchmint.tasks.base import AnswerError, AnswerKind

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


class FreeText(AnswerKind):
    name = "free_text"
    description = "free text (descriptions, explanations), graded by similarity or a judge"
    scoring = "graded"
    primary_metric = "score"

    def extract(self, text: str) -> list | None:
        """The reply without its reasoning block and outer spacing; None when nothing is left."""
        if not isinstance(text, str):
            return None
        answer = " ".join(_THINK.sub("", text).split())
        return [answer] if answer else None

    def normalize(self, value: Any) -> tuple[str]:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, str):
            raise AnswerError(f"expected the answer as text, got {type(value).__name__} {value!r}")
        text = " ".join(value.split())
        if not text:
            raise AnswerError("the answer is empty")
        return (text,)
