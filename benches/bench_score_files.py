"""End to end: raw multi-select predictions + gold JSONL -> scores.jsonl + summary.json.

The data (written once per session into a temporary folder) is synthetic:
realistic raw outputs of four simulated models from benchmint.metrics.synthetic.
Set BENCHMINT_E2E_ITEMS to change the size (default 20,000 predictions, so
the test command runs it quickly; the figures in README.md use 1,000,000).

Run: .venv/bin/python -m pytest benches/bench_score_files.py --benchmark-only --benchmark-group-by=group
"""

import json
import os
import re
import shutil

import pytest

from benchmint.io import dumps
from benchmint.metrics import batch_ref
from benchmint.metrics.pipeline import MEAN_METRICS, ScoreConfig, score_files
from benchmint.metrics.synthetic import mcq_dataset
from benchmint.tasks import extract_ref

from conftest import record_throughput

N_PRED = int(os.environ.get("BENCHMINT_E2E_ITEMS", "20000"))
# Predictions as {id, model, output} (1M: ~150 MB with gold, the size the goal is set for);
# BENCHMINT_E2E_FULL=1 adds confidence, difficulty and tokens to every line (~200 MB).
FULL = os.environ.get("BENCHMINT_E2E_FULL", "") == "1"
MODELS = ["wise-model", "cautious-model", "bold-model", "gambling-model"]
GROUP = f"score-files-{N_PRED}{'-full' if FULL else ''}"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    gold, pred = root / "gold.jsonl", root / "pred.jsonl"
    with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
        for kind, rec in mcq_dataset(N_PRED // len(MODELS), MODELS, seed=11, behaviour_fields=FULL):
            (g if kind == "gold" else p).write(dumps(rec) + "\n")
    return gold, pred, root


_LETTER = re.compile(r"\b([A-F])\b")


def naive_scorer(pred_path, gold_path, out_dir):
    """The straightforward scorer doing the same job: json + a regex + a loop, rows and per-model means.

    It reads letters after the last "answer" (or anywhere) with one regex, so it
    misreads many outputs; it computes no intervals, strata or personalities.
    """
    gold = {}
    with open(gold_path, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            gold[r["id"]] = set(r["answer"])
    sums: dict[str, list] = {}
    os.makedirs(out_dir, exist_ok=True)
    with open(pred_path, encoding="utf-8") as fh, open(os.path.join(out_dir, "scores.jsonl"), "w") as out:
        for line in fh:
            r = json.loads(line)
            text = r["output"]
            at = text.lower().rfind("answer")
            p = set(_LETTER.findall(text[at:] if at >= 0 else text))
            g = gold[r["id"]]
            tp, fp = len(p & g), len(p - g)
            exact = p == g
            prec = tp / len(p) if p else 0.0
            rec = tp / len(g) if g else 0.0
            f1 = 2 * prec * rec / (prec + rec) if tp else 0.0
            jac = tp / len(p | g) if p | g else 1.0
            pen = min(1.0, len(g) / len(p)) if p else 1.0
            spc = 1.0 if exact else (len(p) / len(g) if p and not fp else 0.0)
            pw = tp / (tp + 6 * fp) if tp else 0.0
            sip = 1.0 if exact else (0.6 * 2 * pw * rec / (pw + rec) if tp else 0.0)
            row = {"id": r["id"], "model": r.get("model"), "answer": sorted(p), "em": float(exact), "spc": spc,
                   "sip_f1": sip, "jaccard": jac, "precision": prec, "recall": rec, "f1": f1,
                   "j_pen": jac * pen, "f1_pen": f1 * pen}
            out.write(json.dumps(row) + "\n")
            acc = sums.setdefault(r.get("model"), [0] + [0.0] * 9)
            acc[0] += 1
            for k, v in enumerate((row["em"], spc, sip, jac, prec, rec, f1, jac * pen, f1 * pen), 1):
                acc[k] += v
    summary = {m: [v / acc[0] for v in acc[1:]] for m, acc in sums.items()}
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh)
    return summary


def _gold_sets(gold_path):
    with open(gold_path, encoding="utf-8") as fh:
        return {r["id"]: set(r["answer"]) for r in map(json.loads, fh)}


def check_scores(out, gold_path, pred_path, sample=5000):
    """The rows and summary of a score_files run against the plain references, independently of either path:
    answers as extract_ref reads the outputs (a sample of rows), every row's metrics as batch_ref computes
    them from its answer and the gold set, and each model's means as the mean of its rows."""
    gold = _gold_sets(gold_path)
    with open(pred_path, encoding="utf-8") as fh:
        outputs = {(r["id"], r.get("model")): r["output"] for r in map(json.loads, fh)}
    with open(out / "scores.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert len(rows) == N_PRED
    step = max(1, len(rows) // sample)
    for row in rows[::step]:
        assert row["answer"] == (extract_ref.extract_choices(outputs[row["id"], row["model"]]) or []), row
    sums: dict[str, list] = {}
    for row in rows:
        p, g = set(row["answer"]), gold[row["id"]]
        want = batch_ref.metrics_from_counts(len(p & g), len(p), len(g), 0.6, 6.0)
        assert all(row[k] == want[k] for k in MEAN_METRICS), row
        acc = sums.setdefault(row["model"], [0] + [0.0] * len(MEAN_METRICS))
        acc[0] += 1
        for k, name in enumerate(MEAN_METRICS, 1):
            acc[k] += row[name]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    for model, acc in sums.items():
        means = summary["models"][model]["metrics"]
        for k, name in enumerate(MEAN_METRICS, 1):
            assert means[name]["mean"] == pytest.approx(acc[k] / acc[0], rel=1e-12, abs=1e-15), (model, name)


def _run(benchmark, files, impl, forced_impl, rounds):
    gold, pred, root = files
    cfg = ScoreConfig(task="mcq", by=("domain", "level"), workers=-1)
    out = root / f"out-{impl}"

    def fresh_dir():  # each round writes a new directory, as a user's run does, from a synced page cache
        shutil.rmtree(out, ignore_errors=True)
        os.sync()
        return (pred, gold, out, cfg), {}

    with forced_impl(impl):
        result = benchmark.pedantic(score_files, setup=fresh_dir, rounds=rounds, iterations=1)
    record_throughput(benchmark, N_PRED)
    assert result.exit_code == 0
    assert sum(b["n"] for b in result.summary["models"].values()) == N_PRED
    check_scores(out, gold, pred)
    return out


@pytest.mark.benchmark(group=GROUP)
def test_benchmint_score_files(benchmark, files, forced_impl):
    _run(benchmark, files, "compiled", forced_impl, rounds=5)


@pytest.mark.benchmark(group=GROUP)
def test_benchmint_reference_path(benchmark, files, forced_impl):
    _run(benchmark, files, "reference", forced_impl, rounds=1)


@pytest.mark.benchmark(group=GROUP)
def test_naive_json_regex_loop(benchmark, files):
    gold, pred, root = files
    out = root / "out-naive"

    def fresh_dir():
        shutil.rmtree(out, ignore_errors=True)
        os.sync()
        return (pred, gold, out), {}

    summary = benchmark.pedantic(naive_scorer, setup=fresh_dir, rounds=3, iterations=1)
    record_throughput(benchmark, N_PRED)
    # Its own answers scored by the reference metrics (other float expressions: equal to rounding),
    # and its means the means of its rows.
    gold_sets = _gold_sets(gold)
    sums: dict[str, list] = {}
    with open(out / "scores.jsonl", encoding="utf-8") as fh:
        for row in map(json.loads, fh):
            p, g = set(row["answer"]), gold_sets[row["id"]]
            want = batch_ref.metrics_from_counts(len(p & g), len(p), len(g), 0.6, 6.0)
            for name in MEAN_METRICS:
                assert row[name] == pytest.approx(want[name], rel=1e-12, abs=1e-15), (row, name)
            acc = sums.setdefault(row["model"], [0] + [0.0] * len(MEAN_METRICS))
            acc[0] += 1
            for k, name in enumerate(MEAN_METRICS, 1):
                acc[k] += row[name]
    assert {m: pytest.approx([v / acc[0] for v in acc[1:]], rel=1e-12) for m, acc in sums.items()} == summary
