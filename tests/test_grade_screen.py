"""SeePhys stages 1-2: final answers read by rules, and a screen that says "equivalent" only when sure.

The golden set (tests/data/physics_pairs.jsonl, written by hand) holds 226
pairs: gold answer, the model's answer (or its whole reply), the item's
significant figures, whether the two really are the same answer ("truth"),
and what the screen must say ("equivalent", or "judge" for everything it
cannot be sure of).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmint import tasks
from benchmint.grade.quantity import parse_quantity, round_sig, same_quantity
from benchmint.grade.screen import Screen, split_parts
from benchmint.tasks.quantity import boxed, extract_final

GOLDEN = [json.loads(line) for line in (Path(__file__).parent / "data" / "physics_pairs.jsonl").open(encoding="utf-8")]


@pytest.fixture(scope="module")
def screen():
    with Screen(workers=2) as s:
        yield s


def _inputs(rows):
    return [(r["gold"], extract_final(r["reply"]) if "reply" in r else r["answer"], r["sig_figs"]) for r in rows]


def test_golden_set_is_large_and_covers_the_traps():
    assert len(GOLDEN) >= 200
    notes = {r["note"].split(":")[0] for r in GOLDEN}
    for topic in ("units converted", "unit dropped or dimensions differ", "scientific notation", "tiny or huge magnitude",
                  "significant figures", "expression", "equation", "interval or vector", "several answers", "text answer",
                  "refusal", "conflict", "near miss"):
        assert topic in notes, topic
    assert sum("reply" in r for r in GOLDEN) >= 25


def test_the_screen_matches_the_golden_set_and_is_never_wrongly_sure(screen):
    results = screen.check_many(_inputs(GOLDEN))
    wrong = [(r["gold"], r.get("answer", r.get("reply")), r["screen"], x.reason) for r, x in zip(GOLDEN, results)
             if ("equivalent" if x.equivalent else "judge") != r["screen"]]
    assert wrong == []
    false_equivalent = [r for r, x in zip(GOLDEN, results) if x.equivalent and r["truth"] == "different"]
    assert false_equivalent == []
    same = [x.equivalent for r, x in zip(GOLDEN, results) if r["truth"] == "same"]
    assert sum(same) / len(same) >= 0.8  # 116 of 140 truly equal pairs decided without a judge


def test_one_pair_at_a_time_agrees_with_the_batch(screen):
    rows = GOLDEN[::9]
    batch = screen.check_many(_inputs(rows))
    assert [screen.check(*pair) for pair in _inputs(rows)] == batch


@pytest.mark.parametrize(("gold", "answer", "reason"), [
    ("1 kW", "1000 W", "numeric"),
    ("4 m/s^2", "4", "unit_missing"),
    ("1.6e-19 C", "1.6e-34 C", "far_off"),
    ("1.60e-19 C", "1.61e-19 C", "differs"),
    ("12 V", "12 A", "dimensions_differ"),
    ("$\\frac{mv^2}{R}$", "$m v^2 / R$", "symbolic"),
    ("Ray E", "ray e", "text"),
    ("2 m/s; 3 m/s^2", "2 m/s", "parts"),
])
def test_reasons(screen, gold, answer, reason):
    assert screen.check(gold, answer).reason == reason


def test_significant_figures_rule(screen):
    # 2 figures asked: 6.0 is right; 6.00 and 6 have the right value but not 2 figures (the judge decides);
    # 6.1 rounds to another value.
    assert [screen.check("6.0", a, 2).reason for a in ("6.0", "6.00", "6", "6.1", "5.96")] == [
        "text", "sig_figs", "sig_figs", "differs", "sig_figs"]
    assert screen.check("1.5 \\times 10^{-7} C", "1.5e-7 C", 2).equivalent
    assert screen.check("0.250 A", "250 mA", 3).equivalent  # 250 may be written with 2 or 3 figures


def test_a_stuck_symbolic_check_times_out_and_the_screen_goes_on():
    # equal at every point, so only an expansion of degree 30 in four variables proves it: ~5 s here
    slow = ("$(x+y+z+w)^{30}$", "$(x+y+z+w)^{28}(x^2+2x(y+z+w)+(y+z+w)^2)$", None)
    with Screen(timeout_s=1.0) as s:
        start = time.monotonic()
        results = s.check_many([slow, ("$\\sqrt{2gh}$", "$(2gh)^{1/2}$", None)])
        elapsed = time.monotonic() - start
        assert [(r.equivalent, r.reason) for r in results] == [(False, "timeout"), (True, "symbolic")]
        assert results[0].detail == {"timeout_s": 1.0}
        assert elapsed < 8
        assert s.check("$\\frac{1}{2}$", "0.5").equivalent  # a fresh worker took over


def test_conflicting_or_missing_answers_go_to_the_judge(screen):
    assert screen.check("3 m/s", extract_final("<answer>3 m/s</answer> no: <answer>4 m/s</answer>")).reason == "conflict"
    assert screen.check("3 m/s", extract_final("I cannot tell.")).reason == "unparsed"
    assert screen.check("3 m/s", "").reason == "unparsed"


def test_the_parser_is_required():
    # Without its LaTeX parser the screen must fail loudly, not quietly skip the symbolic stage.
    code = ("import sys; sys.modules['latex2sympy2_extended'] = None\n"
            "import benchmint.grade.screen")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0 and "latex2sympy2_extended" in proc.stderr


# --- stage 1: extraction rules ---

@pytest.mark.parametrize(("reply", "answers", "rule", "conflict"), [
    ("work... <answer> 1000 W. </answer>", ("1000 W",), "answer_tag", False),
    ("<think><answer>2 W</answer></think> so <answer>3 W</answer>", ("3 W",), "answer_tag", False),
    ("<answer>3 W</answer> hmm <answer>4 W</answer>", ("3 W", "4 W"), "answer_tag", True),
    ("<answer>3 W</answer> again <answer>3  W</answer>", ("3 W",), "answer_tag", False),
    ("<answer>\\boxed{5}</answer>", ("5",), "answer_tag", False),
    ("(a) \\boxed{\\frac{1}{2}} and (b) \\boxed{x^{2}}", ("\\frac{1}{2}", "x^{2}"), "boxed", True),
    ("so \\boxed{\\sqrt{\\frac{2gh}{1+\\frac{I}{mr^2}}}}.", ("\\sqrt{\\frac{2gh}{1+\\frac{I}{mr^2}}}",), "boxed", False),
    ("Final answer: 12 V.", ("12 V",), "final_answer", False),
    ("The answer is 3 m/s; the final answer is 4 m/s", ("3 m/s", "4 m/s"), "final_answer", True),
    ("The final answer is: $v = 3.5$ m/s. It follows from energy.", ("$v = 3.5$ m/s",), "final_answer", False),
    ("最终答案：10 N。", ("10 N",), "final_answer", False),
    ("答案是 3 m/s。答案是 4 m/s。", ("3 m/s", "4 m/s"), "final_answer", True),
    ("We find $E = mc^2$ and then $v = 3$ m/s.", ("v = 3",), "last_equation", False),
    ("so the speed is\nv = 3 m/s.", ("so the speed is", "v = 3 m/s")[1:], "last_equation", False),
    ("I cannot solve this.", (), None, False),
    ("", (), None, False),
])
def test_extraction_rules(reply, answers, rule, conflict):
    got = extract_final(reply)
    assert (got.answers, got.rule, got.conflict) == (answers, rule, conflict)


def test_boxed_keeps_nested_braces_and_skips_unclosed():
    assert boxed("\\boxed{a{b}c} \\fbox{d} \\boxed{unclosed") == ["a{b}c", "d"]


# --- numbers with units ---

@pytest.mark.parametrize(("text", "value", "unit", "figures"), [
    ("$1.5 \\times 10^{-7} \\mathrm{C}$", 1.5e-7, "coulomb", (2, 2)),
    ("-2.50 \\mathrm{m/s^{2}}", -2.5, "meter / second ** 2", (3, 3)),
    ("6.63 \\times 10^{-34} \\mathrm{J \\cdot s}", 6.63e-34, "joule * second", (3, 3)),
    ("1000 W", 1000.0, "watt", (1, 4)),
    ("0.0250 A", 0.025, "ampere", (3, 3)),
    ("25^{\\circ}C", 25.0, "degree_Celsius", (2, 2)),
    ("$5\\,\\Omega$", 5.0, "ohm", (1, 1)),
    ("2.2 k\\Omega", 2.2, "kiloohm", (2, 2)),
    ("12 \\mu F", 12.0, "microfarad", (2, 2)),
    ("3.0×10^8 m/s", 3.0e8, "meter / second", (2, 2)),
    ("6.02e23", 6.02e23, None, (3, 3)),
])
def test_parse_quantity(text, value, unit, figures):
    q = parse_quantity(text)
    assert (q.value, None if q.unit is None else str(q.unit), q.sig_figs) == (value, unit, figures)


@pytest.mark.parametrize("text", ["$3mg$", "3/4", "1,000", "Ray E", "5 blorps", "", "(1, 2)", "v = 3 m/s", "$x^2$"])
def test_not_one_number(text):
    assert parse_quantity(text) is None


def test_round_sig_by_hand():
    assert [round_sig(x, n) for x, n in [(5.96, 2), (0.0012345, 3), (-2.45, 2), (1.25e-19, 2), (995, 2), (0.0, 3)]] == [
        6.0, 0.00123, -2.5, 1.3e-19, 1000.0, 0.0]


def test_relative_tolerance_never_absolute():
    g = parse_quantity("1.0e-30 J")
    assert not same_quantity(g, parse_quantity("1.1e-30 J"))[0]
    assert same_quantity(g, parse_quantity("1.0005e-30 J"))[0]
    assert same_quantity(g, parse_quantity("1.0005e-30 J"), rtol=1e-4)[0] is False
    assert same_quantity(parse_quantity("0 V"), parse_quantity("1e-40 V"))[0] is False


def test_split_parts_only_at_the_top_level():
    assert split_parts("a; (b; c); \\{d;e\\}") == ["a", "(b; c)", "\\{d;e\\}"]


# --- the answer kinds ---

def test_quantity_and_free_text_kinds():
    q, t = tasks.get("quantity"), tasks.get("free_text")
    assert (q.scoring, t.scoring) == ("graded", "graded")
    assert q.extract("so <answer>3 m/s</answer>") == ["3 m/s"] and q.extract("no idea") is None
    assert q.normalize("3 m/s") == ("3 m/s",) and q.normalize(["1 A", " 2 A ", 3]) == ("1 A", "2 A", "3")
    assert t.extract("<think>x</think>  The image\nshows grains. ") == ["The image shows grains."]
    assert t.extract("<think>only thinking") is None
    for kind, bad in ((q, []), (q, [None]), (q, {"a": 1}), (t, ""), (t, 5)):
        with pytest.raises(tasks.AnswerError):
            kind.normalize(bad)
    with pytest.raises(ValueError, match="graded, not scored as sets"):
        q.keys(("3 m/s",))
