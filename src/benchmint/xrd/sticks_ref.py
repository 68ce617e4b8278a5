"""Reference of ``benchmint.xrd.sticks``: pymatgen's own XRDCalculator(symprec=0).get_pattern(scaled=True)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pymatgen.core import Structure

    from benchmint.xrd.cifread import CellSites
    from benchmint.xrd.sticks import Sticks

CU_KA1 = 1.54056
DEFAULT_RANGE = (2.0, 90.0)


def sticks(structure: Structure | CellSites, two_theta_range: Sequence[float] | None = DEFAULT_RANGE,
           wavelength: float | str = CU_KA1, debye_waller_factors: dict[str, float] | None = None) -> Sticks:
    """The sticks pymatgen computes, as ``Sticks``; arguments as ``compute_sticks`` takes and checks them.

    ``structure``: a pymatgen Structure or ``benchmint.xrd.cifread.CellSites``
    (turned into its Structure first).
    """
    from pymatgen.analysis.diffraction.xrd import XRDCalculator

    from benchmint.xrd.cifread import CellSites
    from benchmint.xrd.sticks import Sticks, check_range, check_wavelength

    if isinstance(structure, CellSites):  # pymatgen needs its Structure
        structure = structure.structure()
    calc = XRDCalculator(wavelength=check_wavelength(wavelength), symprec=0,
                         debye_waller_factors=debye_waller_factors)
    pat = calc.get_pattern(structure, scaled=True, two_theta_range=check_range(two_theta_range))
    hkls = [[tuple(int(v) for v in fam["hkl"]) for fam in peak] for peak in pat.hkls]
    mults = [[int(fam["multiplicity"]) for fam in peak] for peak in pat.hkls]
    return Sticks(np.asarray(pat.x, dtype=np.float64), np.asarray(pat.y, dtype=np.float64),
                  np.asarray(pat.d_hkls, dtype=np.float64), hkls, mults)
