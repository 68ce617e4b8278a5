"""Plain NumPy reference of ``benchmint.pdf.geometry.transform`` (the compiled kernel must equal it bit for bit).

A NaN among a box's four mapped corners makes that side NaN (NumPy's min and
max propagate it); the compiled kernel does the same. Non-finite input gives
no warning, as in the kernel.
"""

from __future__ import annotations

import numpy as np


def transform(boxes: np.ndarray, matrix) -> np.ndarray:
    """The bounding boxes of (n, 4) ``boxes`` under the affine (a, b, c, d, e, f) map."""
    a, b, c, d, e, f = matrix
    xs = boxes[:, [0, 2, 0, 2]]
    ys = boxes[:, [1, 1, 3, 3]]
    with np.errstate(invalid="ignore", over="ignore"):  # inf·0 and overflow give NaN/inf silently, as in C++
        tx = a * xs + c * ys + e
        ty = b * xs + d * ys + f
    return np.column_stack([tx.min(axis=1), ty.min(axis=1), tx.max(axis=1), ty.max(axis=1)])
