"""Numbers with units as physics answers write them: parsing, significant figures and comparison.

``parse_quantity("$1.5 \\times 10^{-7}\\,\\mathrm{C}$")`` gives value 1.5e-7,
unit coulomb and 2 significant figures; ``None`` means the text is not one
number with an optional unit (an expression, a word, a list), which the
caller hands on to the symbolic check or the judge. Units go through pint
(LaTeX spellings such as ``\\mathrm{m/s^2}``, ``\\Omega``, ``\\mu``,
``^\\circ``, ``\\%`` and ``\\AA`` are mapped first); a unit pint does not
know makes the text unparsed, never unitless.

Comparison (``same_quantity``), the rule this package documents:

* The dimensions must agree, and a unit may not be dropped: "4 m/s²" and
  "4" are not decided equal (a bare number against a unit is undecided).
* Values are compared in the gold answer's unit, **relatively**, never with
  an absolute tolerance, so 1.6e-19 C and 1.6e-34 C stay different.
* When the item gives significant figures *n*: the answer must be written
  with exactly *n* significant figures and round to the gold value at *n*
  figures. A right value with the wrong number of figures is undecided (the
  judge applies the paper's "must meet the requirements").
* Otherwise: |answer − gold| ≤ rtol · |gold| (default rtol 1e-3); a gold
  value of 0 needs an answer of exactly 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from benchmint.tasks.quantity import braced_group

_NUMBER = re.compile(
    r"^\s*(?P<sign>[-+−])?\s*(?P<mant>(?:\d+\.?\d*|\.\d+))"
    r"(?:\s*(?:[eE](?P<e1>[-+−]?\d+)|(?:\\times|\\cdot|×|·|\*|x)\s*10\s*(?:\^|\*\*)\s*\{?\s*(?P<e2>[-+−]?\s*\d+)\s*\}?))?"
    r"(?P<rest>.*)$", re.DOTALL)

# LaTeX and typographic spellings -> pint names; order matters (longer first).
_UNIT_WORDS = [
    (r"\\Omega|Ω|\\ohm", "ohm"), (r"\\mu\s*|μ|µ", "u"), (r"\^\s*\{?\s*\\circ\s*\}?\s*C\b|°\s*C\b|℃", " degC "),
    (r"\^\s*\{?\s*\\circ\s*\}?\s*F\b|°\s*F\b", " degF "), (r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree", " degree "),
    (r"\\%|%", " percent "), (r"\\cdot|\\times", "*"), (r"\\AA|Å|\\mathring\{A\}", " angstrom "), (r"\\hbar", " hbar "),
]
_WRAPPERS = re.compile(r"\\(?:mathrm|text|textrm|rm|operatorname|mathit|mbox|unit|si)\s*\{")
_SPACES = re.compile(r"\\[,;:! ]|\\quad|\\qquad|~|\\displaystyle|\\left|\\right")
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_POWER = re.compile(r"\^\s*\{\s*([-+−]?\s*\d+(?:\.\d+)?)\s*\}|\^\s*([-+−]?\d+)")
_UNIT_START = re.compile(r"\\(?:Omega|mu|AA|%|circ|degree|mathring|hbar)|\^\s*\{?\s*\\circ")
_SUPERSCRIPTS = str.maketrans({"²": "**2", "³": "**3", "¹": "**1", "⁻": "**-", "−": "-", "·": "*", "⋅": "*"})


@dataclass(frozen=True)
class Quantity:
    """A value in a unit (pint's, or None for a bare number) and its written significant figures.

    ``sig_figs`` is a (least, most) pair: "1000" may mean 1 to 4 figures, "1.0e3" means 2.
    """

    value: float
    unit: Any
    sig_figs: tuple[int, int]
    text: str


@lru_cache(maxsize=1)
def registry():
    import pint

    return pint.UnitRegistry(autoconvert_offset_to_baseunit=True)


def strip_math(text: str) -> str:
    """The answer without math delimiters, spacing commands and text wrappers."""
    t = text.strip()
    for a, b in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if t.startswith(a) and t.endswith(b) and len(t) >= len(a) + len(b):
            t = t[len(a): len(t) - len(b)].strip()
    if t.count("$") == 1 and (t.startswith("$") or t.endswith("$")):  # a delimiter whose partner was cut off
        t = t.strip("$").strip()
    t = _SPACES.sub(" ", t)
    while (m := _WRAPPERS.search(t)) is not None:  # \mathrm{m/s^{2}} -> m/s^{2}, nested ones too
        got = braced_group(t, m.end())
        if got is None:
            break
        t = t[: m.start()] + got[0] + t[got[1]:]
    return t.strip()


def _significant(mantissa: str) -> tuple[int, int]:
    digits = mantissa.replace(".", "").lstrip("0")
    if not digits:  # zero: "0" or "0.00"
        decimals = mantissa.split(".")[1] if "." in mantissa else ""
        return (max(1, len(decimals)),) * 2
    if "." in mantissa:
        return (len(digits),) * 2
    stripped = digits.rstrip("0")  # "1000": trailing zeros of an integer may or may not be significant
    return (len(stripped), len(digits))


def _unit(text: str):
    t = text.strip()
    if not t:
        return None
    for pattern, repl in _UNIT_WORDS:
        t = re.sub(pattern, repl, t)
    t = _FRAC.sub(r"(\1)/(\2)", t)
    t = _POWER.sub(lambda m: "**" + (m.group(1) or m.group(2)).replace(" ", ""), t)
    t = t.translate(_SUPERSCRIPTS).replace("{", "(").replace("}", ")").strip()
    if not re.fullmatch(r"[A-Za-z_()*/\s\d.\-]+", t):
        raise ValueError(f"not a unit: {text!r}")
    t = re.sub(r"(?<=[A-Za-z)])\s+(?=[A-Za-z(])", "*", t.strip())  # "N m" -> "N*m"
    ureg = registry()
    try:
        units = ureg.parse_units(t)
    except Exception as exc:  # pint raises several types for unknown or malformed units
        raise ValueError(f"unknown unit {text!r}: {exc}") from None
    return units


def parse_quantity(text: str) -> Quantity | None:
    """One number with an optional unit, or None when ``text`` is anything else."""
    if not isinstance(text, str):
        return None
    stripped = text.strip()
    in_math = stripped.startswith(("$", "\\(", "\\[")) and not _WRAPPERS.search(stripped)
    t = strip_math(text)
    if "=" in t:  # "v = 3 m/s": the value after the last "="
        t = t.rsplit("=", 1)[1].strip()
    m = _NUMBER.match(t)
    if m is None:
        return None
    mant = m.group("mant")
    exponent = m.group("e1") or m.group("e2") or "0"
    value = float(f"{mant}e{int(exponent.replace('−', '-').replace(' ', ''))}")  # decimal-exact: 1.6e-19, not 1.6*10**-19
    if m.group("sign") in ("-", "−"):
        value = -value
    raw_rest = m.group("rest")
    rest = raw_rest.strip()
    if rest.startswith(("^", "/", ",", "(", "[", "\\")) and not _UNIT_START.match(rest):
        return None  # "2^3", "3/4", "1, 2", "2\pi": not one number
    if in_math and rest[:1].isalpha() and not raw_rest[:1].isspace():
        return None  # "$3mg$": in math, letters glued to a number are symbols (3·m·g), not milligrams
    try:
        unit = _unit(rest)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return Quantity(value, unit, _significant(mant), text)


def round_sig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures (decimal, half away from zero)."""
    if x == 0 or not math.isfinite(x):
        return x
    from decimal import ROUND_HALF_UP, Decimal

    d = Decimal(repr(x))
    exp = d.adjusted() - n + 1
    return float(d.scaleb(-exp).quantize(Decimal(1), rounding=ROUND_HALF_UP).scaleb(exp))


def same_quantity(gold: Quantity, answer: Quantity, sig_figs: int | None = None,
                  rtol: float = 1e-3) -> tuple[bool, str, dict]:
    """(equivalent for sure, reason, detail) under the rule of the module docstring."""
    detail: dict = {"gold": gold.value, "answer": answer.value,
                    "gold_unit": str(gold.unit) if gold.unit is not None else None,
                    "answer_unit": str(answer.unit) if answer.unit is not None else None}
    if (gold.unit is None) != (answer.unit is None):
        return False, "unit_missing", detail
    a = answer.value
    if gold.unit is not None:
        ureg = registry()
        try:
            a = ureg.Quantity(answer.value, answer.unit).to(gold.unit).magnitude
        except Exception:  # dimensionality error
            return False, "dimensions_differ", detail
        detail["answer_in_gold_unit"] = a
    g = gold.value
    if sig_figs is not None:
        detail["sig_figs"] = sig_figs
        lo, hi = answer.sig_figs
        if not round_sig(a, sig_figs) == round_sig(g, sig_figs):
            return False, "differs", detail
        if not lo <= sig_figs <= hi:
            return False, "sig_figs", detail
        return True, "numeric", detail
    detail["rtol"] = rtol
    if g == 0:
        return (a == 0), ("numeric" if a == 0 else "differs"), detail
    ok = abs(a - g) <= rtol * abs(g)
    return ok, ("numeric" if ok else "differs"), detail
