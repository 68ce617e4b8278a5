"""CIF text or structure -> XRD item in one call, and the compiled closeness kernels of the fast CIF route."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from benchmint import _core
from benchmint.xrd import cifread_ref, profile_ref, sticks_ref
from benchmint.xrd.cifread import MARGIN, SITE_TOL, CellSites, read_sites
from benchmint.xrd.profile import ProfileParams
from benchmint.xrd.simulate import simulate, simulate_many
from benchmint.xrd.sticks import compute_sticks

# Coordinates that hit the kernels' edges: halves (rint rounds them to even),
# pairs at the tolerance and within the ambiguity margin of it, huge values, NaN and infinities.
EDGE = [0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, SITE_TOL, -SITE_TOL, SITE_TOL + MARGIN, SITE_TOL - 2 * MARGIN,
        0.5 + SITE_TOL, 1e17, -1e17, 2.0**52, 2.0**52 + 1, np.nan, np.inf, -np.inf]
coords = st.one_of(st.floats(-3, 3), st.sampled_from(EDGE), st.integers(-3, 3).map(lambda k: k + 1e-4))


def positions(max_n: int = 12):
    return st.integers(0, max_n).flatmap(lambda n: arrays(np.float64, (n, 3), elements=coords))


@settings(max_examples=300, deadline=None)
@given(positions(), positions())
def test_pbc_close_equals_reference(a, b):
    # Kernel-level: the closeness kernels have no public function of their own (the fast CIF route calls them).
    close, ambiguous = _core.cifread.pbc_close(a, b, SITE_TOL, MARGIN)
    want, want_ambiguous = cifread_ref.pbc_close(a, b, SITE_TOL, MARGIN)
    np.testing.assert_array_equal(close, want)
    assert ambiguous == want_ambiguous


@settings(max_examples=300, deadline=None)
@given(positions(16))
def test_pbc_groups_equals_reference(a):
    root, consistent, ambiguous = _core.cifread.pbc_groups(a, SITE_TOL, MARGIN)
    want_root, want_consistent, want_ambiguous = cifread_ref.pbc_groups(a, SITE_TOL, MARGIN)
    assert (consistent, ambiguous) == (want_consistent, want_ambiguous)
    np.testing.assert_array_equal(root, want_root)


def test_pbc_groups_worked_example():
    # 0.1 and 1.1 are one position modulo 1; 0.30005 is 5e-5 from 0.3; 0.7 stands alone.
    a = np.array([[0.1, 0, 0], [0.3, 0, 0], [1.1, 0, 0], [0.7, 0, 0], [0.30005, 0, 0]])
    chain = np.array([[0.0, 0, 0], [0.00006, 0, 0], [0.00012, 0, 0]])
    for form in (_core.cifread, cifread_ref):
        root, consistent, ambiguous = form.pbc_groups(a, SITE_TOL, MARGIN)
        assert root.tolist() == [0, 1, 0, 3, 1] and consistent and not ambiguous
        # a chain 0 ~ 1 ~ 2 with 0 !~ 2 is no equivalence
        assert form.pbc_groups(chain, SITE_TOL, MARGIN)[1] is False


def test_pbc_kernels_check_shapes():
    for form in (_core.cifread, cifread_ref):
        with pytest.raises(ValueError, match=r"^a must have shape \(n, 3\)"):
            form.pbc_close(np.zeros((2, 2)), np.zeros((2, 3)), SITE_TOL, MARGIN)
        with pytest.raises(ValueError, match=r"^b must have shape \(n, 3\)"):
            form.pbc_close(np.zeros((2, 3)), np.zeros(3), SITE_TOL, MARGIN)
        with pytest.raises(ValueError, match=r"^positions must have shape \(n, 3\)"):
            form.pbc_groups(np.zeros(3), SITE_TOL, MARGIN)


@pytest.fixture(scope="module")
def cif_texts():
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    return [str(CifWriter(AFLOW_PROTOTYPE_LIBRARY[i]["snl"].structure, symprec=0.01)) for i in range(0, 288, 24)]


def test_read_sites_match_their_structure(cif_texts, forced_impl, dispatch_counts):
    with forced_impl("compiled"):
        for text in cif_texts:
            sites, route = read_sites(text)
            assert isinstance(sites, CellSites) and route == "gemmi"
            structure = sites.structure()
            assert sites.structure() is structure  # built once
            assert [s.species for s in structure] == sites.species
            np.testing.assert_array_equal(structure.frac_coords, sites.frac_coords)
            a, b = compute_sticks(sites), compute_sticks(structure)
            np.testing.assert_array_equal(a.two_theta, b.two_theta)
            np.testing.assert_array_equal(a.intensity, b.intensity)
            assert a.hkls == b.hkls and a.multiplicities == b.multiplicities
        assert dispatch_counts("cifread") == {"compiled": len(cif_texts), "reference": 0, "fallback": 0}


def test_reference_reads_with_pymatgen(cif_texts, forced_impl, dispatch_counts):
    # BENCHMINT_IMPL=reference: CifParser reads every CIF and pymatgen computes the sticks; both equal
    # what the compiled route gives on the same text.
    for text in cif_texts:
        with forced_impl("compiled"):
            fast_sites, fast_route = read_sites(text)
            fast_sticks = compute_sticks(fast_sites)
        with forced_impl("reference"):
            dispatch_counts.reset()
            sites, route = read_sites(text)
            sticks = compute_sticks(sites)
            assert dispatch_counts("cifread") == {"compiled": 0, "reference": 1, "fallback": 0}
            assert dispatch_counts("sticks") == {"compiled": 0, "reference": 1, "fallback": 0}
        assert (fast_route, route) == ("gemmi", "pymatgen")
        assert sites.structure() == fast_sites.structure()
        assert sticks.hkls == fast_sticks.hkls and sticks.multiplicities == fast_sticks.multiplicities
        np.testing.assert_allclose(sticks.intensity, fast_sticks.intensity, rtol=1e-9, atol=0)


def _reference_item(structure, params: ProfileParams):
    s = sticks_ref.sticks(structure)
    curve, star, _, truth = profile_ref.broaden(s.two_theta, s.intensity, params)
    return float(params.grid()[star]), sorted({h for i in truth.tolist() for h in s.hkls[i] if any(h)})


def test_simulate_cif_text_and_structure(cif_texts):
    params = ProfileParams()
    for text in cif_texts:
        sim = simulate(text)
        assert sim.route == "gemmi"
        structure = sim.structure()
        assert (sim.pattern.two_theta_star, sim.pattern.ground_truth) == _reference_item(structure, params)
        again = simulate(structure)
        assert again.route == "structure" and again.structure() is structure
        np.testing.assert_array_equal(again.pattern.curve, sim.pattern.curve)
        assert sim.pattern.grid is again.pattern.grid  # one shared read-only grid
        assert not sim.pattern.grid.flags.writeable
        assert len(sim.sticks.hkls) == len(sim.sticks) == sim.pattern.n_sticks
    assert "ground_truth=" in repr(sim)


def test_simulate_many_order_workers_and_errors(cif_texts):
    from pymatgen.core import Lattice, Structure

    one = [s.pattern.ground_truth for s in simulate_many(cif_texts, workers=1)]
    assert [s.pattern.ground_truth for s in simulate_many(cif_texts, workers=2)] == one
    empty = Structure(Lattice.cubic(4), [], [])
    with pytest.raises(ValueError, match=r"source 1: ValueError: the structure has no sites"):
        simulate_many([cif_texts[0], empty, cif_texts[1]], workers=2)
    with pytest.raises(ValueError, match="workers"):
        simulate_many(cif_texts, workers=0)
