"""MatVQA: the MMMU-Pro template with numbered options, full-paper context, and the option_number answer kind."""

import json

import pytest

from benchmint import benchmarks, tasks
from benchmint.benchmarks import ItemError
from benchmint.metrics import score_batch

TINY_PNG = bytes.fromhex(  # a real 1x1 grey PNG: prompts decode their images
    "89504e470d0a1a0a0000000d4948445200000001000000010800000000"
    "3a7e9b550000000a49444154789c636800000082008177cd72b6000000"
    "0049454e44ae426082")

# matvqa.txt App. A.2, the example question
QUESTION = "How does the observed binding energy affect the catalytic performance for ammonia decomposition?"
OPTIONS = [
    "Higher binding energy from Fe exposure enhances reaction efficiency by breaking ammonia bonds more effectively.",
    "Increased binding energy improves adsorption efficiency, enhancing ammonia decomposition on the catalyst surface.",
    "High binding energy indicates a reactive surface, facilitating rapid ammonia decomposition by destabilizing NH3.",
    "Lower binding energy suggests structural stability, maintaining effective catalytic performance over various "
    "temperatures.",
]
# The example complete question the paper prints (A.2), line for line.
PAPER_EXAMPLE = (
    "The following is a multiple choice question (with answers).\n"
    "Think step by step and then output the answer in the format of \"The answer is (X) \\ \" at the end.\n"
    "\n"
    "How does the observed binding energy affect the catalytic performance for ammonia decomposition?\n"
    "\n"
    "Options:\n"
    "(1): Higher binding energy from Fe exposure enhances reaction efficiency by breaking ammonia bonds more "
    "effectively.\n"
    "(2): Increased binding energy improves adsorption efficiency, enhancing ammonia decomposition on the catalyst "
    "surface.\n"
    "(3): High binding energy indicates a reactive surface, facilitating rapid ammonia decomposition by "
    "destabilizing NH3.\n"
    "(4): Lower binding energy suggests structural stability, maintaining effective catalytic performance over "
    "various temperatures.")


@pytest.fixture
def items_file(tmp_path):
    (tmp_path / "fig.png").write_bytes(TINY_PNG)
    (tmp_path / "paper.md").write_text("# A paper\nIron nitrides ...\n")
    rows = [{"id": "q1", "question": QUESTION, "options": OPTIONS, "answer": 4, "image": "fig.png",
             "task": "causal", "context_file": "paper.md"},
            {"id": "q2", "question": "Q?", "options": json.dumps({"1": "a", "2": "b"}), "answer": "(2)",
             "image": "fig.png", "context": "Inline paper text."},
            {"id": "q3", "question": "Q?", "options": ["a", "b"], "answer": 3, "image": "fig.png"},
            {"id": "q4", "question": "Q?", "options": ["a", "b"], "answer": "B", "image": "fig.png"},
            {"id": "q5", "question": "Q?", "options": ["a", "b"], "answer": 1, "image": "fig.png",
             "context_file": "nowhere.md"},
            {"id": "q6", "question": "Q?", "options": ["a", "b"], "answer": 1, "image": "fig.png"}]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_prompt_is_the_papers_template(items_file):
    bench = benchmarks.get("matvqa")
    item = next(it for _, it in bench.read_items(items_file))
    assert item.answer == [4] and item.meta == {"task": "causal"}
    p = bench.prompt(item)
    assert [type(x).__name__ for x in p.parts] == ["ImagePart", "TextPart"]
    assert p.text() == PAPER_EXAMPLE


def test_full_context_setting(items_file):
    bench = benchmarks.get("matvqa")
    got = list(bench.read_items(items_file, "full_context"))
    first, second = got[0][1], got[1][1]
    assert bench.prompt(first, "full_context").text() == (
        "Full text of the paper the figure comes from:\n\n# A paper\nIron nitrides ...\n\n\n" + PAPER_EXAMPLE)
    assert bench.prompt(second, "full_context").text().startswith(
        "Full text of the paper the figure comes from:\n\nInline paper text.\n\nThe following is")
    assert second.answer == [2]
    assert [(loc.rsplit(":", 1)[1], it.field, it.message) for loc, it in got[2:]] == [
        ("3", "answer", 'field "answer" must be one option number 1-2, got 3'),
        ("4", "answer", "field \"answer\" must be an option number such as 2 or \"(2)\", got 'B'"),
        ("5", "context_file", f'file of field "context_file" not found: {items_file.parent}/nowhere.md'),
        ("6", "context", 'full_context needs the paper\'s text: missing field "context" or "context_file"'),
    ]
    assert all(isinstance(it, ItemError) for _, it in got[2:])
    # without the full_context setting the context is not needed
    assert not isinstance(dict(bench.read_items(items_file))[f"{items_file}:6"], ItemError)


@pytest.mark.parametrize("reply, expected", [
    ("Step by step ... The answer is (2)", [2]),  # the format the template asks for, missed by `answer is\s*([0-9])`
    ("**The answer is (3).**", [3]),
    ("the answer is 1", [1]),
    ("The answer is: (4)", [4]),
    ("答案 The answer is （2）", [2]),
    ("At first the answer is (1), but on reflection the answer is (3)", [3]),  # the final statement counts
    ("The answer is 2.5 eV", None),
    ("The answer is (X)", None),
    ("I pick option 2", None),
])
def test_option_number_extraction(reply, expected):
    assert tasks.get("option_number").extract(reply) == expected


def test_option_number_kind_scores():
    kind = tasks.get("option_number")
    assert "option_number" in tasks.names("set") and kind.primary_metric == "em"
    assert kind.normalize([2, "2"]) == (2,) and kind.keys((2,)) == [2] and kind.to_json((2,)) == [2]
    with pytest.raises(tasks.AnswerError, match="option numbers"):
        kind.normalize([0])
    with pytest.raises(tasks.AnswerError, match="list of option numbers"):
        kind.normalize("2")
    replies = ["... The answer is (2)", "The answer is (1)", "no statement"]
    scores = score_batch([kind.extract(r) or [] for r in replies], [[2], [3], [1]], task="option_number")
    assert list(scores["em"]) == [1.0, 0.0, 0.0]
