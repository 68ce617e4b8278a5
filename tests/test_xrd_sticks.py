"""XRD sticks: compiled path vs pymatgen's XRDCalculator(symprec=0).get_pattern(scaled=True) (sticks_ref).

Positions within 1e-6°, intensities within 1e-6 relative, d within 1e-9 relative,
identical hkl family labels (order included), multiplicities and stick counts.
BENCHMINT_FULL_AFLOW=1 runs all 288 AFLOW prototypes instead of a sample of 40.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymatgen.analysis.diffraction.xrd import XRDCalculator
from pymatgen.core import Lattice, Species, Structure

from benchmint.xrd import sticks_ref
from benchmint.xrd.sticks import Sticks, compute_sticks, compute_sticks_many


def assert_same(got: Sticks, want: Sticks) -> None:
    assert len(got) == len(want), (len(got), len(want))
    assert len(got.hkls) == len(got.multiplicities) == len(got.d_spacing) == len(got.intensity) == len(got)
    np.testing.assert_allclose(got.two_theta, want.two_theta, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.intensity, want.intensity, rtol=1e-6, atol=0)
    np.testing.assert_allclose(got.d_spacing, want.d_spacing, rtol=1e-9, atol=0)
    assert got.hkls == want.hkls
    assert got.multiplicities == want.multiplicities


@pytest.fixture(scope="module")
def check(compare_forms):
    """check(structure, workers=1, **kw): compute_sticks (compiled) equals pymatgen's sticks; returns the compiled sticks."""
    def run(structure: Structure, workers: int = 1, **kw) -> Sticks:
        ref, got = compare_forms("sticks", lambda: sticks_ref.sticks(structure, **kw),
                                 lambda: compute_sticks(structure, workers=workers, **kw), assert_same)
        assert got[0] == "ok" and len(got[1]) > 0
        return got[1]

    return run


def sg(symbol, lattice, species, coords):
    return Structure.from_spacegroup(symbol, lattice, species, coords)


SIMPLE = {
    # cubic
    "NaCl": lambda: sg("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]]),
    "Si": lambda: sg("Fd-3m", Lattice.cubic(5.431), ["Si"], [[0, 0, 0]]),
    "Cu": lambda: sg("Fm-3m", Lattice.cubic(3.615), ["Cu"], [[0, 0, 0]]),
    "CsCl": lambda: sg("Pm-3m", Lattice.cubic(4.12), ["Cs", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]]),
    # tetragonal
    "TiO2-rutile": lambda: sg("P4_2/mnm", Lattice.tetragonal(4.594, 2.959), ["Ti", "O"],
                              [[0, 0, 0], [0.3048, 0.3048, 0]]),
    "TiO2-anatase": lambda: sg("I4_1/amd", Lattice.tetragonal(3.785, 9.514), ["Ti", "O"],
                               [[0, 0.75, 0.125], [0, 0.75, 0.3333]]),
    # orthorhombic
    "CaTiO3-Pnma": lambda: sg("Pnma", Lattice.orthorhombic(5.53, 7.80, 5.45), ["Ca", "Ti", "O", "O"],
                              [[0.036, 0.25, 0.99], [0, 0, 0.5], [0.48, 0.25, 0.09], [0.29, 0.04, 0.71]]),
    "S-Fddd-like": lambda: sg("Cmcm", Lattice.orthorhombic(3.3, 10.5, 4.4), ["Ga", "Se"],
                              [[0, 0.12, 0.25], [0, 0.41, 0.25]]),
    # hexagonal (4-index labels)
    "Mg": lambda: sg("P6_3/mmc", Lattice.hexagonal(3.209, 5.211), ["Mg"], [[1 / 3, 2 / 3, 0.25]]),
    "ZnO-wurtzite": lambda: sg("P6_3mc", Lattice.hexagonal(3.250, 5.207), ["Zn", "O"],
                               [[1 / 3, 2 / 3, 0], [1 / 3, 2 / 3, 0.3825]]),
    # trigonal: hexagonal setting and rhombohedral cell
    "Al2O3-corundum": lambda: sg("R-3c", Lattice.hexagonal(4.759, 12.991), ["Al", "O"],
                                 [[0, 0, 0.35216], [0.30624, 0, 0.25]]),
    "Bi-hex": lambda: sg("R-3m", Lattice.hexagonal(4.546, 11.862), ["Bi"], [[0, 0, 0.2339]]),
    "Bi-rhombohedral": lambda: Structure(Lattice.rhombohedral(4.746, 57.23), ["Bi", "Bi"],
                                         [[0.2339, 0.2339, 0.2339], [-0.2339, -0.2339, -0.2339]]),
    # monoclinic
    "ZrO2-baddeleyite": lambda: sg("P2_1/c", Lattice.monoclinic(5.150, 5.212, 5.317, 99.23), ["Zr", "O", "O"],
                                   [[0.2754, 0.0395, 0.2083], [0.0700, 0.3317, 0.3447], [0.4496, 0.7569, 0.4792]]),
    # triclinic
    "triclinic-P-1": lambda: sg("P-1", Lattice.from_parameters(5.1, 6.3, 7.2, 81.0, 97.0, 103.0), ["Si", "O", "Ca"],
                                [[0.1, 0.2, 0.3], [0.4, 0.15, 0.8], [0.7, 0.6, 0.05]]),
    "triclinic-P1": lambda: Structure(Lattice.from_parameters(4.3, 5.9, 6.6, 70.0, 100.0, 115.0), ["K", "Br", "O"],
                                      [[0.0, 0.0, 0.0], [0.31, 0.62, 0.17], [0.77, 0.13, 0.58]]),
    # partial occupancy and oxidation states
    "Cu0.5Au0.5-fcc": lambda: sg("Fm-3m", Lattice.cubic(3.82), [{"Cu": 0.5, "Au": 0.5}], [[0, 0, 0]]),
    "Fe0.9O-vacancies": lambda: sg("Fm-3m", Lattice.cubic(4.30), [{"Fe": 0.9}, "O"], [[0, 0, 0], [0.5, 0.5, 0.5]]),
    "FeO-oxidation-states": lambda: sg("Fm-3m", Lattice.cubic(4.33), [Species("Fe", 2), Species("O", -2)],
                                       [[0, 0, 0], [0.5, 0.5, 0.5]]),
    "spinel-mixed": lambda: sg("Fd-3m", Lattice.cubic(8.08), [{"Mg": 0.8, "Al": 0.2}, {"Al": 0.9, "Mg": 0.1}, "O"],
                               [[0.125, 0.125, 0.125], [0.5, 0.5, 0.5], [0.263, 0.263, 0.263]]),
}


@pytest.mark.parametrize("name", sorted(SIMPLE))
def test_simple_structures(check, name):
    check(SIMPLE[name]())


def test_hexagonal_labels_have_four_indices(check):
    got = check(SIMPLE["Mg"]())
    assert all(len(h) == 4 and h[2] == -h[0] - h[1] for peak in got.hkls for h in peak)
    cubic = check(SIMPLE["NaCl"]())
    assert all(len(h) == 3 for peak in cubic.hkls for h in peak)


def test_nacl_known_pattern(check):
    got = check(SIMPLE["NaCl"]())
    assert got.intensity.max() == 100.0
    assert got.hkls[:3] == [[(1, 1, 1)], [(2, 0, 0)], [(2, 2, 0)]]
    assert got.multiplicities[:3] == [[8], [6], [12]]
    assert np.all(np.diff(got.two_theta) > 0)


@pytest.mark.parametrize("name, scale", [("NaCl", (3, 3, 3)), ("TiO2-rutile", (3, 3, 4)),
                                         ("ZrO2-baddeleyite", (3, 3, 2))])
def test_supercells(check, name, scale):
    s = SIMPLE[name]() * scale
    assert len(s) >= 200
    check(s)
    # Threads share the structure-factor sums (the kernel starts them from about 1e5
    # reflection x atom terms; these cells have 3e5 and more): same answer.
    check(s, workers=2)


def test_thousand_atom_cell(check):
    """Si 5x5x5 (1000 atoms), every atom displaced: hundreds of superlattice peaks, pymatgen's sticks exactly."""
    s = SIMPLE["Si"]() * (5, 5, 5)
    s.perturb(0.3, min_distance=0.05, seed=3)
    assert len(s) == 1000
    got = check(s)
    assert len(got) > 300


def test_perturbed_supercell_breaks_absences(check):
    s = SIMPLE["Si"]() * (2, 2, 2)
    s.perturb(0.05, min_distance=0.01, seed=11)  # seeded: the same cell whatever ran before
    assert len(s) >= 64
    check(s)


@pytest.mark.parametrize("two_theta_range", [(10, 120), (0, 90), (2, 179), None])
def test_other_ranges(check, two_theta_range):
    # None: the whole limiting sphere (radius 2/λ >= 1, the other branch of the sphere search)
    for name in ("Al2O3-corundum", "ZrO2-baddeleyite", "ZnO-wurtzite"):
        check(SIMPLE[name](), two_theta_range=two_theta_range)


@pytest.mark.parametrize("wavelength", ["MoKa1", 0.70930, "CrKa"])
def test_other_wavelengths(check, wavelength):
    for name in ("CaTiO3-Pnma", "Bi-rhombohedral"):
        check(SIMPLE[name](), wavelength=wavelength)


def test_default_is_cuka1_2_90():
    s = SIMPLE["TiO2-anatase"]()
    pat = XRDCalculator(wavelength="CuKa1", symprec=0).get_pattern(s, scaled=True, two_theta_range=(2, 90))
    got = compute_sticks(s)
    np.testing.assert_allclose(got.two_theta, pat.x, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.intensity, pat.y, rtol=1e-6, atol=0)
    assert got.families() == pat.hkls


def test_debye_waller_per_element(check):
    s = SIMPLE["CaTiO3-Pnma"]()
    check(s, debye_waller_factors={"Ca": 0.8, "O": 1.5})


def test_anisotropic_debye_waller_from_site_properties(check):
    s = SIMPLE["ZrO2-baddeleyite"]()
    n = len(s)
    rng = np.random.default_rng(5)
    diag = rng.uniform(0.005, 0.02, (n, 3))
    off = rng.uniform(-0.002, 0.002, (n, 3))
    props = {"U11_cif": diag[:, 0], "U22_cif": diag[:, 1], "U33_cif": diag[:, 2],
             "U23_cif": off[:, 0], "U13_cif": off[:, 1], "U12_cif": off[:, 2]}
    for key, values in props.items():
        s.add_site_property(key, [float(v) for v in values])
    check(s)
    with pytest.raises(ValueError, match="debye_waller_factors"):
        compute_sticks(s, debye_waller_factors={"Zr": 1.0})


def _aflow_structures():
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY

    idx = list(range(len(AFLOW_PROTOTYPE_LIBRARY)))
    if os.environ.get("BENCHMINT_FULL_AFLOW") != "1":
        idx = sorted(random.Random(20261121).sample(idx, 40))
    return [(i, AFLOW_PROTOTYPE_LIBRARY[i]) for i in idx]


@pytest.mark.parametrize("i, entry", _aflow_structures(), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_aflow_prototypes(check, i, entry):
    check(entry["snl"].structure)


def test_batch_equals_single():
    structures = [SIMPLE[n]() for n in sorted(SIMPLE)]
    singles = [compute_sticks(s) for s in structures]
    for workers in (1, 2, -1):
        batch = compute_sticks_many(structures, workers=workers)
        assert len(batch) == len(structures)
        for got, want in zip(batch, singles):
            assert_same(got, want)
            np.testing.assert_array_equal(got.intensity, want.intensity)
    assert compute_sticks_many([], workers=2) == []
    with pytest.raises(ValueError, match="workers"):
        compute_sticks_many(structures, workers=0)


def test_implementation_switch(impl, dispatch_counts):
    # Under either implementation, compute_sticks gives what XRDCalculator gives when called here.
    s = SIMPLE["ZnO-wurtzite"]()
    pat = XRDCalculator(wavelength="CuKa1", symprec=0).get_pattern(s, scaled=True, two_theta_range=(2, 90))
    got = compute_sticks(s)
    np.testing.assert_allclose(got.two_theta, pat.x, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.intensity, pat.y, rtol=1e-6, atol=0)
    assert got.families() == pat.hkls
    assert dispatch_counts("sticks") == {"compiled": int(impl == "compiled"), "reference": int(impl == "reference"),
                                         "fallback": 0}


def test_missing_scattering_factors(impl):
    s = Structure(Lattice.cubic(4.0), ["Na", "Es"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match="no scattering coefficients for Es"):
        compute_sticks(s)
    with pytest.raises(ValueError, match="no scattering coefficients for Es"):
        compute_sticks_many([SIMPLE["Cu"](), s], workers=2)
    # pymatgen raises the same type
    with pytest.raises(ValueError, match="no scattering coefficients for Es"):
        XRDCalculator(wavelength="CuKa1", symprec=0).get_pattern(s, two_theta_range=(2, 90))


def test_bad_arguments():
    s = SIMPLE["Cu"]()
    with pytest.raises(ValueError, match="two_theta_range"):
        compute_sticks(s, two_theta_range=(90, 2))
    with pytest.raises(ValueError, match="wavelength"):
        compute_sticks(s, wavelength=-1.0)
    with pytest.raises(ValueError, match="radiation"):
        compute_sticks(s, wavelength="CuKz")


ELEMENTS = ["H", "Li", "C", "O", "Na", "Mg", "Si", "S", "K", "Ti", "Fe", "Cu", "Zn", "Sr", "Ag", "Ba", "W", "Pb", "U"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    abc=st.tuples(*[st.floats(2.5, 9.0)] * 3),
    angles=st.tuples(*[st.floats(60.0, 120.0)] * 3),
    atoms=st.lists(st.tuples(st.sampled_from(ELEMENTS), st.floats(0.3, 1.0),
                             st.tuples(*[st.floats(0.0, 1.0, exclude_max=True)] * 3)), min_size=1, max_size=8),
)
def test_random_cells(check, abc, angles, atoms):
    try:
        lattice = Lattice.from_parameters(*abc, *angles)
    except ValueError:
        return
    if not lattice.volume > 0.2 * abc[0] * abc[1] * abc[2]:
        return  # nearly degenerate cells
    s = Structure(lattice, [{el: occ} for el, occ, _ in atoms], [xyz for _, _, xyz in atoms])
    check(s)


def test_constants_are_pymatgens():
    """The tolerances and coefficient table the fast path keeps, against pymatgen's own."""
    from pymatgen.analysis.diffraction.core import AbstractDiffractionPatternCalculator
    from pymatgen.analysis.diffraction.xrd import ATOMIC_SCATTERING_PARAMS

    from benchmint.xrd import sticks

    assert sticks.TWO_THETA_TOL == AbstractDiffractionPatternCalculator.TWO_THETA_TOL
    assert sticks.SCALED_INTENSITY_TOL == AbstractDiffractionPatternCalculator.SCALED_INTENSITY_TOL
    assert sticks.atomic_scattering_params() == ATOMIC_SCATTERING_PARAMS


def test_the_fast_cif_path_does_not_import_pymatgens_diffraction_module(tmp_path):
    """Reading a CIF and simulating its item imports neither pymatgen's diffraction modules nor what they pull
    in (pyplot, scipy.stats): ~0.5 s less in every worker's start."""
    import subprocess
    import sys

    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    path = tmp_path / "nacl.cif"
    CifWriter(Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"],
                                        [[0, 0, 0], [0.5, 0.5, 0.5]])).write_file(path)
    code = ("import sys; from benchmint.xrd.simulate import simulate; from benchmint.xrd.profile import ProfileParams;"
            "simulate(open(sys.argv[1]).read(), ProfileParams());"
            "from benchmint.xrd.cifread import read_structure; from benchmint.xrd.sticks import compute_sticks;"
            "compute_sticks(read_structure(open(sys.argv[1]).read())[0]);"  # the Structure route of xrd build
            "print(sorted(m for m in sys.modules if m in HEAVY))").replace(
                "HEAVY", repr({"pymatgen.analysis.diffraction.core", "pymatgen.analysis.diffraction.xrd",
                               "matplotlib.pyplot", "scipy.stats"}))
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
