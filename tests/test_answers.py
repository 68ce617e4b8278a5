"""extract_answer (compiled where it decides) returns what the reference returns."""

import pytest
from golden import load_corpus

from benchmint.metrics import extract_answer, extract_answers
from benchmint.metrics.extract import extract

CORPUS = [case for _, case in load_corpus()]


@pytest.mark.parametrize("impl", ["compiled", "reference"])
def test_corpus(monkeypatch, impl):
    monkeypatch.setenv("BENCHMINT_IMPL", impl)
    for case in CORPUS:
        got = extract_answer(case["output"], case["task"])
        assert got == extract(case["output"], case["task"]), case
        if case["task"] == "hkl" and got is not None:
            got = [list(h) for h in got]
        assert got == case["expected"], case


def test_batch_and_errors():
    assert extract_answers(["Answer: B", "no idea"], "mcq") == [["B"], None]
    with pytest.raises(ValueError, match="task"):
        extract_answer("A", "open")
