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
from conftest import record_throughput

from benchmint.io import dumps
from benchmint.metrics.pipeline import ScoreConfig, score_files
from benchmint.metrics.synthetic import mcq_dataset

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


def naive_scorer(pred_path, gold_path):
    """The straightforward scorer: json + one regex + a loop (takes the last capital letters it sees)."""
    gold = {}
    with open(gold_path, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            gold[r["id"]] = set(r["answer"])
    totals, n = [0.0] * 4, 0
    with open(pred_path, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            text = r["output"]
            tail = text[text.lower().rfind("answer"):] if "answer" in text.lower() else text
            p = set(_LETTER.findall(tail))
            g = gold[r["id"]]
            tp = len(p & g)
            jac = tp / len(p | g) if p | g else 1.0
            prec = tp / len(p) if p else 0.0
            rec = tp / len(g)
            totals[0] += float(p == g)
            totals[1] += jac
            totals[2] += prec
            totals[3] += rec
            n += 1
    return [t / n for t in totals]


def _run(benchmark, files, impl, monkeypatch, rounds):
    gold, pred, root = files
    monkeypatch.setenv("BENCHMINT_IMPL", impl)
    cfg = ScoreConfig(task="mcq", by=("domain", "level"), workers=-1)
    out = root / f"out-{impl}"

    def fresh_dir():  # each round writes a new directory, as a user's run does
        shutil.rmtree(out, ignore_errors=True)
        return (pred, gold, out, cfg), {}

    result = benchmark.pedantic(score_files, setup=fresh_dir, rounds=rounds, iterations=1)
    record_throughput(benchmark, N_PRED)
    assert result.exit_code == 0
    assert sum(b["n"] for b in result.summary["models"].values()) == N_PRED
    return out


@pytest.mark.benchmark(group=GROUP)
def test_benchmint_score_files(benchmark, files, monkeypatch):
    out = _run(benchmark, files, "compiled", monkeypatch, rounds=5)
    assert (out / "scores.jsonl").stat().st_size > 0


@pytest.mark.benchmark(group=GROUP)
def test_benchmint_reference_path(benchmark, files, monkeypatch):
    _run(benchmark, files, "reference", monkeypatch, rounds=1)


@pytest.mark.benchmark(group=GROUP)
def test_naive_json_regex_loop(benchmark, files):
    gold, pred, _ = files
    means = benchmark.pedantic(naive_scorer, args=(pred, gold), rounds=3, iterations=1)
    record_throughput(benchmark, N_PRED)
    assert 0 < means[1] <= 1
