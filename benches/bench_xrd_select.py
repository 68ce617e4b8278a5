"""The KMeans selection of `xrd build` at database size: its two costly steps against plain scikit-learn.

ours: benchmint.xrd.cluster.kmeans (the ten restarts over the threads, each on one thread) and
      benchmint.xrd.cluster.silhouette (the Numba kernel over the distinct rows' blocks, each weighted by its
      count)
reference: KMeans(n_clusters=25, random_state=0, n_init=10) and silhouette_score, on one thread, as `select`
      called them before

Rows are standardized features shaped like the corpus's (``synthetic_items``), a fifth of them repeats of an
earlier structure. The KMeans benches run at 100,000 rows; the silhouette's at 10,000, since scikit-learn's
takes minutes at 100,000 (it grows with the square of the rows). Each bench checks its result against the other
path, computed apart from the timed call: labels and centres bit for bit, the silhouette to 1e-9.

Run: .venv/bin/python -m pytest benches/bench_xrd_select.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from benchmint.xrd import cluster
from benchmint.xrd.build import CRYSTAL_SYSTEMS

K = 25
# Shares of each crystal system among the corpus's 598 items, and each system's space-group numbers.
SYSTEM_SHARES = (11, 59, 158, 131, 89, 57, 93)
SPACE_GROUPS = ((1, 2), (3, 15), (16, 74), (75, 142), (143, 167), (168, 194), (195, 230))


def synthetic_items(n: int, seed: int = 0, repeated: float = 0.2) -> list[dict]:
    """Items with the fields `select` reads, spread as the corpus's are: 2θ* log-normal about 24° in steps of
    0.01°, peak intensity log-normal about 730, peaks log-normal about 124 (3 at least, heavy tail), union size
    1 in 60%, crystal systems in the corpus's shares; ``repeated`` of them copy an earlier item's fields."""
    rng = np.random.default_rng(seed)
    two_theta = np.round(np.clip(rng.lognormal(np.log(24), 0.5, n), 2.0, 89.99), 2)
    intensity = rng.lognormal(np.log(730), 0.15, n)
    peaks = np.maximum(3, rng.lognormal(np.log(124), 1.3, n)).astype(int)
    union = np.minimum(rng.geometric(0.6, n), 12)
    shares = np.array(SYSTEM_SHARES, dtype=np.float64)
    system = rng.choice(len(CRYSTAL_SYSTEMS), n, p=shares / shares.sum())
    items: list[dict] = []
    for i in range(n):
        if i and rng.random() < repeated:
            items.append({**items[int(rng.integers(i))], "id": f"s{i}"})
            continue
        lo, hi = SPACE_GROUPS[system[i]]
        items.append({"db": "default", "id": f"s{i}", "two_theta_star": float(two_theta[i]),
                      "peak_intensity": float(intensity[i]), "n_peaks": int(peaks[i]), "union_size": int(union[i]),
                      "crystal_system": CRYSTAL_SYSTEMS[system[i]], "spacegroup_number": int(rng.integers(lo, hi + 1))})
    return items


def scaled_rows(n: int) -> np.ndarray:
    from sklearn.preprocessing import StandardScaler

    items = synthetic_items(n)
    feats = np.array([[it["two_theta_star"], it["peak_intensity"], it["n_peaks"], it["union_size"],
                       CRYSTAL_SYSTEMS.index(it["crystal_system"]), it["spacegroup_number"]] for it in items])
    return StandardScaler().fit_transform(feats)


def plain_kmeans(x):
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=K, random_state=0, n_init=10).fit(x)
    return km.labels_, km.cluster_centers_


@pytest.fixture(scope="module")
def one_blas_thread():
    import sklearn.cluster  # noqa: F401 - loads the OpenMP runtime before the limit

    with threadpool_limits(limits=1):
        cluster.warm_up()
        yield


@pytest.fixture(scope="module")
def rows_100k(one_blas_thread):
    x = scaled_rows(100_000)
    return x, plain_kmeans(x), cluster.kmeans(x, K, 0, 2)


@pytest.fixture(scope="module")
def rows_10k(one_blas_thread):
    from sklearn.metrics import silhouette_score

    x = scaled_rows(10_000)
    labels = cluster.kmeans(x, K, 0, 2)[0]
    return x, labels, silhouette_score(x, labels)


@pytest.mark.benchmark(group="xrd select: KMeans, 100,000 rows, k=25, n_init=10")
def test_kmeans_plain_scikit_learn_one_thread(benchmark, rows_100k):
    x, _, ours = rows_100k
    labels, centres = benchmark.pedantic(plain_kmeans, args=(x,), rounds=1, iterations=1)
    assert np.array_equal(labels, ours[0]) and np.array_equal(centres, ours[1])


@pytest.mark.benchmark(group="xrd select: KMeans, 100,000 rows, k=25, n_init=10")
def test_kmeans_restarts_over_two_threads(benchmark, rows_100k):
    """(With one worker `kmeans` is the plain call.)"""
    x, plain, _ = rows_100k
    labels, centres = benchmark.pedantic(cluster.kmeans, args=(x, K, 0, 2), rounds=1, iterations=1)
    assert np.array_equal(labels, plain[0]) and np.array_equal(centres, plain[1])


@pytest.mark.benchmark(group="xrd select: silhouette, 10,000 rows")
def test_silhouette_plain_scikit_learn_one_thread(benchmark, rows_10k):
    from sklearn.metrics import silhouette_score

    x, labels, _ = rows_10k
    got = benchmark.pedantic(silhouette_score, args=(x, labels), rounds=1, iterations=1)
    assert got == pytest.approx(cluster.silhouette(x, labels, 2), abs=1e-9)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.benchmark(group="xrd select: silhouette, 10,000 rows")
def test_silhouette_kernel(benchmark, rows_10k, workers):
    x, labels, plain = rows_10k
    got = benchmark.pedantic(cluster.silhouette, args=(x, labels, workers), rounds=3, iterations=1)
    assert got == pytest.approx(plain, abs=1e-9)
