"""SPM-Bench: multi-select items with a figure, the prompt, and the confidence/difficulty a reply reports."""

import json

import pytest

from benchmint import benchmarks, tasks
from benchmint.benchmarks import ItemError
from benchmint.benchmarks.spm import reported_value

TINY_PNG = bytes.fromhex(  # a real 1x1 grey PNG: prompts decode their images
    "89504e470d0a1a0a0000000d4948445200000001000000010800000000"
    "3a7e9b550000000a49444154789c636800000082008177cd72b6000000"
    "0049454e44ae426082")

OPTIONS = ["Phase alpha dissolves.", "The inset shows subunits.", "A solid-state transition.",
           "Two phases coexist.", "Pure ripening.", "An amorphous precursor."]


@pytest.fixture
def items_file(tmp_path):
    (tmp_path / "figs").mkdir()
    (tmp_path / "figs" / "sem.png").write_bytes(TINY_PNG)
    rows = [{"id": "sem-1", "question": "Which statements fit the SEM panels?", "options": OPTIONS,
             "answer": "A, B, D", "image": "figs/sem.png", "level": "PhD", "discipline": "Condensed Matter Physics",
             "question_type": "HG", "technique": "SEM"},
            {"id": "sem-2", "question": "Q?", "options": {"A": "x", "B": "y", "C": "z"}, "answer": ["c"],
             "image": "figs/sem.png", "meta": {"bloom_level": 3}},
            {"id": "sem-3", "question": "Q?", "options": OPTIONS, "answer": "A, G", "image": "figs/sem.png"},
            {"id": "sem-4", "question": "Q?", "options": OPTIONS, "answer": "A and B", "image": "figs/sem.png"},
            {"id": "sem-5", "question": "Q?", "options": OPTIONS, "answer": "B"},
            {"id": "sem-6", "question": "Q?", "options": {"A": "x", "C": "z"}, "answer": "A", "image": "figs/sem.png"}]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_items_gold_and_errors(items_file):
    got = list(benchmarks.get("spm").read_items(items_file))
    first, second = got[0][1], got[1][1]
    assert first.answer == ["A", "B", "D"] and second.answer == ["C"]
    assert first.meta == {"level": "PhD", "discipline": "Condensed Matter Physics", "question_type": "HG",
                          "technique": "SEM"}
    assert second.meta == {"bloom_level": 3} and second.fields["options"] == [("A", "x"), ("B", "y"), ("C", "z")]
    assert tasks.get("mcq").normalize(first.answer) == ("A", "B", "D")
    assert [(loc.rsplit(":", 1)[1], it.field, it.message) for loc, it in got[2:]] == [
        ("3", "answer", "field \"answer\" names ['G'], not among the options ['A', 'B', 'C', 'D', 'E', 'F']"),
        ("4", "answer", "field \"answer\" must list option letters such as \"A, B, D\", got 'A and B'"),
        ("5", "image", 'missing field "image" or "images"'),
        ("6", "options", "field \"options\": option letters ['A', 'C'] are not A-B"),
    ]
    assert all(isinstance(it, ItemError) for _, it in got[2:])


def test_prompt_text(items_file):
    bench = benchmarks.get("spm")
    item = next(it for _, it in bench.read_items(items_file))
    p = bench.prompt(item)
    assert [type(x).__name__ for x in p.parts] == ["ImagePart", "TextPart"] and p.parts[0].mime == "image/png"
    assert p.text() == (
        "Which statements fit the SEM panels?\n\n"
        "A. Phase alpha dissolves.\nB. The inset shows subunits.\nC. A solid-state transition.\n"
        "D. Two phases coexist.\nE. Pure ripening.\nF. An amorphous precursor.\n\n"
        "This is a multiple-select question: one or more of the options are correct. Work through the question, "
        "then finish your reply with these three lines:\n"
        "Answer: <every letter you select, separated by commas, for example A, C>\n"
        "Confidence: <how sure you are that your selection is exactly right, from 0 to 1>\n"
        "Difficulty: <how hard this question is, from 0 (very easy) to 1 (very hard)>")


def test_reply_fields_and_answer_read_from_a_reply():
    reply = ("The inset shows granular subunits, so B holds... Confidence: 0.2 mid-sentence is not a report.\n"
             "Confidence: 0.3\n(a first draft, revised below)\n\n"
             "Answer: A, B, D\n**Confidence:** 85%\nDifficulty: 0.7\n")
    assert benchmarks.get("spm").reply_fields(reply) == {"confidence": 0.85, "difficulty": 0.7}
    assert tasks.get("mcq").extract(reply) == ["A", "B", "D"]
    assert benchmarks.get("spm").reply_fields("Answer: B") == {"confidence": None, "difficulty": None}
    assert reported_value("Confidence: 1.5", "confidence") is None  # outside 0-1
    assert reported_value("confidence = .9", "confidence") == 0.9
