"""benchmint score: files in, scores.jsonl / summary.json / errors.jsonl out."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint.cli import main
from benchmint.io import InputError
from benchmint.metrics import aggregate, aggregate_ref
from benchmint.metrics.batch import score_item
from benchmint.metrics.behaviour import calibration, personality
from benchmint.metrics.pipeline import MEAN_METRICS, ScoreConfig, score_files


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


GOLD = [
    {"id": "q1", "answer": ["A", "B"], "meta": {"domain": "STM", "level": 1}},
    {"id": "q2", "answer": ["C"], "meta": {"domain": "AFM", "level": 2}},
    {"id": "q3", "answer": ["A", "D"], "meta": {"domain": "STM", "level": 2}},
    {"id": "q4", "answer": ["B"], "meta": {"domain": "TEM"}},
]


@pytest.fixture
def gold(tmp_path):
    return write_jsonl(tmp_path / "gold.jsonl", GOLD)


def test_scores_and_summary_single_model(tmp_path, gold):
    pred = write_jsonl(tmp_path / "pred.jsonl", [
        {"id": "q1", "answer": ["A"]},                     # conservative: SIP 0.4, SPC 0.5
        {"id": "q2", "output": "Answer: C"},               # exact
        {"id": "q3", "answer": ["a", "b", "d"]},           # aggressive: TP 2, FP 1
        {"id": "q4", "output": "I cannot tell."},          # unparseable -> empty
    ])
    res = score_files(pred, gold, tmp_path / "out", ScoreConfig(task="mcq", by=("domain", "level")))
    rows = read_jsonl(tmp_path / "out" / "scores.jsonl")
    assert [r["id"] for r in rows] == ["q1", "q2", "q3", "q4"]
    assert rows[0]["sip_f1"] == pytest.approx(0.4) and rows[0]["spc"] == 0.5 and rows[0]["answer"] == ["A"]
    assert rows[1]["em"] == 1.0 and rows[1]["status"] == "ok"
    assert rows[2]["answer"] == ["A", "B", "D"] and rows[2]["sip_f1"] == pytest.approx(0.24)
    assert rows[3]["parse_ok"] is False and rows[3]["status"] == "unparsed" and rows[3]["jaccard"] == 0.0
    assert list(rows[0]) == sorted(rows[0])  # sorted keys
    block = res.summary["models"]["default"]
    assert block["n"] == 4
    assert block["metrics"]["sip_f1"]["mean"] == pytest.approx((0.4 + 1 + 0.24 + 0) / 4)
    assert block["metrics"]["em"]["mean"] == 0.25
    assert block["parse_success_rate"] == 0.75
    assert block["mean_pred_size"] == pytest.approx((1 + 1 + 3 + 0) / 4)
    assert block["over_prediction_rate"] == 0.25
    assert block["unparsed_ids"] == ["q4"]
    for m in MEAN_METRICS:
        lo, hi = block["metrics"][m]["ci95"]
        assert lo <= block["metrics"][m]["mean"] <= hi
    stm = block["by"]["domain"]["STM"]
    assert stm["n"] == 2 and stm["metrics"]["jaccard"]["mean"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert set(block["by"]["level"]) == {"1", "2", "(missing)"}
    assert res.exit_code == 0 and res.errors == []
    assert (tmp_path / "out" / "errors.jsonl").read_text() == ""


def test_macro_average_matches_per_item(tmp_path):
    from benchmint.metrics.synthetic import mcq_dataset

    records = list(mcq_dataset(120, ["bold-model", "wise-model"], seed=3))
    gold = write_jsonl(tmp_path / "g.jsonl", [r for k, r in records if k == "gold"])
    pred = write_jsonl(tmp_path / "p.jsonl", [r for k, r in records if k == "pred"])
    res = score_files(pred, gold, tmp_path / "o", ScoreConfig(task="mcq", by=("domain",)))
    rows = read_jsonl(tmp_path / "o" / "scores.jsonl")
    for model, block in res.summary["models"].items():
        mine = [r for r in rows if r["model"] == model]
        assert block["n"] == len(mine) == 120
        for m in MEAN_METRICS:
            assert block["metrics"][m]["mean"] == pytest.approx(np.mean([r[m] for r in mine]), abs=1e-12)
        for dom, b in block["by"]["domain"].items():
            ids = {r["id"] for r in records_gold(records) if r["meta"]["domain"] == dom}
            sel = [r["sip_f1"] for r in mine if r["id"] in ids]
            assert b["metrics"]["sip_f1"]["mean"] == pytest.approx(np.mean(sel), abs=1e-12)


def records_gold(records):
    return [r for k, r in records if k == "gold"]


def test_errors_are_listed_and_counted(tmp_path, gold):
    pred = write_jsonl(tmp_path / "pred.jsonl", [
        {"id": "q1", "answer": ["A", "B"], "model": "m"},
        '{"id": "q2", "answer": ["C"], "model": "m"',         # line 2: malformed
        {"id": "nope", "answer": ["A"], "model": "m"},          # line 3: unknown id
        {"id": "q1", "answer": ["B"], "model": "m"},            # line 4: duplicate
        {"id": "q2", "answer": [[1, 0, 0]], "model": "m"},      # line 5: wrong kind
        {"id": "q3", "answer": ["A"], "model": "m", "confidence": 3},  # line 6: bad field, still scored
        {"answer": ["A"]},                                      # line 7: no id
    ])
    res = score_files(pred, gold, tmp_path / "out", ScoreConfig(task="mcq"))
    errs = read_jsonl(tmp_path / "out" / "errors.jsonl")
    kinds = [(e["kind"], e.get("line"), e.get("id")) for e in errs]
    assert kinds == [
        ("malformed_json", 2, None),
        ("unknown_id", 3, "nope"),
        ("duplicate_id", 4, "q1"),
        ("wrong_kind", 5, "q2"),
        ("bad_field", 6, "q3"),
        ("missing_id", 7, None),
        ("missing_prediction", None, "q4"),
    ]
    assert all(e["file"].endswith(("pred.jsonl", "gold.jsonl")) for e in errs)
    assert res.exit_code == 1
    block = res.summary["models"]["m"]
    # q2's answer is of the wrong kind and it has no output: scored as unparsed, not dropped as missing
    assert block["n"] == 4 and block["n_missing"] == 1
    assert res.summary["errors"]["count"] == 7
    rows = read_jsonl(tmp_path / "out" / "scores.jsonl")
    assert [(r["id"], r["status"]) for r in rows] == [("q1", "ok"), ("q2", "unparsed"), ("q3", "ok"), ("q4", "missing")]


def test_gold_errors(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", [
        {"id": "a", "answer": ["A"]},
        {"id": "a", "answer": ["B"]},
        {"id": "b", "answer": "A"},
        {"id": "c"},
        "not json",
    ])
    pred = write_jsonl(tmp_path / "pred.jsonl", [{"id": "a", "answer": ["A"]}])
    res = score_files(pred, gold, tmp_path / "out", ScoreConfig(task="mcq"))
    assert [(e["kind"], e["line"]) for e in res.errors] == [
        ("duplicate_id", 2), ("wrong_kind", 3), ("missing_answer", 4), ("malformed_json", 5)]


def test_several_models_and_files(tmp_path, gold):
    p1 = write_jsonl(tmp_path / "a.jsonl", [{"id": g["id"], "answer": g["answer"], "model": "alpha"} for g in GOLD])
    p2 = write_jsonl(tmp_path / "b.jsonl", [{"id": g["id"], "answer": ["A", "B", "C", "D"], "model": "beta"} for g in GOLD])
    res = score_files([p1, p2], gold, tmp_path / "out", ScoreConfig(task="mcq", by=("model", "domain")))
    models = res.summary["models"]
    assert list(models) == ["alpha", "beta"]
    assert models["alpha"]["metrics"]["em"]["mean"] == 1.0
    assert models["alpha"]["personality"]["label"] == "Wise"
    assert models["beta"]["personality"]["label"] == "Gambler"
    assert models["beta"]["over_prediction_rate"] == 1.0


def test_deterministic_outputs(tmp_path, gold):
    pred = write_jsonl(tmp_path / "pred.jsonl", [{"id": g["id"], "answer": ["A"]} for g in GOLD])
    for name in ("o1", "o2"):
        score_files(pred, gold, tmp_path / name, ScoreConfig(task="mcq", by=("domain",)))
    for f in ("scores.jsonl", "summary.json", "errors.jsonl"):
        assert (tmp_path / "o1" / f).read_bytes() == (tmp_path / "o2" / f).read_bytes()


def test_cli_exit_codes(tmp_path, gold, capsys):
    pred = write_jsonl(tmp_path / "pred.jsonl", [{"id": g["id"], "answer": g["answer"]} for g in GOLD])
    assert main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "SIP-F1" in out and "default" in out
    assert main(["score", str(tmp_path / "missing.jsonl"), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o"), "--sip-lambda", "2"]) == 2
    assert "sip_lambda" in capsys.readouterr().err
    bad = write_jsonl(tmp_path / "bad.jsonl", ["{oops"])
    assert main(["score", str(bad), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o2"), "--quiet"]) == 2


def test_missing_gold_file(tmp_path):
    pred = write_jsonl(tmp_path / "pred.jsonl", [{"id": "a", "answer": ["A"]}])
    with pytest.raises(InputError, match="gold file not found"):
        score_files(pred, tmp_path / "nope.jsonl", tmp_path / "o", ScoreConfig(task="mcq"))


def test_hkl_task(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", [
        {"id": "x1", "answer": [[1, 1, 0], [2, 0, 0]], "meta": {"db": "MP"}},
        {"id": "x2", "answer": [[1, 0, -1, 0]], "meta": {"db": "OQMD"}},
    ])
    pred = write_jsonl(tmp_path / "pred.jsonl", [
        {"id": "x1", "output": '{"max_peak_hkls": [[1,1,0],[2,0,0],[0,0,0],[1,1,1]]}'},
        {"id": "x2", "answer": [[1, 0, -1, 0], [1, 0, -1, 0]]},
    ])
    res = score_files(pred, gold, tmp_path / "out", ScoreConfig(task="hkl", by=("db",)))
    rows = read_jsonl(tmp_path / "out" / "scores.jsonl")
    assert rows[0]["answer"] == [[1, 1, 0], [1, 1, 1], [2, 0, 0]]  # (000) dropped, sorted
    assert rows[0]["jaccard"] == pytest.approx(2 / 3) and rows[0]["j_pen"] == pytest.approx(2 / 3 * 2 / 3)
    assert rows[1]["em"] == 1.0
    assert res.summary["models"]["default"]["by"]["db"]["MP"]["n"] == 1


def test_config_validation():
    with pytest.raises(ValueError, match="task"):
        ScoreConfig(task="open")
    with pytest.raises(ValueError, match="sip_gamma"):
        ScoreConfig(task="mcq", sip_gamma=0.5)
    with pytest.raises(ValueError, match="n_boot"):
        ScoreConfig(task="mcq", n_boot=10)


# ---- aggregation and bootstrap --------------------------------------------

def _same_counts(ref, got):
    for a, b in zip(ref, got, strict=True):
        assert a.dtype == b.dtype == np.int64
        np.testing.assert_array_equal(a, b)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 30)), max_size=300))
def test_group_counts_numpy_equals_counter(compare_forms, rows):
    # group_counts has no compiled form: its NumPy form (the "compiled" choice) against the Counter reference.
    group = np.array([g for g, _ in rows], dtype=np.int64)
    key = np.array([k for _, k in rows], dtype=np.int64)
    compare_forms("aggregate", lambda: aggregate_ref.group_counts(group, key),
                  lambda: aggregate.group_counts(group, key, 6, 31), _same_counts)


def test_group_counts_large_and_sparse_paths(compare_forms):
    rng = np.random.default_rng(0)
    group = rng.integers(0, 3, 300_000)
    key = rng.integers(0, 50, 300_000)
    for n_keys in (50, aggregate.DENSE_LIMIT):  # dense table, then the sorting path
        compare_forms("aggregate", lambda: aggregate_ref.group_counts(group, key),
                      lambda n_keys=n_keys: aggregate.group_counts(group, key, 3, n_keys), _same_counts)
    with pytest.raises(ValueError, match="out of range"):
        aggregate.group_counts(np.array([3]), np.array([0]), 3, 5)


def test_multinomial_bootstrap_matches_index_bootstrap():
    # Same distribution as resampling items: compare interval ends with a naive bootstrap.
    rng = np.random.default_rng(1)
    values = rng.choice([0.0, 0.24, 0.4, 1.0], size=2000, p=[0.3, 0.2, 0.2, 0.3])
    uniq, counts = np.unique(values, return_counts=True)
    mean, lo, hi = aggregate.bootstrap_ci(counts, uniq[:, None], 4000, np.random.default_rng(2))
    naive = values[np.random.default_rng(3).integers(0, len(values), (4000, len(values)))].mean(axis=1)
    nlo, nhi = np.quantile(naive, [0.025, 0.975])
    assert mean[0] == pytest.approx(values.mean())
    assert lo[0] == pytest.approx(nlo, abs=0.004) and hi[0] == pytest.approx(nhi, abs=0.004)


# ---- personalities and calibration ------------------------------------------

def _counts(pairs):
    tp = np.array([len(set(p) & set(g)) for p, g in pairs])
    return tp, np.array([len(p) for p, _ in pairs]), np.array([len(g) for _, g in pairs])


@pytest.mark.parametrize("pred, label", [
    ({"A", "B"}, "Wise"), ({"A"}, "Conservative"), ({"A", "B", "C"}, "Aggressive"), ({"A", "B", "C", "D"}, "Gambler")])
def test_personality_of_table2_strategies(pred, label):
    # spm-bench Table 2's rows, each strategy on every item: P = 1, 1, 2/3, 1/2; SIP-F1 1, 0.4, 0.24, 0.15.
    pairs = [(pred, {"A", "B"})] * 10
    rows = [score_item(p, g) for p, g in pairs]
    mean = lambda k: float(np.mean([r[k] for r in rows]))  # noqa: E731
    got = personality(*_counts(pairs), mean("spc"), mean("sip_f1"), mean("precision"), mean("recall"))
    assert got["label"] == label


def test_aggressive_label_needs_mixed_behaviour():
    # Over-selects on 3 of 10 items, exact otherwise: over > under, precision high -> Aggressive.
    pairs = [({"A", "B", "C"}, {"A", "B"})] * 3 + [({"A", "B"}, {"A", "B"})] * 7
    rows = [score_item(p, g) for p, g in pairs]
    mean = lambda k: float(np.mean([r[k] for r in rows]))  # noqa: E731
    got = personality(*_counts(pairs), mean("spc"), mean("sip_f1"), mean("precision"), mean("recall"))
    assert got["label"] == "Aggressive" and got["over_selection_rate"] == 0.3


def _personality(pairs, **behaviour):
    rows = [score_item(p, g) for p, g in pairs]
    mean = lambda k: float(np.mean([r[k] for r in rows]))  # noqa: E731
    score = np.array([r["sip_f1"] for r in rows])
    conf = np.array(behaviour.get("confidence", [np.nan] * len(pairs)), dtype=float)
    diff = np.array(behaviour.get("difficulty", [np.nan] * len(pairs)), dtype=float)
    tokens = np.array(behaviour.get("tokens", [np.nan] * len(pairs)), dtype=float)
    calib = calibration(score, conf, diff, tokens)
    return personality(*_counts(pairs), mean("spc"), mean("sip_f1"), mean("precision"), mean("recall"),
                       calib=calib, score=score, difficulty=diff, tokens=tokens)


def test_a_wise_model_that_sometimes_over_selects_stays_wise():
    # 23 of 25 exact, 2 (8%) with one wrong extra option: SIP-F1 (23 + 2·0.24)/25 = 0.939, P = (23 + 2·2/3)/25
    # = 0.973, R = 1; over 0.08 > under 0 made it "Aggressive" under a rule that looked at over vs under first.
    pairs = [({"A", "B"}, {"A", "B"})] * 23 + [({"A", "B", "C"}, {"A", "B"})] * 2
    right_conf = [0.9] * 23 + [0.6] * 2  # less sure where it is wrong: calibrated
    got = _personality(pairs, confidence=right_conf)
    assert got["label"] == "Wise" and got["calibrated"] is True
    assert got["sip_f1"] == pytest.approx((23 + 2 * 0.24) / 25, abs=1e-9)
    assert _personality(pairs)["reason"].endswith("(no stated confidence: calibration unknown)")
    # The same selections with confidence against its scores (sure where wrong, unsure where right): ECE is
    # |0.5 - 1|·23/25 + |0.95 - 0.24|·2/25 = 0.517 > 0.15 and Spearman < 0: not calibrated, so not Wise; its
    # only errors are extra options, so it is Aggressive.
    wrong_conf = [0.5] * 23 + [0.95] * 2
    got = _personality(pairs, confidence=wrong_conf)
    assert got["label"] == "Aggressive" and got["calibrated"] is False and "does not track" in got["reason"]


def test_aggressive_overconfidence_and_token_profiles():
    # {A, B, C} of {A, B} on every item at confidence 0.9: mean score 0.24, so 0.9 - 0.24 > 0.15: overconfident.
    pairs = [({"A", "B", "C"}, {"A", "B"})] * 10
    got = _personality(pairs, confidence=[0.9] * 10, tokens=[4000] * 10)
    assert (got["label"], got["overconfident"]) == ("Aggressive", True) and "overconfidence" in got["reason"]
    assert got["token_profile"] == {"label": None, "mean_tokens": 4000.0}  # long but not sound: no profile
    exact = [({"A"}, {"A"})] * 10
    assert _personality(exact, tokens=[3500] * 10)["token_profile"]["label"] == "Deliberative Analyst"
    # Short answers, right on the 5 easy items and wrong on the 5 hard ones: 0 < 0.5·1 on hard vs easy.
    mixed = [({"A"}, {"A"})] * 5 + [({"B"}, {"A"})] * 5
    profile = _personality(mixed, tokens=[300] * 10, difficulty=[0.1] * 5 + [0.9] * 5)["token_profile"]
    assert profile == {"label": "Naive Intuitionist", "mean_tokens": 300.0, "hard_score": 0.0, "easy_score": 1.0}
    assert _personality(mixed)["token_profile"] is None  # no tokens stated: no profile


def test_calibration_by_hand():
    score = np.array([1.0, 0.0, 1.0, 0.4])
    conf = np.array([0.95, 0.9, 0.55, 0.5])
    nan = np.full(4, np.nan)
    got = calibration(score, conf, nan, nan)
    # bins: 9 -> {0.95, 0.9} mean conf 0.925, mean score 0.5; 5 -> {0.55, 0.5} 0.525 vs 0.7
    assert got["ece"] == pytest.approx(0.5 * 0.425 + 0.5 * 0.175)
    assert got["brier"] == pytest.approx(np.mean((conf - score) ** 2))
    # ranks (4,3,2,1) vs (3.5,1,3.5,2): covariance 1, spreads sqrt(5) and sqrt(4.5)
    assert got["spearman_confidence_score"] == pytest.approx(1 / np.sqrt(22.5))
    assert calibration(score, nan, nan, nan) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.24, 0.4, 0.5, 1.0, 0.1]), min_size=1, max_size=60))
def test_rank_helpers_equal_scipy(values):
    from scipy.stats import rankdata

    from benchmint.metrics.behaviour import average_ranks, class_average_ranks

    x = np.array(values)
    np.testing.assert_array_equal(average_ranks(x), rankdata(x))
    class_values = np.array([0.0, 0.24, 0.4, 0.5, 1.0, 0.1, 0.4])  # two classes share 0.4
    cls = np.array([[0.0, 0.24, 0.4, 0.5, 1.0, 0.1].index(v) for v in values])
    cls[::3] = np.where(cls[::3] == 2, 6, cls[::3])
    np.testing.assert_array_equal(class_average_ranks(cls, class_values), rankdata(class_values[cls]))


def test_no_usable_prediction_still_lists_the_problems(tmp_path, gold, capsys):
    pred = write_jsonl(tmp_path / "pred.jsonl", ["{broken", {"id": "zz", "answer": ["A"]}])
    assert main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o")]) == 2
    assert "errors.jsonl" in capsys.readouterr().err
    kinds = [e["kind"] for e in read_jsonl(tmp_path / "o" / "errors.jsonl")]
    assert kinds == ["malformed_json", "unknown_id"]


def test_unusable_gold_lists_the_problems(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", ["nope", {"id": "a", "answer": "A"}])
    pred = write_jsonl(tmp_path / "pred.jsonl", [{"id": "a", "answer": ["A"]}])
    with pytest.raises(InputError, match="no usable records"):
        score_files(pred, gold, tmp_path / "o", ScoreConfig(task="mcq"))
    assert [e["line"] for e in read_jsonl(tmp_path / "o" / "errors.jsonl")] == [1, 2]


def test_unanswered_items_are_abstention_not_wrong_selections():
    # A, A and twice "I am not sure." against {A, B}: both selections are right (precision 1 over what it
    # selected), half the items unanswered; it leaves options out: Conservative, never Gambler.
    pairs = [({"A"}, {"A", "B"})] * 2 + [(set(), {"A", "B"})] * 2
    got = _personality(pairs)
    assert got["label"] == "Conservative" and got["precision"] == 1.0
    assert got["abstention_rate"] == 0.5 and got["reason"].endswith("answers nothing on 50% of the items")
    assert _personality([(set(), {"A"})] * 3)["label"] is None


def test_abstention_through_score(tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"id": f"q{i}", "answer": ["A", "B"]}) + "\n" for i in range(4)))
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"id": f"q{i}", "output": o}) + "\n"
                            for i, o in enumerate(["A", "A", "I am not sure.", "I am not sure."])))
    res = score_files(pred, gold, tmp_path / "out", ScoreConfig(task="mcq"))
    p = res.summary["models"]["default"]["personality"]
    assert (p["label"], p["precision"], p["abstention_rate"]) == ("Conservative", 1.0, 0.5)


def _summary_columns(n: int, max_set: int, seed: int):
    """Columns of ``n`` rows of 3 models over 5,000 gold items with 2 strata, every status, some confidences."""
    from benchmint.metrics.pipeline import Columns, Gold

    rng = np.random.default_rng(seed)
    n_gold = rng.integers(1, max_set + 1, n).astype(np.int32)
    n_pred = rng.integers(0, max_set + 1, n).astype(np.int32)
    tp = np.minimum(n_gold, n_pred) - rng.integers(0, 2, n).clip(0, np.minimum(n_gold, n_pred)).astype(np.int32)
    status = rng.choice(np.array([0, 1, 2], dtype=np.uint8), n, p=[0.8, 0.15, 0.05])
    confidence = np.where(rng.random(n) < 0.5, rng.random(n), np.nan)
    cols = Columns(models=["m0", "m1", "m2"], model=rng.integers(0, 3, n).astype(np.int32),
                   gold_idx=rng.integers(0, 5000, n).astype(np.int32), tp=tp.astype(np.int32), n_pred=n_pred,
                   n_gold=n_gold, status=status, confidence=confidence, difficulty=np.full(n, np.nan),
                   tokens=np.full(n, np.nan))
    strata = {"domain": (rng.integers(0, 4, 5000), ["AFM", "SEM", "STM", "TEM"]),
              "level": (rng.integers(0, 7, 5000), [str(k) for k in range(7)])}
    return cols, Gold("gold.jsonl", 5000, strata, [], ids=[f"q{i}" for i in range(5000)])


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_summary_counted_by_row_ranges_equals_the_reference(forced_impl, monkeypatch, workers):
    # More rows than a row range per worker, so each worker's thread counts its own range (3 ranges of
    # uneven ends at 3 workers); the reference counts every (group, triple) pair in plain Python.
    from benchmint.metrics import pipeline

    cols, gold = _summary_columns(3 * pipeline.ROW_RANGE + 1234, 6, seed=workers)
    ranges = []
    row_counts = pipeline._row_counts
    monkeypatch.setattr(pipeline, "_row_counts", lambda *a: ranges.append(a[-1]) or row_counts(*a))
    cfg = ScoreConfig(task="mcq", by=("domain", "level"), workers=workers)
    with forced_impl("compiled"):
        got = pipeline.summarize(cols, gold, cfg)
    assert ranges == [workers]  # the dense tables, split by row ranges
    with forced_impl("reference"):
        want = pipeline.summarize(cols, gold, cfg)
    assert len(ranges) == 1  # the reference does not count by ranges
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    m1 = cols.model == 1
    assert got["m1"]["n"] == int(m1.sum())
    assert got["m1"]["n_missing"] == int((m1 & (cols.status == 2)).sum())
    tem = m1 & (gold.strata["domain"][0][cols.gold_idx] == 3)
    assert got["m1"]["by"]["domain"]["TEM"]["n"] == int(tem.sum())
    assert got["m1"]["calibration"]["n_with_confidence"] == int((m1 & ~np.isnan(cols.confidence)).sum())


def test_summary_of_large_sets_sorts_instead(forced_impl, monkeypatch):
    # Sets of up to 200: the (group, triple) table is past the dense limit, so group_counts sorts and each
    # row's triple class is found by binary search; the same summary as the reference's.
    from benchmint.metrics import pipeline

    cols, gold = _summary_columns(3000, 200, seed=7)
    monkeypatch.setattr(pipeline, "_row_counts", None)  # must not be reached
    cfg = ScoreConfig(task="mcq", by=("domain", "level"), workers=2)
    with forced_impl("compiled"):
        got = pipeline.summarize(cols, gold, cfg)
    with forced_impl("reference"):
        want = pipeline.summarize(cols, gold, cfg)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert got["m0"]["n"] == int((cols.model == 0).sum())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(min_size=1, max_size=6), max_size=5), min_size=1, max_size=3))
def test_summary_json_writes_unparsed_id_lists_as_json_dump(tmp_path_factory, lists):
    # Each model's unparsed ids are written as one text by json's compiled encoder (quotes, backslashes, control
    # characters, non-ASCII and lone surrogates included); the file is json.dump's, byte for byte.
    from benchmint.metrics.pipeline import write_summary

    summary = {"task": "mcq", "errors": {"count": 0},
               "models": {f"m{k}": {"n": len(ids), "unparsed_ids": ids, "metrics": {"em": {"mean": 0.5}}}
                          for k, ids in enumerate(lists)}}
    want = json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    path = tmp_path_factory.mktemp("summary") / "summary.json"
    write_summary(path, summary)
    assert path.read_bytes() == want.encode("utf-8", "surrogatepass")
    assert [m["unparsed_ids"] for m in summary["models"].values()] == lists  # the blocks as they came
