"""The two costly steps of the KMeans selection (``xrd.build.select``) on several threads, with the results of one.

``kmeans``: scikit-learn's ``KMeans(n_clusters=k, random_state=seed, n_init=10)`` on one thread, its ten
restarts run side by side. scikit-learn draws the ten k-means++ starts one after the other from one
RandomState; a start draws a fixed count of uniforms (one for its first centre, ``2 + int(log k)`` for each
next one), so restart i draws its start from a RandomState of the seed advanced by i starts' draws. Each
restart then runs scikit-learn's Lloyd iterations on one thread (``KMeans`` handed that start), and the best
is kept by scikit-learn's own rule (a lower inertia and not the same clustering). The states are checked: each
restart's RandomState before its start must be the previous one's after it; should a scikit-learn release draw
otherwise, the starts are drawn again one after the other as KMeans draws them. So labels and centres are
scikit-learn's, bit for bit, on any thread count.

``silhouette``: scikit-learn's ``silhouette_score(x, labels)`` (Euclidean), exact by construction and the
same on any thread count: every row's distance sums to each cluster come from a Numba kernel
(``cluster_kernel``, no fastmath) that takes each distance from the coordinates' differences and sums a
cluster's distances in eight fixed lanes, rows split into fixed blocks over the threads; below
``KERNEL_FROM_ROWS`` rows the plain form, which is cheaper than loading the kernel. scikit-learn takes
distances from ``|x|² - 2x·y + |y|²`` by BLAS, whose rounding differs (equal rows come out ~1e-8 apart, the
root of a rounding error): the two agree to 1e-11-1e-9 on ordinary data and 1e-7 at worst, so ``select``
writes the silhouette rounded to 6 decimals. ``cluster_ref`` holds the plain forms (``BENCHMINT_IMPL=reference``).

Both expect the caller to hold BLAS at one thread (``select`` does); each thread here holds OpenMP at one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmint import _dispatch
from benchmint.parallel import thread_map
from benchmint.xrd import cluster_ref
from benchmint.xrd.cluster_ref import N_INIT

ROWS_PER_BLOCK = 256  # rows of the silhouette handed to a thread at a time
# Below this many rows the plain form computes the silhouette (0.4 s of CPU at 4,000 rows, 0.01 s at 600): the
# kernel's module costs about as much to load (Numba's import and the cached kernel, ~0.5 s), and the selection
# helper would pay it for every run, on the cores the structures' workers use.
KERNEL_FROM_ROWS = 4096
# Below this many rows (or with one worker) scikit-learn's KMeans runs as it is: a restart of a few hundred rows
# is mostly scikit-learn's Python, which ten separate fits and threads passing the GIL back and forth would only
# add to (0.065 s of CPU instead of 0.034 s for the corpus's 598 items).
THREADS_FROM_ROWS = 4096


def draws_per_start(k: int) -> int:
    """Uniforms one k-means++ start draws: one for the first centre, then ``2 + int(log k)`` trials for each
    next one (scikit-learn's ``_kmeans_plusplus``)."""
    return 1 + (k - 1) * (2 + int(np.log(k)))


def _same_state(a: Any, b: Any) -> bool:
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2:] == b[2:]


def kmeans(scaled: np.ndarray, k: int, seed: int, workers: int = 1,
           threads_from: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Labels and centres of ``KMeans(n_clusters=k, random_state=seed, n_init=10)`` on one thread; the
    restarts over ``workers`` threads from ``threads_from`` rows (``THREADS_FROM_ROWS`` by default), below
    that the plain call (counted as a fallback)."""
    threads_from = THREADS_FROM_ROWS if threads_from is None else threads_from
    if _dispatch.use_reference("cluster", available=workers > 1 and len(scaled) >= threads_from):
        return cluster_ref.kmeans(scaled, k, seed)
    from sklearn.cluster import KMeans, kmeans_plusplus
    from sklearn.cluster._k_means_common import _is_same_clustering
    from sklearn.utils.extmath import row_norms
    from threadpoolctl import threadpool_limits

    x = np.ascontiguousarray(scaled, dtype=np.float64)
    centred = x - x.mean(axis=0)  # what KMeans.fit draws its starts from (it centres the data first)
    norms = row_norms(centred, squared=True)

    def start(i: int) -> tuple[np.ndarray, Any, Any]:
        rng = np.random.RandomState(seed)
        rng.random_sample(i * draws_per_start(k))
        before = rng.get_state()
        _, chosen = kmeans_plusplus(centred, k, x_squared_norms=norms, random_state=rng)
        return chosen, before, rng.get_state()

    def restart(chosen: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        # KMeans takes an explicit start as given rows and centres it as it centres the data: x[chosen] - mean
        # is bitwise the start KMeans would have drawn from the centred rows.
        with threadpool_limits(limits=1, user_api="openmp"):  # OpenMP's limit is each thread's own
            km = KMeans(n_clusters=k, init=x[chosen], n_init=1, random_state=seed).fit(x)
        return km.labels_, km.inertia_, km.cluster_centers_

    def start_and_restart(i: int):
        chosen, before, after = start(i)
        return restart(chosen), before, after

    done = thread_map(start_and_restart, range(N_INIT), workers)
    if not all(_same_state(done[i - 1][2], done[i][1]) for i in range(1, N_INIT)):
        rng = np.random.RandomState(seed)  # the draws differ from the count above: draw in turn, as KMeans does
        starts = [kmeans_plusplus(centred, k, x_squared_norms=norms, random_state=rng)[1] for _ in range(N_INIT)]
        done = [(r, None, None) for r in thread_map(restart, starts, workers)]
    best = None
    for (labels, inertia, centres), _, _ in done:  # scikit-learn's rule, in the order it runs the restarts
        if best is None or (inertia < best[1] and not _is_same_clustering(labels, best[0], k)):
            best = (labels, inertia, centres)
    assert best is not None  # ten restarts
    return best[0], best[2]


def warm_up() -> None:
    """Load (or compile) the silhouette kernel now, on a one-row input."""
    from benchmint.xrd.cluster_kernel import distance_sums

    distance_sums(np.zeros((1, 1)), np.array([0, 1], dtype=np.int64), 0, 1, np.empty((1, 1)))


def silhouette(x: np.ndarray, labels: np.ndarray, workers: int = 1, kernel_from: int | None = None) -> float:
    """``silhouette_score(x, labels)`` (Euclidean) over ``workers`` threads; 2 <= clusters < rows. Fewer rows
    than ``kernel_from`` (``KERNEL_FROM_ROWS`` by default) go to the plain form (counted as a fallback)."""
    kernel_from = KERNEL_FROM_ROWS if kernel_from is None else kernel_from
    if _dispatch.use_reference("cluster", available=len(x) >= kernel_from):
        return cluster_ref.silhouette(x, labels)
    from benchmint.xrd.cluster_kernel import distance_sums
    codes = np.unique(labels, return_inverse=True)[1].ravel()
    counts = np.bincount(codes)
    order = np.argsort(codes, kind="stable")
    xt = np.ascontiguousarray(np.asarray(x, dtype=np.float64)[order].T)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    n = len(codes)
    sums = np.empty((n, len(counts)))
    blocks = [(lo, min(n, lo + ROWS_PER_BLOCK)) for lo in range(0, n, ROWS_PER_BLOCK)]
    thread_map(lambda b: distance_sums(xt, starts, b[0], b[1], sums[b[0]:b[1]]), blocks, workers)
    rows = np.empty(n)
    rows[order] = cluster_ref.silhouette_rows(codes[order], counts, sums)
    return float(np.mean(rows))  # in the rows' own order, as scikit-learn averages them
