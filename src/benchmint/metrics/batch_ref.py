"""Plain-Python reference of the batch set metrics (``benchmint.metrics.batch``).

Obviously-correct loops, no cleverness. The compiled kernels
(``benchmint._core.batch``, csrc/batch.cpp) must return exactly these values
(bit for bit: the float expressions are written in the same order) and raise
exactly these errors, the first failing row's.
"""

from __future__ import annotations

import numpy as np

from benchmint.parallel import resolve_workers

METRIC_FLOATS = ("em", "spc", "sip_f1", "jaccard", "precision", "recall", "f1", "j_pen", "f1_pen")
METRIC_INTS = ("tp", "fp", "fn")
METRIC_NAMES = METRIC_INTS + METRIC_FLOATS + ("over_predicted",)


def metrics_from_counts(tp: int, n_pred: int, n_gold: int, sip_lambda: float, sip_gamma: float) -> dict:
    """Every metric of one item from tp = |P ∩ G|, |P| and |G|.

    EM, SPC and SIP-F1 follow spm-bench §3 (eq. 1-5); Jaccard, precision,
    recall, F1 and the over-prediction penalty follow crystalxrd-bench §2.4,
    with its edge cases: P = ∅ ≠ G and G = ∅ ≠ P score 0, P = G = ∅ scores 1.
    F1 and F1γ use the algebraically equal single-division forms
    2·TP/(|P| + |G|) and 2·TP/(TP + Γ·FP + |G|).
    """
    fp = n_pred - tp
    fn = n_gold - tp
    row = {"tp": tp, "fp": fp, "fn": fn, "over_predicted": n_pred > n_gold}
    if fp == 0 and fn == 0:
        row.update(dict.fromkeys(METRIC_FLOATS, 1.0))
        return row
    row["em"] = 0.0
    row["spc"] = n_pred / n_gold if (fp == 0 and n_pred > 0) else 0.0
    row["sip_f1"] = sip_lambda * (2.0 * tp) / (tp + sip_gamma * fp + n_gold) if tp > 0 else 0.0
    row["jaccard"] = tp / (n_pred + n_gold - tp)
    row["precision"] = tp / n_pred if n_pred > 0 else 0.0
    row["recall"] = tp / n_gold if n_gold > 0 else 0.0
    row["f1"] = 2.0 * tp / (n_pred + n_gold) if tp > 0 else 0.0
    penalty = 1.0 if n_pred <= n_gold else n_gold / n_pred
    row["j_pen"] = row["jaccard"] * penalty
    row["f1_pen"] = row["f1"] * penalty
    return row


_DTYPES = {**dict.fromkeys(METRIC_INTS, np.int32), **dict.fromkeys(METRIC_FLOATS, np.float64), "over_predicted": bool}


def _outputs(n: int, out: dict | None) -> dict[str, np.ndarray]:
    """Fresh output arrays, or the caller's after the same checks as the compiled kernels."""
    if out is None:
        return {name: np.empty(n, dtype=dt) for name, dt in _DTYPES.items()}
    for name, dt in _DTYPES.items():
        if name not in out:
            raise ValueError(f"out is missing the array '{name}'")
        a = out[name]
        if (not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1 or a.shape[0] != n
                or not a.flags.c_contiguous or not a.flags.writeable):
            raise ValueError(f"out['{name}'] must be a writable contiguous 1-D {np.dtype(dt)} array of length {n}")
    return out


def _fill(arrays: dict[str, np.ndarray], i: int, row: dict) -> None:
    for name in METRIC_NAMES:
        arrays[name][i] = row[name]


def _same_length(a: int, b: int) -> None:
    if a != b:
        raise ValueError(f"pred and gold have different lengths ({a} vs {b})")


def from_counts(tp, n_pred, n_gold, sip_lambda, sip_gamma, workers=1, out=None):
    tp, n_pred, n_gold = (np.asarray(a, dtype=np.int32).ravel() for a in (tp, n_pred, n_gold))
    _same_length(len(tp), len(n_pred))
    _same_length(len(tp), len(n_gold))
    resolve_workers(workers)
    arrays = _outputs(len(tp), out)
    for i, (t, p, g) in enumerate(zip(tp.tolist(), n_pred.tolist(), n_gold.tolist())):
        if t < 0 or p < 0 or g < 0 or t > p or t > g:
            raise ValueError(f"row {i}: counts must satisfy 0 <= tp <= min(n_pred, n_gold)")
        _fill(arrays, i, metrics_from_counts(t, p, g, sip_lambda, sip_gamma))
    return arrays


def from_bitmasks(pred, gold, sip_lambda, sip_gamma, workers=1, out=None):
    pred = np.asarray(pred, dtype=np.uint64).ravel()
    gold = np.asarray(gold, dtype=np.uint64).ravel()
    _same_length(len(pred), len(gold))
    resolve_workers(workers)
    arrays = _outputs(len(pred), out)
    for i, (p, g) in enumerate(zip(pred.tolist(), gold.tolist())):
        _fill(arrays, i, metrics_from_counts((p & g).bit_count(), p.bit_count(), g.bit_count(), sip_lambda, sip_gamma))
    return arrays


def _check_row(side: str, i: int, offsets: list[int], keys: list[int]) -> list[int]:
    b, e = offsets[i], offsets[i + 1]
    if e < b:
        raise ValueError(f"{side} row {i}: offsets decrease")
    row = keys[b:e]
    if any(row[k] <= row[k - 1] for k in range(1, len(row))):
        raise ValueError(f"{side} row {i}: keys are not strictly increasing (sort and deduplicate each set)")
    return row


def from_csr(pred_offsets, pred_keys, gold_offsets, gold_keys, sip_lambda, sip_gamma, workers=1, out=None):
    po, pk, go, gk = (np.asarray(a, dtype=np.int64).ravel().tolist() for a in (pred_offsets, pred_keys, gold_offsets, gold_keys))
    if len(po) < 1 or len(go) < 1:
        raise ValueError("offsets must have length n + 1 >= 1")
    n = len(po) - 1
    _same_length(n, len(go) - 1)
    resolve_workers(workers)
    for side, off, keys in (("pred", po, pk), ("gold", go, gk)):
        if off[0] != 0 or off[n] != len(keys):
            raise ValueError(f"{side} offsets must start at 0 and end at len(keys) = {len(keys)}")
    arrays = _outputs(n, out)
    for i in range(n):
        p = _check_row("pred", i, po, pk)
        g = _check_row("gold", i, go, gk)
        _fill(arrays, i, metrics_from_counts(len(set(p) & set(g)), len(p), len(g), sip_lambda, sip_gamma))
    return arrays
