"""benchmint xrd build: items, images, KMeans selection, bad CIFs, resumable runs."""

import json

import pytest
from pymatgen.core import Lattice, Structure
from pymatgen.io.cif import CifWriter

from benchmint.cli import main
from benchmint.xrd.build import BuildConfig, build


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def cif_dirs(tmp_path_factory):
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY

    root = tmp_path_factory.mktemp("cifs")
    for i, entry in enumerate(AFLOW_PROTOTYPE_LIBRARY[:12]):
        db = root / ("dbA", "dbB")[i % 2]
        db.mkdir(exist_ok=True)
        CifWriter(entry["snl"].structure).write_file(db / f"p{i:02d}.cif")
    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    CifWriter(nacl).write_file(root / "dbA" / "nacl.cif")
    bad = root / "bad"
    bad.mkdir()
    (bad / "garbage.cif").write_text("this is not a CIF at all\n")
    (bad / "empty_cell.cif").write_text("data_x\n_cell_length_a 5\n_cell_length_b 5\n_cell_length_c 5\n"
                                        "_cell_angle_alpha 90\n_cell_angle_beta 90\n_cell_angle_gamma 90\n")
    return root


def test_build_items_images_selection(cif_dirs, tmp_path):
    out = tmp_path / "bench"
    res = build([cif_dirs], out, BuildConfig(per_db=2, db_from_dirname=True), workers=2)
    items = {it["id"]: it for it in read(out / "items.jsonl")}
    assert len(items) == 13 and res.items == 13
    nacl = items["nacl"]
    assert nacl["answer"] == [[2, 0, 0]] and abs(nacl["two_theta_star"] - 31.7) < 0.1  # rock salt's (200)
    assert nacl["crystal_system"] == "cubic" and nacl["spacegroup_number"] == 225 and nacl["db"] == "dbA"
    assert nacl["meta"] == {"db": "dbA", "union_size": "Single", "angle_range": "mid", "crystal_system": "cubic",
                            "spacegroup_number": 225}
    for it in items.values():
        assert it["answer"] == sorted(it["answer"]) and it["union_size"] == len(it["answer"]) >= 1
        assert it["meta"]["union_size"] == ("Single", "Double", "Triple+")[min(it["union_size"], 3) - 1]
    from PIL import Image

    with Image.open(out / nacl["image"]) as img:
        assert img.size == (800, 450)
    errors = {e["cif"].rsplit("/", 1)[-1]: e["error"] for e in read(out / "errors.jsonl")}
    assert set(errors) == {"garbage.cif", "empty_cell.cif"}
    selection = read(out / "selection.jsonl")
    assert [(r["db"], r["cluster"]) for r in selection] == [("dbA", 0), ("dbA", 1), ("dbB", 0), ("dbB", 1)]
    assert all(r["id"] in items and items[r["id"]]["db"] == r["db"] for r in selection)
    assert set(res.silhouettes) == {"dbA", "dbB"} and all(-1 <= v <= 1 for v in res.silhouettes.values())


def test_rerun_and_resume_give_identical_files(cif_dirs, tmp_path):
    full = tmp_path / "full"
    cfg = BuildConfig(per_db=3, db_from_dirname=True)
    build([cif_dirs], full, cfg)
    assert build([cif_dirs], full, cfg).skipped == 15
    part = tmp_path / "part"
    build([cif_dirs / "dbB"], part, cfg)  # a run that stopped after one folder
    assert build([cif_dirs], part, cfg).skipped == 6
    for name in ("items.jsonl", "selection.jsonl", "errors.jsonl"):
        assert (part / name).read_text() == (full / name).read_text().replace(str(full), str(part)), name


def test_items_are_gold_for_scoring(cif_dirs, tmp_path, capsys):
    assert main(["xrd", "build", str(cif_dirs / "dbA"), "--out", str(tmp_path / "b"), "--per-db", "2"]) == 0
    items = read(tmp_path / "b" / "items.jsonl")
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"id": it["id"], "answer": it["answer"]}) + "\n" for it in items))
    assert main(["score", str(pred), "--gold", str(tmp_path / "b" / "items.jsonl"), "--task", "hkl",
                 "--out", str(tmp_path / "s"), "--by", "union_size", "--quiet"]) == 0
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["models"]["default"]["metrics"]["em"]["mean"] == 1.0
    assert main(["xrd", "build", str(cif_dirs / "bad"), "--out", str(tmp_path / "x")]) == 1  # every CIF failed
    assert len(read(tmp_path / "x" / "errors.jsonl")) == 2 and read(tmp_path / "x" / "items.jsonl") == []
    assert main(["xrd", "build", str(tmp_path / "nope"), "--out", str(tmp_path / "y")]) == 2


def test_profile_options(cif_dirs, tmp_path, capsys):
    """--fwhm/--eta/--caglioti/--window-fwhms reach the items; 2 FWHMs of the fixed 0.15° is the paper's 0.30°."""
    src = str(cif_dirs / "dbA")
    assert main(["xrd", "build", src, "--out", str(tmp_path / "paper"), "--per-db", "2", "--workers", "1"]) == 0
    assert main(["xrd", "build", src, "--out", str(tmp_path / "two"), "--per-db", "2", "--workers", "1",
                 "--window-fwhms", "2"]) == 0
    paper, two = read(tmp_path / "paper" / "items.jsonl"), read(tmp_path / "two" / "items.jsonl")
    assert [r["answer"] for r in two] == [r["answer"] for r in paper]
    assert main(["xrd", "build", src, "--out", str(tmp_path / "cag"), "--per-db", "2", "--workers", "1",
                 "--caglioti", "0.05", "-0.002", "0.02", "--window-fwhms", "2", "--eta", "0.5"]) == 0
    cag = read(tmp_path / "cag" / "items.jsonl")
    assert len(cag) == len(paper) and all(r["answer"] for r in cag)
    # the run's settings include the profile: a different profile is a different run, not a resumed one
    assert "0 already done" in capsys.readouterr().out.splitlines()[-1]
    assert main(["xrd", "build", src, "--out", str(tmp_path / "bad"), "--window-fwhms", "0"]) == 2
    assert "window_fwhms must be > 0" in capsys.readouterr().err


def test_pattern_renderer_equals_full_draw():
    """The background-once renderer gives the pixels of the plain full draw, whatever it drew before."""
    import numpy as np

    from benchmint.xrd.build import PatternRenderer, render_pattern_full

    grid = 2 + 0.01 * np.arange(8801)
    rng = np.random.default_rng(0)

    def curve():
        c = np.zeros_like(grid)
        for p, h in zip(rng.uniform(5, 88, 30), rng.uniform(1, 100, 30)):
            c += h / (1 + ((grid - p) / 0.075) ** 2)
        return c

    renderer = PatternRenderer(grid, (800, 450))
    first, second = curve(), curve()
    a = renderer.pixels(first)
    renderer.pixels(second)
    assert np.array_equal(renderer.pixels(first), a)
    assert a.shape == (450, 800) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, render_pattern_full(grid, first, (800, 450)))
    assert (a < 128).sum() > 2000  # the curve, axes and labels are drawn


def test_duplicate_ids_are_listed_and_the_run_finishes(tmp_path):
    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    kcl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(6.29), ["K", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    for db, s in (("dbA", nacl), ("dbB", nacl), ("dbC", kcl)):  # one file copied into a second folder
        (tmp_path / db).mkdir()
        CifWriter(s).write_file(tmp_path / db / ("salt.cif" if db != "dbC" else "kcl.cif"))
    res = build([tmp_path / "dbA", tmp_path / "dbB", tmp_path / "dbC"], tmp_path / "out",
                BuildConfig(per_db=1, db_from_dirname=True), workers=1)
    assert res.items == 2 and [it["id"] for it in read(tmp_path / "out" / "items.jsonl")] == ["salt", "kcl"]
    errors = read(tmp_path / "out" / "errors.jsonl")
    assert [(e["kind"], e["cif"].endswith("dbB/salt.cif"), e["duplicate_of"].endswith("dbA/salt.cif"))
            for e in errors] == [("duplicate_id", True, True)]


def test_an_undetermined_space_group_keeps_its_item(tmp_path, monkeypatch):
    # spglib gives up on some real structures; here it is made to fail at every tolerance.
    import pymatgen.symmetry.analyzer as analyzer

    from benchmint.xrd import build as build_module

    def fails(*args, **kwargs):
        raise ValueError("Symmetry detection failed")

    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    CifWriter(nacl).write_file(tmp_path / "nacl.cif")
    kept = build_module._build_one(str(tmp_path / "nacl.cif"), "k" * 16, str(tmp_path), "db", BuildConfig())
    monkeypatch.setattr(analyzer, "SpacegroupAnalyzer", fails)
    item = build_module._build_one(str(tmp_path / "nacl.cif"), "k" * 16, str(tmp_path), "db", BuildConfig())
    assert item["answer"] == kept["answer"] == [[2, 0, 0]]  # the pattern and its truth do not need the group
    assert (item["spacegroup"], item["crystal_system"], item["meta"]["spacegroup_number"]) == (None, None, None)
    assert item["laue_rotations"] == [[-1, 0, 0, 0, -1, 0, 0, 0, -1], [1, 0, 0, 0, 1, 0, 0, 0, 1]]
    assert "symprec 0.01" in item["symmetry_warning"] and "symprec 0.1" in item["symmetry_warning"]
    assert "symprec" not in kept and kept["spacegroup_number"] == 225
    rows, _ = build_module.select([item, kept], per_db=2)  # the selection takes an unknown system too
    assert len(rows) == 2
