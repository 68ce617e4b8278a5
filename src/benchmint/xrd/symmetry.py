"""Symmetry-aware comparison of Miller indices (crystalxrd-bench §5-6).

Reflections related by the crystal's Laue group (its point group plus the
inversion Friedel's law adds) are one reflection for scoring, and a 4-index
Miller-Bravais label (h, k, i, l) with i = -(h + k) is the plane (h, k, l).
Each item carries the rotation parts of its symmetry operations in its own
cell's fractional basis (``laue_rotations``, from ``benchmint xrd build``);
a reflection h (a row vector) maps to h·R under an operation R.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def laue_rotations(structure, symprec: float = 0.01, analyzer=None) -> list[list[int]]:
    """Rotation matrices of the structure's Laue group in its own fractional basis, as sorted 9-int rows.

    ``analyzer``: a SpacegroupAnalyzer of this structure already at hand (its symprec is used).
    """
    if analyzer is None:
        from pymatgen.symmetry.analyzer import SpacegroupAnalyzer

        analyzer = SpacegroupAnalyzer(structure, symprec=symprec)
    ops = analyzer.get_symmetry_operations(cartesian=False)
    rots = {tuple(int(v) for v in np.rint(op.rotation_matrix).astype(int).ravel()) for op in ops}
    rots |= {tuple(-v for v in r) for r in rots}  # Friedel pairs: the Laue group contains the inversion
    return [list(r) for r in sorted(rots)]


def three_index(hkl: Sequence[int]) -> tuple[int, int, int]:
    if len(hkl) == 4:
        h, k, _i, l = hkl
        return (h, k, l)
    return tuple(hkl)


def fold(hkls: Iterable[Sequence[int]], rotations: Sequence[Sequence[int]]) -> tuple[tuple[int, int, int], ...]:
    """Each reflection replaced by the largest member (lexicographic) of its Laue orbit; sorted, unique."""
    mats = np.array(rotations, dtype=np.int64).reshape(-1, 3, 3)
    out = set()
    for hkl in hkls:
        h = np.array(three_index(hkl), dtype=np.int64)
        orbit = h @ mats  # (n_ops, 3): h·R for every operation
        out.add(max(tuple(int(v) for v in row) for row in orbit))
    return tuple(sorted(out))


def check_rotations(value, rid: str) -> list[list[int]]:
    """The ``laue_rotations`` of a gold item, validated."""
    if (not isinstance(value, list) or not value
            or not all(isinstance(r, list) and len(r) == 9 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                   for x in r) for r in value)):
        raise ValueError(f'item {rid!r} has no usable "laue_rotations" (lists of 9 integers); '
                         f"build items with benchmint xrd build to score with --symmetry")
    return value
