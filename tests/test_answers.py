"""extract_answer: the golden corpus under each implementation, and compiled (with its fallbacks) == reference."""

import pytest

from benchmint.metrics import extract_answer, extract_answers
from benchmint.tasks import extract_ref

from golden import load_corpus

CORPUS = [case for _, case in load_corpus()]
# Outputs the compiled extractor leaves to the reference: integers beyond int64, nesting beyond its depth.
UNDECIDED = [('{"max_peak_hkls": [[99999999999999999999, 0, 0]]}', "hkl"),
             ("[" * 2000 + "]" * 2000, "mcq"),
             ('{"answer":' + "[" * 1500 + "]" * 1500 + "}", "hkl")]


def _equal(a, b):
    assert a == b


def _as_json(got, task):
    return [list(h) for h in got] if task == "hkl" and got is not None else got


def test_corpus(impl, dispatch_counts):
    for case in CORPUS:
        assert _as_json(extract_answer(case["output"], case["task"]), case["task"]) == case["expected"], case
    counts = dispatch_counts("extract")
    # The corpus needs no fallback: the compiled extractor decides every case of the kinds it has (option
    # numbers have none: those cases count as fallbacks on the compiled path).
    plain = sum(case["task"] == "option_number" for case in CORPUS)
    assert plain and counts == {"compiled": len(CORPUS) - plain if impl == "compiled" else 0,
                                "reference": len(CORPUS) if impl == "reference" else 0,
                                "fallback": plain if impl == "compiled" else 0}


def test_batch_equals_reference(compare_forms):
    for task in ("mcq", "hkl"):
        texts = [case["output"] for case in CORPUS] + [None, 7]
        compare_forms("extract", lambda task=task, texts=texts: [extract_ref.extract(t, task) for t in texts],
                      lambda task=task, texts=texts: extract_answers(texts, task), _equal)


def test_undecided_outputs_go_to_the_reference(forced_impl, dispatch_counts):
    with forced_impl("compiled"):
        for text, task in UNDECIDED:
            dispatch_counts.reset()
            assert extract_answer(text, task) == extract_ref.extract(text, task)
            assert dispatch_counts("extract") == {"compiled": 1, "reference": 0, "fallback": 1}


def test_batch_and_errors():
    assert extract_answers(["Answer: B", "no idea"], "mcq") == [["B"], None]
    with pytest.raises(ValueError, match="task"):
        extract_answer("A", "open")
