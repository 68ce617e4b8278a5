"""Reference of ``benchmint.xrd.cifread``: pymatgen's CifParser, and NumPy forms of the closeness kernels.

``structure(text)`` is what the fast route must reproduce. ``pbc_close`` and
``pbc_groups`` are the plain forms of ``benchmint._core.cifread``'s kernels,
with their arguments and results: the same float operations (``np.round``
rounds half to even, as the kernel's ``rint``), so every decision is equal.
"""

from __future__ import annotations

import warnings

import numpy as np


def structure(text: str, notes: list[str] | None = None):
    """pymatgen's CifParser, the cell as written: ``CifParser.from_str(text).parse_structures(primitive=False)[0]``.

    ``notes`` receives the parser's warnings (its "Defaulting to P1" among them)."""
    from pymatgen.io.cif import CifParser

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pymatgen warns on many harmless CIF quirks
        parser = CifParser.from_str(text)
        try:
            return parser.parse_structures(primitive=False)[0]
        finally:
            if notes is not None:
                notes.extend(getattr(parser, "warnings", ()))  # set by its parse (untyped)


def _check(a: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 3:
        raise ValueError(f"{name} must have shape (n, 3)")
    return a


def pbc_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """max_k |a_k - b_k - round(a_k - b_k)| for all pairs (a: n x 3, b: m x 3) -> n x m."""
    with np.errstate(invalid="ignore"):  # non-finite coordinates compare as not close
        d = a[:, None, :] - b[None, :, :]
        d -= np.round(d)
    np.abs(d, out=d)
    return np.maximum(np.maximum(d[..., 0], d[..., 1]), d[..., 2])


def pbc_close(a: np.ndarray, b: np.ndarray, tol: float, margin: float) -> tuple[np.ndarray, bool]:
    """(pairs closer than ``tol`` modulo 1, whether any pair lies within ``margin`` of ``tol``)."""
    m = pbc_max(_check(a, "a"), _check(b, "b"))
    return m < tol, bool(np.any(np.abs(m - tol) <= margin))


def pbc_groups(a: np.ndarray, tol: float, margin: float) -> tuple[np.ndarray, bool, bool]:
    """(root, consistent, ambiguous): root[j] is the first position close to position j; consistent says
    closeness is an equivalence; ambiguous that some pair lies within ``margin`` of ``tol``."""
    a = _check(a, "positions")
    close, ambiguous = pbc_close(a, a, tol, margin)
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64), True, ambiguous
    root = np.argmax(close, axis=0)
    return root, bool(np.array_equal(close, root[:, None] == root[None, :])), ambiguous
