"""The silhouette's kernel (``benchmint.xrd.cluster.silhouette``), apart so that Numba is imported only for a
database large enough to need it."""

from __future__ import annotations

import math

import numba
import numpy as np

_LANES = 8  # partial sums per cluster, added in a fixed order at the end
_SPAN = 256  # distances computed at a time before they are summed
# Features taken in one pass over a span: written out six at a time, a distance is one vectorised loop over the
# span instead of a pass a feature, each loading and storing the partial sums (3.3x less CPU at 20,000 rows).
FEATURES_PER_PASS = 6


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, inline="always")
def _six_squares(xt, i, f, b, m, span, first, root):  # pragma: no cover - compiled
    """span[j] (from 0.0 when ``first``, else added to it) += the squared differences of rows i and b + j over
    features f to f + 5, one after the other; then its root when ``root``. The two flags do not change inside
    the loop, which the compiler takes out of it: each call is one branch-free loop."""
    r0, r1, r2 = xt[f, b:b + m], xt[f + 1, b:b + m], xt[f + 2, b:b + m]
    r3, r4, r5 = xt[f + 3, b:b + m], xt[f + 4, b:b + m], xt[f + 5, b:b + m]
    v0, v1, v2, v3, v4, v5 = xt[f, i], xt[f + 1, i], xt[f + 2, i], xt[f + 3, i], xt[f + 4, i], xt[f + 5, i]
    for j in range(m):
        t0, t1, t2, t3, t4, t5 = v0 - r0[j], v1 - r1[j], v2 - r2[j], v3 - r3[j], v4 - r4[j], v5 - r5[j]
        s = (0.0 if first else span[j]) + t0 * t0
        s = s + t1 * t1
        s = s + t2 * t2
        s = s + t3 * t3
        s = s + t4 * t4
        s = s + t5 * t5
        span[j] = math.sqrt(s) if root else s


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, inline="always")
def _roots(xt, i, b, m, span):  # pragma: no cover - compiled
    """span[j] = the distance of rows i and b + j: squares added feature by feature from 0.0, then the root;
    the selection's six features in one loop, squares to root; more in passes of six, then the roots."""
    d = xt.shape[0]
    _six_squares(xt, i, 0, b, m, span, True, d == FEATURES_PER_PASS)
    if d > FEATURES_PER_PASS:
        for f in range(FEATURES_PER_PASS, d, FEATURES_PER_PASS):
            _six_squares(xt, i, f, b, m, span, False, False)
        for j in range(m):
            span[j] = math.sqrt(span[j])


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False)
def pair_sums(xt, weights, lo, hi, first, end, rows_out, columns_out):  # pragma: no cover - compiled
    """Both sums of one block of distances, rows i in [lo, hi) against rows j in [first, end) (one cluster's):
    rows_out[i - lo] = the sum over j of weights[j] * d(i, j), and, when ``columns_out`` has a row for each j,
    columns_out[j - first] = the sum over i of weights[i] * d(i, j), so each distance is computed once for both.

    ``xt``: the rows as columns (features x rows), its feature count a multiple of ``FEATURES_PER_PASS`` (rows of
    zeros added change no distance: each adds 0.0 to a sum of squares). A row's sum puts term j into lane
    (j - first) % 8 and adds the lanes as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)); a column's sum adds its terms
    in the order of i. Either is one order whatever the caller's blocks, threads or tasks."""
    span = np.empty(_SPAN, np.float64)
    term = np.empty(_SPAN, np.float64)
    acc = np.empty(_LANES, np.float64)
    columns = columns_out.shape[0] == end - first
    for i in range(lo, hi):
        acc[:] = 0.0
        wi = weights[i]
        for b in range(first, end, _SPAN):
            m = min(_SPAN, end - b)
            _roots(xt, i, b, m, span)
            w = weights[b:b + m]
            for j in range(m):
                term[j] = span[j] * w[j]
            full = m - m % _LANES  # _SPAN is a multiple of _LANES: lane = (j - first) % 8 in every span
            for j in range(0, full, _LANES):
                for lane in range(_LANES):
                    acc[lane] += term[j + lane]
            for j in range(full, m):
                acc[j - full] += term[j]
            if columns:
                col = columns_out[b - first:b - first + m]
                for j in range(m):
                    col[j] += wi * span[j]
        rows_out[i - lo] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
