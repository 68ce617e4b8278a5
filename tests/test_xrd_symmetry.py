"""Symmetry-aware HKL scoring: Laue-group folding and 3-/4-index equality."""

import json

import pytest
from pymatgen.core import Lattice, Structure
from pymatgen.io.cif import CifWriter

from benchmint.cli import main
from benchmint.tasks.hkl import check_rotations, fold
from benchmint.xrd.symmetry import laue_rotations

NACL = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
MG = Structure.from_spacegroup("P6_3/mmc", Lattice.hexagonal(3.21, 5.21), ["Mg"], [[1 / 3, 2 / 3, 1 / 4]])
TRICLINIC = Structure(Lattice.from_parameters(4.1, 5.3, 6.2, 81, 97, 103), ["Si", "O"], [[0, 0, 0], [0.3, 0.2, 0.4]])


def test_cubic_orbits():
    rot = laue_rotations(NACL)
    assert len(rot) == 48  # m-3m
    assert fold([(0, 2, 0)], rot) == fold([(0, 0, -2)], rot) == ((2, 0, 0),)
    assert fold([(-1, 1, -1), (1, 1, 1)], rot) == ((1, 1, 1),)
    assert fold([(2, 2, 0)], rot) != fold([(2, 0, 0)], rot)


def test_hexagonal_three_and_four_index():
    rot = laue_rotations(MG)
    assert len(rot) == 24  # 6/mmm
    same = [(1, 0, -1, 1), (0, 1, -1, 1), (0, 1, 1), (1, -1, 1), (1, 0, 1)]
    assert {fold([h], rot) for h in same} == {((1, 0, 1),)}
    assert fold([(0, 0, 0, 2)], rot) == fold([(0, 0, -2)], rot) != fold([(1, 0, -1, 0)], rot)


def test_triclinic_only_friedel_pairs():
    rot = laue_rotations(TRICLINIC)
    assert len(rot) == 2  # -1
    assert fold([(-1, 0, 2)], rot) == fold([(1, 0, -2)], rot)
    assert fold([(1, 0, 0)], rot) != fold([(0, 1, 0)], rot)


LOW_SYMMETRY = Structure.from_spacegroup("P2_1/c", Lattice.monoclinic(5.1, 6.2, 7.3, 101), ["Si", "O"],
                                         [[0.1, 0.2, 0.3], [0.37, 0.11, 0.29]])


@pytest.mark.parametrize("structure", [NACL, MG, TRICLINIC, LOW_SYMMETRY], ids=["Fm-3m", "P6_3/mmc", "P-1", "P2_1/c"])
def test_rotations_equal_those_of_pymatgens_symmetry_operations(structure):
    """The dataset's rotations against pymatgen's own route (spglib.get_symmetry through SymmOps)."""
    import numpy as np
    from pymatgen.symmetry.analyzer import SpacegroupAnalyzer

    ops = SpacegroupAnalyzer(structure, symprec=0.01).get_symmetry_operations(cartesian=False)
    rots = {tuple(int(v) for v in np.rint(op.rotation_matrix).astype(int).ravel()) for op in ops}
    rots |= {tuple(-v for v in r) for r in rots}
    assert laue_rotations(structure) == [list(r) for r in sorted(rots)]


@pytest.mark.parametrize("value", [None, [], [[1, 0, 0]], [[1, 0, 0, 0, 1, 0, 0, 0, True]], "x"])
def test_bad_rotations(value):
    with pytest.raises(ValueError, match="laue_rotations"):
        check_rotations(value, "x1")


def test_score_with_and_without_symmetry(tmp_path, capsys):
    cifs = tmp_path / "cifs"
    cifs.mkdir()
    CifWriter(NACL).write_file(cifs / "nacl.cif")
    CifWriter(MG).write_file(cifs / "mg.cif")
    assert main(["xrd", "build", str(cifs), "--out", str(tmp_path / "b"), "--per-db", "1", "--workers", "1"]) == 0
    items = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "b" / "items.jsonl").read_text().splitlines()}
    assert items["nacl"]["answer"] == [[2, 0, 0]] and items["mg"]["answer"] == [[1, 0, -1, 1]]
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"id": "nacl", "output": "Answer: (0 0 2)"}) + "\n"
                    + json.dumps({"id": "mg", "output": '{"max_peak_hkls": [[0, 1, 1]]}'}) + "\n")
    gold = str(tmp_path / "b" / "items.jsonl")
    assert main(["score", str(pred), "--gold", gold, "--task", "hkl", "--out", str(tmp_path / "s"), "--quiet"]) == 0
    strict = json.loads((tmp_path / "s" / "summary.json").read_text())["models"]["default"]
    assert strict["metrics"]["em"]["mean"] == 0.0
    assert main(["score", str(pred), "--gold", gold, "--task", "hkl", "--out", str(tmp_path / "f"), "--symmetry"]) == 0
    assert "Laue group" in capsys.readouterr().out
    folded = json.loads((tmp_path / "f" / "summary.json").read_text())["models"]["default"]
    assert folded["metrics"]["em"]["mean"] == 1.0
    rows = [json.loads(x) for x in (tmp_path / "f" / "scores.jsonl").read_text().splitlines()]
    assert rows[0]["answer"] == [[0, 0, 2]]  # the row keeps the answer as read


def test_symmetry_needs_rotations_and_hkl(tmp_path, capsys):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "a", "answer": [[1, 0, 0]]}) + "\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"id": "a", "answer": [[1, 0, 0]]}) + "\n")
    assert main(["score", str(pred), "--gold", str(gold), "--task", "hkl", "--out", str(tmp_path / "o"),
                 "--symmetry", "--quiet"]) == 2
    assert "laue_rotations" in (tmp_path / "o" / "errors.jsonl").read_text()
    assert main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o2"),
                 "--symmetry"]) == 2
    assert "hkl only" in capsys.readouterr().err
