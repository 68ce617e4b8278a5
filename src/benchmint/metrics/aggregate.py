"""Per-stratum aggregation and bootstrap confidence intervals.

Every per-item metric is a function of the count triple (tp, |P|, |G|), so a
group of items is summarised exactly by how many of its items share each
triple. Macro averages are then count-weighted sums, and the percentile
bootstrap needs no per-item resampling: drawing n items with replacement puts
Multinomial(n, c_k / n) of them on triple k, so one multinomial draw over the
K distinct triples (K is small: tens to hundreds) is one bootstrap resample,
with exactly the distribution of the classical index bootstrap.

``group_counts`` has a NumPy form here and a plain reference in
``aggregate_ref``; there is no compiled form.
"""

from __future__ import annotations

import numpy as np

from benchmint import _dispatch
from benchmint.metrics import aggregate_ref

DENSE_LIMIT = 1 << 22  # cells of the dense (group x triple) table before switching to sorting


def triple_base(n_pred: np.ndarray, n_gold: np.ndarray) -> int:
    """The base ``triple_keys`` packs with: one more than the largest set size."""
    return int(max(n_pred.max(initial=0), n_gold.max(initial=0))) + 1


def pack_triples(tp: np.ndarray, n_pred: np.ndarray, n_gold: np.ndarray, base: int) -> np.ndarray:
    return (tp.astype(np.int64) * base + n_pred) * base + n_gold


def triple_keys(tp: np.ndarray, n_pred: np.ndarray, n_gold: np.ndarray) -> tuple[np.ndarray, int]:
    """Pack (tp, |P|, |G|) into one int64 per item; returns (keys, base)."""
    base = triple_base(n_pred, n_gold)
    return pack_triples(tp, n_pred, n_gold, base), base


def unpack_triples(keys: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_gold = keys % base
    n_pred = (keys // base) % base
    tp = keys // (base * base)
    return tp.astype(np.int32), n_pred.astype(np.int32), n_gold.astype(np.int32)


def group_counts(group: np.ndarray, key: np.ndarray, n_groups: int, n_keys: int):
    """Count items per (group, key): returns (groups, keys, counts) sorted by (group, key).

    ``group`` in [0, n_groups), ``key`` in [0, n_keys), both int64. One
    np.bincount pass over the combined cell index when the table is small
    (the usual case: a few models and strata, triples of small sets), a sort
    otherwise.
    """
    group = np.ascontiguousarray(group, dtype=np.int64)
    key = np.ascontiguousarray(key, dtype=np.int64)
    if len(group) != len(key):
        raise ValueError(f"group and key have different lengths ({len(group)} vs {len(key)})")
    if len(group) and (group.min() < 0 or group.max() >= n_groups or key.min() < 0 or key.max() >= n_keys):
        raise ValueError("group or key out of range")
    if _dispatch.use_reference("aggregate"):
        return aggregate_ref.group_counts(group, key)
    cell = group * n_keys + key
    cells = n_groups * n_keys
    if cells <= DENSE_LIMIT:
        flat = np.bincount(cell, minlength=cells)
        idx = np.flatnonzero(flat)
        return idx // n_keys, idx % n_keys, flat[idx].astype(np.int64)
    combined, counts = np.unique(cell, return_counts=True)
    return combined // n_keys, combined % n_keys, counts.astype(np.int64)


def bootstrap_ci(counts: np.ndarray, values: np.ndarray, n_boot: int, rng: np.random.Generator,
                 level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means and percentile bootstrap intervals of per-item values summarised by class counts.

    counts: (K,) items per class; values: (K, M) the M metric values of each class.
    Returns (mean, low, high), each (M,).
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        nan = np.full(values.shape[1], np.nan)
        return nan, nan, nan
    # einsum, not BLAS: tiny products, and no BLAS thread pool left spinning on the cores.
    mean = np.einsum("k,km->m", counts.astype(np.float64), values) / n
    draws = rng.multinomial(n, counts / n, size=n_boot)
    boot = np.einsum("bk,km->bm", draws.astype(np.float64), values) / n
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha], axis=0)
    return mean, low, high
