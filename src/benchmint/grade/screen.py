"""Stage 2 of SeePhys grading: the symbolic screen, which says "equivalent" only when it is sure.

For each (gold answer, extracted answer) pair, in order:

1. **conflict / nothing read**: undecided (the reply stated different final
   answers, or none). Several boxed answers are the parts of a gold answer
   of as many parts, and a conflict otherwise.
2. **parts**: a gold answer of several parts (separated by ";" at the top
   level) needs as many answer parts, each equivalent in order; a one-part
   answer is split at its top-level commas, "and" or "(a) … (b)" labels.
3. **text**: the same words after case folding and spacing (``Ray E``).
4. **option letters**: a gold answer of letters (``B``, ``AC``) against an
   answer that reads as letters (``(B)``, ``option B``, ``A and C``): the
   same set, or another one (a sure difference).
5. **equations** are compared whole: a named side (``v = …``, ``T(t) = …``)
   against a bare value compares the value; the same name on both sides
   compares the values; anything else goes to SymPy as two equations (sides
   swapped, or the same up to a constant factor). ``p_1/p_2 = 3`` is never
   compared by its ``3``.
6. **vectors and intervals**: ``3\\hat{i} + 4\\hat{j}`` is the list
   ``(3, 4)``, ``\\langle 2, 1\\rangle`` is ``(2, 1)``, and an inequality
   in one variable (``1 \\le x < 3``) is the interval ``[1, 3)`` when the
   other side is an interval.
7. **numbers with units** (``benchmint.grade.quantity``): units converted,
   relative tolerance or the item's significant figures, closed forms at
   the decimal's precision.
8. **expressions** (``benchmint.grade.symbolic``): SymPy proves the
   difference zero, in a worker process killed after ``timeout_s``.

Everything not shown equivalent — differences, unparsed text, timeouts —
is ``equivalent=False`` with the reason, and goes to the judge (stage 3).
``different=True`` marks the few verdicts that are sure the other way (a
different dimension between plain units, a value far off at the gold's
precision, other option letters); the grade flow uses them only with
``--screen-rejects``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from benchmint.grade.quantity import SURE_DIFFERENCES, parse_quantity, same_quantity, strip_math
from benchmint.grade.symbolic import symbolic_equal  # imported here so a missing parser fails at once
from benchmint.run.executors import ProcessExecutor, UnitTimeout, WorkerDied
from benchmint.tasks.quantity import Extraction

DEFAULT_RTOL = 1e-3
SURE = SURE_DIFFERENCES | {"other_option"}  # reasons that are sure the answer is not the gold one
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


def split_parts(text: str, separators: str = ";；") -> list[str]:
    """``text`` split at top-level ``separators`` (not inside braces, brackets or parentheses)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth = max(0, depth - 1)
        elif c in separators and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_LABEL = re.compile(r"(?:^|\s)\(\s*(?:[a-h]|i{1,3}|iv|v)\s*\)\s*")
_AND = re.compile(r"\s+(?:and|以及|和)\s+|\s*[,，、]\s*")


def answer_parts(text: str, wanted: int) -> list[str] | None:
    """A one-part answer read as ``wanted`` parts: "(a) 2 A (b) 6 V", "3 m/s, 2 s", "2 A and 6 V"; else None."""
    labelled = [p.strip().rstrip(",;，；") for p in _LABEL.split(text) if p.strip().rstrip(",;，；")]
    if len(_LABEL.findall(text)) == wanted and len(labelled) == wanted:
        return labelled
    depth, cuts, last = 0, [], 0
    for i, c in enumerate(text):
        depth += 1 if c in "{[(" else -1 if c in "}])" else 0
        if depth == 0 and i >= last and (m := _AND.match(text, i)) is not None:
            cuts.append((i, m.end()))
            last = m.end()
    pieces, start = [], 0
    for begin, end in cuts:
        pieces.append(text[start:begin])
        start = end
    pieces.append(text[start:])
    pieces = [p.strip() for p in pieces if p.strip()]
    return pieces if len(pieces) == wanted else None


_PROSE = re.compile(r"[A-Za-z]{2,}")
_MATHS = re.compile(r"[$\\^_=0-9{}]")
_TEXT_WRAPPERS = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\s*\{([^{}]*)\}")


def _words(text: str) -> str:
    """Text for the literal comparison: spacing collapsed; case folded only for prose.

    In mathematics case is meaning (A and a, R and r are different symbols), so
    case is folded only when the text has a word and no mathematical markup.
    """
    words = " ".join(strip_math(text).split()).rstrip(".。")
    return words.casefold() if _PROSE.search(words) and not _MATHS.search(text) else words


# --- option letters

_OPTION_LEAD = re.compile(r"^(?:选项|答案选?|选)\s*[:：]?\s*"
                          r"|^(?:the\s+)?(?:correct\s+)?(?:options?|choices?|answers?)?\s*(?:is|are)?\s*[:：]?\s*",
                          re.IGNORECASE)
_LETTERS = re.compile(r"^\(?([A-H])\)?(?:\s*(?:,|，|、|&|\s|and|和)\s*\(?([A-H])\)?)*$")


def option_letters(text: str) -> frozenset[str] | None:
    """The set of option letters ``text`` consists of (``B``, ``(B)``, ``option B``, ``A and C``, ``AC``), or None."""
    t = strip_math(_TEXT_WRAPPERS.sub(r"\1", text)).strip().rstrip(".。")
    t = _OPTION_LEAD.sub("", t, count=1).strip()
    if re.fullmatch(r"[A-H]{1,8}", t):
        letters = list(t)
    elif _LETTERS.fullmatch(t):
        letters = re.findall(r"(?<![A-Za-z])[A-H](?![A-Za-z])", t)
    else:
        return None
    if len(set(letters)) != len(letters):
        return None  # "A A" or "ABA": not a plain set of options
    return frozenset(letters)


# --- equations, vectors, intervals

_APPROX = re.compile(r"\\approx(?![A-Za-z])|≈")


def equation_sides(text: str) -> list[str]:
    """The sides of ``text`` at its top-level "=" signs (one side when it has none; ≤ ≥ ≠ are not "=").

    "≈" counts as "=": the value after it is compared by the number rules, which judge closeness themselves.
    """
    t = _APPROX.sub("=", strip_math(text))
    sides, depth, start = [], 0, 0
    for i, c in enumerate(t):
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth = max(0, depth - 1)
        elif c == "=" and depth == 0 and (i == 0 or t[i - 1] not in "<>!:\\") and t[i + 1: i + 2] != "=":
            sides.append(t[start:i])
            start = i + 1
    sides.append(t[start:])
    return [x.strip() for x in sides]


def is_name(side: str) -> bool:
    """A side that names a quantity: one letter or Greek letter, a subscript, an argument (``v_0``, ``T(t)``)."""
    t = side.replace(" ", "")
    m = re.fullmatch(r"([A-Za-z]|\\[A-Za-z]+)(?:_(?:[A-Za-z0-9]|\{[A-Za-z0-9,]+\}))?(?:\([A-Za-z0-9]\))?", t)
    if m is None:
        return False
    head = m.group(1)
    return not head.startswith("\\") or head[1:] in _GREEK_NAMES


_GREEK_NAMES = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
                "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "phi", "varphi", "chi", "psi", "omega",
                "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega"}
_UNIT_VECTOR = re.compile(r"\\(?:hat|vec|mathbf|boldsymbol)\s*\{\s*([ijkxyz])\s*\}|\\(?:hat|vec)\s*([ijkxyz])\b")
_AXIS = {"i": 0, "x": 0, "j": 1, "y": 1, "k": 2, "z": 2}


def unit_vector_components(text: str) -> list[str] | None:
    """``3\\hat{i} - 4\\hat{j}`` as its components ["3", "-4", "0"] (x, y, z), or None for anything else."""
    t = strip_math(text)
    if not _UNIT_VECTOR.search(t):
        return None
    components = ["0", "0", "0"]
    seen = set()
    for term in re.split(r"(?=[+-])", t.replace(" ", "")):
        if not term:
            continue
        found = list(_UNIT_VECTOR.finditer(term))
        if len(found) != 1:
            return None
        m = found[0]
        coefficient = (term[: m.start()] + term[m.end():]).strip().rstrip("*").replace("\\cdot", "")
        if coefficient in ("", "+", "-"):
            coefficient += "1"
        axis = _AXIS[m.group(1) or m.group(2)]
        if axis in seen:
            return None
        seen.add(axis)
        components[axis] = coefficient.lstrip("+")
    return components


def list_entries(text: str) -> list[str] | None:
    """The entries of a whole answer written as a list, ``(3, 4)`` or ``\\langle 3, 4\\rangle``; else None."""
    t = strip_math(text).replace("\\langle", "(").replace("\\rangle", ")")
    if len(t) < 2 or t[0] not in "([" or t[-1] not in ")]":
        return None
    inner = t[1:-1]
    entries = split_parts(inner, ",")
    if len(entries) < 2 or not _balanced(inner):
        return None
    return entries


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += 1 if c in "{[(" else -1 if c in "}])" else 0
        if depth < 0:
            return False
    return depth == 0


_INEQUALITY = re.compile(r"\\leq?|\\geq?|<=|>=|≤|≥|<|>")
_LESS = {"\\le": "<=", "\\leq": "<=", "<=": "<=", "≤": "<=", "<": "<",
         "\\ge": ">=", "\\geq": ">=", ">=": ">=", "≥": ">=", ">": ">"}


def inequality_interval(text: str) -> str | None:
    """An inequality in one variable as the interval it describes: ``1 \\le x < 3`` -> ``[1, 3)``; else None."""
    t = strip_math(text)
    ops = [_LESS[m.group(0)] for m in _INEQUALITY.finditer(t)]
    terms = [x.strip() for x in _INEQUALITY.split(t)]
    if not ops or len(ops) > 2 or any(not x for x in terms):
        return None
    names = [i for i, x in enumerate(terms) if is_name(x)]
    if len(names) != 1:
        return None
    var = names[0]
    if len(ops) == 2:
        if var != 1 or ops[0][0] != ops[1][0]:
            return None
        low, high = (terms[0], terms[2]) if ops[0][0] == "<" else (terms[2], terms[0])
        low_open, high_open = (ops[0] == "<", ops[1] == "<") if ops[0][0] == "<" else (ops[1] == ">", ops[0] == ">")
        return f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    bound, op = terms[1 - var], ops[0]
    below = (op[0] == "<") == (var == 0)  # x < b, or b > x: bounded above
    strict = op in ("<", ">")
    if below:
        return f"(-\\infty, {bound}{')' if strict else ']'}"
    return f"{'(' if strict else '['}{bound}, \\infty)"


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
        # The workers start now and warm SymPy and latex2sympy up while this process reads the answers
        self._executor = ProcessExecutor(workers, unit_seconds=timeout_s, preload=("benchmint.grade._symbolic_warm",))
        self._executor.start()

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
        if not isinstance(gold, str) or not gold.strip():
            return _Pending(ScreenResult(False, "unparsed"), [])
        gold_parts = split_parts(gold)
        if isinstance(answer, Extraction):
            answers = list(answer.answers)
            several_boxes = answer.rule in ("boxed", "answer_tag") and len(answers) == len(gold_parts) > 1
            if answer.conflict and not several_boxes:
                return _Pending(ScreenResult(False, "conflict", {"answers": answers}), [])
        else:
            answers = [answer] if isinstance(answer, str) and answer.strip() else []
        if not answers:
            return _Pending(ScreenResult(False, "unparsed"), [])
        answer_parts_ = answers if len(answers) > 1 else split_parts(answers[0])
        if len(gold_parts) > 1 and len(answer_parts_) == 1:
            answer_parts_ = answer_parts(answer_parts_[0], len(gold_parts)) or answer_parts_
        if len(gold_parts) != len(answer_parts_):
            return _Pending(ScreenResult(False, "parts", {"gold": len(gold_parts), "answer": len(answer_parts_)}), [])
        symbolic, details = [], []
        undecided: ScreenResult | None = None
        for g, a in zip(gold_parts, answer_parts_):
            ok, reason, detail = self._pair(g, a, sig_figs if len(gold_parts) == 1 else None)
            if reason == "symbolic?":
                symbolic.extend(detail["jobs"])
                continue
            if not ok:
                found = ScreenResult(False, reason, {k: v for k, v in detail.items() if k != "by"},
                                     different=reason in SURE)
                if found.different:
                    return _Pending(found, [])  # one part surely wrong: the answer is
                undecided = undecided or found
                continue
            details.append(detail)
        if undecided is not None:
            return _Pending(undecided, [])
        if symbolic:
            return _Pending(None, symbolic)
        reasons = {d.get("by", "numeric") for d in details}
        return _Pending(ScreenResult(True, reasons.pop() if len(reasons) == 1 else "parts",
                                     details[0] if len(details) == 1 else {"parts": details}), [])

    def _pair(self, gold: str, answer: str, sig_figs: int | None) -> tuple[bool, str, dict]:
        """One part: (equivalent, reason, detail); reason "symbolic?" hands detail's (gold, answer) jobs to SymPy."""
        if _words(gold) == _words(answer):
            return True, "text", {"by": "text"}
        letters = option_letters(gold)
        if letters is not None:
            read = option_letters(answer)
            if read is not None:
                same = read == letters
                return same, "option" if same else "other_option", {"by": "option", "gold": sorted(letters),
                                                                    "answer": sorted(read)}
        g_sides, a_sides = equation_sides(gold), equation_sides(answer)
        if len(g_sides) > 1 or len(a_sides) > 1:
            return self._equation(g_sides, a_sides, sig_figs)
        return self._value(g_sides[0], a_sides[0], sig_figs)

    def _equation(self, g: list[str], a: list[str], sig_figs: int | None) -> tuple[bool, str, dict]:
        """Equations compared whole: a named side against a value, the same name on both sides, or SymPy."""
        if any(not side for side in g + a):
            return False, "unparsed", {}
        if len(g) == 1:  # a bare gold value against "v = ... = 3 m/s": the answer's own name, its last value
            return self._value(g[0], a[-1], sig_figs) if is_name(a[0]) else (False, "equation_side", {})
        if len(g) > 2:
            return False, "unparsed", {}
        if len(a) == 1:  # "v = 3 m/s" against "3 m/s": only a named gold side makes the other its value
            return self._value(g[1], a[0], sig_figs) if is_name(g[0]) else (False, "equation_side", {})
        if is_name(g[0]) and is_name(a[0]) and _same_name(g[0], a[0]):
            return self._value(g[1], a[-1], sig_figs)
        if len(a) > 2:
            return False, "unparsed", {}
        return False, "symbolic?", {"jobs": [(f"{g[0]} = {g[1]}", f"{a[0]} = {a[1]}")]}

    def _value(self, gold: str, answer: str, sig_figs: int | None) -> tuple[bool, str, dict]:
        """One side against one side: vectors, intervals, numbers with units, else SymPy."""
        if _words(gold) == _words(answer):
            return True, "text", {"by": "text"}
        lists = _as_lists(gold, answer)
        if lists is not None:
            return self._entries(*lists)
        gq, aq = parse_quantity(_ratio(gold)), parse_quantity(_ratio(answer))
        if gq is not None and aq is not None:
            ok, reason, detail = same_quantity(gq, aq, sig_figs, self.rtol)
            if reason == "symbolic?":
                return False, "symbolic?", {"jobs": [(gold, answer)]}
            return ok, reason, {**detail, "by": "numeric"}
        if gq is not None and gq.unit is not None:
            return False, "unit_missing" if aq is None else "unparsed", {}
        if any(strip_math(x)[:1] in "([" and "," in x and list_entries(x) is None for x in (gold, answer)):
            return False, "unparsed", {}  # a list followed by something, "(3, 4) m/s": not SymPy's to read
        if sig_figs is not None and gq is not None:
            return False, "sig_figs", {}  # a number asked to n figures, answered as an expression: the judge's call
        return False, "symbolic?", {"jobs": [(gold, answer)]}

    def _entries(self, gold: str, answer: str) -> tuple[bool, str, dict]:
        """Lists and intervals (``(3, 4)``, ``[1, 3)``): the same brackets and length, then entry by entry."""
        g, a = list_entries(gold), list_entries(answer)
        if g is None or a is None:
            return False, "unparsed", {}
        gs, as_ = _brackets(gold), _brackets(answer)
        if len(g) != len(a) or (gs[0], gs[-1]) != (as_[0], as_[-1]):
            return False, "differs", {}  # [1, 3] against (1, 3)
        jobs, details = [], []
        for x, y in zip(g, a):
            ok, reason, detail = self._value(x, y, None)
            if reason == "symbolic?":
                jobs.extend(detail["jobs"])
            elif not ok:
                return False, reason, detail  # one entry settles it (a sure difference stays sure)
            else:
                details.append(detail)
        if jobs:
            return False, "symbolic?", {"jobs": jobs}
        return True, "list", {"by": "list", "entries": details}


def _brackets(text: str) -> str:
    return strip_math(text).replace("\\langle", "(").replace("\\rangle", ")")


def _as_lists(gold: str, answer: str) -> tuple[str, str] | None:
    """Both sides as bracketed lists when either is one: unit vectors as components, an inequality as the
    interval it describes; None when neither side is a list."""
    g_vec, a_vec = unit_vector_components(gold), unit_vector_components(answer)
    if g_vec is not None or a_vec is not None:
        other = a_vec if g_vec is not None and a_vec is not None else list_entries(answer if g_vec is not None
                                                                                   else gold)
        vec = g_vec if g_vec is not None else a_vec
        assert vec is not None
        if other is None or len(other) not in (2, 3) or (len(other) == 2 and vec[2] != "0"):
            return gold, answer  # a unit vector against no list: _entries calls it unparsed
        as_list = [f"({', '.join(x[:len(other)])})" for x in (vec, other)]
        return (as_list[0], as_list[1]) if g_vec is not None else (as_list[1], as_list[0])
    g_list, a_list = list_entries(gold) is not None, list_entries(answer) is not None
    if not (g_list or a_list):
        return None
    if g_list and not a_list:
        answer = inequality_interval(answer) or answer
    elif a_list and not g_list:
        gold = inequality_interval(gold) or gold
    return gold, answer


_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*$")


def _ratio(text: str) -> str:
    """A ratio of two numbers, ``2:3``, as the fraction it stands for (``\\frac{2}{3}``); other text as it is."""
    m = _RATIO.match(strip_math(text))
    return f"\\frac{{{m.group(1)}}}{{{m.group(2)}}}" if m else text


def _same_name(a: str, b: str) -> bool:
    return a.replace(" ", "").replace("{", "").replace("}", "") == b.replace(" ", "").replace("{", "").replace("}", "")
