"""Option letters: multi-select (SPM-Bench, A-F) and single-answer (CSMBench, A-D) questions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchmint.tasks.base import AnswerError, AnswerKind
from benchmint.tasks.extract_ref import extract_choices


def choice_key(letter: str) -> int:
    return ord(letter) - ord("A")


class OptionLetters(AnswerKind):
    name = "mcq"
    description = "option letters (multiple choice, one or several answers)"
    primary_metric = "sip_f1"
    compiled = "mcq"

    def extract(self, text: str) -> list | None:
        return extract_choices(text)

    def normalize(self, value: Any) -> tuple[str, ...]:
        """A list of option letters -> sorted unique uppercase letters."""
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise AnswerError(f"expected a list of option letters, got {type(value).__name__} {value!r}")
        letters = set()
        for item in value:
            if not (isinstance(item, str) and len(item) == 1 and "A" <= item.upper() <= "Z"):
                raise AnswerError(f"expected option letters A-Z, got {item!r}")
            letters.add(item.upper())
        return tuple(sorted(letters))

    def keys(self, answer: tuple) -> list[int]:
        return [choice_key(c) for c in answer]  # normalised letters are sorted already
