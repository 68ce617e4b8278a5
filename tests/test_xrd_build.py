"""benchmint xrd build: items, images, KMeans selection, bad CIFs, resumable runs."""

import json
from pathlib import Path

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


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (5, 1), (450, 800)])
def test_gray_png_reads_back_as_its_pixels_in_pillow(shape):
    """Our PNG writer against an independent reader: Pillow decodes the very pixels, wrapping differences too."""
    import io

    import numpy as np
    from PIL import Image

    from benchmint.xrd.build import gray_png

    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    pixels = rng.integers(0, 256, size=shape, dtype=np.uint8)
    pixels[: shape[0] // 2] = 255  # white rows above random ones: the up filter wraps below zero
    with Image.open(io.BytesIO(gray_png(pixels))) as im:
        assert im.mode == "L" and im.size == (shape[1], shape[0])
        np.testing.assert_array_equal(np.asarray(im), pixels)


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
    kept = build_module._build_items(str(tmp_path / "nacl.cif"), "k" * 16, str(tmp_path), "db", BuildConfig())
    monkeypatch.setattr(analyzer, "SpacegroupAnalyzer", fails)
    item = build_module._build_items(str(tmp_path / "nacl.cif"), "k" * 16, str(tmp_path), "db", BuildConfig())
    assert item["answer"] == kept["answer"] == [[2, 0, 0]]  # the pattern and its truth do not need the group
    assert (item["spacegroup"], item["crystal_system"], item["meta"]["spacegroup_number"]) == (None, None, None)
    assert item["laue_rotations"] == [[-1, 0, 0, 0, -1, 0, 0, 0, -1], [1, 0, 0, 0, 1, 0, 0, 0, 1]]
    assert "symprec 0.01" in item["symmetry_warning"] and "symprec 0.1" in item["symmetry_warning"]
    assert "symprec" not in kept and kept["spacegroup_number"] == 225
    rows, _ = build_module.select([{**item, "id": "a"}, {**kept, "id": "b"}], per_db=2)  # an unknown system too
    assert len(rows) == 2


def test_march_dollase_weight_by_hand():
    import numpy as np

    from benchmint.xrd.realism import march_dollase, po_weights
    from benchmint.xrd.symmetry import laue_rotations

    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    rots, rec = np.array(laue_rotations(nacl)), nacl.lattice.reciprocal_lattice.matrix
    # {100} along [001], r = 0.5: (00±1) at α = 0 weigh r⁻³ = 8, the four others at 90° weigh r^1.5.
    w = po_weights(np.array([[1, 0, 0]]), np.array([6]), np.array([0, 1]), rots, rec, (0, 0, 1), 0.5)
    assert w[0] == pytest.approx((2 * 8 + 4 * 0.5 ** 1.5) / 6)
    # {111}: all eight planes at cos α = 1/√3 to [001]; r = 1 is no texture at all.
    w = po_weights(np.array([[1, 1, 1], [1, 0, 0]]), np.array([8, 6]), np.array([0, 1, 2]), rots, rec, (0, 0, 1), 0.5)
    assert w[0] == pytest.approx((0.25 / 3 + (2 / 3) / 0.5) ** -1.5)
    assert po_weights(np.array([[1, 1, 1]]), np.array([8]), np.array([0, 1]), rots, rec, (1, 1, 0), 1.0)[0] == 1.0
    # A stick of two families is their multiplicity-weighted mean; the plain formula agrees term by term.
    two = po_weights(np.array([[1, 1, 1], [1, 0, 0]]), np.array([8, 6]), np.array([0, 2]), rots, rec, (0, 0, 1), 0.5)
    assert two[0] == pytest.approx((8 * w[0] + 6 * (2 * 8 + 4 * 0.5 ** 1.5) / 6) / 14)
    assert march_dollase(np.array([1.0, 0.0]), 2.0).tolist() == pytest.approx([2.0 ** -3, 2.0 ** 1.5])


def test_po_weights_equal_a_loop_over_the_orbits(cif_dirs):
    # An independent path: every equivalent plane enumerated as a set, angles by math, one family at a time.
    import math

    import numpy as np
    from pymatgen.core import Structure as S

    from benchmint.xrd.realism import po_weights
    from benchmint.xrd.sticks import compute_sticks
    from benchmint.xrd.symmetry import laue_rotations

    for cif in sorted((cif_dirs / "dbA").glob("*.cif"))[:4] + sorted((cif_dirs / "dbB").glob("*.cif"))[:3]:
        s = S.from_file(cif)
        sticks = compute_sticks(s, (2.0, 90.0))
        labels, mults, start = sticks.family_arrays()
        rots = [np.array(r).reshape(3, 3) for r in laue_rotations(s)]
        rec = s.lattice.reciprocal_lattice.matrix
        got = po_weights(labels, mults, start, np.array(laue_rotations(s)), rec, (1, 0, 2), 0.7)
        d = np.array([1.0, 0.0, 2.0]) @ rec
        for i in range(len(start) - 1):
            num = den = 0.0
            for f in range(start[i], start[i + 1]):
                h = labels[f][[0, 1, 3]] if labels.shape[1] == 4 else labels[f]
                orbit = {tuple(int(v) for v in h @ r) for r in rots}
                ws = []
                for plane in orbit:
                    g = np.array(plane, dtype=float) @ rec
                    c = float(g @ d) / math.sqrt(float(g @ g) * float(d @ d))
                    ws.append((0.49 * c * c + (1 - c * c) / 0.7) ** -1.5)
                num += mults[f] * sum(ws) / len(ws)
                den += mults[f]
            assert got[i] == pytest.approx(num / den, rel=1e-12), (cif.name, i)


def test_realistic_patterns_keep_the_clean_truth(cif_dirs, tmp_path):
    out = tmp_path / "real"
    argv = ["xrd", "build", str(cif_dirs / "dbA"), "--out", str(out), "--workers", "1", "--per-db", "2",
            "--noise-counts", "200", "--background", "0.05", "0.02", "--preferred-orientation", "0", "0", "1", "0.6",
            "--fwhm-range", "0.08", "0.30", "--realism-seed", "7"]
    assert main(argv) == 0
    items = {it["id"]: it for it in read(out / "items.jsonl")}
    clean = tmp_path / "clean"
    for item in items.values():
        r = item["realism"]
        assert 0.08 <= r["fwhm"] <= 0.30 and r["noise_counts"] == 200 and r["seed"] == 7
        assert item["meta"]["peak_shift"] in ("none", "within_window", "beyond_window")
        assert item["peak_shift_deg"] == pytest.approx(item["observed_two_theta_star"] - item["two_theta_star"],
                                                       abs=0.006)
        # The ground truth is the clean pattern's at the item's own width.
        assert main(["xrd", "build", str(cif_dirs / "dbA" / f"{item['id']}.cif"), "--out", str(clean / item["id"]),
                     "--workers", "1", "--fwhm", str(r["fwhm"])]) == 0
        clean_item = read(clean / item["id"] / "items.jsonl")[0]
        # The drawn width is the item's own: its 2θ* too is the clean pattern's at that width.
        assert (clean_item["answer"], clean_item["two_theta_star"]) == (item["answer"], item["two_theta_star"])
        clean_image = next((clean / item["id"] / "images").iterdir()).read_bytes()
        assert clean_image != (out / item["image"]).read_bytes()  # the image shows the realistic pattern
    # Seeded: a second build draws the same widths and the same noise.
    assert main([*argv[:4], str(tmp_path / "again"), *argv[5:]]) == 0
    assert (tmp_path / "again" / "items.jsonl").read_bytes() == (out / "items.jsonl").read_bytes()
    first = sorted((out / "images").iterdir())
    assert [p.read_bytes() for p in first] == [(tmp_path / "again" / "images" / p.name).read_bytes() for p in first]
    assert main([*argv, "--caglioti", "0.01", "0", "0.01"]) == 2  # a width range and Caglioti widths exclude


def _selection_items(n=30):
    import numpy as np

    rng = np.random.default_rng(3)
    systems = ["cubic", "hexagonal", "triclinic", None]
    return [{"db": "ab"[i % 2], "id": f"c{i}", "two_theta_star": float(rng.uniform(10, 80)),
             "peak_intensity": float(rng.uniform(1, 100)), "n_peaks": int(rng.integers(5, 90)),
             "union_size": int(rng.integers(1, 6)), "crystal_system": systems[i % 4],
             "spacegroup_number": None if systems[i % 4] is None else int(rng.integers(1, 231)),
             "answer": [[1, 0, 0]], "pattern_note": "fields select() does not read travel nowhere"}
            for i in range(n)]


@pytest.mark.parametrize("workers", [1, 2])
def test_kmeans_runs_on_one_thread_whatever_the_machine_allows(workers, monkeypatch):
    """scikit-learn's Lloyd iterations take as many OpenMP threads as the process may use (four here, as on a
    four-core machine); select() gives each restart one, on the calling thread or on its own threads. Read from
    the thread count each KMeans run is handed."""
    import sys
    import threading

    from threadpoolctl import threadpool_limits

    from benchmint.xrd import cluster
    from benchmint.xrd.build import select

    monkeypatch.setattr(cluster, "THREADS_FROM_ROWS", 0)  # threads for these few hundred rows too
    seen = []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "_kmeans_single_lloyd":
            seen.append(frame.f_locals["n_threads"])

    items = _selection_items(600)
    with threadpool_limits(limits=4, user_api="openmp"):
        sys.setprofile(watch)
        threading.setprofile(watch)  # the restarts' threads, started inside select()
        try:
            rows, _ = select(items, 5, 0, workers)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    assert len(rows) == 10 and len(seen) == 2 * 10 and set(seen) == {1}  # two databases, ten restarts each


def test_selection_and_silhouettes_are_the_same_on_any_worker_count(monkeypatch):
    """The restarts and the silhouette's rows spread over the workers; what comes out does not depend on how
    many, and the silhouette is written rounded as the standardized features are."""
    from benchmint.xrd import cluster
    from benchmint.xrd.build import select

    items = _selection_items(700)
    one = select(items, 6, 3, workers=1)
    assert select(items, 6, 3, workers=2) == one
    monkeypatch.setattr(cluster, "THREADS_FROM_ROWS", 0)  # the restarts on threads, the silhouette by the kernel
    monkeypatch.setattr(cluster, "KERNEL_FROM_ROWS", 0)
    assert select(items, 6, 3, workers=2) == one and select(items, 6, 3, workers=5) == one
    assert all(v is not None and v == round(v, 6) for v in one[1].values())


def test_selector_helper_returns_what_select_returns():
    from benchmint.xrd.build import Selector, select

    items = _selection_items()
    selector = Selector()
    try:
        assert selector.proc is not None
        got = selector.select(items, 4, 7, workers=2)
    finally:
        selector.close()
    assert got == select(items, 4, 7) and len(got[0]) == 8


def test_selector_falls_back_to_selecting_here_when_its_helper_is_gone():
    from benchmint.xrd.build import Selector, select

    items = _selection_items()
    selector = Selector()
    selector.proc.kill()
    selector.proc.wait()
    assert selector.select(items, 3, 0) == select(items, 3, 0)
    selector.close()


def test_selector_helper_ends_with_its_parent(tmp_path):
    """A run killed while the helper waits leaves no helper behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = ("import os, sys, time; from benchmint.xrd.build import Selector; s = Selector();"
            "print(s.proc.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    helper = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(helper, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{helper}/stat") as fh:
            if fh.read().split()[2] == "Z":  # ended; only its exit status is left for init to reap
                return
        time.sleep(0.05)
    raise AssertionError(f"helper {helper} outlived its parent")


# Files as real collections hold them: repeated structures, unreadable files, symmetry given other ways, blocks.

CELL = ("_cell_length_a {a}\n_cell_length_b {a}\n_cell_length_c {a}\n_cell_angle_alpha 90\n_cell_angle_beta 90\n"
        "_cell_angle_gamma 90\n")
SITES = ("loop_\n_atom_site_label\n_atom_site_type_symbol\n_atom_site_fract_x\n_atom_site_fract_y\n"
         "_atom_site_fract_z\n_atom_site_occupancy\n{m}1 {m} 0 0 0 1\nCl1 Cl 0.5 0.5 0.5 1\n")


def salt_cif(name="nacl", symmetry="_symmetry_space_group_name_H-M 'F m -3 m'\n", a=5.64, metal="Na"):
    """A rock-salt CIF of its asymmetric unit (two atoms), its symmetry given by ``symmetry``."""
    return f"data_{name}\n" + CELL.format(a=a) + symmetry + SITES.format(m=metal)


def test_repeated_structures_select_one_item_per_distinct_row(tmp_path):
    """Two copies of a structure (one with CRLF line ends) and a dozen more: fewer distinct feature rows than
    --per-db clusters; the run finishes and selects each distinct structure once, its first file."""
    kcl = salt_cif("kcl", a=6.29, metal="K")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a_nacl.cif").write_text(salt_cif())
    (tmp_path / "in" / "b_nacl_crlf.cif").write_bytes(salt_cif().replace("\n", "\r\n").encode())
    for i in range(12):
        (tmp_path / "in" / f"c_kcl{i:02d}.cif").write_text(kcl + f"# copy {i}\n")
    res = build([tmp_path / "in"], tmp_path / "out", BuildConfig(), workers=1)
    assert res.items == 14 and res.errors == []
    selection = read(tmp_path / "out" / "selection.jsonl")
    assert sorted(r["id"] for r in selection) == ["a_nacl", "c_kcl00"]
    assert res.silhouettes == {"default": 1.0}  # two tight clusters of identical rows: a = 0, b > 0 for every item


def test_select_caps_clusters_at_distinct_rows():
    from benchmint.xrd.build import select

    base = _selection_items(6)
    items = [{**base[i % 3], "db": "a", "id": f"r{i}"} for i in range(9)]  # three rows, three times each
    rows, silhouettes = select(items, per_db=5)
    assert sorted(r["id"] for r in rows) == ["r0", "r1", "r2"] and 0 < silhouettes["a"] <= 1
    one = [{**base[0], "db": "a", "id": f"s{i}"} for i in range(4)]  # a single distinct row
    assert [r["id"] for r in select(one, per_db=3)[0]] == ["s0"]


def test_identical_files_give_the_first_its_item_and_list_the_second(tmp_path):
    (tmp_path / "in").mkdir()
    for name in ("a.cif", "b.cif"):
        (tmp_path / "in" / name).write_text(salt_cif())
    res = build([tmp_path / "in"], tmp_path / "out", BuildConfig(), workers=1)
    items = read(tmp_path / "out" / "items.jsonl")
    assert [(it["id"], it["cif"]) for it in items] == [("a", "../in/a.cif")] and res.items == 1
    assert read(tmp_path / "out" / "errors.jsonl") == [
        {"cif": str(tmp_path / "in" / "b.cif"), "kind": "duplicate_content",
         "duplicate_of": str(tmp_path / "in" / "a.cif"), "error": f"the same content as {tmp_path / 'in' / 'a.cif'}; "
                                                                   "left out"}]


def test_the_same_file_named_twice_is_a_duplicate_row(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "nacl.cif").write_text(salt_cif())
    (tmp_path / "in" / "link.cif").symlink_to(tmp_path / "in" / "nacl.cif")
    res = build([tmp_path / "in", tmp_path / "in" / "nacl.cif"], tmp_path / "out", BuildConfig(), workers=1)
    assert [it["id"] for it in read(tmp_path / "out" / "items.jsonl")] == ["link"]
    dups = [(e["cif"].rsplit("/", 1)[1], e["kind"], e["duplicate_of"].rsplit("/", 1)[1]) for e in res.errors]
    assert dups == [("nacl.cif", "duplicate_file", "link.cif"), ("nacl.cif", "duplicate_file", "link.cif")]
    assert res.cifs == 3


def test_an_unreadable_cif_and_a_link_loop_are_rows_and_the_run_goes_on():
    import os
    import shutil
    from pathlib import Path

    from unprivileged import open_folder, open_subfolder, run_cli

    root = open_folder()
    try:
        src = open_subfolder(root, "in")
        (src / "a_nacl.cif").write_text(salt_cif())
        (src / "b_locked.cif").write_text(salt_cif("kcl", a=6.29, metal="K"))
        os.chmod(src / "b_locked.cif", 0)
        (src / "c_loop.cif").symlink_to(src / "d_loop.cif")
        (src / "d_loop.cif").symlink_to(src / "c_loop.cif")
        out = open_subfolder(root, "out")
        done = run_cli(["xrd", "build", str(src), "--out", str(out), "--workers", "1"], out)
        assert done.returncode == 1, done.stderr
        assert [it["id"] for it in read(out / "items.jsonl")] == ["a_nacl"]
        errors = {Path(e["cif"]).name: e for e in read(out / "errors.jsonl")}
        assert set(errors) == {"b_locked.cif", "c_loop.cif", "d_loop.cif"}
        assert errors["b_locked.cif"]["error"] == "cannot be read: PermissionError: Permission denied"
        assert errors["c_loop.cif"]["error"].startswith("cannot be read: a loop of symbolic links")
        assert all(e["kind"] == "unreadable" for e in errors.values())
        assert "4 CIFs (0 already done): 1 items" in done.stdout and "3 failed" in done.stdout
    finally:
        shutil.rmtree(root)


def test_a_hall_symbol_gives_the_structure_its_h_m_symbol_gives(tmp_path, impl):
    """Rock salt by its Hall symbol alone: the item of rock salt (Fm-3m, (200)), as the H-M symbol and as
    pymatgen's own Fm-3m structure give it; pymatgen alone reads it as P1 (Pm-3m, (110) at 22.29°)."""
    from benchmint.xrd.build import _build_items
    from benchmint.xrd.simulate import simulate

    (tmp_path / "hall.cif").write_text(salt_cif(symmetry="_symmetry_space_group_name_Hall '-F 4 2 3'\n"))
    (tmp_path / "hm.cif").write_text(salt_cif())
    hall = _build_items(str(tmp_path / "hall.cif"), "h" * 16, str(tmp_path), "db", BuildConfig())
    hm = _build_items(str(tmp_path / "hm.cif"), "m" * 16, str(tmp_path), "db", BuildConfig())
    assert (hall["spacegroup"], hall["spacegroup_number"], hall["answer"]) == ("Fm-3m", 225, [[2, 0, 0]])
    assert hall["cif_symmetry"] == "Hall symbol -F 4 2 3"
    assert hm["cif_symmetry"] == "space group symbol _symmetry_space_group_name_H-M"
    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    own = simulate(nacl).pattern
    assert hall["two_theta_star"] == hm["two_theta_star"] == round(own.two_theta_star, 2) == 31.72
    same = ("answer", "two_theta_star", "peak_intensity", "n_peaks", "formula", "laue_rotations")
    assert {k: hall[k] for k in same} == {k: hm[k] for k in same}
    assert hall["cif_route"] == ("pymatgen" if impl == "reference" else "gemmi")


def test_a_cif_without_symmetry_is_kept_as_p1_and_warned(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bare.cif").write_text(salt_cif(symmetry=""))
    res = build([tmp_path / "in"], tmp_path / "out", BuildConfig(), workers=1)
    (item,) = read(tmp_path / "out" / "items.jsonl")
    # two atoms in a primitive cubic cell: CsCl's arrangement, whose strongest line is (110) at 22.29°
    assert (item["cif_symmetry"], item["spacegroup_number"], item["answer"]) == ("assumed P1", 221, [[1, 1, 0]])
    assert item["two_theta_star"] == 22.29
    (row,) = read(tmp_path / "out" / "errors.jsonl")
    assert row["kind"] == "warning" and row["id"] == "bare" and "P1" in row["warning"]
    assert res.errors == [] and res.warnings == [row]


def test_every_structure_block_of_a_cif_is_an_item(tmp_path):
    text = ("data_global\n_publ_section_title 'Two salts'\n"
            + salt_cif("nacl_293K") + salt_cif("kcl_293K", a=6.29, metal="K")
            + "data_broken\n_cell_length_a 5\n" + SITES.format(m="Na"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "salts.cif").write_text(text)
    (tmp_path / "in" / "nacl.cif").write_text(salt_cif())
    res = build([tmp_path / "in"], tmp_path / "out", BuildConfig(per_db=5), workers=1)
    items = {it["id"]: it for it in read(tmp_path / "out" / "items.jsonl")}
    assert list(items) == ["nacl", "salts#nacl_293K", "salts#kcl_293K"]
    assert items["salts#nacl_293K"]["answer"] == items["nacl"]["answer"] == [[2, 0, 0]]
    assert items["salts#kcl_293K"]["formula"] == "KCl" and items["salts#kcl_293K"]["cif"] == "../in/salts.cif"
    assert len({it["image"] for it in items.values()}) == 3
    (error,) = res.errors
    assert (error["id"], error["block"], error["error"].split(":")[0]) == ("salts#broken", "broken", "unreadable CIF")


def _slow_cif(n_atoms=60):
    import random

    rng = random.Random(1)
    rows = "".join(f"C{i} C {rng.random():.5f} {rng.random():.5f} {rng.random():.5f} 1\n" for i in range(n_atoms))
    # general positions of Fm-3m from its symbol alone: pymatgen's parser expands them, for ~30 s
    return ("data_slow\n" + CELL.format(a=30) + "_symmetry_space_group_name_H-M 'F m -3 m'\n"
            + SITES.split("{m}1")[0] + rows)


def test_a_cif_past_its_time_limit_is_an_error_row(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a_nacl.cif").write_text(salt_cif())
    (tmp_path / "in" / "b_slow.cif").write_text(_slow_cif())  # ~30 s here
    (tmp_path / "in" / "c_kcl.cif").write_text(salt_cif("kcl", a=6.29, metal="K"))  # after the worker is replaced
    res = build([tmp_path / "in"], tmp_path / "out", BuildConfig(cif_seconds=6), workers=1)
    assert [it["id"] for it in read(tmp_path / "out" / "items.jsonl")] == ["a_nacl", "c_kcl"]
    (error,) = read(tmp_path / "out" / "errors.jsonl")
    assert error["cif"].endswith("b_slow.cif") and res.errors == [error]
    assert error["time_limit"] == {"limit": "unit", "seconds": 6, "stage": None}
    assert error["error"].endswith("ran past the unit time limit of 6 s; its worker was stopped")


def test_options_are_checked_before_any_work(tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    (src / "nacl.cif").write_text(salt_cif())
    for extra, said in ((["--noise-counts", "1e30"], "at most 1e+18"), (["--noise-counts", "0"], "peak count > 0"),
                        (["--cif-seconds", "0"], "cif_seconds must be a positive number")):
        assert main(["xrd", "build", str(src), "--out", str(tmp_path / "o"), *extra]) == 2
        assert said in capsys.readouterr().err
        assert not (tmp_path / "o").exists()


def test_a_collection_as_databases_hold_it_is_built_with_every_file_accounted_for(tmp_path):
    """Repeated structures, a copy, a Hall-only and a symmetry-less CIF, a file of blocks, one stem in two
    folders, a loop of links: every file is an item or a row, and a rerun writes the same files."""
    src = tmp_path / "in"
    for db in ("dbA", "dbB"):
        (src / db).mkdir(parents=True)
    files = {
        "dbA/nacl.cif": salt_cif(),
        "dbA/nacl_copy.cif": salt_cif(),
        "dbA/nacl_crlf.cif": salt_cif().replace("\n", "\r\n"),
        "dbA/hall.cif": salt_cif("kcl", symmetry="_symmetry_space_group_name_Hall '-F 4 2 3'\n", a=6.29, metal="K"),
        "dbA/bare.cif": salt_cif("bare", symmetry=""),
        "dbB/blocks.cif": salt_cif("one") + salt_cif("two", a=6.29, metal="K"),
        "dbB/nacl.cif": salt_cif(a=5.70),
    }
    for name, text in files.items():
        (src / name).write_bytes(text.encode())
    (src / "dbB" / "loop.cif").symlink_to(src / "dbB" / "loop.cif")
    cfg = BuildConfig(db_from_dirname=True)
    res = build([src], tmp_path / "out", cfg, workers=2)
    items = read(tmp_path / "out" / "items.jsonl")
    rows = read(tmp_path / "out" / "errors.jsonl")
    assert [it["id"] for it in items] == ["bare", "hall", "nacl", "nacl_crlf", "blocks#one", "blocks#two"]
    assert {Path(it["cif"]).name for it in items} | {Path(r["cif"]).name for r in rows} == {
        Path(n).name for n in files} | {"loop.cif"}
    assert [(Path(r["cif"]).name, r["kind"]) for r in rows] == [
        ("bare.cif", "warning"), ("nacl_copy.cif", "duplicate_content"), ("loop.cif", "unreadable"),
        ("nacl.cif", "duplicate_id")]
    assert {it["id"]: it["answer"] for it in items if it["id"] != "bare"} == {
        "hall": [[2, 0, 0]], "nacl": [[2, 0, 0]], "nacl_crlf": [[2, 0, 0]], "blocks#one": [[2, 0, 0]],
        "blocks#two": [[2, 0, 0]]}
    assert res.selected == len(read(tmp_path / "out" / "selection.jsonl")) >= 2
    before = {n: (tmp_path / "out" / n).read_bytes() for n in ("items.jsonl", "errors.jsonl", "selection.jsonl")}
    again = build([src], tmp_path / "out", cfg, workers=1)
    # seven files read, six keys: the copy shares its original's
    assert again.skipped == 6 and before == {n: (tmp_path / "out" / n).read_bytes() for n in before}


def test_block_and_hall_items_read_back_for_eval_with_their_own_structure(tmp_path):
    """A block's item carries its block's text, so a prompt and the deterministic baseline see that structure;
    the baseline reads a Hall-only CIF as the build does."""
    from benchmint import benchmarks

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "salts.cif").write_text(salt_cif("one", a=5.64) + salt_cif("two", a=6.29, metal="K"))
    (tmp_path / "in" / "hall.cif").write_text(salt_cif(symmetry="_symmetry_space_group_name_Hall '-F 4 2 3'\n"))
    build([tmp_path / "in"], tmp_path / "out", BuildConfig(), workers=1)
    bench = benchmarks.get("crystalxrd")
    items = {it.id: it for _, it in bench.read_items(tmp_path / "out" / "items.jsonl")}
    assert set(items) == {"hall", "salts#one", "salts#two"}
    assert items["salts#two"].fields["cif_text"] == salt_cif("two", a=6.29, metal="K")
    assert "The chemical formula: KCl\n" in bench.prompt(items["salts#two"], "cif_only").text()
    for it in items.values():
        assert json.loads(bench.baseline_reply(it))["max_peak_hkls"] == it.answer == [[2, 0, 0]]


def test_cif_paths_relative_to_the_output_resolve_links_as_path_resolve_does(tmp_path, monkeypatch):
    """Folders resolved once each give what resolving each whole path gives: through a linked folder, to a
    linked file (into another folder, through a chain of two links, to nothing), from a bare relative name, in
    the output folder and above it."""
    import os

    from benchmint.xrd.build import _Relative

    real, out = tmp_path / "data" / "real", tmp_path / "runs" / "out"
    real.mkdir(parents=True)
    out.mkdir(parents=True)
    (real / "a.cif").write_text("a")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "b.cif").write_text("b")
    (tmp_path / "via").symlink_to(real)
    (real / "link.cif").symlink_to(tmp_path / "other" / "b.cif")
    (real / "chain.cif").symlink_to("link.cif")
    (real / "gone.cif").symlink_to(tmp_path / "nowhere" / "c.cif")
    (out / "inside.cif").write_text("i")
    monkeypatch.chdir(real)
    paths = [real / "a.cif", tmp_path / "via" / "a.cif", tmp_path / "via" / "link.cif", real / "chain.cif",
             tmp_path / "via" / "gone.cif", "a.cif", "chain.cif", os.path.join("..", "..", "via", "a.cif"),
             out / "inside.cif", tmp_path / "runs" / "inside.cif"]
    relative = _Relative(out)
    got = [relative(p) for p in paths]
    assert got == [Path(os.path.relpath(Path(p).resolve(), out.resolve())).as_posix() for p in paths]
    assert got[:5] == ["../../data/real/a.cif", "../../data/real/a.cif", "../../other/b.cif", "../../other/b.cif",
                       "../../nowhere/c.cif"]
