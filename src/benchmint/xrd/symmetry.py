"""The Laue rotations each XRD item carries, for symmetry-aware scoring (crystalxrd-bench §5-6).

The comparison itself belongs to the Miller-index answer kind
(``benchmint.tasks.hkl``); this module only reads the rotations off a structure.
"""

from __future__ import annotations

import numpy as np


def laue_rotations(structure, symprec: float = 0.01, analyzer=None) -> list[list[int]]:
    """Rotation matrices of the structure's Laue group in its own fractional basis, as sorted 9-int rows.

    ``analyzer``: a SpacegroupAnalyzer of this structure already at hand (its symprec is used).
    """
    if analyzer is None:
        from pymatgen.symmetry.analyzer import SpacegroupAnalyzer

        analyzer = SpacegroupAnalyzer(structure, symprec=symprec)
    # The rotations of the analyzer's (cached) spglib dataset: get_symmetry_operations would run spglib a
    # second time and rationalise every translation, for the same rotations (equal on all 598 real CIFs of
    # the corpus that spglib analyses; tests/test_xrd_symmetry.py compares the two).
    rots = {tuple(int(v) for v in np.asarray(r).ravel()) for r in analyzer.get_symmetry_dataset().rotations}
    rots |= {tuple(-v for v in r) for r in rots}  # Friedel pairs: the Laue group contains the inversion
    return [list(r) for r in sorted(rots)]
