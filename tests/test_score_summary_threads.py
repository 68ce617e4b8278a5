"""The summary's per-model work at sizes where calibration runs on threads (THREADED_ITEMS items a model and more).

Each model's calibration, personality and unparsed ids in summary.json are checked against the same figures
worked out in the test from scores.jsonl and the predictions: one thread, the rows picked out by model, each
correlation's ranks sorted from its own subset's copies. Some predictions leave out their confidence or difficulty, so the correlations
are taken over three different subsets of the items.
"""

import json

import numpy as np
import pytest

from benchmint.io import dumps
from benchmint.metrics.behaviour import THREADED_ITEMS, _pearson, average_ranks, calibration, personality
from benchmint.metrics.pipeline import ScoreConfig, score_files
from benchmint.metrics.synthetic import mcq_dataset

ITEMS = THREADED_ITEMS + 3_000
MODELS = ["wise-model", "bold-model"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("summary-threads")
    gold, pred = root / "gold.jsonl", root / "pred.jsonl"
    with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
        for i, (kind, rec) in enumerate(mcq_dataset(ITEMS, MODELS, seed=5)):
            if kind == "pred":
                if i % 7 == 0:
                    del rec["confidence"]
                if i % 5 == 0:
                    del rec["difficulty"]
            (g if kind == "gold" else p).write(dumps(rec) + "\n")
    one = root / "pred-one.jsonl"
    one.write_text("".join(line for line in pred.read_text().splitlines(keepends=True)
                           if f'"model":"{MODELS[0]}"' in line.replace(" ", "")))
    return gold, pred, one


def expected_block(scores: list[dict], preds: dict, model: str, block: dict) -> dict:
    rows = [r for r in scores if r["model"] == model]
    stated = [preds[(r["id"], model)] for r in rows]

    def column(name):
        return np.array([p.get(name, np.nan) for p in stated], dtype=np.float64)

    score = np.array([r["sip_f1"] for r in rows])
    tp = np.array([r["tp"] for r in rows])
    n_pred, n_gold = tp + np.array([r["fp"] for r in rows]), tp + np.array([r["fn"] for r in rows])
    conf, diff = column("confidence"), column("difficulty")
    calib = calibration(score, conf, diff, column("tokens"))
    assert calib is not None
    # The correlations from each subset's own copies, ranked by a sort of each: no shared rank cache, no threads.
    has_conf, has_diff = ~np.isnan(conf), ~np.isnan(diff)
    both = has_conf & has_diff
    calib.update(
        spearman_confidence_score=_pearson(average_ranks(conf[has_conf]), average_ranks(score[has_conf])),
        spearman_difficulty_score=_pearson(average_ranks(diff[has_diff]), average_ranks(score[has_diff])),
        spearman_difficulty_confidence=_pearson(average_ranks(diff[both]), average_ranks(conf[both])))
    m = block["metrics"]
    person = personality(tp, n_pred, n_gold, m["spc"]["mean"], m["sip_f1"]["mean"], m["precision"]["mean"],
                         m["recall"]["mean"], calib=calib, score=score, difficulty=column("difficulty"),
                         tokens=column("tokens"))
    calib["score_metric"] = "sip_f1"
    # through JSON, as summary.json holds them (floats round-trip exactly)
    return json.loads(json.dumps({"calibration": calib, "personality": person,
                                  "unparsed_ids": [r["id"] for r in rows if r["status"] == "unparsed"]}))


@pytest.mark.parametrize("n_models", [1, 2])
def test_per_model_figures_match_a_plain_computation(inputs, tmp_path, forced_impl, n_models):
    gold, pred, one = inputs
    pred = one if n_models == 1 else pred
    summary = {}
    runs = [("compiled", 1), ("compiled", 2)] + [("reference", 2)] * (n_models == 1)  # the reference is slow
    for impl, workers in runs:
        out = tmp_path / f"{impl}{workers}"
        with forced_impl(impl):
            score_files(pred, gold, out, ScoreConfig(task="mcq", by=("domain",), workers=workers))
        summary[impl, workers] = (out / "summary.json").read_bytes()
    # the threads change no byte, nor does the reference's counting (group_counts) and stream
    assert len(set(summary.values())) == 1
    scores = [json.loads(line) for line in (tmp_path / "compiled2" / "scores.jsonl").read_text().splitlines()]
    preds = {(p["id"], p["model"]): p for p in map(json.loads, pred.read_text().splitlines())}
    models = json.loads(summary["compiled", 2])["models"]
    assert sorted(models) == sorted(MODELS[:n_models])
    for model, block in models.items():
        assert sum(r["model"] == model for r in scores) == ITEMS >= THREADED_ITEMS
        want = expected_block(scores, preds, model, block)
        got = {k: block[k] for k in want}
        assert got == want
        calib = block["calibration"]
        # the three correlations are over different subsets: each item missing a confidence or a difficulty
        assert ITEMS > calib["n_with_difficulty"] > 0 and ITEMS > calib["n_with_confidence"] > 0
        assert None not in (calib["spearman_confidence_score"], calib["spearman_difficulty_score"],
                            calib["spearman_difficulty_confidence"])
        assert block["unparsed_ids"]


def _columns(n: int, n_models: int, stating: set[int], seed: int):
    from benchmint.metrics.pipeline import Columns

    rng = np.random.default_rng(seed)
    n_gold = rng.integers(1, 5, n).astype(np.int32)
    n_pred = rng.integers(0, 6, n).astype(np.int32)
    tp = np.minimum(n_gold, n_pred) - (rng.random(n) < 0.3) * (np.minimum(n_gold, n_pred) > 0)
    model = rng.integers(0, n_models, n).astype(np.int32)
    stated = np.isin(model, list(stating))
    confidence = np.where(stated & (rng.random(n) < 0.6), rng.random(n), np.nan)
    difficulty = np.where(stated & (rng.random(n) < 0.7), rng.random(n), np.nan)
    return Columns(models=[f"m{k}" for k in range(n_models)], model=model,
                   gold_idx=rng.integers(0, 10 * n, n).astype(np.int32), tp=tp.astype(np.int32), n_pred=n_pred,
                   n_gold=n_gold, status=rng.choice(np.array([0, 1, 2], dtype=np.uint8), n, p=[0.7, 0.2, 0.1]),
                   confidence=confidence, difficulty=difficulty, tokens=np.full(n, np.nan))


@pytest.mark.parametrize(("n_models", "stating", "workers"),
                         [(1, set(), 2), (1, {0}, 3), (3, set(), 2), (3, {1}, 3), (4, {0, 2}, 1), (4, {0, 3}, 4)])
def test_model_rows_by_ranges_are_the_masked_rows(monkeypatch, n_models, stating, workers):
    # Ranges of 1,000 rows, so each worker's thread gathers several and a model's rows come from every range;
    # each model's columns must be what masks over all rows pick out, and the sums over them the same bits.
    from benchmint.metrics import pipeline

    cols = _columns(7_321, n_models, stating, seed=n_models + workers)
    keys = pipeline.pack_triples(cols.tp, cols.n_pred, cols.n_gold, 7)
    uniq = np.unique(keys)
    monkeypatch.setattr(pipeline, "ROW_RANGE", 1_000)
    got = pipeline._model_rows(cols, keys, lambda k: np.searchsorted(uniq, k), workers)
    assert len(got) == n_models
    for m, rows in enumerate(got):
        sel = cols.model == m
        answered = sel & (cols.n_pred > 0)
        assert np.array_equal(rows.precision, cols.tp[answered] / cols.n_pred[answered])
        assert np.mean(rows.precision).tobytes() == np.mean(cols.tp[answered] / cols.n_pred[answered]).tobytes()
        assert np.array_equal(rows.unparsed, cols.gold_idx[sel & (cols.status == 1)])
        if m not in stating:
            assert rows.cls is None and rows.confidence is None and rows.tokens is None
            continue
        assert np.array_equal(rows.cls, np.searchsorted(uniq, keys[sel]))
        for name in ("confidence", "difficulty", "tokens"):
            assert np.array_equal(getattr(rows, name), getattr(cols, name)[sel], equal_nan=True)
