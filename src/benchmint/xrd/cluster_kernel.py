"""The silhouette's kernel (``benchmint.xrd.cluster.silhouette``), apart so that Numba is imported only for a
database large enough to need it."""

from __future__ import annotations

import math

import numba
import numpy as np

_LANES = 8  # partial sums per cluster, added in a fixed order at the end
_SPAN = 256  # distances computed at a time before they are summed
# Rows taken one after the other against each span of a cluster, so that the span's coordinates (6 x 256
# doubles) are read from memory once for all of them and stay in L1 (at 100,000 rows each row read the whole
# 4.8 MB of coordinates from L3 before).
_TILE = 8
# Features taken in one pass over a span: written out six at a time, a distance is one vectorised loop over the
# span instead of a pass a feature, each loading and storing the partial sums (3.3x less CPU at 20,000 rows).
FEATURES_PER_PASS = 6


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, inline="always")
def _first_squares(xt, i, b, m, span):  # pragma: no cover - compiled
    """span[j] = the sum of the squared differences of rows i and b + j over features 0-5, added from 0.0."""
    r0, r1, r2, r3, r4, r5 = xt[0, b:b + m], xt[1, b:b + m], xt[2, b:b + m], xt[3, b:b + m], xt[4, b:b + m], \
        xt[5, b:b + m]
    v0, v1, v2, v3, v4, v5 = xt[0, i], xt[1, i], xt[2, i], xt[3, i], xt[4, i], xt[5, i]
    for j in range(m):
        t0, t1, t2, t3, t4, t5 = v0 - r0[j], v1 - r1[j], v2 - r2[j], v3 - r3[j], v4 - r4[j], v5 - r5[j]
        s = 0.0 + t0 * t0
        s = s + t1 * t1
        s = s + t2 * t2
        s = s + t3 * t3
        s = s + t4 * t4
        span[j] = s + t5 * t5


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, inline="always")
def _distances(xt, w, i, b, m, span):  # pragma: no cover - compiled
    """span[j] = w[j] * the distance of rows i and b + j over six features: ``_first_squares``, then the root."""
    r0, r1, r2, r3, r4, r5 = xt[0, b:b + m], xt[1, b:b + m], xt[2, b:b + m], xt[3, b:b + m], xt[4, b:b + m], \
        xt[5, b:b + m]
    v0, v1, v2, v3, v4, v5 = xt[0, i], xt[1, i], xt[2, i], xt[3, i], xt[4, i], xt[5, i]
    for j in range(m):
        t0, t1, t2, t3, t4, t5 = v0 - r0[j], v1 - r1[j], v2 - r2[j], v3 - r3[j], v4 - r4[j], v5 - r5[j]
        s = 0.0 + t0 * t0
        s = s + t1 * t1
        s = s + t2 * t2
        s = s + t3 * t3
        s = s + t4 * t4
        span[j] = math.sqrt(s + t5 * t5) * w[j]


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, inline="always")
def _more_squares(xt, i, f, b, m, span):  # pragma: no cover - compiled
    """span[j] += the squared differences of rows i and b + j over features f to f + 5, one after the other."""
    r0, r1, r2 = xt[f, b:b + m], xt[f + 1, b:b + m], xt[f + 2, b:b + m]
    r3, r4, r5 = xt[f + 3, b:b + m], xt[f + 4, b:b + m], xt[f + 5, b:b + m]
    v0, v1, v2, v3, v4, v5 = xt[f, i], xt[f + 1, i], xt[f + 2, i], xt[f + 3, i], xt[f + 4, i], xt[f + 5, i]
    for j in range(m):
        t0, t1, t2, t3, t4, t5 = v0 - r0[j], v1 - r1[j], v2 - r2[j], v3 - r3[j], v4 - r4[j], v5 - r5[j]
        s = span[j] + t0 * t0
        s = s + t1 * t1
        s = s + t2 * t2
        s = s + t3 * t3
        s = s + t4 * t4
        span[j] = s + t5 * t5


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False)
def distance_sums(xt, weights, starts, lo, hi, out):  # pragma: no cover - compiled
    """out[i - lo, c]: the sum over the rows j of cluster c of weights[j] * distance(i, j), for i in [lo, hi).

    ``xt``: the rows as columns (features x rows), sorted by cluster, its feature count a multiple of
    ``FEATURES_PER_PASS`` (rows of zeros added change no distance: each adds 0.0 to a sum of squares); cluster c
    is ``starts[c]:starts[c + 1]``. ``weights[j]``: how many rows of the data row j stands for (all 1.0: each term
    is the distance itself, bit for bit). A distance's squares are added feature by feature from 0.0; term j of a
    cluster goes into lane j % 8 (its index from the cluster's start) and the lanes are added as
    ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)): one order for row i whatever the tiles, blocks or threads."""
    d = xt.shape[0]
    k = starts.shape[0] - 1
    span = np.empty(_SPAN, np.float64)
    acc = np.empty((_TILE, _LANES), np.float64)
    for i0 in range(lo, hi, _TILE):
        rows = min(_TILE, hi - i0)
        for c in range(k):
            acc[:, :] = 0.0
            first, end = starts[c], starts[c + 1]
            for b in range(first, end, _SPAN):
                m = min(_SPAN, end - b)
                w = weights[b:b + m]
                for r in range(rows):
                    if d == FEATURES_PER_PASS:  # the selection's six features: one loop, squares to root
                        _distances(xt, w, i0 + r, b, m, span)
                    else:  # in passes of six, then the roots (each loop without a branch inside, for SIMD)
                        _first_squares(xt, i0 + r, b, m, span)
                        for f in range(FEATURES_PER_PASS, d, FEATURES_PER_PASS):
                            _more_squares(xt, i0 + r, f, b, m, span)
                        for j in range(m):
                            span[j] = math.sqrt(span[j]) * w[j]
                    full = m - m % _LANES  # _SPAN is a multiple of _LANES: lane = (j - first) % 8 in every span
                    for j in range(0, full, _LANES):
                        for lane in range(_LANES):
                            acc[r, lane] += span[j + lane]
                    for j in range(full, m):
                        acc[r, j - full] += span[j]
            for r in range(rows):
                a = acc[r]
                out[i0 + r - lo, c] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
