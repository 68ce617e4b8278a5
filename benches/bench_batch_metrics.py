"""Batch set metrics on pre-encoded sets: compiled kernels vs scikit-learn vs a plain loop.

Run: .venv/bin/python -m pytest benches/bench_batch_metrics.py --benchmark-only --benchmark-group-by=group
"""

import numpy as np
import pytest
from conftest import record_throughput

from benchmint import _core
from benchmint.metrics.batch import score_batch

GROUP = "batch-metrics-500k"


def _masks_to_csr(masks):
    bits = ((masks[:, None] >> np.arange(6, dtype=np.uint64)) & np.uint64(1)).astype(bool)
    keys = np.nonzero(bits)[1].astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(bits.sum(axis=1))]).astype(np.int64)
    return offsets, keys, bits


@pytest.mark.benchmark(group=GROUP)
def test_compiled_bitmask_all_cores(benchmark, mcq_masks):
    pred, gold = mcq_masks
    buffers = _core.metrics.from_bitmasks(pred, gold, 0.6, 6.0, -1)
    out = benchmark(_core.metrics.from_bitmasks, pred, gold, 0.6, 6.0, -1, buffers)
    record_throughput(benchmark, len(pred))
    ref = score_batch(pred[:2000], gold[:2000])
    np.testing.assert_array_equal(out["sip_f1"][:2000], ref["sip_f1"])


@pytest.mark.benchmark(group=GROUP)
def test_compiled_bitmask_one_core(benchmark, mcq_masks):
    pred, gold = mcq_masks
    buffers = _core.metrics.from_bitmasks(pred, gold, 0.6, 6.0, 1)
    out = benchmark(_core.metrics.from_bitmasks, pred, gold, 0.6, 6.0, 1, buffers)
    record_throughput(benchmark, len(pred))
    assert out["em"].mean() == np.mean(pred == gold)


@pytest.mark.benchmark(group=GROUP)
def test_compiled_csr_all_cores(benchmark, mcq_masks):
    pred, gold = mcq_masks
    po, pk, _ = _masks_to_csr(pred)
    go, gk, _ = _masks_to_csr(gold)
    buffers = _core.metrics.from_csr(po, pk, go, gk, 0.6, 6.0, -1)
    out = benchmark(_core.metrics.from_csr, po, pk, go, gk, 0.6, 6.0, -1, buffers)
    record_throughput(benchmark, len(pred))
    np.testing.assert_array_equal(out["jaccard"], _core.metrics.from_bitmasks(pred, gold, 0.6, 6.0, 1)["jaccard"])


@pytest.mark.benchmark(group=GROUP)
def test_compiled_bitmask_fresh_arrays(benchmark, mcq_masks):
    # Same kernel, new output arrays each call: the page faults of ~42 MB of fresh memory dominate.
    pred, gold = mcq_masks
    benchmark(_core.metrics.from_bitmasks, pred, gold, 0.6, 6.0, -1)
    record_throughput(benchmark, len(pred))


@pytest.mark.benchmark(group=GROUP)
def test_sklearn_jaccard_samples(benchmark, mcq_masks):
    from sklearn.metrics import jaccard_score

    pred, gold = mcq_masks
    p_bits = _masks_to_csr(pred)[2]
    g_bits = _masks_to_csr(gold)[2]
    # sklearn computes Jaccard only (and rejects rows where both sets are empty, which never happens here).
    value = benchmark(jaccard_score, g_bits, p_bits, average="samples", zero_division=1.0)
    record_throughput(benchmark, len(pred))
    ours = _core.metrics.from_bitmasks(pred, gold, 0.6, 6.0, 1)["jaccard"].mean()
    assert value == pytest.approx(ours, abs=1e-12)


def _python_loop(pred_sets, gold_sets):
    out = []
    for p, g in zip(pred_sets, gold_sets):
        tp = len(p & g)
        union = len(p | g)
        prec = tp / len(p) if p else 0.0
        rec = tp / len(g) if g else 0.0
        f1 = 2 * prec * rec / (prec + rec) if tp else 0.0
        pen = min(1.0, len(g) / len(p)) if p else 1.0
        exact = p == g
        spc = 1.0 if exact else (len(p) / len(g) if p and p < g else 0.0)
        fp = len(p - g)
        pw = tp / (tp + 6 * fp) if tp else 0.0
        sip = 1.0 if exact else (0.6 * 2 * pw * rec / (pw + rec) if tp else 0.0)
        out.append((float(exact), spc, sip, tp / union if union else 1.0, prec, rec, f1, pen))
    return out


@pytest.mark.benchmark(group=GROUP)
def test_plain_python_loop(benchmark, mcq_masks):
    pred, gold = mcq_masks
    as_sets = lambda masks: [frozenset(i for i in range(6) if (m >> i) & 1) for m in masks.tolist()]  # noqa: E731
    p, g = as_sets(pred), as_sets(gold)
    rows = benchmark.pedantic(_python_loop, args=(p, g), rounds=2, iterations=1)
    record_throughput(benchmark, len(pred))
    assert len(rows) == len(pred)
