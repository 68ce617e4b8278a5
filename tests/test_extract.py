"""Golden corpus and property tests for the reference answer extractor."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmint.tasks.extract_ref import extract, extract_choices, extract_hkls

from golden import load_corpus

_ROWS = load_corpus()


def _case_id(lineno: int, row: dict) -> str:
    note = row["note"].encode("ascii", "replace").decode("ascii")
    return f"L{lineno}-{row['task']}-{note[:60]}"


def _expected(row: dict):
    exp = row["expected"]
    if exp is None or row["task"] in ("mcq", "option_number"):
        return exp
    return [tuple(x) for x in exp]


@pytest.mark.parametrize("row", [r for _, r in _ROWS], ids=[_case_id(n, r) for n, r in _ROWS])
def test_golden(row):
    assert extract(row["output"], row["task"]) == _expected(row)


def test_corpus_shape():
    tasks = [r["task"] for _, r in _ROWS]
    assert len(_ROWS) >= 170
    assert tasks.count("mcq") >= 100 and tasks.count("hkl") >= 60 and tasks.count("option_number") >= 20
    for _, r in _ROWS:
        assert set(r) == {"task", "output", "expected", "note"}
        assert r["task"] in ("mcq", "hkl", "option_number") and isinstance(r["output"], str) and r["note"]
        if r["expected"] is not None and r["task"] == "option_number":
            assert len(r["expected"]) == 1 and type(r["expected"][0]) is int and r["expected"][0] >= 1
        exp = r["expected"]
        assert exp is None or isinstance(exp, list)
        if exp is not None and r["task"] == "mcq":
            assert exp == sorted(set(exp)) and all(len(c) == 1 and "A" <= c <= "Z" for c in exp)
        if exp is not None and r["task"] == "hkl":
            tup = [tuple(x) for x in exp]
            assert tup == sorted(set(tup)) and all(len(t) in (3, 4) for t in tup)
    # every output appears once, so a parse cannot be pinned twice with different answers
    keys = [(r["task"], r["output"]) for _, r in _ROWS]
    assert len(keys) == len(set(keys))


def test_unknown_task():
    with pytest.raises(ValueError):
        extract("Answer: A", "numeric")


def test_non_string_input():
    assert extract_choices(None) is None  # type: ignore[arg-type]
    assert extract_hkls(None) is None  # type: ignore[arg-type]


DEGENERATE = {
    "repeated peak phrase": "The peak is at 28.4 and " * 3000,
    "repeated hkl lines": "hkl\n" * 8000,
    "repeated marker lines": "The answer is:\n" * 5000,
    "repeated Chinese marker": "选项" * 20000,
    "spaces after a marker": "answer" + " " * 20000 + "x",
    "unclosed boxes": "\\boxed{" * 20000,
    "nested boxes": "\\boxed{" * 5000 + "}" * 5000,
    "wrapper characters": "`" * 100000,
    "repeated glosses": "Answer: A (Tunneling) and " * 5000,
    "an unclosed gloss": "Answer: A (" + "x" * 100000,
    "repeated hedges": "The answer is (2) or " * 10000,
    "full-width letters": "\uff21" * 100000,
}


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_degenerate_outputs_stay_fast(name):
    # repetition loops are common in long generations; the extractor must stay near-linear on them
    import time

    text = DEGENERATE[name]
    start = time.perf_counter()
    for task in ("mcq", "hkl", "option_number"):
        _check_shape(extract(text, task), task)
    assert time.perf_counter() - start < 5.0


def test_types_of_results():
    assert extract_choices("Answer: b, a") == ["A", "B"]
    got = extract_hkls('{"hkl": [[1, 1, 0], [1.0, 0, 0]]}')
    assert got == [(1, 0, 0), (1, 1, 0)]
    assert all(type(x) is int for t in got for x in t)


# --------------------------------------------------------------------------
# properties

LETTERS = st.lists(st.sampled_from("ABCDEFGH"), min_size=1, max_size=6, unique=True)


def _english(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


MCQ_TEMPLATES = [
    lambda s: ("Reasoning: panel (b) shows larger grains than (a), so option A looks wrong at first.\n\n"
               f"Final answer: {', '.join(s)}"),
    lambda s: "**Answer:** " + " and ".join(f"({c})" for c in s),
    lambda s: json.dumps({"reasoning": "compare (a) with (c)", "answer": s}),
    lambda s: "```json\n" + json.dumps({"answer": ", ".join(s)}) + "\n```",
    lambda s: "经过分析图(b)，答案：" + "".join(sorted(s)),
    lambda s: ("The correct option is " if len(s) == 1 else "The correct options are ") + _english(s) + ".",
    lambda s: "Step 1 ... Step 2 ...\nTherefore $\\boxed{\\text{" + ", ".join(s) + "}}$",
    lambda s: "answer: " + ", ".join(c.lower() for c in s) + "\r\n\r\nExplanation: option A is wrong because of (b).",
    lambda s: ("Option " if len(s) == 1 else "Options ") + _english(s) + (" is" if len(s) == 1 else " are") + " correct.",
    lambda s: "<think>maybe A or B?</think>\n<answer>" + "/".join(s) + "</answer>",
]


@given(letters=LETTERS, template=st.sampled_from(range(len(MCQ_TEMPLATES))))
def test_choices_round_trip(letters, template):
    text = MCQ_TEMPLATES[template](letters)
    assert extract_choices(text) == sorted(letters)
    assert extract(text, "mcq") == sorted(letters)


SMALL = st.integers(min_value=-9, max_value=9)
WIDE = st.integers(min_value=-15, max_value=15)
HKL = st.one_of(st.tuples(SMALL, SMALL, SMALL), st.tuples(SMALL, SMALL, SMALL, SMALL))
HKL_WIDE = st.one_of(st.tuples(WIDE, WIDE, WIDE), st.tuples(WIDE, WIDE, WIDE, WIDE))
HKL_SETS = st.lists(HKL, min_size=1, max_size=5)


def _compact(t, bar=False):
    if bar:
        return "".join(f"\\bar{{{-x}}}" if x < 0 else str(x) for x in t)
    return "".join(str(x) for x in t)


@given(hkls=st.lists(HKL_WIDE, min_size=1, max_size=5))
def test_hkls_json_round_trip(hkls):
    expected = sorted(set(hkls))
    text = "The strongest peaks at 2θ = 28.44° and 47.3°.\n" + json.dumps({"max_peak_hkls": [list(t) for t in hkls]})
    assert extract_hkls(text) == expected
    assert extract(json.dumps({"hkls": [list(t) for t in hkls]}), "hkl") == expected


@given(hkls=st.lists(HKL_WIDE, min_size=1, max_size=5))
def test_hkls_spaced_text_round_trip(hkls):
    expected = sorted(set(hkls))
    body = ", ".join("(" + " ".join(str(x) for x in t) + ")" for t in hkls)
    text = f"The d-spacing is 3.135 Å at 2θ = 28.44°; the (200) line is weak.\n\nAnswer: {body}"
    assert extract_hkls(text) == expected


@given(hkls=HKL_SETS, bar=st.booleans())
def test_hkls_compact_text_round_trip(hkls, bar):
    expected = sorted(set(hkls))
    body = " and ".join("(" + _compact(t, bar) + ")" for t in hkls)
    assert extract_hkls(f"**Final answer:** {body}") == expected
    assert extract_hkls("答案：" + "，".join("[" + _compact(t, bar) + "]" for t in hkls)) == expected


def _check_shape(result, task):
    if result is None:
        return
    assert isinstance(result, list)
    assert result == sorted(set(result))
    if task == "mcq":
        assert all(isinstance(c, str) and len(c) == 1 and "A" <= c <= "Z" for c in result)
    elif task == "option_number":
        assert len(result) == 1 and type(result[0]) is int and result[0] >= 1
    else:
        assert all(isinstance(t, tuple) and len(t) in (3, 4) and all(type(x) is int for x in t) for t in result)


FRAGMENTS = st.sampled_from([
    "Answer", "answer: ", "is ", " ", "\n", "\r\n", ",", " and ", " or ", "A", "b", "(C)", "[D]", "AC", "N/A",
    "答案", "选", "：", "、", "\\boxed{", "\\text{", "}", "{", '"', '{"answer": ', "[", "]", "**", "`", "$",
    "(1 1 0)", "1-10", "(11-20)", "\\bar{1}", "2019", "28.44", "7/10", "hkl", "peak is ", "option", "Options A",
    " are correct", "```json\n", "```", "0", "-", "\u0305", "\u2212", "ABD", "because",
])
STRUCTURED = st.lists(FRAGMENTS, max_size=25).map("".join)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), STRUCTURED), task=st.sampled_from(["mcq", "hkl", "option_number"]))
def test_never_raises_and_well_formed(text, task):
    _check_shape(extract(text, task), task)
    _check_shape(extract("Answer: " + text, task), task)


@given(text=st.one_of(st.text(), STRUCTURED))
def test_reextracting_a_rendered_answer_is_stable(text):
    letters = extract_choices(text)
    if letters:
        assert extract_choices("Answer: " + ", ".join(letters)) == letters
    hkls = extract_hkls(text)
    if hkls:
        rendered = ", ".join("(" + " ".join(str(x) for x in t) + ")" for t in hkls)
        if all(abs(x) < 1000 for t in hkls for x in t):
            assert extract_hkls("Answer: " + rendered) == hkls


def _table_rows(doc: str):
    """(outputs, result) of each row of the reStructuredText table of forms in a docstring."""
    import re

    lines = doc.splitlines()
    rules = [i for i, ln in enumerate(lines) if re.fullmatch(r"=+( +=+)+", ln)]  # a table's rules, not headings
    assert len(rules) >= 3
    for ln in lines[rules[1] + 1:rules[2]]:
        first, result = re.split(r"\s{2,}", ln.strip())[:2]
        yield re.findall(r"``(.*?)``", first), result


@pytest.mark.parametrize("task, module", [("mcq", "benchmint.tasks.extract_ref"),
                                          ("option_number", "benchmint.tasks.option_numbers")])
def test_spec_tables_are_golden_rows(task, module):
    # each form the specification's table lists is a row of the golden corpus with the result the table gives
    import importlib

    golden = {r["output"]: r["expected"] for _, r in _ROWS if r["task"] == task}
    rows = list(_table_rows(importlib.import_module(module).__doc__))
    assert len(rows) >= 10
    for outputs, result in rows:
        if task == "mcq":
            expected = None if result == "(none)" else result.split()
        else:
            expected = None if result == "None" else [int(result)]
        for output in outputs:
            assert output in golden and golden[output] == expected, output
