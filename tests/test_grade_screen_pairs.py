"""The screen on the category pair sets, and its rules one by one with values worked out by hand.

tests/data/screen_pairs_dev.jsonl (231 pairs) is the set the rules were written against;
tests/data/screen_pairs_heldout.jsonl (147 pairs) was written at the same time and first run once the rules
were fixed. Each row: gold, answer or whole reply, significant figures, truth (same / different / judge: a matter
of judgement neither verdict may decide) and, for same pairs, whether a sound check can prove it. The goals: at
least 80% of the provable pairs proved, no false equivalent, no false rejection.
"""

import sys
import time
from pathlib import Path

import pytest

from benchmint.grade.quantity import parse_quantity, same_quantity
from benchmint.grade.screen import (
    Screen,
    answer_parts,
    equation_sides,
    inequality_interval,
    is_name,
    option_letters,
    unit_vector_components,
)
from benchmint.tasks.quantity import boxed, extract_final

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import screen_pairs  # noqa: E402 - the measuring script, so the test and the README's figures are one computation

CATEGORIES = ("units", "magnitudes", "sig_figs", "fractions", "closed_forms", "symbolic", "equations", "multipart",
              "vectors", "intervals", "ratios", "options", "refusals", "closing")


@pytest.fixture(scope="module")
def screen():
    with Screen(workers=2) as s:
        yield s


@pytest.mark.parametrize("name", screen_pairs.SETS)
def test_pair_sets_cover_every_category(name):
    rows = screen_pairs.load(name)
    counts = {c: sum(r["category"] == c for r in rows) for c in CATEGORIES}
    assert set(r["category"] for r in rows) == set(CATEGORIES)
    assert min(counts.values()) >= 3 and sum(r["truth"] == "different" for r in rows) >= 50
    assert sum("reply" in r for r in rows) >= 20  # whole replies: the final-answer rules are part of the test


@pytest.mark.parametrize("name", screen_pairs.SETS)
def test_goals_on_each_pair_set(screen, name):
    rows = screen_pairs.load(name)
    got = screen_pairs.measure(rows, screen.check_many(screen_pairs.inputs(rows)))
    total = got["categories"]["total"]
    assert got["false_decisions"] == []  # no false equivalent, no false rejection
    assert total["proved"] / total["provable"] >= 0.8
    assert total["rejected"] >= 0.3 * total["different"]  # what --screen-rejects can save


# --- units: angles, solid angles and cycles kept apart; Chinese names; conversions written in units followed

@pytest.mark.parametrize(("gold", "answer"), [("1 rad/s", "1 Hz"), ("1 Hz", "1 rad/s"), ("2 rad", "2 sr"),
                                              ("2 sr", "2 rad"), ("6.28 rad/s", "1 Hz")])
def test_angles_solid_angles_and_cycles_are_not_converted_by_pint_alone(screen, gold, answer):
    got = screen.check(gold, answer)
    assert (got.equivalent, got.different, got.reason) == (False, False, "angle_units")  # the judge's call


@pytest.mark.parametrize(("gold", "answer"), [
    ("60 rpm", "1 rev/s"), ("2\\pi rad/s", "1 rev/s"), ("180^\\circ", "\\pi rad"), ("45^\\circ", "0.785 rad"),
    ("5 m", "5米"), ("3 J", "3焦耳"), ("2 m/s", "2 米/秒"), ("2 m/s", "2 米每秒"), ("1.5 kW", "1500 瓦"),
    ("0.5 T", "5000 G"), ("1 eV", "1.602 \\times 10^{-19} J"), ("10^{-6} m", "1 \\mu m")])
def test_units_followed(screen, gold, answer):
    assert screen.check(gold, answer).equivalent


def test_chinese_units_by_hand():
    assert [(q.value, str(q.unit)) for q in map(parse_quantity, ["5米", "3焦耳", "2 千米", "4 牛顿"])] == [
        (5.0, "meter"), (3.0, "joule"), (2.0, "kilometer"), (4.0, "newton")]


# --- numbers: figures, closed forms at the decimal's precision, sure differences

@pytest.mark.parametrize(("gold", "answer", "equivalent", "reason"), [
    ("\\frac{\\sqrt{2}}{2}", "0.707", True, "numeric"),  # 0.70711 is 0.707 to 3 figures
    ("0.785", "\\frac{\\pi}{4}", True, "numeric"),  # π/4 = 0.78540
    ("\\frac{\\sqrt{2}}{2}", "0.7", False, "differs"),  # one figure: too rough to be sure
    ("\\frac{\\sqrt{2}}{2}", "0.866", False, "far_off"),  # 22% off
    ("\\sqrt{3}", "1.74", False, "differs"),  # 1.7321 rounds to 1.73, and 1.74 is 0.5% off: not sure either way
    ("1.0004", "1", False, "fewer_figures"),  # within 1e-3, but one figure against five
    ("0.7071", "0.707", True, "numeric"),  # three figures suffice
    ("50\\%", "0.5", True, "numeric"),
    ("25\\%", "25", False, "differs"),  # a bare 25 for 25 %: never rejected
    ("5 km", "5 m", False, "far_off"),
    ("12 V", "12 W", False, "dimensions_differ"),
    ("3 m/s", "4 m/s", False, "differs"),  # 33% off, but no further than the gold's last digit
    ("0.5 T", "0.5 G", False, "far_off"),
    ("-3 m/s", "3 m/s", False, "differs"),  # a speed for a velocity: never a sure difference
])
def test_numbers(screen, gold, answer, equivalent, reason):
    got = screen.check(gold, answer)
    assert (got.equivalent, got.reason) == (equivalent, reason)
    assert got.different == (reason in ("far_off", "dimensions_differ"))


def test_a_huge_power_is_not_computed_in_the_calling_process():
    # 2^{10^{10}} would be an integer of ten billion bits; a worker with a time limit may try, the caller not
    start = time.monotonic()
    assert parse_quantity("2^{10^{10}}") is None and parse_quantity("10^{12345} m") is None
    assert parse_quantity("2^{123456789}") is None
    assert time.monotonic() - start < 1
    assert parse_quantity("10^{-6} m").value == 1e-06 and parse_quantity("2^{10}").value == 1024


def test_a_unit_with_a_constant_is_never_a_sure_difference():
    # pint reads G alone as the gauss here, but "c" is the speed of light: m/c is no plain unit
    ok, reason, _ = same_quantity(parse_quantity("3 m"), parse_quantity("3 kg/c"))
    assert (ok, reason) == (False, "units_unrelated")


# --- equations compared whole

@pytest.mark.parametrize(("gold", "answer", "equivalent"), [
    ("\\frac{p_1}{p_2} = 3", "\\frac{p_2}{p_1} = 3", False),  # the right-hand sides match, the equations do not
    ("\\frac{p_1}{p_2} = 3", "p_2/p_1 = 3", False),
    ("\\frac{p_1}{p_2} = 3", "3", False),  # an unnamed side: the judge decides
    ("v = 3 m/s", "u = 3 m/s", False),
    ("a = b", "b = a", True), ("mg = kx", "kx = mg", True), ("F = kx", "kx", True), ("\\sqrt{2gh}", "v = \\sqrt{2gh}", True),
    ("v(t) = v_0 - gt", "v_0 - g t", True), ("v = 3 m/s", "3 m/s", True),
    ("v = 3 m/s", "v = \\sqrt{2 g h} = 3 m/s", True),  # a named chain: its last value
    ("2x = 4y", "x = 2y", True),  # the same equation halved
    ("3 m/s", "v \\approx 3.00 m/s", True), ("3.14 m/s", "v \\approx 3 m/s", False),
    ("F = kx", "F = -kx", False), ("x = \\frac{mg}{k}", "kx = mg", False),  # k is no constant factor
])
def test_equations(screen, gold, answer, equivalent):
    got = screen.check(gold, answer)
    assert got.equivalent is equivalent and not got.different


def test_equation_pieces_by_hand():
    assert equation_sides("$v = \\sqrt{2gh} = 4.4$") == ["v", "\\sqrt{2gh}", "4.4"]
    assert equation_sides("x \\le 3") == ["x \\le 3"] and equation_sides("a \\neq b") == ["a \\neq b"]
    assert [is_name(x) for x in ("v", "v_0", "v_{max}", "T(t)", "\\omega", "\\frac{p_1}{p_2}", "2v", "\\infty")] == [
        True, True, True, True, True, False, False, False]


# --- vectors, intervals, parts, options

def test_vectors_intervals_parts_and_options_by_hand():
    assert unit_vector_components("\\hat{i} - 2\\hat{j} + 2\\hat{k}") == ["1", "-2", "2"]
    assert unit_vector_components("5\\hat{k}") == ["0", "0", "5"]
    assert unit_vector_components("3\\hat{i} + 4\\hat{i}") is None  # an axis twice
    assert [inequality_interval(t) for t in ("1 \\le x \\le 3", "x > 0", "2 \\leq x < 5", "x \\le 1", "3 > x > 1",
                                             "x > y")] == ["[1, 3]", "(0, \\infty)", "[2, 5)", "(-\\infty, 1]",
                                                           "(1, 3)", None]
    assert answer_parts("(a) 2 A (b) 6 V", 2) == ["2 A", "6 V"]
    assert answer_parts("v = 3 m/s, t = 2 s", 2) == ["v = 3 m/s", "t = 2 s"]
    assert answer_parts("(3, 4), 5", 2) == ["(3, 4)", "5"] and answer_parts("3 m/s", 2) is None
    assert [option_letters(t) for t in ("B", "(B)", "option C", "A and C", "AC", "选项D", "A or B", "Ray E")] == [
        {"B"}, {"B"}, {"C"}, {"A", "C"}, {"A", "C"}, {"D"}, None, None]


@pytest.mark.parametrize(("gold", "answer", "equivalent", "different"), [
    ("(3, 4)", "3\\hat{i} + 4\\hat{j}", True, False), ("(0, 0, 5)", "5\\hat{k}", True, False),
    ("(3, 4)", "4\\hat{i} + 3\\hat{j}", False, False), ("\\langle 2, 1 \\rangle", "(2, 1)", True, False),
    ("(\\frac{1}{2}, -4)", "0.5\\hat{i} - 4\\hat{j}", True, False),  # entry by entry (as SymPy, (0.5, -4) is empty)
    ("(1, 2, 2)", "(1, 2, 20)", False, True),  # one entry far off: a sure difference
    ("[1, 3]", "1 \\le x \\le 3", True, False), ("[1, 3]", "1 < x \\le 3", False, False),
    ("3 m/s; 2 s", "3 m/s, 2 s", True, False), ("3 m/s; 2 s", "2 s, 3 m/s", False, True),
    ("B", "option B", True, False), ("B", "D", False, True), ("AC", "A", False, True),
])
def test_vectors_intervals_parts_options(screen, gold, answer, equivalent, different):
    got = screen.check(gold, answer)
    assert (got.equivalent, got.different) == (equivalent, different)


def test_a_symbol_named_I_is_a_current_on_both_readers(screen):
    # latex.parse declines the product with parentheses; latex2sympy would read I as the imaginary unit
    assert screen.check("\\frac{I}{2}(\\omega_1^2 - \\omega_2^2)",
                        "\\frac{1}{2}I(\\omega_1-\\omega_2)(\\omega_1+\\omega_2)").equivalent
    assert not screen.check("I^2 R", "-R").equivalent


# --- final answers: boxes, closing sentences

def test_a_box_in_a_box_is_one_answer_and_two_boxes_a_conflict(screen):
    assert boxed("\\boxed{\\boxed{4}}") == ["4"] and boxed("\\boxed{x + \\boxed{4}}") == ["x + \\boxed{4}"]
    one = extract_final("so \\boxed{\\boxed{4}}.")
    assert (one.answers, one.conflict) == (("4",), False) and screen.check("4", one).equivalent
    two = extract_final("\\boxed{6.0 W} first, then \\boxed{12 W}")
    assert (two.answers, two.rule, two.conflict) == (("6.0 W", "12 W"), "boxed", True)
    assert screen.check("12 W", two).reason == "conflict"
    assert screen.check("6.0 W; 12 W", two).equivalent  # as many boxes as the gold has parts: the parts


@pytest.mark.parametrize(("reply", "answer"), [
    ("Solving the equation of motion, hence the period is T = 2\\pi\\sqrt{m/k}.", "T = 2\\pi\\sqrt{m/k}"),
    ("The range is largest at 45 degrees, so the range is \\frac{v^2}{g}.", "\\frac{v^2}{g}"),
    ("It follows. Therefore, the speed of the block is approximately 3 m/s.", "3 m/s"),
    ("Adding the drops, thus the emf equals 12 V.", "12 V"),
    ("Energy is conserved. Therefore, v = 3 m/s.", "v = 3 m/s"),
    ("The speed at the bottom is therefore 3 m/s.", "3 m/s"),
    ("由动能定理，所以 v = 3 m/s。", "v = 3 m/s"),
    ("Solving for the positive root, 2 s is the answer.", "2 s"),
    ("Only option D satisfies both conditions, so D is the answer.", "D"),
    ("The field points inward, so option A is correct.", "A"),
    ("The correct option is (B).", "(B)"),
    ("Answer: B", "B"),
    ("由机械能守恒可得，所以，物体上升的高度为10 m。", "10 m"),
    ("对物体受力分析，故拉力大小为6 N。", "6 N"),
    ("由受力分析可知，故选D。", "D"),
    ("答案：AB", "AB"),
])
def test_closing_sentences(reply, answer):
    assert extract_final(reply).answers == (answer,)


def test_a_closing_sentence_must_state_a_value():
    # "larger than the weight" is no value: nothing read, the extraction model or the judge decide
    assert extract_final("So the tension is larger than the weight.").rule is None
