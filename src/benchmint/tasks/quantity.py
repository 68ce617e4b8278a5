"""Numbers and expressions with units (SeePhys): the final answer(s) a reply states, read by rules.

This is stage 1 of open-answer grading (seephys.txt §3, D.4); comparing the
answers with the gold one is the grading stage's (``benchmint.grade``).
Rules, first match wins:

``answer_tag``
    ``<answer>…</answer>``, the format the SeePhys prompts ask for.
``boxed``
    ``\\boxed{…}`` / ``\\fbox{…}`` with nested braces (a box inside a box is one answer).
``final_answer``
    a statement "final answer: …", "the answer is …", "the correct option is …", "Answer: …", "最终答案…",
    "答案是…", "答案：…", "故选…" (to the end of its sentence).
``closing_sentence``
    the last sentence that concludes: "hence/so/therefore/thus … is X", "… is therefore X", "therefore,
    v = X", "X is the answer", "option X is correct", "所以/因此/故/则 … 为/是/等于 X"; X must look like a
    value (a digit, LaTeX, or one word).
``last_equation``
    the last display or inline math span, or else the last line holding "=".

Reasoning inside ``<think>…</think>`` is dropped first. Several *different*
boxes, answer tags or final-answer statements are a **conflict** (the grader
reads several boxes as the parts of a gold answer with as many parts): the reply stated two final
answers, and ``Extraction.conflict`` says so instead of picking the last one
(the grader sends such replies to the judge). ``rule`` is None when no rule
matched: the caller falls back to the model-based extraction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmint.tasks.base import AnswerError, AnswerKind

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FINAL = re.compile(
    r"(?:(?:the\s+)?final\s+answer\s*(?:is)?\s*[:：]?|the\s+answer\s+is\s*[:：]?"
    r"|the\s+correct\s+(?:option|choice|answer)\s+is\s*[:：]?|(?:^|(?<=\n))[ \t]*answer\s*[:：]"
    r"|最终答案\s*(?:是|为)?\s*[:：]?|答案\s*(?:是|为|选)\s*[:：]?|答案\s*[:：]|(?:故|所以|因此)\s*选(?=\s*[A-H]))[ \t]*",
    re.IGNORECASE)
# A concluding sentence: a connective, then "… is X" (the value after the last copula); or "X is the answer".
_CONNECTIVE = re.compile(r"\b(?:hence|so|therefore|thus|consequently|finally)\b|所以|因此|故|则|综上", re.IGNORECASE)
_COPULA = re.compile(r"\s(?:is|are|equals|is\s+equal\s+to|becomes)\s+(?:(?:approximately|about|roughly)\s+)?"
                     r"|为|是|等于", re.IGNORECASE)
_COPULA_BEFORE = re.compile(r"\s(?:is|are|equals|becomes)\s+$", re.IGNORECASE)
_IS_THE_ANSWER = re.compile(r"^(?:.*?(?:[,，:：]|\b(?:so|hence|thus|therefore)\b)\s*)?(?P<x>.+?)\s+is\s+the\s+"
                            r"(?:final\s+|correct\s+)?answer$", re.IGNORECASE)
_OPTION_CORRECT = re.compile(r"\boptions?\s*(?P<x>\(?[A-H]\)?(?:\s*(?:,|and)\s*\(?[A-H]\)?)*)\s+(?:is|are)\s+"
                             r"(?:correct|right)$", re.IGNORECASE)
_LEADING_CONNECTIVE = re.compile(r"^(?:(?:and\s+)?(?:so|hence|thus|therefore)\b[,\s]*)+", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[。！？!?])|(?<=\.)(?=\s)|\n")
_VALUE_LIKE = re.compile(r"[\d\\$^=/]")
# A stated answer runs to the end of its sentence (a line end, "。", or a full stop before a space) or to the
# next statement, whichever comes first; "3.5 m" keeps its decimal point.
_SENTENCE_END = re.compile(r"\n|。|\.(?=\s)")
_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\$(.+?)\$|\\\((.+?)\\\)", re.DOTALL)


@dataclass(frozen=True)
class Extraction:
    """The final answer(s) of a reply: ``answers`` in order, the ``rule`` that found them, ``conflict``."""

    answers: tuple[str, ...]
    rule: str | None
    conflict: bool = False

    def to_json(self) -> dict:
        return {"answers": list(self.answers), "rule": self.rule, "conflict": self.conflict}


def braced_group(text: str, start: int) -> tuple[str, int] | None:
    """The content of the brace group opening at ``text[start - 1]``, and the index after it."""
    depth = 1
    i = start
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start:i], i + 1
        i += 1
    return None


def boxed(text: str) -> list[str]:
    """Contents of every outermost ``\\boxed{}`` / ``\\fbox{}`` in ``text``, nested braces kept.

    A box around nothing but another box (``\\boxed{\\boxed{4}}``) is that box's content; a box inside a
    longer one stays part of it.
    """
    found, end = [], 0
    for m in _BOX.finditer(text):
        if m.start() < end:
            continue  # inside the last box
        got = braced_group(text, m.end())
        if got is not None:
            content, end = got[0].strip(), got[1]
            while (inner := _BOX.match(content)) is not None and (sub := braced_group(content, inner.end())) \
                    and sub[1] == len(content):
                content = sub[0].strip()
            found.append(content)
    return found


def _clean(answer: str) -> str:
    answer = answer.strip()
    # A stated answer often ends a sentence: "… is 3 m/s." keeps "3 m/s".
    while answer and answer[-1] in ".。;；,，" and not answer.endswith("..."):
        answer = answer[:-1].rstrip()
    return answer


def _distinct(answers: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for a in answers:
        seen.setdefault(" ".join(a.split()), a)
    return list(seen.values())


def _statements(body: str) -> list[str]:
    """The answers stated after each "final answer" / "答案是" phrase of ``body``."""
    phrases = list(_FINAL.finditer(body))
    out = []
    for k, m in enumerate(phrases):
        stop = phrases[k + 1].start() if k + 1 < len(phrases) else len(body)
        end = _SENTENCE_END.search(body, m.end(), stop)
        out.append(body[m.end():end.start() if end else stop])
    return out


def closing_sentence(body: str) -> str | None:
    """The value stated by the last concluding sentence of ``body`` (see the module docstring), or None."""
    sentences = [x.strip() for x in _SENTENCES.split(body) if x and x.strip()]
    for sentence in reversed(sentences):
        sentence = _clean(sentence)
        found = None
        if (m := _OPTION_CORRECT.search(sentence)) is not None:
            found = m.group("x")
        elif (m := _IS_THE_ANSWER.match(sentence)) is not None:
            found = _LEADING_CONNECTIVE.sub("", m.group("x"))  # "…, so D is the answer": D
        elif (c := _CONNECTIVE.search(sentence)) is not None:
            copulas = list(_COPULA.finditer(sentence, c.end()))
            rest = sentence[c.end():].strip(" ,，:：")
            if copulas:
                found = sentence[copulas[-1].end():]
            elif "=" in rest:  # "Therefore, v = 3 m/s." / "所以 v = 3 m/s": the equation itself
                found = rest
            elif _COPULA_BEFORE.search(sentence[: c.start()]) is not None:
                found = rest  # "The speed is therefore 3 m/s."
        if found is not None:
            found = _clean(found.strip("，, "))
            if found and (_VALUE_LIKE.search(found) or len(found.split()) == 1):
                return found
    return None


def strip_reasoning(text: str) -> str:
    """``text`` without its ``<think>…</think>`` blocks (an unclosed one runs to the end)."""
    return _THINK.sub("", text)


def extract_final(text: str) -> Extraction:
    """The final answer(s) stated in ``text`` by the rules above; ``rule=None`` when none matched."""
    if not isinstance(text, str):
        return Extraction((), None)
    body = strip_reasoning(text)
    tags = [a for a in (_clean(t) for t in _TAG.findall(body)) if a]
    if tags:
        inner = [b for t in tags for b in boxed(t)]
        distinct = _distinct([_clean(b) for b in inner] if inner and len(inner) == len(tags) else tags)
        return Extraction(tuple(distinct), "answer_tag", conflict=len(distinct) > 1)
    boxes = _distinct([a for a in (_clean(b) for b in boxed(body)) if a])
    if boxes:
        return Extraction(tuple(boxes), "boxed", conflict=len(boxes) > 1)
    finals = [a for a in (_clean(a) for a in _statements(body)) if a]
    if finals:
        distinct = _distinct(finals)
        return Extraction(tuple(distinct), "final_answer", conflict=len(distinct) > 1)
    closing = closing_sentence(body)
    if closing is not None:
        return Extraction((closing,), "closing_sentence")
    spans = [next(g for g in m.groups() if g is not None) for m in _MATH.finditer(body)]
    spans = [s for s in (_clean(s) for s in spans) if s]
    if spans:
        return Extraction((spans[-1],), "last_equation")
    lines = [_clean(line) for line in body.splitlines() if "=" in line]
    if lines and lines[-1]:
        return Extraction((lines[-1],), "last_equation")
    return Extraction((), None)


class Quantities(AnswerKind):
    """Open answers that are numbers, expressions or equations with units; graded, not scored as sets."""

    name = "quantity"
    description = "numbers, expressions and equations with units (open physics answers)"
    scoring = "graded"
    primary_metric = "accuracy"

    def extract(self, text: str) -> list | None:
        found = extract_final(text)
        return list(found.answers) if found.rule is not None and found.answers else None

    def normalize(self, value: Any) -> tuple[str, ...]:
        """One answer (text) or a list of answer parts -> a tuple of stripped, non-empty strings."""
        parts = [value] if isinstance(value, str) else value
        if isinstance(parts, (bytes, dict)) or not isinstance(parts, Iterable):
            raise AnswerError(f"expected an answer as text or a list of texts, got {type(value).__name__} {value!r}")
        out = []
        for part in parts:
            if isinstance(part, bool) or not isinstance(part, (str, int, float)):
                raise AnswerError(f"expected answer parts as text or numbers, got {part!r}")
            text = str(part).strip()
            if text:
                out.append(text)
        if not out:
            raise AnswerError("the answer is empty")
        return tuple(out)
