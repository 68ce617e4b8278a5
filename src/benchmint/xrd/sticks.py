"""XRD sticks of a structure, as pymatgen's XRDCalculator gives them.

CrystalXRD-Bench takes Cu Kα1 sticks (1.54056 Å) with symprec 0, the structure
read with primitive=False (Miller indices in the CIF's cell), 2θ from 2 to 90°,
pymatgen's merging, intensity cutoff and hkl family labels.

``compute_sticks(structure)`` equals
``XRDCalculator(wavelength="CuKa1", symprec=0).get_pattern(structure, scaled=True,
two_theta_range=(2, 90))``: the reciprocal lattice points of the structure's own
cell inside the limiting sphere, atomic scattering factors from pymatgen's
``ATOMIC_SCATTERING_PARAMS`` (f = Z - 41.78214·s²·Σ a·exp(-b·s²)), site
occupancies, optional Debye-Waller factors (per element, or anisotropic from the
U11_cif ... U12_cif site properties), the Lorentz-polarisation factor, peaks
merged when round(2θ / TWO_THETA_TOL) agree (intensities summed in order of
increasing |g|; position and d of the first), peaks dropped when their scaled
intensity is not above SCALED_INTENSITY_TOL, the maximum scaled to 100, and the
hkl families of each peak as pymatgen's ``get_unique_families`` forms them
(members: permutations up to sign; representative: the largest member;
families in order of first appearance; 4-index (h, k, -h-k, l) labels on
hexagonal lattices).

The compiled path enumerates the reflections and computes 2·|F|²·LP in C++
(benchmint._core.sticks, GIL released). The reflection distances |g| are
evaluated exactly as pymatgen's neighbour search does, and θ, 2θ and the merge
bins are computed here with the same NumPy calls pymatgen makes, so the
discrete decisions (ordering, merging) are taken on identical floats.
Intensities agree to rounding (~1e-15 relative). ``BENCHMINT_IMPL=reference``
calls pymatgen itself (``sticks_ref.sticks``).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmint import _dispatch
from benchmint.parallel import thread_map
from benchmint.xrd import sticks_ref

if TYPE_CHECKING:
    from pymatgen.core import Structure

    from benchmint.xrd.cifread import CellSites

__all__ = ["CU_KA1", "Sticks", "compute_sticks", "compute_sticks_many"]

CU_KA1 = sticks_ref.CU_KA1
DEFAULT_RANGE = sticks_ref.DEFAULT_RANGE

HKLLabel = tuple[int, ...]


class Sticks:
    """Kα1 sticks of one structure, in increasing 2θ.

    two_theta (degrees), intensity (max = 100), d_spacing (Å): float64 arrays of
    equal length. hkls[i] lists the family representatives of stick i (3- or
    4-index tuples) and multiplicities[i] their multiplicities, in pymatgen's
    order. The compiled path keeps the families packed (``family_arrays()``:
    labels (F, 3|4), multiplicities (F,), offsets per stick (n + 1,)) and
    builds the tuple lists only when asked for.
    """

    __slots__ = ("two_theta", "intensity", "d_spacing", "_hkls", "_mults", "_packed")

    def __init__(self, two_theta: np.ndarray, intensity: np.ndarray, d_spacing: np.ndarray,
                 hkls: list[list[HKLLabel]] | None = None, multiplicities: list[list[int]] | None = None, *,
                 packed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        if (hkls is None) != (multiplicities is None) or (hkls is None) == (packed is None):
            raise ValueError("give either hkls and multiplicities, or packed families")
        self.two_theta, self.intensity, self.d_spacing = two_theta, intensity, d_spacing
        self._hkls, self._mults, self._packed = hkls, multiplicities, packed

    def __len__(self) -> int:
        return len(self.two_theta)

    def __repr__(self) -> str:
        return f"Sticks({len(self)} sticks, 2θ {self.two_theta[:1].tolist()}..{self.two_theta[-1:].tolist()})"

    @property
    def hkls(self) -> list[list[HKLLabel]]:
        if self._hkls is None:
            assert self._packed is not None  # the constructor takes either hkls or packed families
            labels, _, start = self._packed
            rows = [tuple(r) for r in labels.tolist()]
            bounds = start.tolist()
            self._hkls = [rows[bounds[i]:bounds[i + 1]] for i in range(len(self))]
        return self._hkls

    @property
    def multiplicities(self) -> list[list[int]]:
        if self._mults is None:
            assert self._packed is not None  # the constructor takes either multiplicities or packed families
            _, mults, start = self._packed
            m, bounds = mults.tolist(), start.tolist()
            self._mults = [m[bounds[i]:bounds[i + 1]] for i in range(len(self))]
        return self._mults

    def family_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(labels (F, k), multiplicities (F,), offsets (n + 1,)): stick i's families are rows offsets[i]:offsets[i+1]."""
        if self._packed is None:
            # without packed families the constructor was given both lists
            assert self._hkls is not None and self._mults is not None
            width = max((len(h) for peak in self._hkls for h in peak), default=3)
            if any(len(h) != width for peak in self._hkls for h in peak):
                raise ValueError("mixed 3- and 4-index labels cannot be packed")
            flat = [h for peak in self._hkls for h in peak]
            labels = np.array(flat, dtype=np.int64).reshape(len(flat), width)
            mults = np.array([m for peak in self._mults for m in peak], dtype=np.int64)
            start = np.concatenate(([0], np.cumsum([len(peak) for peak in self._hkls]))).astype(np.int64)
            self._packed = (labels, mults, start)
        return self._packed

    def families(self) -> list[list[dict[str, Any]]]:
        """The labels in pymatgen's DiffractionPattern.hkls form."""
        return [[{"hkl": h, "multiplicity": m} for h, m in zip(hs, ms)]
                for hs, ms in zip(self.hkls, self.multiplicities)]


def check_wavelength(wavelength: float | str) -> float:
    if isinstance(wavelength, str):
        from pymatgen.analysis.diffraction.xrd import WAVELENGTHS

        try:
            return WAVELENGTHS[wavelength]
        except KeyError:
            raise ValueError(f"unknown radiation {wavelength!r}; one of {', '.join(WAVELENGTHS)}") from None
    if isinstance(wavelength, bool) or not isinstance(wavelength, (int, float)):
        raise TypeError(f"wavelength must be a float or a radiation name, got {type(wavelength).__name__}")
    w = float(wavelength)
    if not (math.isfinite(w) and w > 0.0):
        raise ValueError(f"wavelength must be a finite positive number, got {wavelength!r}")
    return w


def check_range(two_theta_range: Sequence[float] | None) -> tuple[float, float] | None:
    if two_theta_range is None:
        return None
    lo, hi = (float(t) for t in two_theta_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo < hi <= 180.0):
        raise ValueError(f"two_theta_range must satisfy 0 <= low < high <= 180, got {two_theta_range!r}")
    return lo, hi


# pymatgen's peak-merging tolerances (AbstractDiffractionPatternCalculator: peaks closer than TWO_THETA_TOL in
# 2θ merge, those below SCALED_INTENSITY_TOL of the scaled maximum drop); tests/test_xrd_sticks.py pins them to
# pymatgen's. Kept here so the fast path does not import pymatgen.analysis.diffraction, whose import pulls in
# matplotlib.pyplot and scipy.stats (~0.5 s in every worker process).
TWO_THETA_TOL = 1e-5
SCALED_INTENSITY_TOL = 1e-3


@functools.cache
def atomic_scattering_params() -> dict[str, list]:
    """pymatgen's X-ray atomic scattering coefficients, read from the file its XRDCalculator reads."""
    from importlib.resources import files

    return json.loads((files("pymatgen.analysis.diffraction") / "atomic_scattering_params.json").read_text())


def _scattering_inputs(species: Sequence, frac_coords: np.ndarray, dw_factors: dict[str, float]):
    """Atoms grouped by element (fractional coordinates, occupancies, group index) and per-element
    Z, coefficient table and Debye-Waller factor. Raises pymatgen's ValueError for an element
    without scattering coefficients."""
    table = atomic_scattering_params()

    symbols: dict[str, int] = {}
    z: list[float] = []
    coeffs: list[Any] = []
    atoms: list[tuple[int, int, float]] = []  # (group, site index, occupancy)
    seen: dict[int, list[tuple[int, float]]] = {}  # per Composition object: its (group, occupancy) pairs
    for site_idx, comp in enumerate(species):
        pairs = seen.get(id(comp))
        if pairs is None:
            pairs = []
            for sp, occu in comp.items():
                sym = sp.symbol
                gi = symbols.get(sym)
                if gi is None:
                    try:
                        coeff = table[sym]
                    except KeyError:
                        raise ValueError(
                            f"Unable to calculate XRD pattern as there is no scattering coefficients for {sym}."
                        ) from None
                    gi = symbols[sym] = len(z)
                    z.append(float(sp.Z))
                    coeffs.append(coeff)
                pairs.append((gi, float(occu)))
            seen[id(comp)] = pairs
        atoms.extend((gi, site_idx, occu) for gi, occu in pairs)
    atoms.sort(key=lambda a: a[0])  # stable: sites keep their order within an element
    grp = np.array([a[0] for a in atoms], dtype=np.int64)
    idx = np.array([a[1] for a in atoms], dtype=np.int64)
    occ = np.array([a[2] for a in atoms], dtype=np.float64)
    frac = np.ascontiguousarray(np.asarray(frac_coords)[idx], dtype=np.float64) if len(idx) else np.zeros((0, 3))
    coeff_arr = np.asarray(coeffs, dtype=np.float64).reshape(len(z), -1, 2)
    dw = np.array([float(dw_factors.get(s, 0)) for s in symbols], dtype=np.float64)
    return frac, occ, grp, idx, np.asarray(z, dtype=np.float64), coeff_arr, dw


def _compiled_sticks(structure, two_theta_range: tuple[float, float] | None, wavelength: float,
                     debye_waller_factors: dict[str, float] | None, workers: int) -> Sticks:
    from benchmint.xrd.cifread import CellSites

    core = _dispatch.core().sticks
    dw_factors = debye_waller_factors or {}
    if isinstance(structure, CellSites):  # plain sites from a CIF: no anisotropic displacement properties
        species, frac_coords, ustar = structure.species, structure.frac_coords, None
    else:
        species, frac_coords, ustar = [site.species for site in structure], structure.frac_coords, None
        if "U11_cif" in structure.site_properties:  # what get_ustar looks for first; it needs the module
            from pymatgen.analysis.diffraction.core import get_ustar

            ustar = get_ustar(structure)
    if ustar is not None and dw_factors:
        raise ValueError(
            "Neither symprec nor debye_waller_factors can be used with the U11_cif, ..., U12_cif site properties."
        )
    frac, occ, grp, site_idx, z, coeff, dw = _scattering_inputs(species, frac_coords, dw_factors)
    if ustar is not None:
        ustar = np.ascontiguousarray(np.asarray(ustar, dtype=np.float64)[site_idx])

    lattice = structure.lattice
    is_hex = lattice.is_hexagonal()
    min_r: float
    max_r: float
    if two_theta_range is None:
        min_r, max_r = 0, 2 / wavelength
    else:
        min_r, max_r = (2 * math.sin(math.radians(t / 2)) / wavelength for t in two_theta_range)
    recip = np.ascontiguousarray(lattice.reciprocal_lattice_crystallographic.matrix, dtype=np.float64)
    hkl, g = core.reflections(recip, np.ascontiguousarray(lattice.matrix, dtype=np.float64), max_r, min_r)

    # The same NumPy expressions as pymatgen: the merge bins depend on these bits.
    theta = np.arcsin(np.clip(wavelength * g / 2, -1, 1))
    two_thetas = np.degrees(2 * theta)
    if len(g) == 0:
        raise ValueError(f"no reflection within two_theta_range {two_theta_range!r} for this structure")
    intens = core.intensities(hkl, g, theta, frac, occ, grp, z, coeff, dw, ustar, workers)
    keys = np.round(two_thetas / TWO_THETA_TOL).astype(np.int64)
    rep, y, labels, mults, start = core.merge_peaks(keys, intens, hkl, is_hex, SCALED_INTENSITY_TOL)
    return Sticks(two_thetas[rep].astype(np.float64), y, 1.0 / g[rep], packed=(labels, mults, start))


def compute_sticks(structure: Structure | CellSites, two_theta_range: Sequence[float] | None = DEFAULT_RANGE,
                   wavelength: float | str = CU_KA1, debye_waller_factors: dict[str, float] | None = None,
                   workers: int = 1) -> Sticks:
    """Sticks of ``structure`` (a pymatgen Structure or ``benchmint.xrd.cifread.CellSites``, taken as
    is: its own cell gives the Miller indices; read CIFs with primitive=False). Equal to pymatgen's
    XRDCalculator(wavelength, symprec=0).get_pattern(structure, scaled=True, two_theta_range).
    ``workers`` threads share the structure-factor sums (-1: all cores). Raises ValueError for an
    element without scattering coefficients."""
    wl = check_wavelength(wavelength)
    rng = check_range(two_theta_range)
    if _dispatch.use_reference("sticks"):
        return sticks_ref.sticks(structure, rng, wl, debye_waller_factors)
    return _compiled_sticks(structure, rng, wl, debye_waller_factors, workers)


def compute_sticks_many(structures: Iterable[Structure], workers: int = 1,
                        two_theta_range: Sequence[float] | None = DEFAULT_RANGE,
                        wavelength: float | str = CU_KA1,
                        debye_waller_factors: dict[str, float] | None = None) -> list[Sticks]:
    """compute_sticks for each structure, in order, over ``workers`` threads (-1: all cores).
    The compiled kernels release the GIL; the first failing structure's error is raised."""
    def one(s: Structure) -> Sticks:
        return compute_sticks(s, two_theta_range, wavelength, debye_waller_factors, workers=1)

    return thread_map(one, structures, workers)
