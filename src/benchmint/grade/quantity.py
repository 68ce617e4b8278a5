"""Numbers with units as physics answers write them: parsing, significant figures and comparison.

``parse_quantity("$1.5 \\times 10^{-7}\\,\\mathrm{C}$")`` gives value 1.5e-7,
unit coulomb and 2 significant figures; ``None`` means the text is not one
number with an optional unit (an expression, a word, a list), which the
caller hands on to the symbolic check or the judge. Units go through pint
(LaTeX spellings such as ``\\mathrm{m/s^2}``, ``\\Omega``, ``\\mu``,
``^\\circ``, ``\\%`` and ``\\AA`` are mapped first); a unit pint does not
know makes the text unparsed, never unitless.

Chinese unit names (``5米``, ``3焦耳``, ``2 米/秒``) are read through a small
table, since pint knows none; ``G`` is the gauss as 1e-4 T (pint's gauss is the
CGS one, which no SI unit converts to). A number may be a closed form
(``10\\sqrt{2} m/s``, ``\\pi rad``, ``4\\pi \\times 10^{-7}``): then
``exact`` holds its SymPy value.

Comparison (``same_quantity``), the rule this package documents:

* The dimensions must agree, and a unit may not be dropped: "4 m/s²" and
  "4" are not decided equal (a bare number against a unit is undecided).
  A percentage against a bare number is a number (50 % is 0.5).
* Angles, solid angles, cycles and counts are kept apart although pint
  makes them all dimensionless: 1 rad/s is not decided equal to 1 Hz, nor
  2 rad to 2 sr; a conversion written in units (rpm, rev/s, degrees) is
  followed.
* Values are compared in the gold answer's unit, **relatively**, never with
  an absolute tolerance, so 1.6e-19 C and 1.6e-34 C stay different.
* When the item gives significant figures *n*: the answer must be written
  with exactly *n* significant figures and round to the gold value at *n*
  figures. A right value with the wrong number of figures is undecided (the
  judge applies the paper's "must meet the requirements").
* Otherwise, two written decimals: |answer − gold| ≤ rtol · |gold| (default
  rtol 1e-3), and the answer written to at least min(the gold's figures, 3)
  figures ("1" is not decided equal to "1.0004"); a gold value of 0 needs
  an answer of exactly 0.
* A decimal against a closed form (0.707 against √2/2): the closed form at
  the decimal's precision, which must be 3 figures or more (0.7 is left to
  the judge).

``SURE_DIFFERENCES`` names the reasons of pairs no reading could make equal: plain units
of different dimensions, or values apart by more than 5 % and more than the
gold's last written digit (the same magnitude with the other sign is left to the judge).
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

    ``sig_figs`` is a (least, most) pair: "1000" may mean 1 to 4 figures, "1.0e3" means 2; None for a closed
    form, whose ``exact`` SymPy value is kept.
    """

    value: float
    unit: Any
    sig_figs: tuple[int, int] | None
    text: str
    exact: Any = None


# Units pint lacks or reads otherwise: the gauss as an SI unit (pint's is the CGS one, convertible to no SI
# unit), "rev" for a revolution.
_DEFINITIONS = ("gauss_si = 1e-4 * tesla", "rev = revolution")


@lru_cache(maxsize=1)
def registry():
    import pint

    ureg = pint.UnitRegistry(autoconvert_offset_to_baseunit=True)
    for line in _DEFINITIONS:
        ureg.define(line)
    return ureg


# Chinese unit names (longest first, so 千米 is not read as 千 + 米); 每 is "per".
_CHINESE_UNITS = sorted({
    "千米": "km", "公里": "km", "厘米": "cm", "毫米": "mm", "微米": "um", "纳米": "nm", "米": "m",
    "千克": "kg", "公斤": "kg", "克": "g", "毫秒": "ms", "秒": "s", "分钟": "min", "小时": "h",
    "牛顿": "N", "牛": "N", "焦耳": "J", "千焦": "kJ", "焦": "J", "千瓦时": "kWh", "千瓦": "kW", "瓦特": "W", "瓦": "W",
    "千伏": "kV", "伏特": "V", "伏": "V", "毫安": "mA", "安培": "A", "安": "A", "欧姆": "ohm", "欧": "ohm",
    "帕斯卡": "Pa", "千帕": "kPa", "帕": "Pa", "赫兹": "Hz", "赫": "Hz", "特斯拉": "T", "库仑": "C", "库": "C",
    "法拉": "F", "微法": "uF", "开尔文": "K", "摄氏度": "degC", "弧度": "rad", "度": "degree", "电子伏特": "eV",
    "电子伏": "eV", "升": "L", "毫升": "mL", "摩尔": "mol", "每": "/",
}.items(), key=lambda kv: -len(kv[0]))
_CHINESE = re.compile("|".join(re.escape(k) for k, _ in _CHINESE_UNITS))
_CHINESE_MAP = dict(_CHINESE_UNITS)
# Root units pint treats as dimensionless that a physics answer keeps apart (1 Hz is 2π rad/s, not 1 rad/s).
_KEPT_APART = ("radian", "count")
# Units whose dimension a reply cannot have meant otherwise: a different dimension between two of these is a
# sure difference (a constant such as G or c in a unit is not one of them).
PLAIN_UNITS = frozenset({
    "meter", "second", "gram", "newton", "joule", "watt", "volt", "ampere", "ohm", "coulomb", "farad", "henry",
    "tesla", "gauss_si", "pascal", "hertz", "kelvin", "degree_Celsius", "electron_volt", "liter", "minute", "hour",
    "day", "year", "atmosphere", "bar", "mole", "weber", "siemens", "calorie", "watt_hour", "angstrom", "radian",
    "degree", "steradian", "revolution", "revolutions_per_minute", "kilometer_per_hour", "percent",
})


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


@lru_cache(maxsize=4096)
def _unit(text: str):
    t = text.strip()
    if not t:
        return None
    t = _CHINESE.sub(lambda m: " " + _CHINESE_MAP[m.group(0)] + " ", t).strip()
    for pattern, repl in _UNIT_WORDS:
        t = re.sub(pattern, repl, t)
    t = _FRAC.sub(r"(\1)/(\2)", t)
    t = _POWER.sub(lambda m: "**" + (m.group(1) or m.group(2)).replace(" ", ""), t)
    t = t.translate(_SUPERSCRIPTS).replace("{", "(").replace("}", ")").strip()
    if not re.fullmatch(r"[A-Za-z_()*/\s\d.\-]+", t):
        raise ValueError(f"not a unit: {text!r}")
    t = re.sub(r"\bG\b", "gauss_si", t)
    t = re.sub(r"(?<=[A-Za-z)])\s+(?=[A-Za-z(])", "*", t.strip())  # "N m" -> "N*m"
    t = re.sub(r"\s*/\s*", "/", t)
    ureg = registry()
    try:
        units = ureg.parse_units(t)
    except Exception as exc:  # pint raises several types for unknown or malformed units
        raise ValueError(f"unknown unit {text!r}: {exc}") from None
    return units


def parse_quantity(text: str) -> Quantity | None:
    """One number (written, or a closed form) with an optional unit; None when ``text`` is anything else."""
    if not isinstance(text, str):
        return None
    return _parse_quantity(text)


@lru_cache(maxsize=4096)  # a batch repeats its gold answers and units: each text is read once
def _parse_quantity(text: str) -> Quantity | None:
    stripped = text.strip()
    in_math = stripped.startswith(("$", "\\(", "\\[")) and not _WRAPPERS.search(stripped)
    t = strip_math(text)
    if "=" in t:
        return None  # an equation is compared whole (benchmint.grade.screen), never by its last side
    m = _NUMBER.match(t)
    if m is None:
        return _closed_form(t)
    mant = m.group("mant")
    exponent = m.group("e1") or m.group("e2") or "0"
    value = float(f"{mant}e{int(exponent.replace('−', '-').replace(' ', ''))}")  # decimal-exact: 1.6e-19, not 1.6*10**-19
    if m.group("sign") in ("-", "−"):
        value = -value
    raw_rest = m.group("rest")
    rest = raw_rest.strip()
    if rest.startswith(("^", "/", ",", "(", "[", "\\")) and not _UNIT_START.match(rest):
        return _closed_form(t)  # "2^3", "3/4", "2\pi": not one written number
    if in_math and rest[:1].isalpha() and not raw_rest[:1].isspace():
        return None  # "$3mg$": in math, letters glued to a number are symbols (3·m·g), not milligrams
    try:
        unit = _unit(rest)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return Quantity(value, unit, _significant(mant), text)


_CLOSED_FORM_MARK = re.compile(r"\\(?:pi|sqrt|frac|dfrac|tfrac|ln|exp|sin|cos|tan)|\^|\be\^")


# Powers SymPy would compute as integers at once (2^{10^{10}}): this runs in the calling process, with no time
# limit, so such a text is left to the symbolic check in a worker.
_HUGE_POWER = re.compile(r"\^\s*\{[^}]*\^|\^\s*\{?\s*[-+]?\s*\d{4,}")
_NUMBER_COMMANDS = re.compile(r"\\(?:pi|sqrt|[dt]?frac|ln|exp|sin|cos|tan|times|cdot|left|right)(?![A-Za-z])")
_SYMBOL_LETTER = re.compile(r"[A-DF-Za-df-z\\]|E")


def _closed_form(t: str) -> Quantity | None:
    """A closed-form number with an optional unit after the last space (``10\\sqrt{2} m/s``), or None."""
    if not _CLOSED_FORM_MARK.search(t) or ":" in t or _HUGE_POWER.search(t):
        return None
    from benchmint.grade import latex

    cuts = [len(t)] + [m.start() for m in re.finditer(r"\s+(?=[A-Za-z\\°])", t)][::-1]
    for cut in cuts:
        head, tail = t[:cut].strip(), t[cut:].strip()
        if not head or _SYMBOL_LETTER.search(_NUMBER_COMMANDS.sub(" ", head)):
            continue  # a letter other than e in the number part: a symbol, not a closed-form number
        try:
            unit = _unit(tail)
            value = latex.parse(head)
        except (ValueError, TypeError):
            continue
        if value is None or getattr(value, "free_symbols", True) or not getattr(value, "is_number", False):
            continue
        try:
            number = complex(value.evalf(30))
        except (TypeError, ValueError):
            return None
        if number.imag != 0 or not math.isfinite(number.real):
            return None
        return Quantity(number.real, unit, None, t, exact=value)
    return None


def round_sig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures (decimal, half away from zero)."""
    if x == 0 or not math.isfinite(x):
        return x
    from decimal import ROUND_HALF_UP, Decimal

    d = Decimal(repr(x))
    exp = d.adjusted() - n + 1
    return float(d.scaleb(-exp).quantize(Decimal(1), rounding=ROUND_HALF_UP).scaleb(exp))


def _kept_apart(unit) -> dict[str, float]:
    """The exponents of the root units pint calls dimensionless but a physics answer keeps apart."""
    if unit is None:
        return {}
    root = registry().Quantity(1, unit).to_root_units().units
    return {name: power for name, power in dict(root._units).items() if name in _KEPT_APART}


def _plain(unit) -> bool:
    """Every factor of ``unit`` is a common unit (any prefix): its dimension is what the writer meant."""
    if unit is None:
        return False
    ureg = registry()
    for name in dict(unit._units):
        parsed = ureg.parse_unit_name(name)
        if not parsed or parsed[0][1] not in PLAIN_UNITS:
            return False
    return True


def _percent_only(unit) -> bool:
    return unit is not None and dict(unit._units) == {"percent": 1}


def _last_digit(q: Quantity) -> float:
    """One unit in the last written digit of a written decimal (0 for a closed form)."""
    if q.sig_figs is None or q.value == 0:
        return 0.0
    return 10.0 ** (math.floor(math.log10(abs(q.value))) - q.sig_figs[0] + 1)


def same_quantity(gold: Quantity, answer: Quantity, sig_figs: int | None = None,
                  rtol: float = 1e-3) -> tuple[bool, str, dict]:
    """(equivalent for sure, reason, detail) under the rule of the module docstring.

    Reasons of a sure difference (``SURE_DIFFERENCES``): ``dimensions_differ`` between plain units, ``far_off``.
    """
    detail: dict = {"gold": gold.value, "answer": answer.value,
                    "gold_unit": str(gold.unit) if gold.unit is not None else None,
                    "answer_unit": str(answer.unit) if answer.unit is not None else None}
    g, a, reason = _in_gold_unit(gold, answer, detail)
    if reason is not None:
        return False, reason, detail
    far = _far_off(gold, g, a) and not detail.get("percent")
    if sig_figs is not None:
        detail["sig_figs"] = sig_figs
        if answer.sig_figs is None:
            return False, "sig_figs", detail  # a closed form where figures were asked: the judge's call
        lo, hi = answer.sig_figs
        if not round_sig(a, sig_figs) == round_sig(g, sig_figs):
            return False, "far_off" if far else "differs", detail
        if not lo <= sig_figs <= hi:
            return False, "sig_figs", detail
        return True, "numeric", detail
    detail["rtol"] = rtol
    if g == 0 or a == 0:
        return (a == g), ("numeric" if a == g else "differs"), detail
    if abs(a - g) <= 1e-9 * abs(g):  # the same value, whatever the figures (1 rev/s and 2π rad/s)
        return True, "numeric", detail
    if gold.sig_figs is None or answer.sig_figs is None:
        # A closed form against a decimal: the closed form at the decimal's precision, 3 figures or more.
        decimal = answer if gold.sig_figs is None else gold
        if decimal.sig_figs is None:
            if gold.exact.is_Rational and answer.exact.is_Rational:  # 2:3 against 4:6
                same = bool(gold.exact == answer.exact)
                return same, "numeric" if same else ("far_off" if far else "differs"), detail
            return False, "symbolic?", detail  # two closed forms: SymPy decides
        figures = decimal.sig_figs[1]
        d_value, e_value = (a, g) if decimal is answer else (g, a)
        half = 0.5 * 10.0 ** (math.floor(math.log10(abs(d_value))) - figures + 1)
        ok = figures >= 3 and abs(d_value - e_value) <= half * (1 + 1e-9)
        return ok, "numeric" if ok else ("far_off" if far else "differs"), {**detail, "precision": figures}
    ok = abs(a - g) <= rtol * abs(g)
    if ok and answer.sig_figs[1] < min(gold.sig_figs[0], 3):
        return False, "fewer_figures", detail  # "1" against "1.0004": a rounder answer than the gold allows
    return ok, ("numeric" if ok else "far_off" if far else "differs"), detail


def _in_gold_unit(gold: Quantity, answer: Quantity, detail: dict) -> tuple[float, float, str | None]:
    """Both values in the gold answer's unit (a percentage against a bare number: both numbers), or the reason
    they cannot be compared."""
    g_unit, a_unit, a, g = gold.unit, answer.unit, answer.value, gold.value
    if _percent_only(g_unit) and a_unit is None:  # 50 % against 0.5: both numbers
        g, g_unit = g / 100, None
        detail["percent"] = True
    elif _percent_only(a_unit) and g_unit is None:
        a, a_unit = a / 100, None
        detail["percent"] = True
    if (g_unit is None) != (a_unit is None):
        return g, a, "unit_missing"
    if g_unit is not None:
        try:
            a = registry().Quantity(a, a_unit).to(g_unit).magnitude
        except Exception:  # dimensionality error
            return g, a, "dimensions_differ" if _plain(g_unit) and _plain(a_unit) else "units_unrelated"
        if _kept_apart(g_unit) != _kept_apart(a_unit):
            return g, a, "angle_units"  # 1 rad/s against 1 Hz: pint converts, physics does not
        detail["answer_in_gold_unit"] = a
    return g, a, None


def _far_off(gold: Quantity, g: float, a: float) -> bool:
    """More than 5 % from the gold value and more than one unit of its last written digit."""
    if g == 0 or abs(a + g) <= 1e-3 * abs(g):
        return False  # the opposite sign: a speed for a velocity, a magnitude for a component — the judge's call
    return abs(a - g) > 0.05 * abs(g) and abs(a - g) > _last_digit(gold)


SURE_DIFFERENCES = frozenset({"dimensions_differ", "far_off"})  # same_quantity's reasons of a sure difference
