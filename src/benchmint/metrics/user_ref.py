"""Plain-Python reference of user-defined metrics: one call of the metric's Python function per row.

The compiled kernels of ``benchmint.metrics.user`` must return exactly these
values and raise exactly these errors. The helpers below are also what the
compiled path calls to re-raise the error of the lowest failing row, so both
paths raise the same exception object type, message and note.
"""

from __future__ import annotations

import numpy as np

NUMBER_TYPES = (int, float, np.integer, np.floating, np.bool_)  # bool is an int


def check_row(i: int, tp: int, fp: int, fn: int, g: int) -> None:
    if tp < 0 or fp < 0 or fn < 0 or g != tp + fn:
        raise ValueError(f"row {i}: counts must satisfy tp, fp, fn >= 0 and g = tp + fn "
                         f"(got tp={tp}, fp={fp}, fn={fn}, g={g})")


def row_note(name: str, i: int, tp: int, fp: int, fn: int, g: int) -> str:
    return f"raised by user metric {name!r} at row {i} (tp={tp}, fp={fp}, fn={fn}, g={g})"


def row_value(metric, i: int, tp: int, fp: int, fn: int, g: int) -> float:
    """The metric of one row as a float; the function's own exception (with a note naming the row) if it raises."""
    try:
        value = metric.fn(tp, fp, fn, g)
    except Exception as exc:
        exc.add_note(row_note(metric.name, i, tp, fp, fn, g))
        raise
    if not isinstance(value, NUMBER_TYPES):
        raise TypeError(f"user metric {metric.name!r} must return a number (int, float or bool); "
                        f"row {i} returned {type(value).__name__}")
    return float(value)


def evaluate(metric, tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, g: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[i] = metric.fn(tp[i], fp[i], fn[i], g[i])`` row by row; the first bad row raises."""
    for i, (t, p, f, s) in enumerate(zip(tp.tolist(), fp.tolist(), fn.tolist(), g.tolist())):
        check_row(i, t, p, f, s)
        out[i] = row_value(metric, i, t, p, f, s)
    return out
