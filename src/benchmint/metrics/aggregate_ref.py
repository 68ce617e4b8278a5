"""Plain reference of ``benchmint.metrics.aggregate.group_counts``: a Counter over (group, key) pairs."""

from __future__ import annotations

from collections import Counter

import numpy as np


def group_counts(group: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(groups, keys, counts) of the distinct (group, key) pairs, sorted by (group, key)."""
    counter = Counter(zip(np.asarray(group).tolist(), np.asarray(key).tolist()))
    items = sorted(counter.items())
    groups = np.array([g for (g, _), _ in items], dtype=np.int64)
    keys = np.array([k for (_, k), _ in items], dtype=np.int64)
    counts = np.array([c for _, c in items], dtype=np.int64)
    return groups, keys, counts
