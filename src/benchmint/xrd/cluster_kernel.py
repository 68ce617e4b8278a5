"""The silhouette's kernel (``benchmint.xrd.cluster.silhouette``), apart so that Numba is imported only for a
database large enough to need it."""

from __future__ import annotations

import math

import numba
import numpy as np

_LANES = 8  # partial sums per cluster, added in a fixed order at the end
_SPAN = 256  # distances computed at a time before they are summed


@numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False)
def distance_sums(xt, starts, lo, hi, out):  # pragma: no cover - compiled
    """out[i - lo, c]: the sum of the distances of row i to the rows of cluster c, for i in [lo, hi).

    ``xt``: the rows as columns (features x rows), sorted by cluster; cluster c is ``starts[c]:starts[c + 1]``.
    Distance j of a cluster goes into lane j % 8 (its index from the cluster's start), the lanes are added as
    ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)): one order whatever the blocks or threads."""
    d = xt.shape[0]
    k = starts.shape[0] - 1
    span = np.empty(_SPAN, np.float64)
    acc = np.empty(_LANES, np.float64)
    xi = np.empty(d, np.float64)
    for i in range(lo, hi):
        for f in range(d):
            xi[f] = xt[f, i]
        for c in range(k):
            acc[:] = 0.0
            first, end = starts[c], starts[c + 1]
            for b in range(first, end, _SPAN):
                m = min(_SPAN, end - b)
                for j in range(m):
                    span[j] = 0.0
                for f in range(d):
                    v = xi[f]
                    row = xt[f]
                    for j in range(m):
                        t = v - row[b + j]
                        span[j] += t * t
                for j in range(m):
                    span[j] = math.sqrt(span[j])
                full = m - m % _LANES  # _SPAN is a multiple of _LANES: lane = (j - first) % 8 in every span
                for j in range(0, full, _LANES):
                    for lane in range(_LANES):
                        acc[lane] += span[j + lane]
                for j in range(full, m):
                    acc[j - full] += span[j]
            out[i - lo, c] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
