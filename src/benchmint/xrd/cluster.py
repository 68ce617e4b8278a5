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
(``cluster_kernel``, no fastmath) that takes each distance from the coordinates' differences once for both
rows it joins, over the distinct rows (a repeated row weighted by its count), in fixed units over the threads
(or Ray tasks), every sum in an order fixed by the data alone; below
``KERNEL_FROM_ROWS`` rows the plain form, which is cheaper than loading the kernel. scikit-learn takes
distances from ``|x|² - 2x·y + |y|²`` by BLAS, whose rounding differs (equal rows come out ~1e-8 apart, the
root of a rounding error): the two agree to 1e-11-1e-9 on ordinary data and 1e-7 at worst, so ``select``
writes the silhouette rounded to 6 decimals. ``cluster_ref`` holds the plain forms (``BENCHMINT_IMPL=reference``).

Both expect the caller to hold BLAS at one thread (``select`` does); each thread here holds OpenMP at one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from itertools import groupby
from typing import Any

import numpy as np

from benchmint import _dispatch
from benchmint.parallel import thread_map
from benchmint.xrd import cluster_ref
from benchmint.xrd.cluster_ref import N_INIT

# Rows of a cluster in one unit of the silhouette's work (against one cluster): fixed, since the partial column
# sums of a cluster's units are added in their order, and large enough that those partials (one a row of the
# other cluster) stay near the size of the sums themselves (80 MB at 400,000 distinct rows and 25 clusters).
ROWS_PER_UNIT = 8192
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


class Threads:
    """The local engine's spread: ``map(fn, shared, items)`` is ``[fn(shared, item) ...]`` over up to ``workers``
    threads of this process (``parallel.thread_map``), one item a silhouette unit.
    ``run.ray_engine.RayMap`` is its twin over Ray tasks."""

    tasks_per_worker = None  # a unit an item: threads share memory, so small items cost nothing to hand out

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers

    def map(self, fn: Callable[[Any, Any], Any], shared: Any, items: list) -> list:
        return thread_map(partial(fn, shared), items, self.workers)


def _spread(spread: Any) -> Any:
    return spread if hasattr(spread, "map") else Threads(spread)


def _start(shared: tuple, k: int, seed: int, i: int) -> tuple[np.ndarray, Any, Any]:
    from sklearn.cluster import kmeans_plusplus

    _, centred, norms = shared
    rng = np.random.RandomState(seed)
    rng.random_sample(i * draws_per_start(k))
    before = rng.get_state()
    _, chosen = kmeans_plusplus(centred, k, x_squared_norms=norms, random_state=rng)
    return chosen, before, rng.get_state()


def _restart(shared: tuple, job: tuple[int, int, np.ndarray]) -> tuple[np.ndarray, float, np.ndarray]:
    """One restart's Lloyd iterations from the start ``chosen`` (``job``: k, seed, chosen)."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    x = shared[0]
    k, seed, chosen = job
    # KMeans takes an explicit start as given rows and centres it as it centres the data: x[chosen] - mean is
    # bitwise the start KMeans would have drawn from the centred rows.
    with threadpool_limits(limits=1, user_api="openmp"):  # OpenMP's limit is each thread's own
        km = KMeans(n_clusters=k, init=x[chosen], n_init=1, random_state=seed).fit(x)
    return km.labels_, km.inertia_, km.cluster_centers_


def _start_and_restart(shared: tuple, job: tuple[int, int, int]):
    """Restart i (``job``: k, seed, i): its start, its iterations, and the RandomState before and after the start."""
    k, seed, i = job
    chosen, before, after = _start(shared, k, seed, i)
    return _restart(shared, (k, seed, chosen)), before, after


def kmeans(scaled: np.ndarray, k: int, seed: int, spread: Any = 1,
           threads_from: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Labels and centres of ``KMeans(n_clusters=k, random_state=seed, n_init=10)`` on one thread; the
    restarts over ``spread`` (a worker count for ``Threads``, or ``run.ray_engine.RayMap``: a Ray task each) from
    ``threads_from`` rows (``THREADS_FROM_ROWS`` by default), below that the plain call (counted as a fallback)."""
    spread = _spread(spread)
    threads_from = THREADS_FROM_ROWS if threads_from is None else threads_from
    if _dispatch.use_reference("cluster", available=spread.workers > 1 and len(scaled) >= threads_from):
        return cluster_ref.kmeans(scaled, k, seed)
    from sklearn.cluster import kmeans_plusplus
    from sklearn.cluster._k_means_common import _is_same_clustering
    from sklearn.utils.extmath import row_norms

    x = np.ascontiguousarray(scaled, dtype=np.float64)
    centred = x - x.mean(axis=0)  # what KMeans.fit draws its starts from (it centres the data first)
    shared = (x, centred, row_norms(centred, squared=True))  # put in Ray's object store once for all restarts
    done = spread.map(_start_and_restart, shared, [(k, seed, i) for i in range(N_INIT)])
    if not all(_same_state(done[i - 1][2], done[i][1]) for i in range(1, N_INIT)):
        rng = np.random.RandomState(seed)  # the draws differ from the count above: draw in turn, as KMeans does
        starts = [kmeans_plusplus(centred, k, x_squared_norms=shared[2], random_state=rng)[1] for _ in range(N_INIT)]
        done = [(r, None, None) for r in spread.map(_restart, shared, [(k, seed, c) for c in starts])]
    best = None
    for (labels, inertia, centres), _, _ in done:  # scikit-learn's rule, in the order it runs the restarts
        if best is None or (inertia < best[1] and not _is_same_clustering(labels, best[0], k)):
            best = (labels, inertia, centres)
    assert best is not None  # ten restarts
    return best[0], best[2]


def warm_up() -> None:
    """Load (or compile) the silhouette kernel now, on a one-row input."""
    from benchmint.xrd.cluster_kernel import FEATURES_PER_PASS, pair_sums

    pair_sums(np.zeros((FEATURES_PER_PASS, 1)), np.ones(1), 0, 1, 0, 1, np.empty(1), np.zeros(1))


def distinct_rows(x: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (cluster, row) pairs of ``x`` labelled ``codes``, sorted by cluster: their codes, rows and
    counts. Rows equal in every feature and cluster have the same distance sums and the same silhouette, so one
    row stands for all of them, weighted by their count (a fifth of the synthetic rows repeat; so do the
    corpus's, where one structure comes in several files)."""
    keyed = np.column_stack([codes.astype(np.float64), np.asarray(x, dtype=np.float64)])
    pairs, counts = np.unique(keyed, axis=0, return_counts=True)  # sorted by code first: clusters are contiguous
    return pairs[:, 0].astype(np.int64), pairs[:, 1:], counts


def _units(shared: tuple, units: list[tuple[int, int, int, int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each unit (rows lo:hi of cluster a, cluster c): the rows' sums to c and, for a < c, the partial sums
    of c's rows to those rows (``cluster_kernel.pair_sums``)."""
    from benchmint.xrd.cluster_kernel import pair_sums

    xt, weights, starts = shared
    done = []
    for a, c, lo, hi in units:
        first, end = starts[c], starts[c + 1]
        rows = np.empty(hi - lo)
        columns = np.zeros(end - first if a < c else 0)
        pair_sums(xt, weights, lo, hi, first, end, rows, columns)
        done.append((rows, columns))
    return done


def _pair_sums(xt: np.ndarray, weights: np.ndarray, starts: np.ndarray, spread: Any) -> np.ndarray:
    """Every row's distance sums to every cluster (rows x clusters), each distance computed once: the block of
    clusters a <= c gives a's rows' sums to c and, for a < c, c's rows' sums to a, cut into units of
    ``ROWS_PER_UNIT`` rows of a; the units (a few a worker grouped into a task when ``spread`` says so) run
    over ``spread``."""
    k = len(starts) - 1
    units = [(a, c, lo, min(lo + ROWS_PER_UNIT, starts[a + 1]))
             for a in range(k) for c in range(a, k) for lo in range(starts[a], starts[a + 1], ROWS_PER_UNIT)]
    if spread.tasks_per_worker:  # consecutive units in a few groups a worker of about equal cost
        cost = np.array([(hi - lo) * (starts[c + 1] - starts[c]) for a, c, lo, hi in units], dtype=np.float64)
        groups = min(len(units), spread.tasks_per_worker * spread.workers)
        group_of = ((np.cumsum(cost) - cost) * groups // cost.sum()).tolist()  # what precedes each unit
        batches = [[u for u, _ in run] for _, run in groupby(zip(units, group_of), key=lambda p: p[1])]
    else:  # threads: a unit each
        batches = [[u] for u in units]
    # Which batch computes a unit changes nothing it gives.
    got = [r for batch in spread.map(_units, (xt, weights, starts), batches) for r in batch]
    sums = np.empty((xt.shape[1], k))
    columns: dict[tuple[int, int], np.ndarray] = {}
    for (a, c, lo, hi), (rows, part) in zip(units, got):
        sums[lo:hi, c] = rows
        if a < c:  # c's rows to a: the units' partial sums added in the units' order, the same on any spread
            columns[a, c] = part if (a, c) not in columns else columns[a, c] + part
    for (a, c), total_part in columns.items():
        sums[starts[c]:starts[c + 1], a] = total_part
    return sums


def silhouette(x: np.ndarray, labels: np.ndarray, spread: Any = 1, kernel_from: int | None = None) -> float:
    """``silhouette_score(x, labels)`` (Euclidean) over ``spread`` (a worker count for ``Threads``, or
    ``run.ray_engine.RayMap``: groups of units as Ray tasks); 2 <= clusters < rows. Fewer rows than
    ``kernel_from`` (``KERNEL_FROM_ROWS`` by default) go to the plain form (counted as a fallback).

    The kernel runs over the distinct (cluster, row) pairs, each weighted by its count (``distinct_rows``): the
    sums are those over every row, each term w * d in place of w terms d, so they differ from the plain form's
    by rounding only (1e-15 relative); the mean is the exactly rounded sum (``math.fsum``) of each pair's
    silhouette times its count, over the rows."""
    spread = _spread(spread)
    kernel_from = KERNEL_FROM_ROWS if kernel_from is None else kernel_from
    if _dispatch.use_reference("cluster", available=len(x) >= kernel_from):
        return cluster_ref.silhouette(x, labels)
    from benchmint.xrd.cluster_kernel import FEATURES_PER_PASS

    codes = np.unique(labels, return_inverse=True)[1].ravel()
    pair_codes, rows, weights = distinct_rows(x, codes)
    n, d = rows.shape
    # The features as rows, padded with rows of zeros to whole passes of the kernel (each adds 0.0 to a square sum).
    xt = np.zeros((-(-d // FEATURES_PER_PASS) * FEATURES_PER_PASS, n))
    xt[:d] = rows.T
    counts = np.bincount(codes)
    starts = np.concatenate([[0], np.cumsum(np.bincount(pair_codes, minlength=len(counts)))]).astype(np.int64)
    sums = _pair_sums(xt, weights.astype(np.float64), starts, spread)
    each = cluster_ref.silhouette_rows(pair_codes, counts, sums)
    return math.fsum((each * weights).tolist()) / len(codes)
