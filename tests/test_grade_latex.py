"""The fast LaTeX reader against latex2sympy2_extended: the same value wherever it reads, None elsewhere."""

import json
import re
from pathlib import Path

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sympy.core.function import AppliedUndef

from benchmint.grade import latex, symbolic
from benchmint.grade.quantity import strip_math
from benchmint.grade.screen import Screen

GOLDEN = Path(__file__).parent / "data" / "physics_pairs.jsonl"
SLOW = symbolic._latex2sympy()


def reference(text: str):
    # latex2sympy makes I the imaginary unit (and evaluates I^2 to -1); the reader makes it a symbol. Compare
    # like with like: latex2sympy reads another capital in its place, renamed afterwards.
    stand_in = next(c for c in "JQWZY" if c not in text)
    value = SLOW(re.sub(r"(?<![A-Za-z\\])I(?![A-Za-z])", stand_in, text))
    if not isinstance(value, sympy.Basic):
        return value
    # latex2sympy keeps some arithmetic unevaluated (an interval from 2-2 to a-a); evaluate it as the reader does
    value = value.xreplace({sympy.Symbol(stand_in): sympy.Symbol("I")})
    # I (2) is read as a function applied to 2: its stand-in's name goes back too
    value = value.replace(lambda e: isinstance(e, AppliedUndef) and e.func.__name__ == stand_in,
                          lambda e: sympy.Function("I")(*e.args))
    return value.doit()


def same_value(a, b) -> bool:
    a = a.doit() if isinstance(a, sympy.Basic) else a  # both evaluated alike (an Eq of two numbers is True)
    if a == b:
        return True
    if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr):
        d = sympy.simplify(a - b)
        if d == 0:
            return True
        if not (a.has(sympy.Float) or b.has(sympy.Float)):
            return False
        # with decimals the two may round at different steps (sqrt(0.5) evaluated or kept, 1.5/10 divided or
        # multiplied by 0.1 in an exponent): equal to 1e-12, as numbers or with each decimal read to 1e-12
        if d.is_number:
            return abs(complex(d)) < 1e-12
        if sympy.simplify(_rational(a) - _rational(b)) == 0:
            return True
        # a decimal folded into a constant on one side only (e^{2+0.5}: 12.18... against 1.6487... e^2): equal to
        # 1e-12 relative at sample values of the symbols
        return _close_at_samples(a, b)
    if isinstance(a, sympy.Eq) and isinstance(b, sympy.Eq):
        return same_value(a.lhs, b.lhs) and same_value(a.rhs, b.rhs)
    if isinstance(a, sympy.Tuple) and isinstance(b, sympy.Tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, sympy.Interval) and isinstance(b, sympy.Interval):
        return ((a.left_open, a.right_open) == (b.left_open, b.right_open) and same_value(a.start, b.start)
                and same_value(a.end, b.end))
    return False


def _close_at_samples(a, b) -> bool:
    names = sorted(a.free_symbols | b.free_symbols, key=str)
    for point in (0.7, 1.3):
        at = dict.fromkeys(names, point)
        try:
            x, y = complex(a.subs(at).evalf(30)), complex(b.subs(at).evalf(30))
        except (TypeError, ValueError):
            return False
        if abs(x - y) > 1e-12 * max(1.0, abs(x)):
            return False
    return True


def _rational(expr):
    """``expr`` with each decimal replaced by the simplest fraction within 1e-12 of it."""
    return expr.xreplace({f: sympy.nsimplify(f, rational=True, tolerance=1e-12) for f in expr.atoms(sympy.Float)})


def _golden_texts() -> list[str]:
    texts = set()
    for line in GOLDEN.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for key in ("gold", "answer"):
            if isinstance(row.get(key), str) and not symbolic.is_words(row[key]):  # words never reach a reader
                texts.add(strip_math(row[key]))
    return sorted(texts)


def read_as_latex2sympy(text: str) -> bool:
    """Whether the reader read ``text`` (False: declined or refused); when it did, latex2sympy's value."""
    try:
        mine = latex.parse(text)
    except ValueError:  # a number beside a number: refused, the judge decides
        return False
    if mine is None:
        return False
    try:
        ref = reference(text)
    except Exception:  # noqa: BLE001 - latex2sympy cannot read it: the fast reader must not claim it either
        pytest.fail(f"read {text!r}, which latex2sympy cannot")
    assert same_value(mine, ref), (text, mine, ref)
    return True


def test_every_golden_expression_it_reads_has_latex2sympys_value():
    assert sum(read_as_latex2sympy(text) for text in _golden_texts()) >= 100


ATOMS = ["2", "3", "10", "0.5", "1.5", "a", "b", "x", "R", "g", "m", "t", "k", "v_0", "v_{max}", r"\theta",
         r"\omega", r"\pi", r"\mu_0", "I", "e", r"\Delta"]


def _combine(children):
    a, b = children
    return st.sampled_from([
        f"{a}+{b}", f"{a}-{b}", f"{a} {b}", f"{a} \\cdot {b}", f"{a} \\times {b}", f"{a}/{b}",
        f"\\frac{{{a}}}{{{b}}}", f"\\sqrt{{{a}}}", f"({a})", f"\\left({a}\\right)", f"{{{a}}}^{{{b}}}",
        f"({a})^2", f"\\sin({a})", f"\\cos {b}", f"\\ln({a})", f"\\exp({a})", f"e^{{{a}}}", f"-{a}",
        f"\\sqrt[3]{{{a}}}", f"{a} = {b}", f"({a}, {b})", f"[{a}, {b})", f"\\sin {b} \\cos {b}", f"{b}^2",
    ])


EXPRESSIONS = st.recursive(st.sampled_from(ATOMS), lambda inner: st.tuples(inner, inner).flatmap(_combine),
                           max_leaves=6)


# Derandomized: the same 300 expressions on every run, so a clean checkout's test run does not depend on which
# corner of the grammar chance visits. When changing the reader, turn it off and run several seeds
# (--hypothesis-seed) to explore further; what they find becomes a pinned case below.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(EXPRESSIONS)
def test_generated_expressions_read_as_latex2sympy_reads_them(text):
    read_as_latex2sympy(text)


@pytest.mark.parametrize("text", [
    "a(x+1)", r"\sin x/2", r"\sin^2 x", r"\sin x^2", "x^23", "3e8", r"\frac12", r"\mathrm{kg}", "(1, 2) + 1",
    "(1, 2, 3]", "[1, 2, 3]", "x!", "", "$", r"\int x dx", "a, b",
    # latex2sympy applies \pi as a function and multiplies e: found by the generated test
    r"\pi (2)", r"\pi(x)", "e (2)", "e(x+1)",
])
def test_declined(text):
    assert latex.parse(text) is None


@pytest.mark.parametrize("text", [r"2\frac{1}{2}", r"2 \frac{2}{2}", "2 (3)", "2 {3}", "2 3", "10 (2)",
                                  r"2 \left(3\right)", r"0.5 \frac{1}{2}", "x^2 3", r"\cos 2 3"])
def test_a_number_beside_a_number_is_refused(text):
    # latex2sympy adds them (2\frac{1}{2} is 5/2, 2 (3) is 5), a reader could multiply them: neither is sure
    with pytest.raises(ValueError, match="number beside a number"):
        latex.parse(text)
    with pytest.raises(ValueError, match="cannot parse"):
        symbolic.to_sympy(f"${text}$")


def test_an_answer_with_I_the_reader_declines_reaches_latex2sympy_under_another_name():
    # latex2sympy would make I the imaginary unit (I^2 R = -R, I_0 R = I R): it is handed over renamed, and
    # the symbols come back as I, I_0 and I_{max}, the names the fast reader gives them
    i, i0, imax, r = sympy.symbols("I I_0 I_{max} R")
    assert latex.parse(r"\sin^2 I") is None
    assert symbolic.to_sympy(r"$\sin^2 I$") == sympy.sin(i) ** 2
    assert latex.parse(r"\frac{1}{2}I(a-b)(a+b)") is None
    assert symbolic.to_sympy(r"\frac{1}{2}I(a-b)(a+b)").free_symbols == {i, *sympy.symbols("a b")}
    assert symbolic.to_sympy(r"\sin^2 I_0 R").free_symbols == {i0, r}
    assert symbolic.to_sympy(r"\sin^2 I_{max}").free_symbols == {imax}
    assert symbolic.symbolic_equal(r"\sin^2 I \cdot R", r"-R") == (False, "differs")


def test_values_by_hand():
    x, g, h = sympy.symbols("x g h")
    assert latex.parse(r"\sqrt{2gh}") == sympy.sqrt(2 * g * h)
    assert latex.parse("a/bc") == sympy.Symbol("a") / (sympy.Symbol("b") * sympy.Symbol("c"))
    assert latex.parse("2(x+1)") == 2 * (x + 1) and latex.parse(r"2 \frac{x}{2}") == x  # products
    assert latex.parse(r"2\pi") == 2 * sympy.pi and latex.parse(r"2 (\pi)") == 2 * sympy.pi
    assert latex.parse(r"\frac{a}{b}c") == sympy.Symbol("a") * sympy.Symbol("c") / sympy.Symbol("b")
    assert latex.parse("e^{x}") == sympy.exp(x) and latex.parse("2e") == 2 * sympy.E
    assert latex.parse(r"\log(x)") == sympy.log(x, 10) and latex.parse(r"\ln x") == sympy.log(x)
    assert latex.parse("v_{0}") == sympy.Symbol("v_0") and latex.parse("x_12") == sympy.Symbol("x_{12}")
    assert latex.parse("(2, -1)") == sympy.Tuple(2, -1) and latex.parse("(0, 1]") == sympy.Interval.Lopen(0, 1)
    assert latex.parse("I") == sympy.Symbol("I")  # a current, not the imaginary unit


@pytest.mark.parametrize("gold, answer", [
    ("$I^2 R$", "$-R$"),  # with I the imaginary unit, I^2 R would be -R
    ("$\\mu_0 I$", "$-\\mu_0 I^3$"),
    ("listen", "silent"),  # words are not products of letters
    ("stop", "pots"),
    ("$[2, 1)$", "$(5, 3]$"),  # two empty intervals
])
def test_no_false_equivalents_from_conventions(gold, answer):
    with Screen(workers=1) as screen:
        assert screen.check(gold, answer).equivalent is False
    assert symbolic.symbolic_equal(gold, answer)[0] is False


def test_decimals_rounded_at_different_steps_in_an_exponent_are_the_same_value():
    # 1.5/10 is 0.15 to the last bit here and 1.5*0.1 (one bit more) in latex2sympy: found by the generated test.
    assert read_as_latex2sympy("{a}^{1.5/10}")
    # e^{2+0.5} is one number to the reader and e^0.5 e^2 to latex2sympy: found by the generated test.
    assert read_as_latex2sympy("a e^{2+0.5}")


def test_I_applied_to_a_number_reads_as_latex2sympy_reads_it_under_its_stand_in():
    assert read_as_latex2sympy("I (2)")  # found by the generated test
