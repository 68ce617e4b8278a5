"""extract_answer (compiled where it decides) returns what the reference returns."""

import json
from pathlib import Path

import pytest

from benchmint.metrics import extract_answer, extract_answers
from benchmint.metrics.extract import extract

CORPUS = [json.loads(line) for line in (Path(__file__).parent / "data" / "extract_golden.jsonl").read_text("utf-8").splitlines()]


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
