"""benchmint.xrd.cifread: the gemmi route gives pymatgen's CifParser structure (cifread_ref), site for site.

A CIF outside the gemmi route's conditions is read by CifParser itself: those
tests check that it was sent there (route and fallback count), not that
CifParser equals itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmint import _dispatch
from benchmint.xrd import cifread_ref
from benchmint.xrd.cifread import read_structure
from benchmint.xrd.sticks import compute_sticks


def species_of(site) -> dict[str, float]:
    return {str(sp): float(x) for sp, x in site.species.items()}


def assert_same_structure(got, want) -> None:
    np.testing.assert_allclose(got.lattice.parameters, want.lattice.parameters, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.lattice.matrix, want.lattice.matrix, rtol=0, atol=1e-9)
    assert len(got) == len(want)
    fa = np.array([s.frac_coords for s in got])
    fb = np.array([s.frac_coords for s in want])
    d = fa[:, None, :] - fb[None, :, :]
    d -= np.round(d)
    close = np.all(np.abs(d) < 1e-6, axis=2)
    # one-to-one: every site has exactly one partner at its position modulo 1
    assert np.all(close.sum(axis=0) == 1) and np.all(close.sum(axis=1) == 1)
    for i, j in zip(*np.nonzero(close)):
        assert species_of(got[i]) == species_of(want[j]), (i, j)


def assert_same_sticks(got, want) -> None:
    a, b = compute_sticks(got), compute_sticks(want)
    assert len(a) == len(b)
    np.testing.assert_allclose(a.two_theta, b.two_theta, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.intensity, b.intensity, rtol=1e-9, atol=0)
    assert a.hkls == b.hkls


@pytest.fixture(autouse=True, scope="module")
def _compiled(forced_impl):
    with forced_impl("compiled"):
        yield


def read_counted(text: str):
    """read_structure(text) and the dispatch counts of that one read."""
    _dispatch.reset_counts()
    got, used = read_structure(text)
    counts = _dispatch.counts("cifread")
    assert counts["compiled"] == 1 and counts["fallback"] == (used == "pymatgen"), counts
    return got, used


def check(text: str, route: str | None = "gemmi"):
    """The gemmi route's structure (and sticks) equal CifParser's; returns the route taken."""
    got, used = read_counted(text)
    if route is not None:
        assert used == route
    if used == "gemmi":
        want = cifread_ref.structure(text)
        assert_same_structure(got, want)
        assert_same_sticks(got, want)
    return used


def check_falls_back(text: str):
    """The CIF goes to CifParser (counted as a fallback); returns what it read."""
    got, used = read_counted(text)
    assert used == "pymatgen"
    return got


@pytest.fixture(scope="module")
def prototypes():
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY

    return [entry["snl"].structure for entry in AFLOW_PROTOTYPE_LIBRARY]


@pytest.mark.parametrize("symprec", [0.01, None])
def test_aflow_prototypes(prototypes, symprec):
    from pymatgen.io.cif import CifWriter

    assert len(prototypes) == 288
    routes = [check(str(CifWriter(s, symprec=symprec)), route=None) for s in prototypes]
    share = routes.count("gemmi") / len(routes)  # compared site for site on each of these
    print(f"symprec={symprec}: {routes.count('gemmi')}/{len(routes)} prototypes on the gemmi route")
    assert share >= 0.95


def round_atom_sites(text: str, decimals: int) -> str:
    """CifWriter's atom rows (symbol label multiplicity x y z occupancy) with coordinates rounded,
    as real CIFs print them: symmetry images of rounded special positions then differ by ~1e-4."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[0].isalpha():
            parts[3:6] = [f"{float(v):.{decimals}f}" for v in parts[3:6]]
            line = "  " + "  ".join(parts)
        out.append(line)
    return "\n".join(out) + "\n"


def test_aflow_prototypes_rounded_coordinates(prototypes):
    from pymatgen.io.cif import CifWriter

    routes = [check(round_atom_sites(str(CifWriter(s, symprec=0.01)), 4), route=None) for s in prototypes]
    print(f"4-decimal coordinates: {routes.count('gemmi')}/{len(routes)} prototypes on the gemmi route")
    assert routes.count("gemmi") >= 0.9 * len(routes)


def cif(cell, ops, rows, occupancy=True, extra="") -> str:
    """A small-molecule CIF: cell (a, b, c, α, β, γ), xyz operations, rows (label, symbol, x, y, z[, occ])."""
    a, b, c, al, be, ga = cell
    lines = ["data_test", f"_cell_length_a {a}", f"_cell_length_b {b}", f"_cell_length_c {c}",
             f"_cell_angle_alpha {al}", f"_cell_angle_beta {be}", f"_cell_angle_gamma {ga}", extra,
             "loop_", "_symmetry_equiv_pos_site_id", "_symmetry_equiv_pos_as_xyz"]
    lines += [f"{i + 1} '{op}'" for i, op in enumerate(ops)]
    lines += ["loop_", "_atom_site_label", "_atom_site_type_symbol", "_atom_site_fract_x", "_atom_site_fract_y",
              "_atom_site_fract_z"] + (["_atom_site_occupancy"] if occupancy else [])
    for r in rows:
        label, sym, x, y, z, *occ = r
        lines.append(f"{label} {sym} {x} {y} {z}" + (f" {occ[0] if occ else 1}" if occupancy else ""))
    return "\n".join(lines) + "\n"


def ops_of(hm: str) -> list[str]:
    import gemmi

    return [op.triplet() for op in gemmi.SpaceGroup(hm).operations()]


def test_partial_occupancy():
    text = cif((3.75,) * 3 + (90,) * 3, ops_of("P m -3 m"),
               [("Au1", "Au", 0, 0, 0, 0.7), ("Cu1", "Cu", 0, 0.5, 0.5, 0.9)])
    check(text)


def test_mixed_site():
    text = cif((3.6,) * 3 + (90,) * 3, ops_of("F m -3 m"),
               [("Fe1", "Fe", 0, 0, 0, 0.6), ("Ni1", "Ni", 0, 0, 0, 0.3), ("O1", "O", 0.5, 0.5, 0.5, 1)])
    got, route = read_counted(text)
    assert route == "gemmi" and len(got) == 8
    assert sorted(species_of(s) == {"Fe": 0.6, "Ni": 0.3} for s in got).count(True) == 4
    check(text)


def test_hexagonal_with_rounded_thirds():
    # 0.3333 / 0.6667 are snapped to 1/3, 2/3 by pymatgen; the gemmi route must do the same
    text = cif((3.21, 3.21, 5.21, 90, 90, 120), ops_of("P 63/m m c"),
               [("Mg1", "Mg", 0.3333, 0.6667, 0.25), ("Zn1", "Zn", 0, 0, 0, 0.5)])
    got, _ = read_structure(text)
    assert len(got) == 4
    check(text)


def test_rhombohedral_hexagonal_setting():
    text = cif((4.38, 4.38, 30.5, 90, 90, 120), ops_of("R -3 m:H"),
               [("Bi1", "Bi", 0, 0, 0.4, 1), ("Te1", "Te", 0, 0, 0, 1), ("Te2", "Te", 0, 0, 0.21, 1)])
    got, _ = read_structure(text)
    assert len(got) == 15
    check(text)


def test_rhombohedral_axes():
    text = cif((5.43, 5.43, 5.43, 55.3, 55.3, 55.3), ops_of("R -3 c:R"),
               [("Fe1", "Fe", 0.3553, 0.3553, 0.3553), ("O1", "O", 0.5528, -0.0528, 0.25)], occupancy=False)
    check(text)


def test_near_special_position_merged_like_pymatgen():
    # y written as 0.24999 on a mirror: the image at 0.25001 lies within 1e-4 and is merged into the first
    text = cif((5.0, 6.0, 7.0, 90, 90, 90), ops_of("P n m a"),
               [("Ca1", "Ca", 0.0136, 0.24999, 0.9483), ("O1", "O", 0.1, 0.2, 0.3)])
    check(text)


def test_p1_many_atoms():
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    check(str(CifWriter(nacl * (3, 3, 3))))


OXI_LOOP = "loop_\n_atom_type_symbol\n_atom_type_oxidation_number\n{rows}"


@pytest.mark.parametrize("rows, oxi, species", [
    # rock salt: four Fe2+ and four O2- in the conventional cell
    ([("Fe1", "Fe2+", 0, 0, 0), ("O1", "O2-", 0.5, 0.5, 0.5)], "Fe2+ 2\nO2- -2\n", ["Fe2+"] * 4 + ["O2-"] * 4),
    # a type symbol the loop does not name: the stripped symbol's number, else 0 (a Species all the same)
    ([("Fe1", "Fe3+", 0, 0, 0), ("O1", "O", 0.5, 0.5, 0.5)], "Fe3+ 3.0\n", ["Fe3+"] * 4 + ["O0+"] * 4),
    # mixed valence on two positions: two species, kept apart
    ([("Fe1", "Fe2+", 0, 0, 0), ("Fe2", "Fe3+", 0.5, 0.5, 0.5)], "Fe2+ 2\nFe3+ 3\n", ["Fe2+"] * 4 + ["Fe3+"] * 4),
    # a number pymatgen cannot read: no oxidation states at all
    ([("Fe1", "Fe2+", 0, 0, 0), ("O1", "O2-", 0.5, 0.5, 0.5)], "Fe2+ two\nO2- -2\n", ["Fe"] * 4 + ["O"] * 4),
])
def test_oxidation_number_loops_read_as_pymatgen_reads_them(rows, oxi, species):
    text = cif((4.3,) * 3 + (90,) * 3, ops_of("F m -3 m"), rows, extra=OXI_LOOP.format(rows=oxi))
    assert check(text) == "gemmi"
    assert sorted(str(site.specie) for site in read_structure(text)[0]) == species


def test_attached_hydrogens_are_read_but_change_nothing():
    rows = [("Na1", "Na", 0, 0, 0), ("Cl1", "Cl", 0.5, 0.5, 0.5)]
    text = cif((5.6,) * 3 + (90,) * 3, ops_of("F m -3 m"), rows)
    hydrogens = text.replace("_atom_site_occupancy\n", "_atom_site_occupancy\n_atom_site_attached_hydrogens\n")
    lines = hydrogens.splitlines()
    ok = "\n".join(line + " 0" if line.startswith(("Na1", "Cl1")) else line for line in lines) + "\n"
    assert check(ok) == "gemmi"
    # a value CifParser's str2float cannot read makes its parse fail: the fast route must not succeed instead
    bad = ok.replace("Na1 Na 0 0 0 1 0", "Na1 Na 0 0 0 1 ?")
    assert bad != ok
    with pytest.raises(Exception):  # noqa: B017 - what CifParser raises
        cifread_ref.structure(bad)
    with pytest.raises(Exception):  # noqa: B017
        read_structure(bad)


def test_oxidation_state_symbols_read_as_pymatgen_reads_them():
    # CifParser takes the element ("Fe2+" -> Fe, "O2-" -> O) and, without an oxidation-number loop, no charge.
    text = cif((4.3,) * 3 + (90,) * 3, ops_of("F m -3 m"), [("Fe1", "Fe2+", 0, 0, 0), ("O1", "O2-", 0.5, 0.5, 0.5)])
    assert check(text) == "gemmi"
    got, _ = read_structure(text)
    assert len(got) == 8 and {str(s) for s in got.species} == {"Fe", "O"}


NO_TYPE_SYMBOLS = ("data_x\n_cell_length_a 4\n_cell_length_b 4\n_cell_length_c 4\n_cell_angle_alpha 90\n"
                   "_cell_angle_beta 90\n_cell_angle_gamma 90\nloop_\n_symmetry_equiv_pos_as_xyz\n'x,y,z'\nloop_\n"
                   "_atom_site_label\n_atom_site_fract_x\n_atom_site_fract_y\n_atom_site_fract_z\n{rows}")


@pytest.mark.parametrize("rows, elements", [
    ("Cs1 0 0 0\nCl1 0.5 0.5 0.5\n", {"Cs", "Cl"}),
    ("CO1 0 0 0\nO2 0.5 0.5 0.5\n", {"Co", "O"}),  # pymatgen's reading, cobalt, kept: identical is the rule
    ("Fe 0 0 0\nS1a 0.5 0.5 0.5\nn3 0.25 0.25 0.25\n", {"Fe", "S", "N"}),
])
def test_labels_without_type_symbols_read_as_pymatgen_reads_them(rows, elements):
    text = NO_TYPE_SYMBOLS.format(rows=rows)
    assert check(text) == "gemmi"
    assert {str(s) for s in read_structure(text)[0].species} == elements


@pytest.mark.parametrize("text", [
    cif((4.0,) * 3 + (90,) * 3, ["x,y,z"], [("O1", "OH-", 0, 0, 0), ("Na1", "Na+", 0.5, 0.5, 0.5)]),  # hydroxide
    cif((4.0,) * 3 + (90,) * 3, ["x,y,z"], [("Ow1", "Ow", 0, 0, 0), ("Na1", "Na", 0.5, 0.5, 0.5)]),  # water O
    NO_TYPE_SYMBOLS.format(rows="O-H1 0 0 0\nNa1 0.5 0.5 0.5\n"),  # an implicit hydrogen
    NO_TYPE_SYMBOLS.format(rows="Xx1 0 0 0\nNa1 0.5 0.5 0.5\n"),  # no element: pymatgen skips or fails
    cif((4.0,) * 3 + (90,) * 3, ["x,y,z"], [("Na1", "Na", 0, 0, 0)]).replace("_atom_site_type_symbol",
                                                                            "_atom_site_Type_Symbol"),
])
def test_symbols_pymatgen_reads_otherwise_fall_back(text):
    try:
        want = cifread_ref.structure(text)
    except Exception as exc:  # noqa: BLE001 - then read_structure raises the same
        with pytest.raises(type(exc)):
            read_structure(text)
        return
    assert_same_structure(check_falls_back(text), want)


@pytest.mark.parametrize("text", [
    # only a space-group symbol, no operations
    ("data_x\n_cell_length_a 4\n_cell_length_b 4\n_cell_length_c 4\n_cell_angle_alpha 90\n_cell_angle_beta 90\n"
    "_cell_angle_gamma 90\n_symmetry_space_group_name_H-M 'P m -3 m'\nloop_\n_atom_site_label\n"
    "_atom_site_type_symbol\n_atom_site_fract_x\n_atom_site_fract_y\n_atom_site_fract_z\nCs1 Cs 0 0 0\n"
    "Cl1 Cl 0.5 0.5 0.5\n"),
    # occupancies over 1 on a shared position (pymatgen rescales within tolerance or raises)
    cif((4.0,) * 3 + (90,) * 3, ["x,y,z"], [("Fe1", "Fe", 0, 0, 0, 0.7), ("Ni1", "Ni", 0, 0, 0, 0.7)]),
])
def test_outside_conditions_fall_back(text):
    try:
        cifread_ref.structure(text)
    except Exception as exc:  # noqa: BLE001 - then read_structure raises the same
        with pytest.raises(type(exc)) as fast:
            read_structure(text)
        assert str(fast.value) == str(exc)
        return
    assert len(check_falls_back(text)) > 0


def test_reference_sends_every_cif_to_pymatgen(forced_impl, dispatch_counts):
    # A CIF the gemmi route reads: under BENCHMINT_IMPL=reference CifParser reads it instead.
    text = cif((3.75,) * 3 + (90,) * 3, ops_of("P m -3 m"), [("Au1", "Au", 0, 0, 0, 0.7), ("Cu1", "Cu", 0, 0.5, 0.5)])
    fast, route = read_structure(text)
    assert route == "gemmi"
    with forced_impl("reference"):
        dispatch_counts.reset()
        got, route = read_structure(text)
        assert route == "pymatgen"
        assert dispatch_counts("cifread") == {"compiled": 0, "reference": 1, "fallback": 0}
    assert_same_structure(fast, got)


def test_unreadable_cif_raises_like_pymatgen():
    for text in ("this is not a CIF at all\n",
                 ("data_x\n_cell_length_a 5\n_cell_length_b 5\n_cell_length_c 5\n"
                 "_cell_angle_alpha 90\n_cell_angle_beta 90\n_cell_angle_gamma 90\n")):
        with pytest.raises(Exception) as fast:
            read_structure(text)
        with pytest.raises(Exception) as ref:
            cifread_ref.structure(text)
        assert type(fast.value) is type(ref.value) and str(fast.value) == str(ref.value)
