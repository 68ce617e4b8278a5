"""Option numbers: single-answer questions whose options are numbered (1), (2), ... (MatVQA).

MatVQA asks for "The answer is (X)" and reads replies with the regular
expression ``answer is\\s*([0-9])`` (matvqa.txt A.2), which cannot match the
format it asks for: the parenthesis stands between "is" and the digit. Here
the parenthesis (ASCII or full-width) and a colon are allowed, case does not
matter, a number followed by more digits or a decimal part is not an option
number, and the last statement in the reply counts (the template asks for it
at the end).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from benchmint.tasks.base import AnswerError, AnswerKind

_STATEMENT = re.compile(r"answer\s+is\s*[:：]?\s*[(（]?\s*([0-9]+)(?![0-9]|\.[0-9])", re.IGNORECASE)


class OptionNumbers(AnswerKind):
    name = "option_number"
    description = "option numbers (1), (2), ... of single-answer questions"
    primary_metric = "em"

    def extract(self, text: str) -> list | None:
        if not isinstance(text, str):
            return None
        found = _STATEMENT.findall(text)
        return [int(found[-1])] if found else None

    def normalize(self, value: Any) -> tuple[int, ...]:
        """A list of option numbers (integers >= 1, or their digits as text) -> sorted unique integers."""
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise AnswerError(f"expected a list of option numbers, got {type(value).__name__} {value!r}")
        numbers = set()
        for item in value:
            if isinstance(item, str) and item.strip().isdigit():
                item = int(item)
            if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= 4095:
                raise AnswerError(f"expected option numbers 1-4095, got {item!r}")
            numbers.add(item)
        return tuple(sorted(numbers))

    def keys(self, answer: tuple) -> list[int]:
        return list(answer)  # normalised numbers are sorted already
