"""Per-item and batch scoring of predicted sets against gold sets.

The batch entry point takes plain Python lists of sets/lists, pre-encoded
uint64 bitmasks, or pre-encoded CSR pairs ``(offsets, keys)``, and returns a
dict of numpy arrays with every metric (names in ``METRIC_NAMES``).
Compiled form ``benchmint._core.batch``, reference ``batch_ref``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from benchmint import _dispatch, tasks
from benchmint.metrics import batch_ref
from benchmint.metrics.batch_ref import METRIC_NAMES
from benchmint.metrics.encode import encode_csr
from benchmint.parallel import resolve_workers

DEFAULT_SIP_LAMBDA = 0.6
DEFAULT_SIP_GAMMA = 6.0

__all__ = ["METRIC_NAMES", "check_params", "score_item", "score_batch", "score_counts"]


def check_params(sip_lambda: float, sip_gamma: float) -> tuple[float, float]:
    """λ must lie in [0, 1] and Γ >= 1 (Γ = 1 is plain F1; below 1 false positives would be rewarded)."""
    lam, gamma = float(sip_lambda), float(sip_gamma)
    if not (math.isfinite(lam) and 0.0 <= lam <= 1.0):
        raise ValueError(f"sip_lambda must be in [0, 1], got {sip_lambda!r}")
    if not (math.isfinite(gamma) and gamma >= 1.0):
        raise ValueError(f"sip_gamma must be a finite number >= 1, got {sip_gamma!r}")
    return lam, gamma


def _backend():
    return batch_ref if _dispatch.use_reference("batch") else _dispatch.core().batch


def score_item(pred: Iterable, gold: Iterable, task: str | None = None, *,
               sip_lambda: float = DEFAULT_SIP_LAMBDA, sip_gamma: float = DEFAULT_SIP_GAMMA) -> dict:
    """Every metric for one prediction. ``task`` (an answer kind: "mcq", "hkl") normalises the answers first."""
    lam, gamma = check_params(sip_lambda, sip_gamma)
    if task is not None:
        kind = tasks.get(task)
        p, g = set(kind.normalize(pred)), set(kind.normalize(gold))
    else:
        p, g = set(pred), set(gold)
    return batch_ref.metrics_from_counts(len(p & g), len(p), len(g), lam, gamma)


def score_counts(tp, n_pred, n_gold, *, sip_lambda: float = DEFAULT_SIP_LAMBDA,
                 sip_gamma: float = DEFAULT_SIP_GAMMA, workers: int = 1) -> dict[str, np.ndarray]:
    """Every metric from arrays of (|P ∩ G|, |P|, |G|)."""
    lam, gamma = check_params(sip_lambda, sip_gamma)
    as32 = lambda a: np.ascontiguousarray(a, dtype=np.int32)  # noqa: E731
    return _backend().from_counts(as32(tp), as32(n_pred), as32(n_gold), lam, gamma, workers)


def _is_csr(x: Any) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and all(isinstance(a, np.ndarray) for a in x)


def score_batch(pred: Sequence | np.ndarray | tuple, gold: Sequence | np.ndarray | tuple, *,
                task: str | None = None, sip_lambda: float = DEFAULT_SIP_LAMBDA,
                sip_gamma: float = DEFAULT_SIP_GAMMA, workers: int = 1,
                out: dict[str, np.ndarray] | None = None, user_metrics: Sequence = ()) -> dict[str, np.ndarray]:
    """Every metric for many predictions at once.

    ``pred``/``gold`` are either
      * sequences of sets or lists (any hashable elements; with ``task`` they
        are normalised as option letters or Miller indices first),
      * uint64 arrays of bitmasks (one bit per label, up to 64 labels), or
      * ``(offsets, keys)`` int64 pairs: row i is ``keys[offsets[i]:offsets[i+1]]``,
        sorted and unique.
    ``workers``: 1 serial, -1 all cores, n threads.
    ``out``: the dict of a previous call of the same length, to be overwritten
    (saves allocating ~85 bytes per item when scoring batch after batch).
    ``user_metrics``: ``benchmint.metrics.user.UserMetric`` objects; each adds a
    float64 column under its name, computed from the item's (tp, fp, fn, |G|).
    """
    lam, gamma = check_params(sip_lambda, sip_gamma)
    resolve_workers(workers)
    arrays = _score_sets(pred, gold, task, lam, gamma, workers, out)
    if user_metrics:
        from benchmint.metrics.user import add_columns

        add_columns(arrays, user_metrics, workers)
    return arrays


def _score_sets(pred: Any, gold: Any, task: str | None, lam: float, gamma: float, workers: int,
                out: Any) -> dict[str, np.ndarray]:
    backend = _backend()
    if isinstance(pred, np.ndarray) and isinstance(gold, np.ndarray):
        if pred.dtype != np.uint64 or gold.dtype != np.uint64:
            raise TypeError("array inputs must be uint64 bitmasks; use (offsets, keys) pairs for other encodings")
        return backend.from_bitmasks(np.ascontiguousarray(pred), np.ascontiguousarray(gold), lam, gamma, workers, out)
    if _is_csr(pred) and _is_csr(gold):
        arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (*pred, *gold)]
        return backend.from_csr(*arrays, lam, gamma, workers, out)
    kind = tasks.get(task) if task is not None else None
    vocabulary: dict | None = None if kind is not None else {}
    po, pk = encode_csr(pred, kind, vocabulary)
    go, gk = encode_csr(gold, kind, vocabulary)
    return backend.from_csr(po, pk, go, gk, lam, gamma, workers, out)
