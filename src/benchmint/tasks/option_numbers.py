"""Option numbers: single-answer questions whose options are numbered (1), (2), ... (MatVQA).

MatVQA asks for "The answer is (X)" and reads replies with the regular
expression ``answer is\\s*([0-9])`` (matvqa.txt A.2), which cannot match the
format it asks for: the parenthesis stands between "is" and the digit. The
rules here read that format and the other ways models state one option.

Rules (the executable specification; each form below is a row of the golden
corpus, tests/data/extract_golden.jsonl, task ``option_number``):

N0. Full-width digits and letters (``２``, ``Ｂ``) are read as their ASCII
    forms; full-width brackets and colons are named where they count.
N1. STATEMENTS: every match, case-insensitive, of ``answer(s)`` followed by
    ``is``, ``would be``, ``should be``, ``will be`` (each maybe followed by
    ``:``/``：``) or ``:``/``：``/``=``;
    ``(correct|right|best) (option|choice|answer) is``; ``答案`` with an
    optional ``是``/``为``/``:``/``：``; ``\\boxed{``; ``<answer>``. After it,
    SPACE, ``*`` and the words ``option``, ``choice``, ``number``, ``no.`` are
    skipped, and a VALUE is read: ITEM (SEP ITEM)*, where
      ITEM is a NUMBER (a run of digits not followed by another digit or by a
      decimal part ``.5``, and not 0: options are numbered from 1), optionally in ``( )``, ``（ ）`` or ``[ ]``, or
      written ``2)``; or an uppercase LETTER ``A``-``H`` (not preceded or
      followed by a letter; option A is 1, B is 2, ...: "answer: B" names
      option 2; the template's own ``(X)`` is no option), optionally
      bracketed the same way;
      SEP is SPACE around one of ``, ， 、 / & + ;`` or the words ``or``,
      ``and``, ``or option``, ``and option``, ``或``, ``和``, ``及``.
    A LETTER that ends the VALUE must be followed (after spaces) by the end,
    a line break, one of ``. , ; ! ) ） ] } * $ <`` or ``(``, so the "I" of
    "Answer: I think ..." is not option 9.
    A VALUE followed by ``is``/``are``/``was``/``were`` and ``not``,
    ``incorrect``, ``wrong``, ``false`` or ``invalid`` is no VALUE ("answers:
    (1) is wrong").  A statement whose VALUE names one option reads that option; a VALUE
    naming two or more different options (``(2) or (3)``, ``(1) and (2)``) is
    a HEDGE; a statement with no VALUE is passed over.
N2. The last statement with a VALUE decides: its option, or None for a HEDGE
    (a hedge is never credited: it is unparsed, scored 0).
N3. With no statement: the whole reply, else its last non-blank line, with
    SPACE, ``**`` and a final ``.`` stripped, read as ``option``/``choice``
    (optional) followed by one ITEM and nothing else.
N4. Otherwise None.

==========================================  ======  ==========================
reply                                       read    rule
==========================================  ======  ==========================
``The answer is (2)``                       2       N1 (the A.2 format)
``Answer: (2)``                             2       N1
``The answer is option 2``                  2       N1, ``option`` skipped
``The answer is ２`` / ``答案是（２）``         2       N0, N1
``answer: B``                               2       N1, letter B
``\\boxed{2}``                               2       N1
``Option 2`` / ``(2)`` / ``2)``             2       N3
``The answer is (2) or (3)``                None    N2: a hedge
``The answer is (1) and (2)``               None    N2: two options named
``The answer is not (2)``                   None    N1: no VALUE
``Answer: I think it is 2``                 None    N1: "I" is no option
==========================================  ======  ==========================
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from benchmint.tasks.base import AnswerError, AnswerKind

_WIDTH = {c: c - 0xFEE0 for lo, hi in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))
          for c in range(lo, hi + 1)}
_STATEMENT = re.compile(
    r"answers?(?:(?:\s+is|\s+(?:would|should|will)\s+be)(?:\s*[:：])?|\s*[:：=])"
    r"|(?:correct|right|best)\s+(?:option|choice|answer)\s+is"
    r"|答案\s*[是为:：]?|\\boxed\s*\{|<answer>", re.IGNORECASE)
_FILLER = re.compile(r"(?:\s|\*|(?:option|choice|number|no\.)(?![a-z]))*", re.IGNORECASE)
_ITEM = re.compile(r"([(（\[]\s*)?(?:([0-9]+)(?![0-9]|\.[0-9])|(?<![A-Za-z])([A-H])(?![A-Za-z]))(\s*[)）\]])?")
_SEP = re.compile(r"\s*(?:[,，、/&+;]|or|and|或|和|及)(?:\s*(?:option|choice)(?![a-z]))?\s*", re.IGNORECASE)
_LETTER_END = re.compile(r"[ \t]*(?:$|[\n\r.,;!)）\]}*$<(])")
_NEGATED = re.compile(r"\s*(?:is|are|was|were)\s+(?:not|incorrect|wrong|false|invalid)(?![a-z])", re.IGNORECASE)
_BARE = re.compile(r"(?:(?:option|choice)\s*)?", re.IGNORECASE)
_HEDGE = "hedge"


def _skip(pattern: re.Pattern[str], text: str, i: int) -> int:
    """End of ``pattern`` (which may match the empty string) at i."""
    m = pattern.match(text, i)
    return i if m is None else m.end()


def _item(text: str, i: int) -> tuple[int, int, bool] | None:
    """(option number, end, written as a letter) of an ITEM at i, or None."""
    m = _ITEM.match(text, i)
    if m is None or (m.group(1) is not None and m.group(4) is None):
        return None  # an opening bracket needs its closing one
    if m.group(2) is not None:
        number = int(m.group(2))
        return (number, m.end(), False) if number else None  # options are numbered from 1
    return ord(m.group(3)) - ord("A") + 1, m.end(), True


def _value(text: str, i: int) -> int | str | None:
    """The option a VALUE at i names, _HEDGE for two or more, None when there is no VALUE (rule N1)."""
    i = _skip(_FILLER, text, i)
    got = _item(text, i)
    if got is None:
        return None
    numbers = {got[0]}
    _, end, letter = got
    while True:
        sep = _SEP.match(text, end)
        nxt = _item(text, sep.end()) if sep is not None else None
        if nxt is None:
            break
        numbers.add(nxt[0])
        _, end, letter = nxt
    if (letter and _LETTER_END.match(text, end) is None) or _NEGATED.match(text, end):
        return None
    return next(iter(numbers)) if len(numbers) == 1 else _HEDGE


def _bare(line: str) -> int | None:
    s = line.strip()
    s = s[2:-2].strip() if len(s) >= 4 and s.startswith("**") and s.endswith("**") else s
    s = s[:-1].rstrip() if s.endswith(".") else s
    got = _item(s, _skip(_BARE, s, 0))
    return got[0] if got is not None and got[1] == len(s) else None


def read_option_number(text: str) -> int | None:
    """The option number a reply states (rules N0-N4 of the module docstring), or None."""
    if not isinstance(text, str):
        return None
    text = text.translate(_WIDTH)
    last: int | str | None = None
    for m in _STATEMENT.finditer(text):
        value = _value(text, m.end())
        if value is not None:
            last = value
    if last is not None:
        return None if last == _HEDGE else int(last)
    found = _bare(text)
    if found is None:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        found = _bare(lines[-1]) if len(lines) > 1 else None
    return found


class OptionNumbers(AnswerKind):
    name = "option_number"
    description = "option numbers (1), (2), ... of single-answer questions"
    primary_metric = "em"

    def extract(self, text: str) -> list | None:
        found = read_option_number(text)
        return None if found is None else [found]

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
