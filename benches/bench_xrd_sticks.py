"""XRD sticks (structure -> 2θ, intensity, hkl families, multiplicities, d): compiled path vs pymatgen.

Each bench checks its result against the other side, computed apart from the timed call:
the compiled benches against pymatgen's XRDCalculator called here, the pymatgen benches
(sticks_ref, the reference form) against the compiled sticks.

Run: .venv/bin/python -m pytest benches/bench_xrd_sticks.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest
from pymatgen.analysis.diffraction.xrd import XRDCalculator
from pymatgen.core import Lattice, Structure

from benchmint.xrd import sticks_ref
from benchmint.xrd.sticks import compute_sticks, compute_sticks_many

from conftest import best_time

N_AFLOW = 40


def pymatgen_pattern(structure):
    """XRDCalculator itself, as CrystalXRD-Bench calls it: (2θ, intensity, d, families)."""
    pat = XRDCalculator(wavelength="CuKa1", symprec=0).get_pattern(structure, scaled=True, two_theta_range=(2, 90))
    return np.asarray(pat.x), np.asarray(pat.y), np.asarray(pat.d_hkls), pat.hkls


def same(got, want) -> None:
    """Sticks equal the pymatgen pattern ``want``: positions, intensities, d, families in order."""
    x, y, d, families = want
    assert len(got) == len(x)
    np.testing.assert_allclose(got.two_theta, x, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.intensity, y, rtol=1e-6, atol=0)
    np.testing.assert_allclose(got.d_spacing, d, rtol=1e-9, atol=0)
    assert got.families() == families


def as_pattern(sticks):
    return sticks.two_theta, sticks.intensity, sticks.d_spacing, sticks.families()


@pytest.fixture(scope="module")
def aflow(forced_impl):
    """Structures, pymatgen's patterns and the compiled sticks (BENCHMINT_IMPL=compiled)."""
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY

    idx = sorted(random.Random(20261121).sample(range(len(AFLOW_PROTOTYPE_LIBRARY)), N_AFLOW))
    structures = [AFLOW_PROTOTYPE_LIBRARY[i]["snl"].structure for i in idx]
    with forced_impl("compiled"):
        compiled = [as_pattern(compute_sticks(s)) for s in structures]
    return structures, [pymatgen_pattern(s) for s in structures], compiled


@pytest.fixture(scope="module")
def big(forced_impl):
    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    zro2 = Structure.from_spacegroup("P2_1/c", Lattice.monoclinic(5.150, 5.212, 5.317, 99.23), ["Zr", "O", "O"],
                                     [[0.2754, 0.0395, 0.2083], [0.0700, 0.3317, 0.3447],
                                      [0.4496, 0.7569, 0.4792]])
    cells = {"NaCl-3x3x3": nacl * (3, 3, 3), "ZrO2-3x3x2": zro2 * (3, 3, 2)}
    with forced_impl("compiled"):
        return {k: (s, pymatgen_pattern(s), as_pattern(compute_sticks(s))) for k, s in cells.items()}


@pytest.fixture
def compiled(forced_impl):
    with forced_impl("compiled"):
        yield


def test_aflow_compiled(benchmark, aflow, compiled):
    structures, want, _ = aflow
    benchmark.group = f"xrd-sticks-aflow-{N_AFLOW}"
    got = benchmark(lambda: [compute_sticks(s) for s in structures])
    for g, w in zip(got, want):
        same(g, w)
    # per-structure medians (best of 5 each), for the README
    comp = [best_time(compute_sticks, s) for s in structures]
    ref = [best_time(sticks_ref.sticks, s, 3) for s in structures]
    benchmark.extra_info["median_ms_compiled"] = 1e3 * statistics.median(comp)
    benchmark.extra_info["median_ms_pymatgen"] = 1e3 * statistics.median(ref)
    benchmark.extra_info["median_speedup"] = statistics.median(r / c for r, c in zip(ref, comp))


def test_aflow_compiled_batch(benchmark, aflow, compiled):
    structures, want, _ = aflow
    benchmark.group = f"xrd-sticks-aflow-{N_AFLOW}"
    got = benchmark(compute_sticks_many, structures, -1)
    for g, w in zip(got, want):
        same(g, w)


def test_aflow_pymatgen(benchmark, aflow):
    structures, _, compiled_sticks = aflow
    benchmark.group = f"xrd-sticks-aflow-{N_AFLOW}"
    got = benchmark.pedantic(lambda: [sticks_ref.sticks(s) for s in structures], rounds=5)
    for g, w in zip(got, compiled_sticks):
        same(g, w)


@pytest.mark.parametrize("name", ["NaCl-3x3x3", "ZrO2-3x3x2"])
@pytest.mark.parametrize("workers", [1, -1])
def test_big_cell_compiled(benchmark, big, name, workers, compiled):
    s, want, _ = big[name]
    assert len(s) >= 200
    benchmark.group = f"xrd-sticks-{name}-{len(s)}-atoms"
    same(benchmark(compute_sticks, s, workers=workers), want)


@pytest.mark.parametrize("name", ["NaCl-3x3x3", "ZrO2-3x3x2"])
def test_big_cell_pymatgen(benchmark, big, name):
    s, _, compiled_sticks = big[name]
    benchmark.group = f"xrd-sticks-{name}-{len(s)}-atoms"
    same(benchmark.pedantic(sticks_ref.sticks, args=(s,), rounds=3), compiled_sticks)
