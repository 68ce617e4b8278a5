"""Batch set metrics on pre-encoded sets: compiled kernels vs scikit-learn vs a plain loop.

Every bench checks its result against the plain reference (benchmint.metrics.batch_ref),
computed once for all 500,000 items.

Run: .venv/bin/python -m pytest benches/bench_batch_metrics.py --benchmark-only --benchmark-group-by=group
"""

import numpy as np
import pytest

from benchmint import _dispatch
from benchmint.metrics import batch_ref
from benchmint.metrics.batch import METRIC_NAMES, score_batch

from conftest import record_throughput

GROUP = "batch-metrics-500k"


def _masks_to_csr(masks):
    bits = ((masks[:, None] >> np.arange(6, dtype=np.uint64)) & np.uint64(1)).astype(bool)
    keys = np.nonzero(bits)[1].astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(bits.sum(axis=1))]).astype(np.int64)
    return offsets, keys, bits


@pytest.fixture(scope="module")
def reference(mcq_masks):
    """Every metric of every item from the plain Python reference (a few seconds)."""
    pred, gold = mcq_masks
    return batch_ref.from_bitmasks(pred, gold, 0.6, 6.0)


def assert_reference(out, reference):
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(out[name], reference[name], err_msg=name)  # bit for bit


@pytest.fixture
def compiled(forced_impl):
    with forced_impl("compiled"):
        _dispatch.reset_counts()
        yield
        assert _dispatch.counts("batch")["reference"] == 0


@pytest.mark.benchmark(group=GROUP)
def test_compiled_bitmask_all_cores(benchmark, mcq_masks, reference, compiled):
    pred, gold = mcq_masks
    buffers = score_batch(pred, gold, workers=-1)
    out = benchmark(score_batch, pred, gold, workers=-1, out=buffers)
    record_throughput(benchmark, len(pred))
    assert_reference(out, reference)


@pytest.mark.benchmark(group=GROUP)
def test_compiled_bitmask_one_core(benchmark, mcq_masks, reference, compiled):
    pred, gold = mcq_masks
    buffers = score_batch(pred, gold, workers=1)
    out = benchmark(score_batch, pred, gold, workers=1, out=buffers)
    record_throughput(benchmark, len(pred))
    assert_reference(out, reference)


@pytest.mark.benchmark(group=GROUP)
def test_compiled_csr_all_cores(benchmark, mcq_masks, reference, compiled):
    pred, gold = mcq_masks
    po, pk, _ = _masks_to_csr(pred)
    go, gk, _ = _masks_to_csr(gold)
    buffers = score_batch((po, pk), (go, gk), workers=-1)
    out = benchmark(score_batch, (po, pk), (go, gk), workers=-1, out=buffers)
    record_throughput(benchmark, len(pred))
    assert_reference(out, reference)


@pytest.mark.benchmark(group=GROUP)
def test_compiled_bitmask_fresh_arrays(benchmark, mcq_masks, reference, compiled):
    # Same kernel, new output arrays each call: the page faults of ~42 MB of fresh memory dominate.
    pred, gold = mcq_masks
    out = benchmark(score_batch, pred, gold, workers=-1)
    record_throughput(benchmark, len(pred))
    assert_reference(out, reference)


@pytest.mark.benchmark(group=GROUP)
def test_sklearn_jaccard_samples(benchmark, mcq_masks, reference):
    from sklearn.metrics import jaccard_score

    pred, gold = mcq_masks
    p_bits = _masks_to_csr(pred)[2]
    g_bits = _masks_to_csr(gold)[2]
    # sklearn computes Jaccard only (and rejects rows where both sets are empty, which never happens here).
    value = benchmark(jaccard_score, g_bits, p_bits, average="samples", zero_division=1.0)
    record_throughput(benchmark, len(pred))
    assert value == pytest.approx(reference["jaccard"].mean(), abs=1e-12)


def _python_loop(pred_sets, gold_sets, lam=0.6, gamma=6.0):
    """The straightforward loop over Python sets, doing the whole job: all 13 metrics into arrays."""
    n = len(pred_sets)
    out = {name: np.empty(n, dtype=dt) for name, dt in
           [("tp", np.int32), ("fp", np.int32), ("fn", np.int32), ("over_predicted", bool)]
           + [(m, np.float64) for m in batch_ref.METRIC_FLOATS]}
    for i, (p, g) in enumerate(zip(pred_sets, gold_sets)):
        tp, fp, fn = len(p & g), len(p - g), len(g - p)
        union = len(p | g)
        prec = tp / len(p) if p else 0.0
        rec = tp / len(g) if g else 0.0
        exact = p == g
        f1 = 1.0 if exact else (2 * prec * rec / (prec + rec) if tp else 0.0)
        pen = min(1.0, len(g) / len(p)) if p else 1.0
        jac = tp / union if union else 1.0
        pw = tp / (tp + gamma * fp) if tp else 0.0
        out["tp"][i], out["fp"][i], out["fn"][i] = tp, fp, fn
        out["over_predicted"][i] = len(p) > len(g)
        out["em"][i] = float(exact)
        out["spc"][i] = 1.0 if exact else (len(p) / len(g) if p and p < g else 0.0)
        out["sip_f1"][i] = 1.0 if exact else (lam * 2 * pw * rec / (pw + rec) if tp else 0.0)
        out["jaccard"][i] = jac
        out["precision"][i] = 1.0 if exact else prec
        out["recall"][i] = 1.0 if exact else rec
        out["f1"][i] = f1
        out["j_pen"][i] = jac * pen
        out["f1_pen"][i] = f1 * pen
    return out


@pytest.mark.benchmark(group=GROUP)
def test_plain_python_loop(benchmark, mcq_masks, reference):
    pred, gold = mcq_masks
    as_sets = lambda masks: [frozenset(i for i in range(6) if (m >> i) & 1) for m in masks.tolist()]  # noqa: E731
    p, g = as_sets(pred), as_sets(gold)
    out = benchmark.pedantic(_python_loop, args=(p, g), rounds=2, iterations=1)
    record_throughput(benchmark, len(pred))
    for name in METRIC_NAMES:  # other float expressions than the reference's: equal to rounding
        np.testing.assert_allclose(out[name], reference[name], rtol=1e-12, atol=0, err_msg=name)
