"""Expressions compared by SymPy: equal only when SymPy proves the difference zero.

LaTeX is parsed by latex2sympy2_extended (the parser math-verify uses), with
symbol case kept (``A`` and ``a`` are different amplitudes; math-verify's
default lower-cases them) and no mixed-fraction reading (``2\\frac{1}{2}``
is not 2.5 in a physics answer). The parser is a declared dependency:
importing this module without it fails loudly rather than switching the
screen off.

``symbolic_equal`` is meant to run in a worker process under a time limit
(``benchmint.grade.screen`` does that): ``simplify`` can run for minutes and
cannot be interrupted from another thread.
"""

from __future__ import annotations

import sympy
from latex2sympy2_extended import latex2sympy
from latex2sympy2_extended.latex2sympy2 import ConversionConfig

from benchmint.grade.quantity import strip_math

_CONFIG = ConversionConfig(interpret_as_mixed_fractions=False, lowercase_symbols=False)


def to_sympy(text: str):
    """The SymPy form of a LaTeX or plain answer; ValueError when it does not parse."""
    t = strip_math(text)
    if not t:
        raise ValueError("empty expression")
    try:
        return latex2sympy(t, conversion_config=_CONFIG)
    except Exception as exc:  # the parser raises many types on malformed input
        raise ValueError(f"cannot parse {text!r}: {type(exc).__name__}: {exc}") from None


def _zero(diff) -> bool:
    try:
        return bool(sympy.simplify(diff) == 0)
    except (TypeError, ValueError, AttributeError, NotImplementedError):
        return False


def _same(g, a) -> bool:
    if g == a:  # structurally equal; also where subtraction cannot tell (oo - oo is nan)
        return True
    if isinstance(g, sympy.Eq) and isinstance(a, sympy.Eq):
        return _same(g.lhs, a.lhs) and _same(g.rhs, a.rhs)
    if isinstance(g, sympy.Eq) != isinstance(a, sympy.Eq):
        # "a(t) = expr" against "expr": the right-hand sides, when the other side is a bare expression
        eq, expr = (g, a) if isinstance(g, sympy.Eq) else (a, g)
        return _same(eq.rhs, expr)
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
    return _zero(g - a)


def symbolic_equal(gold: str, answer: str) -> tuple[bool, str]:
    """(equal for sure, reason): reason "symbolic", "differs" or "unparsed: …"."""
    try:
        g, a = to_sympy(gold), to_sympy(answer)
    except ValueError as exc:
        return False, f"unparsed: {exc}"
    return (True, "symbolic") if _same(g, a) else (False, "differs")
