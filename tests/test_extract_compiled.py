"""The compiled extractor (benchmint._core.extract) against the Python reference.

Every compiled answer is either the literal string "undecided" (the caller then
runs the reference) or exactly what benchmint.tasks.extract_ref returns.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.metrics.synthetic import PERSONAS, hkl_dataset, mcq_dataset
from benchmint.tasks.extract_ref import extract_choices, extract_hkls

from golden import load_corpus

UNDECIDED = "undecided"
PAIRS = ((extract_choices, _core.extract.choices), (extract_hkls, _core.extract.hkls))
_ROWS = load_corpus()
_COMPILED_ROWS = [r for _, r in _ROWS if r["task"] in ("mcq", "hkl")]  # the kinds with a compiled extractor


def _agrees(text: str) -> int:
    """Asserts that both compiled extractors agree with the reference when they decide; returns the undecided count."""
    undecided = 0
    for reference, compiled in PAIRS:
        got = compiled(text)
        if got == UNDECIDED:
            undecided += 1
            continue
        assert got == reference(text), (compiled.__name__, text)
    return undecided


def _well_typed(got, task: str) -> None:
    if got is None or got == UNDECIDED:
        return
    assert isinstance(got, list) and got == sorted(set(got))
    if task == "mcq":
        assert all(type(c) is str and len(c) == 1 and "A" <= c <= "Z" for c in got)
    else:
        assert all(type(t) is tuple and len(t) in (3, 4) and all(type(x) is int for x in t) for t in got)


# --------------------------------------------------------------------------
# golden corpus


def _expected(row: dict):
    exp = row["expected"]
    if exp is None or row["task"] == "mcq":
        return exp
    return [tuple(x) for x in exp]


@pytest.mark.parametrize("row", _COMPILED_ROWS, ids=[f"L{n}-{r['task']}" for n, r in _ROWS if r in _COMPILED_ROWS])
def test_golden(row):
    text = row["output"]
    _agrees(text)
    compiled = _core.extract.choices if row["task"] == "mcq" else _core.extract.hkls
    got = compiled(text)
    _well_typed(got, row["task"])
    if got != UNDECIDED:
        assert got == _expected(row)


def test_golden_mostly_decided():
    undecided = sum(_agrees(r["output"]) for r in _COMPILED_ROWS)
    assert undecided <= 0.05 * 2 * len(_COMPILED_ROWS)


# --------------------------------------------------------------------------
# fixed cases


def test_result_types_and_none():
    assert _core.extract.choices("Answer: b, a") == ["A", "B"]
    assert _core.extract.choices("I cannot tell.") is None
    assert _core.extract.choices('{"answer": []}') == []
    assert _core.extract.choices(None) is None  # non-string input, like the reference
    assert _core.extract.hkls(3) is None
    got = _core.extract.hkls('{"hkl": [[1, 1, 0], [1.0, 0, 0]]}')
    assert got == [(1, 0, 0), (1, 1, 0)] and all(type(x) is int for t in got for x in t)


def test_hkl_tuple_order():
    text = "Answer: (1 1 -2 0), (1 0 0 0), (1 0 0), (0 0 0), (-1 0 0)"
    assert _core.extract.hkls(text) == extract_hkls(text)
    assert _core.extract.hkls(text) == [(-1, 0, 0), (0, 0, 0), (1, 0, 0), (1, 0, 0, 0), (1, 1, -2, 0)]


@pytest.mark.parametrize("text", [
    "答案：A、C", "Answer：（B）", "The answer is \u00a0B\u3000because", "故选BD。", "选项A错误。故选B。",
    "Answer: (1\u030410)", "Answer: (1\u221210)", "2\u03b8 = 28.4\u00b0, answer: 110", "**Answer:**\n\n- A\n- C",
    "Answer:\r\n(110)\r\n(200)\r\n", "Answer: A\r\n", "\\boxed{\\text{A, C}}", "😀 Answer: D 😀",
])
def test_unicode_positions(text):
    assert _agrees(text) == 0


@pytest.mark.parametrize("text", [
    '{"answer": "A", "Answer": "B", "answer": "C"}',          # repeated key: first place, last value
    '{"Answer": "A", "answer": "B", "Answer": "C"}',
    '{"\\u0061nswer": "b"}',                                  # escaped key
    '{"answer": "\\ud83d\\ude00 A"}',                          # surrogate pair
    '{"answer": "\\ud800A"}',                                  # lone surrogate in a JSON string
    '{"answer": "A\\u0001"}', '{"answer": "A\x01"}',           # escaped vs raw control character
    '{"answer": "A", "x": NaN, "y": -Infinity}', '{"answer": "A",}', '{"answer": "A"} x',
    '{"hkl": [1.0, 1e0, -0.0]}', '{"hkl": [1.5, 1, 0]}', '{"hkl": [true, 1, 0]}', '{"hkl": [1, 1, 01]}',
    '{"hkl": [NaN, 1, 0]}', '{"hkls": [[1, 1, 0], "11-20"]}', '[1, 1, 0]', '[["A"]]',
    '```json\n{"answer": ["B", "D"]}\n```', '{"result": {"answer": "D"}, "note": "the (b) panel"}',
])
def test_json_corner_cases(text):
    assert _agrees(text) == 0


def test_out_of_reach_values_are_undecided():
    # integers beyond int64 in an hkl, and input that has no UTF-8 form (lone surrogate)
    assert _core.extract.hkls('{"hkl": [100000000000000000000, 1, 0]}') == UNDECIDED
    assert _core.extract.choices("Answer: A \ud800") == UNDECIDED
    assert _core.extract.hkls("Answer: (110) \udfff") == UNDECIDED
    # ... but a value that fails anyway still decides
    assert _core.extract.hkls('{"hkl": [100000000000000000000, "x", 0]}') is None


# --------------------------------------------------------------------------
# property tests

FRAGMENTS = [
    "Answer", "answer", "ANSWER", "answers", "Answer(s)", "answer option", "Final answer", ": ", ":", "：", "=",
    " is ", " are ", " would be ", "**Answer:**", "**Answer**:", "__", "**", "答案：", "答案是", "答案为", "选", "故选",
    "正确选项为", "正确的是", "选项", "\\boxed{", "\\fbox{", "\\text{", "\\textbf{", "}", "{", "The correct options are ",
    "The correct option is ", "correct answer", "Options ", "Option ", "statement ", " are correct", " is correct",
    "I choose ", "I'd pick ", "I\u2019ll go with ", "My final choice is ", "<answer>", "</answer>", "A", "B", "C", "D",
    "a", "c", "AC", "ABD", "BA", "(b)", "(A)", "（C）", "[D]", "B)", "**A**", "N/A", " or ", " and ", "and/or", "或",
    "以及", "和", ",", "，", "、", ";", "/", "&", "+", " ", "  ", "\t", "\u00a0", "\u3000", "\n", "\n\n", "\r\n", "\r",
    "- ", "* ", "• ", " because", " since", " which", " only", " is not", "clearly ", "most likely ", "the ",
    '{"answer": ', '{"Answer": ', '{"answers": [', '{"final_answer": "', '{"hkl": ', '{"max_peak_hkls": [[', '[', ']',
    '"', "'", "`", "$", "“", "”", '"A"', '"(b)"', '"A, C"', "null", "true", "1.0", "NaN", "\\u0041", "```json\n",
    "```", "(1 1 0)", "(110)", "[1-10]", "{110}", "<111>", "⟨111⟩", "（110）", "\\{1 1 0\\}", "1-10", "11-20", "(11-20)",
    "\\bar{1}", "\\bar1", "\\overline{2}", "1\u0304", "2\u0305", "\u2212", "-", "0", "1", "2", "12", "2019", "28.44",
    "3.135", "7/10", "2θ", "°", "Å", "hkl", "HKL = ", "hkil", "Miller indices ", "peak is ", "peaks are ",
    " (Tunneling)", "（力）", "(x" * 3, "$\\mathrm{", "}$", "$", "\\(", "\\)", "\\[", "\\]", "Ａ", "ｃ", "both ",
    "Option C: ", "Choice D. ", "(C) SEM image", "**(B)** ", " correct", "（D）原子",
    "reflection corresponds to ", "the strongest peak ", "most intense reflection ", "highest intensity peak ",
    "dominant XRD peaks ", ". ", "。", "！", "?", "…", "(", ")", "<", ">", "x", "é", "😀", "中文",
]
STRUCTURED = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(STRUCTURED, st.text(), st.text(alphabet="ABCabc()[],;: \n-*•答案选0123456789", max_size=40)))
def test_random_texts_agree(text):
    _agrees(text)
    _agrees("Answer: " + text)


KEYS = st.sampled_from([
    "answer", "Answer", "ANSWER", "answers", "final_answer", "choice", "choices", "options", "selected",
    "correct_options", "hkl", "HKL", "hkls", "max_peak_hkls", "miller_indices", "reasoning", "confidence", "x",
])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-20, 20), st.integers(),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1.0, -0.0, 2.5, 1e20, 3.0]),
    st.sampled_from(["A", "b", "A, C", "(c)", "AC", "A or C", "", "1 1 0", "(110)", "11-20", "110, 200",
                     "(1 1 0) and (2 0 0)", "N/A", "\u00e9", "A\u0000"]),
    st.text(max_size=6),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                       st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


@st.composite
def json_texts(draw):
    if draw(st.booleans()):
        body = json.dumps(draw(VALUES), ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    else:  # raw pairs: repeated keys and odd spacing
        pairs = draw(st.lists(st.tuples(KEYS, VALUES), max_size=4))
        sep = draw(st.sampled_from([", ", ",", " ,\n ", ",,"]))
        body = "{" + sep.join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
    if draw(st.booleans()):  # small damage: a character inserted or removed
        pos = draw(st.integers(0, len(body)))
        if draw(st.booleans()):
            body = body[:pos] + draw(st.sampled_from(list('{}[]",:\\ 0-eE.\n') + ["\\u", "\\ud800"])) + body[pos:]
        else:
            body = body[:pos] + body[pos + 1:]
    prefix = draw(st.sampled_from(["", "Answer: B\n", "```json\n", "```\n", "Here: ", "{", "x"]))
    suffix = draw(st.sampled_from(["", "\n```", "}", " done", "\nAnswer: C", "\nhkl: (111)"]))
    return prefix + body + suffix


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=json_texts())
def test_json_texts_agree(text):
    _agrees(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=st.sampled_from(["peak: x. ", "answer: y\n", "Answer: (1 1 ", "the strongest peak ", "\\boxed{x}", "ab ",
                             " ", "{", "- A\n"]),
       reps=st.integers(0, 140), head=STRUCTURED, tail=STRUCTURED)
def test_long_texts_agree(unit, reps, head, tail):
    # near SPAN_MAX (1000 characters) and MAX_HKL_CANDIDATES (64)
    text = head + unit * reps + tail
    _agrees(text)
    _agrees("\\boxed{" + " " * (990 + reps % 20) + tail + "}")


# --------------------------------------------------------------------------
# synthetic outputs: almost always decided


def test_synthetic_outputs_decided_and_equal():
    mcq = [r["output"] for kind, r in mcq_dataset(2000, list(PERSONAS), seed=5) if kind == "pred"]
    hkl = [r["output"] for kind, r in hkl_dataset(1000, list(PERSONAS)[:3], seed=5) if kind == "pred"]
    for outputs, reference, compiled in ((mcq, extract_choices, _core.extract.choices),
                                         (hkl, extract_hkls, _core.extract.hkls)):
        undecided = 0
        for text in outputs:
            got = compiled(text)
            if got == UNDECIDED:
                undecided += 1
            else:
                assert got == reference(text), text
        assert undecided < 0.01 * len(outputs)
