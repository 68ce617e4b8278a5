"""The summary of a score by id shards (``metrics/shard_summary.py``): its float reductions replayed as numpy
computes them, its ranks merged over shards, and summary.json byte for byte the local engine's."""

import json

import numpy as np
import pytest
from scipy.stats import rankdata
from test_score_shards import OUTPUTS, _sharded, _write

from benchmint.io import dumps
from benchmint.metrics import shard_summary
from benchmint.metrics.behaviour import THREADED_ITEMS
from benchmint.metrics.pipeline import ROW_RANGE, ScoreConfig, score_files
from benchmint.metrics.synthetic import mcq_dataset
from benchmint.metrics.user import metric
from benchmint.run.executors import SerialExecutor


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 127, 128, 129, 1000, 3001, 8191, 8192, 8193, 65537, 300_007])
@pytest.mark.parametrize("chunk", [128, shard_summary.PairwiseSum.CHUNK])
def test_pairwise_sum_is_numpys_reduction(n, chunk, monkeypatch):
    monkeypatch.setattr(shard_summary.PairwiseSum, "CHUNK", chunk)  # numpy sums subtrees of up to 128 its own way
    rng = np.random.default_rng(n)
    x = rng.random(n) * 10.0 ** rng.integers(-3, 6, n)  # magnitudes apart, so the order of additions shows
    acc = shard_summary.PairwiseSum(n)
    at = 0
    while at < n:  # blocks of uneven lengths, some longer than a subtree, some far shorter
        step = int(rng.integers(1, 20_000))
        acc.add(x[at:at + step])
        at += step
    assert acc.total() == np.add.reduce(x)
    if n:
        assert acc.mean() == float(x.mean())


def test_pairwise_sum_needs_every_value():
    acc = shard_summary.PairwiseSum(10)
    acc.add(np.ones(9))
    with pytest.raises(RuntimeError, match="fed 9 values of 10"):
        acc.total()


def test_sequential_sums_are_bincounts_weights():
    rng = np.random.default_rng(3)
    bins, w = rng.integers(0, 10, 50_000), rng.random(50_000) * 10.0 ** rng.integers(-3, 6, 50_000)
    acc = shard_summary.SequentialSums(10)
    for at in range(0, 50_000, 777):
        acc.add(bins[at:at + 777], w[at:at + 777])
    assert acc.sums.tobytes() == np.bincount(bins, w, 10).tobytes()


def test_ranks_merged_over_shards_are_scipys_average_ranks(tmp_path, monkeypatch):
    # Three shards' values with ties inside a shard, across shards and across the merge's blocks (blocks of 5),
    # each shard's after another model's values in its file (a shard's models share its files).
    monkeypatch.setattr(shard_summary, "BLOCK", 5)
    monkeypatch.setattr(shard_summary, "MIN_BLOCK", 2)
    rng = np.random.default_rng(1)
    shards = [np.round(rng.random(40) * 4) / 4, np.full(30, 0.5), np.round(rng.random(25) * 8) / 8, np.empty(0)]
    parts = []
    for k, values in enumerate(shards):
        p = str(tmp_path / f"s{k}")
        v, c = np.unique(values, return_counts=True)
        before = np.arange(k + 1, dtype=np.float64)  # the other model's distinct values
        np.concatenate([before, v]).tofile(f"{p}.conf.v")
        np.concatenate([np.ones(k + 1, dtype=np.int64), c.astype(np.int64)]).tofile(f"{p}.conf.c")
        np.full(len(before) + len(v), np.nan).tofile(f"{p}.conf.r")
        parts.append((p, {"conf": (len(before), len(v))}))
    files = shard_summary.Files()
    assert shard_summary.merge_ranks(files, parts, "conf") == len(np.unique(np.concatenate(shards)))
    files.close()
    expected = rankdata(np.concatenate(shards))  # average ranks for ties, computed apart
    at = 0
    for (p, place), values in zip(parts, shards):
        start = place["conf"][0]
        v = np.fromfile(f"{p}.conf.v")[start:]
        r = np.fromfile(f"{p}.conf.r")
        assert np.isnan(r[:start]).all()  # the other model's ranks are not touched
        got = r[start:][np.searchsorted(v, values)]
        assert got.tolist() == expected[at:at + len(values)].tolist()
        at += len(values)


@metric
def half_jaccard(tp, fp, fn, g):
    return 0.5 * tp / (tp + fp + fn) if tp + fp + fn else 1.0


def _rewrite(pred, fn):
    """Each prediction record passed through ``fn`` (None drops it)."""
    lines = []
    for i, line in enumerate(pred.read_text(encoding="utf-8").splitlines()):
        rec = fn(i, json.loads(line))
        if rec is not None:
            lines.append(dumps(rec))
    pred.write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def _same_files(tmp_path, preds, gold, cfg, n_shards, executor=SerialExecutor):
    local = score_files(preds, gold, tmp_path / "local", ScoreConfig(**cfg))
    sharded = _sharded(preds, gold, tmp_path / "sharded", cfg, n_shards, executor)
    assert sharded.exit_code == local.exit_code
    for f in OUTPUTS:
        assert (tmp_path / "sharded" / f).read_bytes() == (tmp_path / "local" / f).read_bytes(), f
    return local.summary


def _ties(i, rec):
    # Confidence and difficulty on a coarse grid (ties everywhere), some rows without either, one model's
    # confidence constant, tokens few enough for the token profile's hard/easy test.
    if i % 11 == 0:
        rec.pop("confidence", None)
    if i % 13 == 0:
        rec.pop("difficulty", None)
    if "confidence" in rec:
        rec["confidence"] = 0.9 if rec["model"] == "bold-model" else round(rec["confidence"], 1)
    if "difficulty" in rec:
        rec["difficulty"] = round(rec["difficulty"] * 4) / 4
    if rec["model"] == "wise-model":
        rec["tokens"] //= 10
    return None if i % 17 == 0 else rec  # missing predictions


@pytest.mark.parametrize("n_shards", [1, 5])
def test_summary_of_several_models_with_ties_strata_and_missing_rows(tmp_path, monkeypatch, n_shards):
    # Small merge blocks and subtrees, so every merge and sum crosses many of them.
    monkeypatch.setattr(shard_summary, "BLOCK", 37)
    monkeypatch.setattr(shard_summary, "MIN_BLOCK", 5)
    monkeypatch.setattr(shard_summary.PairwiseSum, "CHUNK", 128)
    gold, pred = _write(tmp_path, "d", mcq_dataset(3_000, ["wise-model", "bold-model", "gambling-model"], seed=5),
                        ['{"id": "q0000003", "model": "rare", "output": "Answer: B", "confidence": 0.2}'])
    _rewrite(pred, _ties)
    summary = _same_files(tmp_path, [pred], gold, {"task": "mcq", "by": ("domain", "level"),
                                                   "user_metrics": (half_jaccard,)}, n_shards)
    models = summary["models"]
    # The cases the test is for are there: ties, a constant confidence, rows without confidences, missing rows,
    # a model with one stated confidence, a token profile that compared hard and easy items.
    assert models["bold-model"]["calibration"]["spearman_confidence_score"] is None
    assert models["wise-model"]["calibration"]["spearman_confidence_score"] is not None
    assert models["wise-model"]["calibration"]["n_with_confidence"] < 3_000
    assert models["wise-model"]["personality"]["token_profile"]["hard_score"] > 0
    assert models["rare"]["calibration"]["n_with_confidence"] == 1
    assert "spearman_confidence_score" in models["rare"]["calibration"]
    assert models["rare"]["n_missing"] == 2_999


def test_summary_without_behaviour_fields(tmp_path):
    gold, pred = _write(tmp_path, "d", mcq_dataset(500, ["wise-model", "gambling-model"], seed=6,
                                                   behaviour_fields=False))
    summary = _same_files(tmp_path, [pred], gold, {"task": "mcq", "by": ("domain",)}, 3)
    assert "calibration" not in summary["models"]["wise-model"]


def test_summary_of_one_model_above_every_threading_threshold(tmp_path):
    # One model's rows past the summary's threaded calibration and its counting ranges, at 2 workers locally.
    n = max(THREADED_ITEMS, ROW_RANGE) + 4_000
    gold, pred = _write(tmp_path, "d", mcq_dataset(n, ["wise-model"], seed=7))
    _rewrite(pred, lambda i, rec: {**rec, "confidence": round(rec["confidence"], 2)})
    summary = _same_files(tmp_path, [pred], gold, {"task": "mcq", "by": ("domain",), "workers": 2}, 4)
    assert summary["models"]["wise-model"]["calibration"]["spearman_difficulty_confidence"] is not None


def test_summary_with_the_rank_means_summed_in_a_pass_of_their_own(tmp_path, monkeypatch):
    # Past EXACT_RANKS rows a model's mean ranks are summed as numpy sums them before the correlations' pass;
    # below it both ways give the same bits, so forcing the pass must change nothing.
    monkeypatch.setattr(shard_summary, "EXACT_RANKS", 0)
    calls = []
    real = shard_summary.RankMeans.means
    monkeypatch.setattr(shard_summary.RankMeans, "means", lambda self: calls.append(1) or real(self))
    gold, pred = _write(tmp_path, "d", mcq_dataset(800, ["wise-model", "bold-model"], seed=9))
    _rewrite(pred, _ties)
    _same_files(tmp_path, [pred], gold, {"task": "mcq", "by": ("domain",)}, 3)
    assert len(calls) == 2
