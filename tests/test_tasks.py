"""The answer-kind registry: lookup, the built-in kinds, and a new kind added as one module."""

import json
import re
import sys

import pytest

from benchmint import tasks
from benchmint.metrics import ScoreConfig, score_batch, score_files
from benchmint.tasks import AnswerError, AnswerKind


class Integers(AnswerKind):
    """What a new kind takes: reading, normalising and keys (a set of integers, e.g. peak counts)."""

    name = "ints"
    description = "sets of integers"

    def extract(self, text):
        found = re.findall(r"-?\d+", text)
        return [int(x) for x in found] if found else None

    def normalize(self, value):
        if isinstance(value, (str, bytes)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise AnswerError(f"expected a list of integers, got {value!r}")
        return tuple(sorted(set(value)))

    def keys(self, answer):
        return list(answer)


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(tasks, "_REGISTRY", dict(tasks._REGISTRY))
    return tasks


def test_builtin_kinds():
    assert tasks.names("set")[:2] == ["mcq", "hkl"]
    mcq, hkl = tasks.get("mcq"), tasks.get("hkl")
    assert mcq.normalize(["c", "A", "C"]) == ("A", "C") and mcq.keys(("A", "C")) == [0, 2]
    assert hkl.normalize([[0, 0, 0], [1, 1, 0], [1, 1, 0], [1, 1, -2, 0]]) == ((1, 1, -2, 0), (1, 1, 0))
    # 3-index key: tag 3, then 12 bits per index offset by 2048
    assert hkl.keys(((1, 1, 0),)) == [(((3 << 12 | 2049) << 12 | 2049) << 12) | 2048]
    assert hkl.to_json(((1, 1, 0),)) == [[1, 1, 0]] and mcq.to_json(("A",)) == ["A"]
    assert mcq.primary_metric == "sip_f1" and hkl.primary_metric == "jaccard"
    with pytest.raises(AnswerError, match="option letters"):
        mcq.normalize("AB")
    with pytest.raises(ValueError, match="not folded"):
        mcq.fold(("A",), None)
    # cubic m-3m folds (1,0,0) and (0,0,-1) together
    rotations = [[1, 0, 0, 0, 1, 0, 0, 0, 1], [0, 0, 1, 0, 1, 0, -1, 0, 0], [-1, 0, 0, 0, -1, 0, 0, 0, -1]]
    assert hkl.fold(((0, 0, -1),), rotations) == hkl.fold(((1, 0, 0),), rotations)


def test_lookup_errors(registry):
    with pytest.raises(ValueError, match="task must be one of mcq, free_text, hkl, option_number, quantity; got 'nope'"):
        registry.get("nope")
    assert registry.get(registry.get("mcq")) is registry.get("mcq")
    registry.register(Integers())
    with pytest.raises(ValueError, match="registered already"):
        class Other(Integers):
            pass
        registry.register(Other())


NEW_KIND_MODULE = '''
from benchmint.tasks.base import AnswerKind
from benchmint.tasks.free_text import FreeText


class Helper(AnswerKind):  # no name of its own: not a kind
    pass


class Paragraphs(FreeText):
    name = "paragraphs"
    description = "free text split into paragraphs"
'''


def test_a_new_module_in_the_package_is_a_new_kind(registry, monkeypatch, tmp_path):
    # Adding a kind is one module: dropped into the package folder, it is found without any other edit.
    (tmp_path / "paragraphs_kind.py").write_text(NEW_KIND_MODULE, encoding="utf-8")
    monkeypatch.setattr(tasks, "__path__", [*tasks.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "benchmint.tasks.paragraphs_kind", raising=False)
    assert "paragraphs" not in registry.names()
    registry.discover()
    assert registry.names() == ["mcq", "free_text", "hkl", "option_number", "quantity", "paragraphs"]
    assert registry.get("paragraphs").scoring == "graded"
    assert type(registry.get("free_text")).__name__ == "FreeText"  # imported names are not registered twice
    sys.modules.pop("benchmint.tasks.paragraphs_kind", None)


def test_a_new_kind_scores_end_to_end(registry, tmp_path):
    registry.register(Integers())
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "a", "answer": [1, 2]}\n{"id": "b", "answer": [3]}\n')
    pred = tmp_path / "pred.jsonl"
    pred.write_text('{"id": "a", "output": "I count 2 and 1 and 7"}\n{"id": "b", "answer": ["x"]}\n')
    res = score_files([pred], gold, tmp_path / "out", ScoreConfig(task="ints", n_boot=1000))
    rows = [json.loads(line) for line in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    assert rows[0]["answer"] == [1, 2, 7] and rows[0]["jaccard"] == pytest.approx(2 / 3)
    assert [e["kind"] for e in res.errors] == ["wrong_kind"]  # b is scored as unparsed, not left missing
    assert rows[1]["status"] == "unparsed"
    assert "not a ints answer" in res.errors[0]["message"]
    assert list(score_batch([[1, 2]], [[2]], task="ints")["jaccard"]) == [0.5]


def test_graded_kinds_are_not_set_scored(registry):
    class Words(Integers):
        name = "words"
        scoring = "graded"

    registry.register(Words())
    assert "words" not in registry.names("set") and "words" in registry.names("graded")
    with pytest.raises(ValueError, match="graded, not scored as sets"):
        ScoreConfig(task="words")
    with pytest.raises(ValueError, match="symmetry folding applies to --task hkl only"):
        ScoreConfig(task="mcq", symmetry=True)
