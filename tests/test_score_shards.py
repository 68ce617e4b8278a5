"""Scoring by item-id shards (``score --engine ray``): the local engine's files, and a driver whose memory does not
follow the inputs. The shards' units run here on local worker processes (``ProcessExecutor``); on a Ray cluster in
tests/test_ray_engine.py."""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from test_score_equivalence import _write_rows, datasets

from benchmint.io import dumps
from benchmint.metrics import pipeline_shards
from benchmint.metrics.pipeline import ScoreConfig, _Progress, score_files
from benchmint.metrics.report import render
from benchmint.metrics.synthetic import mcq_dataset
from benchmint.run.executors import ProcessExecutor, SerialExecutor

OUTPUTS = ("scores.jsonl", "summary.json", "errors.jsonl")

# The Ray engine's branch of score_files with its units on two local worker processes; prints the driver's peak
# resident memory (VmHWM: this process image's own peak, the workers are processes of their own).
DRIVER = """
import re, sys
import benchmint.run.ray_engine as ray_engine
from benchmint.run.executors import ProcessExecutor, SerialExecutor
ray_engine.RayExecutor = lambda: ProcessExecutor(2)
from benchmint.metrics import pipeline_shards
from benchmint.metrics.pipeline import ScoreConfig, score_files
pipeline_shards.MIN_ID_SHARDS = int(sys.argv[4])
score_files(sys.argv[1], sys.argv[2], sys.argv[3], ScoreConfig(task="mcq", by=("domain",), engine="ray"))
print(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def _write(tmp_path, name, records, pred_extra=()):
    gold, pred = tmp_path / f"{name}_gold.jsonl", tmp_path / f"{name}_pred.jsonl"
    with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
        for kind, rec in records:
            (g if kind == "gold" else p).write(dumps(rec) + "\n")
        p.write("".join(line + "\n" for line in pred_extra))
    return gold, pred


def _sharded(preds, gold, out, cfg, n_shards, executor=lambda: ProcessExecutor(2)):
    """The id-sharded stream on local worker processes (or ``executor``), through score_files' Ray branch."""
    import benchmint.run.ray_engine as ray_engine

    real = ray_engine.RayExecutor
    ray_engine.RayExecutor = executor
    old = pipeline_shards.MIN_ID_SHARDS
    pipeline_shards.MIN_ID_SHARDS = n_shards
    try:
        return score_files(preds, gold, out, ScoreConfig(**{**cfg, "engine": "ray"}))
    finally:
        ray_engine.RayExecutor, pipeline_shards.MIN_ID_SHARDS = real, old


@pytest.mark.parametrize("n_shards", [1, 7])
def test_id_shards_write_the_local_engines_files(tmp_path, monkeypatch, n_shards):
    monkeypatch.setattr(pipeline_shards, "SHARD_BYTES", 8192)  # dozens of ranges per file
    # Three models over 600 items, one model that answers two items only (its missing rows come from shards it
    # never met), repeated and unknown ids, lines that are no records, across two prediction files.
    gold, pred = _write(tmp_path, "d", mcq_dataset(600, ["wise-model", "bold-model", "gambling-model"], seed=4),
                        ['{"id": "q0000003", "model": "rare", "output": "Answer: B"}',
                         '{"id": "q0000100", "model": "rare", "answer": ["a", "Z"]}',
                         '{"id": "q0000003", "model": "rare", "output": "Answer: C"}',
                         '{"id": "nowhere", "output": "A"}', "[1]", "{", '{"id": 5, "output": "A"}'])
    second = tmp_path / "second.jsonl"
    lines = pred.read_text(encoding="utf-8").splitlines()
    pred.write_text("\n".join(lines[:900]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[900:]) + "\n\n", encoding="utf-8")
    with open(gold, "a", encoding="utf-8") as fh:  # a repeated gold id and a gold line that is no record
        fh.write('{"id": "q0000007", "answer": ["A"]}\n{"answer": ["A"]}\n')
    cfg = {"task": "mcq", "by": ("domain", "level")}
    local = score_files([pred, second], gold, tmp_path / "local", ScoreConfig(**cfg))
    sharded = _sharded([pred, second], gold, tmp_path / "sharded", cfg, n_shards)
    assert sharded.exit_code == local.exit_code == 1
    for f in OUTPUTS:
        assert (tmp_path / "sharded" / f).read_bytes() == (tmp_path / "local" / f).read_bytes(), f
    kinds = {e["kind"] for e in sharded.errors}
    assert {"duplicate_id", "unknown_id", "malformed_json", "missing_prediction", "missing_id"} <= kinds
    assert sum(e["kind"] == "missing_prediction" and e["model"] == "rare" for e in sharded.errors) == 598
    assert not (tmp_path / "sharded" / ".score-shards").exists()  # the intermediate files are removed


@settings(max_examples=int(os.environ.get("BENCHMINT_FUZZ_EXAMPLES", "40")), deadline=None)
@given(datasets())
def test_random_records_by_id_shards(tmp_path_factory, rows):
    # The generated gold and prediction lines of the compiled/reference comparison, valid and not, scored by
    # id shards in this process (three shards: lines of one id meet in one) and by the local engine.
    gold_rows, pred_rows = rows
    tmp_path = tmp_path_factory.mktemp("rand")
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    _write_rows(gold, gold_rows)
    _write_rows(pred, pred_rows)
    cfg = {"task": "mcq", "by": ("domain",)}
    local = score_files([pred], gold, tmp_path / "local", ScoreConfig(**cfg))
    sharded = _sharded([pred], gold, tmp_path / "sharded", cfg, 3, SerialExecutor)
    assert sharded.exit_code == local.exit_code
    for f in OUTPUTS:
        assert (tmp_path / "sharded" / f).read_bytes() == (tmp_path / "local" / f).read_bytes(), f


def test_id_shards_with_no_usable_gold_fail_as_the_local_engine(tmp_path):
    gold, pred = tmp_path / "g.jsonl", tmp_path / "p.jsonl"
    gold.write_text('{"id": "a"}\n[]\n', encoding="utf-8")
    pred.write_text('{"id": "a", "output": "A"}\n', encoding="utf-8")
    messages = {}
    for how in ("local", "sharded"):
        with pytest.raises(Exception) as exc:
            if how == "local":
                score_files([pred], gold, tmp_path / how, ScoreConfig(task="mcq"))
            else:
                _sharded([pred], gold, tmp_path / how, {"task": "mcq"}, 3)
        messages[how] = (type(exc.value), str(exc.value).replace(str(tmp_path / how), "OUT"))
        assert not (tmp_path / how / "scores.jsonl").exists()
    assert messages["local"] == messages["sharded"]
    assert (tmp_path / "local" / "errors.jsonl").read_bytes() == (tmp_path / "sharded" / "errors.jsonl").read_bytes()


def _driver_peak_mib(pred, gold, out, n_shards) -> float:
    done = subprocess.run([sys.executable, "-c", DRIVER, str(pred), str(gold), str(out), str(n_shards)],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1]) / 1024


def test_the_driver_holds_no_row_of_the_inputs_or_the_summary(tmp_path):
    # One model, so there are as many gold items as predictions: 50,000 lines in 4 id shards against 250,000 in
    # 16 (50 MB of predictions with their behaviour fields, 12 MB of gold; a shard per 64 MB of input makes more
    # shards of larger inputs). The driver keeps per model a block of rows shared among the shards and the count
    # tables; holding the summary's columns (~100 bytes a row, ~190 while calibration sorts) grew its peak by
    # 27 MB between the two sizes, and a block of 8,192 rows per shard by as much between the shard counts.
    small = _write(tmp_path, "small", mcq_dataset(50_000, ["wise-model"], seed=8))
    big = _write(tmp_path, "big", mcq_dataset(250_000, ["wise-model"], seed=8))
    grown = _driver_peak_mib(big[1], big[0], tmp_path / "o2", 16) - _driver_peak_mib(small[1], small[0],
                                                                                     tmp_path / "o1", 4)
    assert grown < 8, grown
    rows = (tmp_path / "o2" / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 250_000 and json.loads(rows[-1])["id"] == "q0249999"


def _problem_inputs(folder, n_items, rejected_every=0):
    """Gold of ``n_items`` items (every ``rejected_every``-th line without its answer) and predictions that are
    mostly problems: "lost" answers each item with an output no answer can be read from (an unparsed id each),
    "rare" answers one item (a missing prediction for each other usable item), and "lost" answers each rejected
    item too (an unknown id naming the rejected line)."""
    gold, pred = folder / "gold.jsonl", folder / "pred.jsonl"
    with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
        for k in range(n_items):
            rid = f"q{k:07d}"
            bad = rejected_every and k % rejected_every == 0
            g.write(dumps({"id": rid, **({} if bad else {"answer": ["A"]}), "meta": {"domain": f"d{k % 3}"}}) + "\n")
            if not bad:
                p.write(dumps({"id": rid, "model": "lost", "output": "no idea", "confidence": 0.5}) + "\n")
            else:
                p.write(dumps({"id": rid, "model": "lost", "output": "Answer: A"}) + "\n")
        p.write(dumps({"id": "q0000001", "model": "rare", "output": "Answer: A"}) + "\n")
    return gold, pred


@pytest.mark.parametrize("n_shards", [1, 5])
def test_id_shards_with_many_errors_and_unparsed_ids_write_the_local_engines_files(tmp_path, monkeypatch, n_shards):
    # Thousands of error rows of every shard (missing predictions, unknown ids naming their rejected gold line,
    # gold lines without an answer) and of unparsed ids, which the driver writes as they come: the same files.
    monkeypatch.setattr(pipeline_shards, "SHARD_BYTES", 16384)
    gold, pred = _problem_inputs(tmp_path, 3000, rejected_every=7)
    cfg = {"task": "mcq", "by": ("domain",)}
    local = score_files([pred], gold, tmp_path / "local", ScoreConfig(**cfg))
    sharded = _sharded([pred], gold, tmp_path / "sharded", cfg, n_shards)
    for f in OUTPUTS:
        assert (tmp_path / "sharded" / f).read_bytes() == (tmp_path / "local" / f).read_bytes(), f
    assert len(sharded.errors) == len(local.errors) == len(list(sharded.errors)) == (3000 - 429 - 1) + 2 * 429
    assert list(sharded.errors) == local.errors
    rejected = [e for e in sharded.errors if e["kind"] == "unknown_id"]
    assert len(rejected) == 429 and rejected[0]["gold_line"] == 1 and "was rejected" in rejected[0]["message"]
    summary = json.loads((tmp_path / "sharded" / "summary.json").read_text(encoding="utf-8"))
    assert len(summary["models"]["lost"]["unparsed_ids"]) == 3000 - 429
    assert summary["models"]["rare"]["unparsed_ids"] == []
    # what the run returns: the count and the first ids, as the report shows them
    block = sharded.summary["models"]["lost"]
    assert len(block["unparsed_ids"]) == 3000 - 429 and block["unparsed_ids"][:5] == local.summary["models"][
        "lost"]["unparsed_ids"][:5]
    assert render(sharded.summary) == render(local.summary)


def test_the_drivers_peak_does_not_follow_the_error_rows_or_the_unparsed_ids(tmp_path):
    # 40,000 against 200,000 items, each a missing prediction of "rare" and an unparsed id of "lost": the driver
    # that listed them grew by 72 MiB between the two (a dict a row and a string an id); written as they come,
    # the error rows and ids stay in the files.
    small, big = tmp_path / "small", tmp_path / "big"
    small.mkdir()
    big.mkdir()
    s_gold, s_pred = _problem_inputs(small, 40_000)
    b_gold, b_pred = _problem_inputs(big, 200_000)
    grown = _driver_peak_mib(b_pred, b_gold, big / "out", 4) - _driver_peak_mib(s_pred, s_gold, small / "out", 4)
    assert grown < 8, grown
    lines = (big / "out" / "errors.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 199_999 and json.loads(lines[-1])["id"] == "q0199999"


def test_a_shards_summary_files_do_not_follow_the_number_of_models(tmp_path, monkeypatch):
    # 3 and 60 models answering every item (copies of one persona's lines): a shard writes one set of summary
    # files for all its models, and the summary still matches the local engine's.
    records = list(mcq_dataset(200, ["wise-model"], seed=2))
    listed = {}
    real = pipeline_shards._summary

    def summary(models, counts, where, gold, cfg, executor, work, shards):
        listed[len(models)] = sorted(os.listdir(work))
        return real(models, counts, where, gold, cfg, executor, work, shards)

    monkeypatch.setattr(pipeline_shards, "_summary", summary)
    for n_models in (3, 60):
        folder = tmp_path / str(n_models)
        folder.mkdir()
        copies = [(kind, rec if kind == "gold" else {**rec, "model": f"m{k:02d}"}) for kind, rec in records
                  for k in range(1 if kind == "gold" else n_models)]
        gold, pred = _write(folder, "d", copies)
        cfg = {"task": "mcq", "by": ("domain",)}
        score_files([pred], gold, folder / "local", ScoreConfig(**cfg))
        _sharded([pred], gold, folder / "sharded", cfg, 3, SerialExecutor)
        for f in OUTPUTS:
            assert (folder / "sharded" / f).read_bytes() == (folder / "local" / f).read_bytes(), f
    # (a model's unparsed ids and missing rows, when it has any, are files of their own)
    summary_files = {n: [f for f in names if "unparsed" not in f and "missing" not in f] for n, names in listed.items()}
    assert len(summary_files[60]) == len(summary_files[3]), (len(summary_files[3]), len(summary_files[60]))


def test_progress_counts_every_prediction_line(tmp_path):
    gold, pred = _write(tmp_path, "p", mcq_dataset(50, ["wise-model", "bold-model"], seed=1), ["", "{", '{"id": "x", "output": ""}'])
    seen = []

    class Count(_Progress):
        def __call__(self, n):
            seen.append(n)

    import benchmint.metrics.pipeline as pipeline

    real = pipeline._Progress
    pipeline._Progress = Count
    try:
        _sharded([pred], gold, tmp_path / "o", {"task": "mcq"}, 3)
    finally:
        pipeline._Progress = real
    assert sum(seen) == 102  # 100 records, "{" and the unknown id; the blank line is not a prediction
