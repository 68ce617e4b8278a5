"""XRD profile stage (sticks -> Kα1/Kα2 pseudo-Voigt curve -> 2θ* -> ground truth): kernel vs dense reference.

The kernel benches check against the dense reference (profile_ref), the reference benches against
the kernel, each computed apart from the timed call.

Run: .venv/bin/python -m pytest benches/bench_xrd_profile.py --benchmark-only --benchmark-group-by=group
"""

import numpy as np
import pytest

from benchmint.xrd import ProfileParams, pattern, patterns, profile_ref

PARAMS = ProfileParams()


def sticks(n, seed):
    rng = np.random.default_rng(seed)
    tt = rng.uniform(2.0, 90.0, n)
    inten = 100.0 * rng.random(n) ** 4  # a few strong reflections, many weak ones
    hkls = [[(int(h), int(k), int(l))] for h, k, l in rng.integers(0, 6, (n, 3))]
    return tt, inten, hkls


@pytest.fixture(scope="module")
def batch_items():
    rng = np.random.default_rng(11)
    return [sticks(int(rng.integers(50, 150)), seed) for seed in range(200)]


def check_against_reference(res, tt, inten):
    curve, star, peak, _ = profile_ref.broaden(tt, inten, PARAMS)
    assert np.abs(res.curve - curve).max() <= 1e-9 * peak
    assert res.two_theta_star == res.grid[star]


def run_reference(tt, inten, hkls):
    curve, star, peak, truth = profile_ref.broaden(tt, inten, PARAMS)
    return PARAMS.grid()[star], sorted({h for i in truth for h in hkls[i] if any(h)})


@pytest.mark.parametrize("n", [100, 3000])
def test_kernel(benchmark, n):
    tt, inten, hkls = sticks(n, seed=n)
    benchmark.group = f"xrd-pattern-{n}-sticks"
    res = benchmark(pattern, tt, inten, hkls, PARAMS)
    check_against_reference(res, tt, inten)
    assert res.n_sticks == n and res.ground_truth


@pytest.mark.parametrize("n", [100, 3000])
def test_dense_reference(benchmark, n):
    tt, inten, hkls = sticks(n, seed=n)
    benchmark.group = f"xrd-pattern-{n}-sticks"
    star, truth = benchmark.pedantic(run_reference, args=(tt, inten, hkls), rounds=5 if n > 1000 else 20)
    res = pattern(tt, inten, hkls, PARAMS)
    assert (star, truth) == (res.two_theta_star, res.ground_truth)


@pytest.mark.parametrize("workers", [-1, 1])
def test_kernel_batch(benchmark, batch_items, workers):
    benchmark.group = "xrd-batch-200-patterns"
    results = benchmark(patterns, batch_items, PARAMS, workers)
    assert len(results) == 200
    for item, res in zip(batch_items[::50], results[::50]):
        check_against_reference(res, item[0], item[1])


def test_dense_reference_batch(benchmark, batch_items):
    benchmark.group = "xrd-batch-200-patterns"
    outcomes = benchmark.pedantic(profile_ref.broaden_batch, args=([i[:2] for i in batch_items], PARAMS), rounds=2)
    for (curve, star, peak, truth), item, res in zip(outcomes, batch_items, patterns(batch_items, PARAMS, -1)):
        assert np.abs(res.curve - curve).max() <= 1e-9 * peak
        assert res.two_theta_star == res.grid[star]
        assert res.ground_truth == sorted({h for i in truth.tolist() for h in item[2][i] if any(h)})
