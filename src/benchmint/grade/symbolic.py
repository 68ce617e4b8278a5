"""Expressions compared by SymPy: equal only when SymPy proves the difference zero.

LaTeX is read by ``benchmint.grade.latex`` when it is in that reader's
subset (most answers; microseconds), otherwise by latex2sympy2_extended (the
parser math-verify uses, tens of milliseconds until warm), with symbol case
kept (``A`` and ``a`` are different amplitudes; math-verify's default
lower-cases them), no mixed-fraction reading (``2\\frac{1}{2}`` is not 2.5 in
a physics answer, and latex2sympy reads it so whatever its settings say, so
the fast reader refuses it and the judge decides), and ``I`` a symbol (a current), not the imaginary unit
latex2sympy makes of it (which would make I^2 R equal -R). Both readers give
the same values and symbol names. latex2sympy2_extended is a declared
dependency: importing this module without it fails loudly rather than
switching the screen off. Plain words (a run of four letters or more outside
``$...$`` and commands) are not read as products of symbols: "listen" and
"silent" would be equal.

``symbolic_equal`` is meant to run in a worker process under a time limit
(``benchmint.grade.screen`` does that): ``simplify`` can run for minutes and
cannot be interrupted from another thread.
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache

import sympy

from benchmint.grade import latex
from benchmint.grade.quantity import strip_math

if importlib.util.find_spec("latex2sympy2_extended") is None:  # imported when first needed (it is slow to load)
    raise ImportError("the symbolic screen needs latex2sympy2_extended: pip install latex2sympy2_extended")

_WORD = re.compile(r"[A-Za-z]{4,}")


def is_words(text: str) -> bool:
    """Plain words rather than an expression: a run of four letters or more outside ``$...$`` and commands."""
    return "$" not in text and _WORD.search(_COMMAND.sub(" ", strip_math(text))) is not None
_COMMAND = re.compile(r"\\[A-Za-z]+")
_CURRENT = re.compile(r"(?<![A-Za-z\\])I(?![A-Za-z])")
_CURRENT_NAME = "Icur"  # I handed to latex2sympy under this name (it reads I as the imaginary unit), renamed back
# Variant letter forms are the same symbol (\varepsilon_0 is \epsilon_0).
_VARIANTS = re.compile(r"\\var(epsilon|phi|theta|rho|sigma)(?![A-Za-z])")


@lru_cache(maxsize=1)
def _latex2sympy():
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig

    config = ConversionConfig(interpret_as_mixed_fractions=False, lowercase_symbols=False)
    return lambda t: latex2sympy(t, conversion_config=config)


def to_sympy(text: str):
    """The SymPy form of a LaTeX or plain answer; ValueError when it does not parse."""
    t = _VARIANTS.sub(r"\\\1", strip_math(text))
    if not t:
        raise ValueError("empty expression")
    if is_words(text):
        raise ValueError(f"cannot parse {text!r}: words, not an expression")
    try:
        fast = latex.parse(t)
    except ValueError as exc:
        raise ValueError(f"cannot parse {text!r}: {exc}") from None
    if fast is not None:
        return fast
    current = _CURRENT.search(t) is not None
    if current:
        # latex2sympy reads I as the imaginary unit (I^2 R becomes -R, I_0 becomes I): it gets another name
        if _CURRENT_NAME in t:
            raise ValueError(f"cannot parse {text!r}: it holds {_CURRENT_NAME}, the name I is read under")
        t = _CURRENT.sub(lambda m: "\\mathit{" + _CURRENT_NAME + "}", t)
    try:
        value = _latex2sympy()(t)
    except Exception as exc:  # the parser raises many types on malformed input
        raise ValueError(f"cannot parse {text!r}: {type(exc).__name__}: {exc}") from None
    if current:
        value = value.subs({s: sympy.Symbol("I" + s.name[len(_CURRENT_NAME):])
                            for s in value.free_symbols if s.name.startswith(_CURRENT_NAME)})
    return value


def _reduced(expr):
    """``expr`` by cancel, then by simplify, lazily: cancel (expand, then common factors) settles most rational
    expressions in a fraction of simplify's time, so simplify runs only when the caller asks for more. A reduction
    sympy cannot carry out (it raises) is left out."""
    for reduce in (sympy.cancel, sympy.simplify):
        try:
            yield reduce(expr)
        except (TypeError, ValueError, AttributeError, NotImplementedError, ZeroDivisionError, sympy.PolynomialError):
            continue


def _zero(diff) -> bool:
    return any(form == 0 for form in _reduced(diff))


def _same(g, a) -> bool:
    if sympy.S.EmptySet in (g, a):
        return False  # an interval written with its ends swapped, [2, 1): never equal to anything for sure
    if g == a:  # structurally equal; also where subtraction cannot tell (oo - oo is nan)
        return True
    if isinstance(g, sympy.Eq) and isinstance(a, sympy.Eq):
        # Whole equations: side by side, swapped, or the same equation times a constant (a - b = 0, 2a = 2b)
        if (_same(g.lhs, a.lhs) and _same(g.rhs, a.rhs)) or (_same(g.lhs, a.rhs) and _same(g.rhs, a.lhs)):
            return True
        return _proportional(g.lhs - g.rhs, a.lhs - a.rhs)
    if isinstance(g, sympy.Eq) != isinstance(a, sympy.Eq):
        # "v(t) = expr" against "expr": the value, but only of a side that names a quantity (p_1/p_2 = 3 is not 3)
        eq, expr = (g, a) if isinstance(g, sympy.Eq) else (a, g)
        named = isinstance(eq.lhs, sympy.Symbol) or (isinstance(eq.lhs, sympy.Function)
                                                     and isinstance(eq.lhs.func, sympy.core.function.UndefinedFunction))
        return named and _same(eq.rhs, expr)
    if isinstance(g, sympy.Interval) or isinstance(a, sympy.Interval):
        return (isinstance(g, sympy.Interval) and isinstance(a, sympy.Interval)
                and g.left_open == a.left_open and g.right_open == a.right_open
                and _same(g.start, a.start) and _same(g.end, a.end))
    if isinstance(g, (sympy.Tuple, tuple)) or isinstance(a, (sympy.Tuple, tuple)):
        return (isinstance(g, (sympy.Tuple, tuple)) and isinstance(a, (sympy.Tuple, tuple))
                and len(g) == len(a) and all(_same(x, y) for x, y in zip(g, a)))
    if isinstance(g, sympy.FiniteSet) or isinstance(a, sympy.FiniteSet):
        if not (isinstance(g, sympy.FiniteSet) and isinstance(a, sympy.FiniteSet)) or len(g) != len(a):
            return False
        left = list(a)
        for x in g:
            match = next((y for y in left if _same(x, y)), None)
            if match is None:
                return False
            left.remove(match)
        return True
    if not (isinstance(g, sympy.Expr) and isinstance(a, sympy.Expr)):
        return bool(g == a)
    if g.free_symbols != a.free_symbols:
        return False  # different variables: never proved equal by a cancellation
    if _apart_at_a_point(g, a):
        return False  # two values differ at a point: simplify could only fail to prove it zero, slowly
    return _zero(g - a)


# Values given to the symbols for the numeric check: positive, unremarkable, different from each other.
_POINTS = (0.7316, 1.2871, 0.9143, 1.6029, 0.5407, 1.1931, 1.4467, 0.8358)


def _apart_at_a_point(g, a) -> bool:
    """True when g and a evaluate to clearly different finite numbers at one point (so g - a is not zero).

    Only ever used to say "not proved": a difference at one point is a certain difference, while equal values
    prove nothing and leave the question to simplify. Undefined functions (v(t)) and anything that does not
    evaluate to a finite real number leave it to simplify as well.
    """
    symbols = sorted(g.free_symbols | a.free_symbols, key=lambda s: s.name)
    if g.atoms(sympy.core.function.AppliedUndef) or a.atoms(sympy.core.function.AppliedUndef):
        return False
    point = {s: _POINTS[i % len(_POINTS)] + 0.1 * (i // len(_POINTS)) for i, s in enumerate(symbols)}
    try:
        x, y = complex(g.evalf(30, subs=point)), complex(a.evalf(30, subs=point))
    except (TypeError, ValueError, AttributeError, ZeroDivisionError, OverflowError):
        return False
    if not all(map(_finite, (x, y))):
        return False
    return abs(x - y) > 1e-9 * max(abs(x), abs(y), 1e-300)


def _finite(z: complex) -> bool:
    return z.real == z.real and z.imag == z.imag and abs(z) != float("inf")


def _proportional(d1, d2) -> bool:
    """d1 = c · d2 for a nonzero number c: the same equation written as another multiple."""
    if not (isinstance(d1, sympy.Expr) and isinstance(d2, sympy.Expr)) or d1.free_symbols != d2.free_symbols:
        return False
    if not d1.free_symbols or d2 == 0:
        return False
    ratio = d1 / d2
    moved = ratio.subs({x: x + sympy.Rational(37 * (i + 1), 100)
                        for i, x in enumerate(sorted(d1.free_symbols, key=lambda x: x.name))})
    if _apart_at_a_point(ratio, moved):
        return False  # the ratio changes from one point to another (not along a scaling: formulas are homogeneous)
    for ratio in _reduced(d1 / d2):
        if ratio.is_number:
            return bool(ratio.is_finite and ratio != 0)
    return False


def symbolic_equal(gold: str, answer: str) -> tuple[bool, str]:
    """(equal for sure, reason): reason "symbolic", "differs" or "unparsed: …"."""
    try:
        g, a = to_sympy(gold), to_sympy(answer)
    except ValueError as exc:
        return False, f"unparsed: {exc}"
    return (True, "symbolic") if _same(g, a) else (False, "differs")
