"""Plain forms of ``benchmint.xrd.cluster``: scikit-learn's KMeans as it is called by hand, and the silhouette
row by row in NumPy. ``BENCHMINT_IMPL=reference`` runs these; the tests compare the two forms.

Both expect the caller to hold scikit-learn's and BLAS's thread pools at one thread (``xrd.build.select`` does).
"""

from __future__ import annotations

import numpy as np

N_INIT = 10  # KMeans restarts, scikit-learn's default for k-means++


def kmeans(scaled: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels and centres of ``KMeans(n_clusters=k, random_state=seed, n_init=10)``."""
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, random_state=seed, n_init=N_INIT).fit(scaled)
    return km.labels_, km.cluster_centers_


def silhouette_rows(codes: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Each row's silhouette from its distance sums to every cluster, as scikit-learn's silhouette_samples
    finishes them: a = mean distance to the rest of its own cluster, b = the least mean distance to another
    cluster, (b - a) / max(a, b); 0 for a row alone in its cluster (0 / 0) and where a = b = 0."""
    n = len(codes)
    intra = sums[np.arange(n), codes]
    inter_sums = sums.copy()
    inter_sums[np.arange(n), codes] = np.inf
    inter = (inter_sums / counts).min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        intra = intra / (counts - 1)[codes]
        rows = (inter - intra) / np.maximum(intra, inter)
    return np.nan_to_num(rows)


def silhouette(x: np.ndarray, labels: np.ndarray) -> float:
    """The mean silhouette of ``labels`` over the rows of ``x`` (Euclidean), each distance taken from the
    coordinates' differences. Needs 2 <= clusters < rows, as scikit-learn's silhouette_score."""
    codes = np.unique(labels, return_inverse=True)[1].ravel()
    counts = np.bincount(codes)
    sums = np.empty((len(x), len(counts)))
    for i in range(len(x)):
        sums[i] = np.bincount(codes, weights=np.sqrt(((x - x[i]) ** 2).sum(axis=1)), minlength=len(counts))
    return float(np.mean(silhouette_rows(codes, counts, sums)))
