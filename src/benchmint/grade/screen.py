"""Stage 2 of SeePhys grading: the symbolic screen, which says "equivalent" only when it is sure.

For each (gold answer, extracted answer) pair, in order:

1. **conflict / nothing read**: undecided (the reply stated different final
   answers, or none).
2. **parts**: a gold answer of several parts (separated by ";" at the top
   level) needs as many answer parts, each equivalent in order.
3. **text**: the same words after case folding and spacing (``Ray E``).
4. **numbers with units** (``benchmint.grade.quantity``): units converted,
   relative tolerance or the item's significant figures.
5. **expressions** (``benchmint.grade.symbolic``): SymPy proves the
   difference zero, in a worker process killed after ``timeout_s``.

Everything not shown equivalent — differences, unparsed text, timeouts —
is ``equivalent=False`` with the reason, and goes to the judge (stage 3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from benchmint.grade.quantity import parse_quantity, same_quantity, strip_math
from benchmint.grade.symbolic import symbolic_equal  # imported here so a missing parser fails at once
from benchmint.run.executors import ProcessExecutor, UnitTimeout, WorkerDied
from benchmint.tasks.quantity import Extraction

DEFAULT_RTOL = 1e-3
DEFAULT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ScreenResult:
    """``equivalent`` True only when the screen is sure; ``reason`` says why (machine-readable)."""

    equivalent: bool
    reason: str
    detail: dict = field(default_factory=dict)
    different: bool = False

    def to_json(self) -> dict:
        return {"equivalent": self.equivalent, "different": self.different, "reason": self.reason,
                "detail": self.detail}


def split_parts(text: str) -> list[str]:
    """``text`` split at top-level semicolons (not inside braces, brackets or parentheses)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth = max(0, depth - 1)
        elif c in ";；" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_PROSE = re.compile(r"[A-Za-z]{2,}")
_MATHS = re.compile(r"[$\\^_=0-9{}]")


def _words(text: str) -> str:
    """Text for the literal comparison: spacing collapsed; case folded only for prose.

    In mathematics case is meaning (A and a, R and r are different symbols), so
    case is folded only when the text has a word and no mathematical markup.
    """
    words = " ".join(strip_math(text).split()).rstrip(".。")
    return words.casefold() if _PROSE.search(words) and not _MATHS.search(text) else words


@dataclass
class _Pending:
    """A pair decided in the parent, or waiting for the symbolic worker."""

    result: ScreenResult | None
    parts: list[tuple[str, str]]


class Screen:
    """The symbolic screen: ``check`` one pair, ``check_many`` a batch (symbolic checks on ``workers`` processes).

    ``rtol``: relative tolerance of numbers without significant figures;
    ``timeout_s``: time limit of one symbolic check (the worker is killed).
    """

    def __init__(self, rtol: float = DEFAULT_RTOL, timeout_s: float = DEFAULT_TIMEOUT_S, workers: int = 1) -> None:
        if not rtol >= 0:
            raise ValueError(f"rtol must be >= 0, got {rtol!r}")
        self.rtol, self.timeout_s = rtol, timeout_s
        self._executor = ProcessExecutor(workers, unit_seconds=timeout_s)

    def close(self) -> None:
        self._executor.close()

    def __enter__(self) -> Screen:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def check(self, gold: str, answer: str | Extraction, sig_figs: int | None = None) -> ScreenResult:
        return self.check_many([(gold, answer, sig_figs)])[0]

    def check_many(self, pairs: Iterable[tuple[str, str | Extraction, int | None]]) -> list[ScreenResult]:
        pending = [self._first_pass(g, a, s) for g, a, s in pairs]
        jobs = sorted({p for item in pending if item.result is None for p in item.parts})
        decided: dict[tuple[str, str], tuple[bool, str]] = {}
        for i, got in self._executor.map_unordered(symbolic_equal, jobs):
            if isinstance(got, UnitTimeout):
                decided[jobs[i]] = (False, "timeout")
            elif isinstance(got, (WorkerDied, Exception)):
                decided[jobs[i]] = (False, f"error: {got}")
            else:
                decided[jobs[i]] = got
        out = []
        for item in pending:
            if item.result is not None:
                out.append(item.result)
                continue
            verdicts = [decided[p] for p in item.parts]
            failed = next((r for ok, r in verdicts if not ok), None)
            detail = {"timeout_s": self.timeout_s} if failed == "timeout" else {}
            out.append(ScreenResult(failed is None, "symbolic" if failed is None else failed, detail))
        return out

    def _first_pass(self, gold: str, answer: str | Extraction, sig_figs: int | None) -> _Pending:
        """Decide by text and numbers where possible; else the (gold, answer) parts for SymPy."""
        if isinstance(answer, Extraction):
            if answer.conflict:
                return _Pending(ScreenResult(False, "conflict", {"answers": list(answer.answers)}), [])
            answers = list(answer.answers)
        else:
            answers = [answer] if isinstance(answer, str) and answer.strip() else []
        if not answers or not isinstance(gold, str) or not gold.strip():
            return _Pending(ScreenResult(False, "unparsed"), [])
        gold_parts = split_parts(gold)
        answer_parts = answers if len(answers) > 1 else split_parts(answers[0])
        if len(gold_parts) != len(answer_parts):
            return _Pending(ScreenResult(False, "parts", {"gold": len(gold_parts), "answer": len(answer_parts)}), [])
        symbolic, details = [], []
        for g, a in zip(gold_parts, answer_parts):
            ok, reason, detail = self._pair(g, a, sig_figs if len(gold_parts) == 1 else None)
            if reason == "symbolic?":
                symbolic.append((g, a))
                continue
            if not ok:
                return _Pending(ScreenResult(False, reason, detail), [])
            details.append(detail)
        if symbolic:
            return _Pending(None, symbolic)
        reasons = {d.get("by", "numeric") for d in details}
        return _Pending(ScreenResult(True, reasons.pop() if len(reasons) == 1 else "parts",
                                     details[0] if len(details) == 1 else {"parts": details}), [])

    def _pair(self, gold: str, answer: str, sig_figs: int | None) -> tuple[bool, str, dict]:
        if _words(gold) == _words(answer):
            return True, "text", {"by": "text"}
        gq, aq = parse_quantity(gold), parse_quantity(answer)
        if gq is not None and aq is not None:
            ok, reason, detail = same_quantity(gq, aq, sig_figs, self.rtol)
            return ok, reason, {**detail, "by": "numeric"}
        if gq is not None and gq.unit is not None:
            return False, "unit_missing" if aq is None else "unparsed", {}
        if sig_figs is not None and gq is not None:
            return False, "sig_figs", {}  # a number asked to n figures, answered as an expression: the judge's call
        return False, "symbolic?", {}
