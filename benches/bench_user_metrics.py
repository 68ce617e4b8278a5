"""User-defined metrics compiled by Numba beside the C++ kernels of the built-in metrics, on 10M rows.

Run: .venv/bin/python -m pytest benches/bench_user_metrics.py --benchmark-only --benchmark-group-by=group \
         --benchmark-columns=min,median,rounds
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from benchmint import _core
from benchmint.metrics import user_ref
from benchmint.metrics.user import UserMetric, evaluate

from conftest import record_throughput

GROUP = "user-metrics-10M"
N = 10_000_000
N_REFERENCE = 200_000  # the plain loop takes ~1 µs a row: timed on fewer rows, compared per row
LAM, GAMMA = 0.6, 6.0

SIP_SOURCE = '''
def sip_f1(tp, fp, fn, g):
    """SIP-F1 (spm-bench eq. 1-5) at λ = 0.6, Γ = 6, as an evaluator would write it."""
    if fp == 0 and fn == 0:
        return 1.0
    if tp == 0:
        return 0.0
    return 0.6 * (2.0 * tp) / ((tp + 6.0 * fp) + g)
'''


def _sip(tp, fp, fn, g):
    if fp == 0 and fn == 0:
        return 1.0
    if tp == 0:
        return 0.0
    return LAM * (2.0 * tp) / ((tp + GAMMA * fp) + g)


SIP = UserMetric("sip_f1", _sip)


@pytest.fixture(scope="module")
def counts():
    """10M multi-select items: |G| in 1..6, |P| in 0..6, tp <= min(|P|, |G|)."""
    rng = np.random.default_rng(0)
    n_gold = rng.integers(1, 7, N, dtype=np.int32)
    n_pred = rng.integers(0, 7, N, dtype=np.int32)
    tp = (np.minimum(n_gold, n_pred) * rng.random(N)).astype(np.int32)
    return tp, n_pred, n_gold, n_pred - tp, n_gold - tp


@pytest.fixture(scope="module")
def numpy_sip(counts):
    """SIP-F1 by NumPy array expressions, in the kernels' order of operations (independent of both)."""
    tp, n_pred, n_gold, fp, fn = counts
    t, f, g = tp.astype(np.float64), fp.astype(np.float64), n_gold.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        partial = np.where(tp > 0, LAM * (2.0 * t) / ((t + GAMMA * f) + g), 0.0)
    return np.where((fp == 0) & (fn == 0), 1.0, partial)


def _numba(benchmark, counts, numpy_sip, workers):
    tp, n_pred, n_gold, fp, fn = counts
    out = evaluate(SIP, tp, fp, fn, n_gold, workers=workers)
    values = benchmark(evaluate, SIP, tp, fp, fn, n_gold, workers=workers, out=out)
    assert SIP.last_run.path == "compiled" and SIP.last_run.rows == N
    record_throughput(benchmark, N)
    benchmark.extra_info["threads"] = SIP.last_run.threads
    np.testing.assert_array_equal(values.view(np.uint64), numpy_sip.view(np.uint64))


@pytest.mark.benchmark(group=GROUP)
def test_numba_user_sip_all_cores(benchmark, counts, numpy_sip):
    _numba(benchmark, counts, numpy_sip, -1)


@pytest.mark.benchmark(group=GROUP)
def test_numba_user_sip_one_core(benchmark, counts, numpy_sip):
    _numba(benchmark, counts, numpy_sip, 1)


def _cpp(benchmark, counts, numpy_sip, workers):
    # The built-in kernel writes all 13 columns (tp, fp, fn, 9 metrics, over_predicted): ~85 bytes a row.
    tp, n_pred, n_gold, _, _ = counts
    out = _core.batch.from_counts(tp, n_pred, n_gold, LAM, GAMMA, workers)
    values = benchmark(_core.batch.from_counts, tp, n_pred, n_gold, LAM, GAMMA, workers, out)
    record_throughput(benchmark, N)
    np.testing.assert_array_equal(values["sip_f1"].view(np.uint64), numpy_sip.view(np.uint64))


@pytest.mark.benchmark(group=GROUP)
def test_cpp_built_in_kernel_all_cores(benchmark, counts, numpy_sip):
    _cpp(benchmark, counts, numpy_sip, -1)


@pytest.mark.benchmark(group=GROUP)
def test_cpp_built_in_kernel_one_core(benchmark, counts, numpy_sip):
    _cpp(benchmark, counts, numpy_sip, 1)


@pytest.mark.benchmark(group=GROUP)
def test_numpy_expressions_sip_only(benchmark, counts, numpy_sip):
    tp, n_pred, n_gold, fp, fn = counts

    def sip():
        t, f, g = tp.astype(np.float64), fp.astype(np.float64), n_gold.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            partial = np.where(tp > 0, LAM * (2.0 * t) / ((t + GAMMA * f) + g), 0.0)
        return np.where((fp == 0) & (fn == 0), 1.0, partial)

    values = benchmark(sip)
    record_throughput(benchmark, N)
    ref = _core.batch.from_counts(tp[:N_REFERENCE], n_pred[:N_REFERENCE], n_gold[:N_REFERENCE], LAM, GAMMA, 1)
    np.testing.assert_array_equal(values[:N_REFERENCE], ref["sip_f1"])


@pytest.mark.benchmark(group=GROUP)
def test_plain_reference_loop(benchmark, counts):
    """The reference path (BENCHMINT_IMPL=reference) on the first 200,000 rows; items_per_second is per row."""
    tp, n_pred, n_gold, fp, fn = (a[:N_REFERENCE].copy() for a in counts)
    out = np.empty(N_REFERENCE)
    values = benchmark.pedantic(user_ref.evaluate, args=(SIP, tp, fp, fn, n_gold, out), rounds=3, iterations=1)
    record_throughput(benchmark, N_REFERENCE)
    ref = _core.batch.from_counts(tp, n_pred, n_gold, LAM, GAMMA, 1)
    np.testing.assert_array_equal(values, ref["sip_f1"])


# ---- first-call compile time, in fresh processes -------------------------------------------------------------

DRIVER = '''
import json, sys, time
start = time.perf_counter()
import numpy as np
sys.path.insert(0, sys.argv[1])
from benchmint.metrics.user import UserMetric, evaluate
import sip_metric
m = UserMetric("sip_f1", sip_metric.sip_f1)
imported = time.perf_counter()
tp, fp, fn = (np.array(a, np.int32) for a in ([0, 1, 2, 3, 2], [0, 1, 0, 2, 0], [1, 0, 1, 0, 0]))
values = evaluate(m, tp, fp, fn, tp + fn)
done = time.perf_counter()
print(json.dumps({"compile_seconds": m.compile_seconds, "cache_hit": m.cache_hit, "import_seconds": imported - start,
                  "first_call_seconds": done - imported, "values": values.tolist()}))
'''


def _fresh_process(directory, cache_dir):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    env.pop("BENCHMINT_IMPL", None)
    started = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", DRIVER, str(directory)], capture_output=True, text=True, env=env,
                         timeout=600, check=True)
    report = json.loads(res.stdout.splitlines()[-1])
    report["wall_seconds"] = time.perf_counter() - started
    return report


@pytest.mark.benchmark(group="user-metrics-compile")
def test_first_call_compile_cold_and_cached(benchmark, tmp_path):
    """Interpreter start to the first value: an empty Numba cache, then the cache the first process wrote."""
    (tmp_path / "sip_metric.py").write_text(textwrap.dedent(SIP_SOURCE))
    cache_dir = tmp_path / "numba-cache"
    cold = benchmark.pedantic(_fresh_process, args=(tmp_path, cache_dir), rounds=1, iterations=1)
    cached = [_fresh_process(tmp_path, cache_dir) for _ in range(3)]
    assert cold["cache_hit"] is False and all(c["cache_hit"] for c in cached)
    best = min(cached, key=lambda c: c["compile_seconds"])
    benchmark.extra_info.update({
        "compile_seconds_cold": cold["compile_seconds"],
        "compile_seconds_cached": best["compile_seconds"],
        "first_call_seconds_cold": cold["first_call_seconds"],
        "first_call_seconds_cached": best["first_call_seconds"],
        "import_seconds": best["import_seconds"],
        "process_seconds_cold": cold["wall_seconds"],
        "process_seconds_cached": min(c["wall_seconds"] for c in cached),
    })
    rows = zip([0, 1, 2, 3, 2], [0, 1, 0, 2, 0], [1, 0, 1, 0, 0])
    want = [_sip(t, p, f, t + f) for t, p, f in rows]
    assert cold["values"] == want and all(c["values"] == want for c in cached)
