import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pytest

# The fixtures of tests/conftest.py (impl, forced_impl, dispatch_counts, compare_forms), shared with the benches.
_TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(_TESTS))
_spec = importlib.util.spec_from_file_location("benchmint_tests_conftest", _TESTS / "conftest.py")
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)
impl, forced_impl, dispatch_counts, compare_forms = (_shared.impl, _shared.forced_impl, _shared.dispatch_counts,
                                                     _shared.compare_forms)


def record_throughput(benchmark, n_items: int) -> None:
    """Store items per second (from the best round) beside the timing, for the README figures."""
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None and stats.stats.min > 0:
        benchmark.extra_info["items_per_second"] = n_items / stats.stats.min


def best_time(fn, arg, repeats: int = 5) -> float:
    """Best wall time of ``fn(arg)`` over ``repeats`` calls (for per-item ratios beside the grouped benches)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t)
    return best


@pytest.fixture(scope="session")
def mcq_masks():
    """500k multi-select items over 6 options: gold and predicted sets as bitmasks."""
    rng = np.random.default_rng(0)
    n = 500_000
    gold = rng.integers(1, 64, n).astype(np.uint64)
    noise = rng.integers(0, 64, n).astype(np.uint64) & rng.integers(0, 64, n).astype(np.uint64)
    pred = gold ^ noise
    return pred, gold
