"""What a command's processes import before their first unit: the fixed start-up every run pays whatever its
worker count. Each check runs in a fresh interpreter (``sys.modules`` there is the process's whole history)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.resources import files
from pathlib import Path

import pytest

# Modules of the scientific stack that a driver which only hashes, records and writes does not need.
HEAVY = ("numpy", "scipy", "sklearn", "pymatgen", "matplotlib", "PIL", "gemmi", "spglib", "numba")


def run_python(code: str, cwd: Path) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last, returned."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def loaded(names, modules) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names)


@pytest.fixture(scope="module")
def cifs(tmp_path_factory) -> Path:
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    root = tmp_path_factory.mktemp("cif")
    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    CifWriter(nacl).write_file(root / "nacl.cif")
    rutile = Structure.from_spacegroup("P4_2/mnm", Lattice.tetragonal(4.594, 2.959), ["Ti", "O"],
                                       [[0, 0, 0], [0.3053, 0.3053, 0]])
    CifWriter(rutile).write_file(root / "rutile.cif")
    return root


def test_the_xrd_worker_preload_leaves_out_scipy_cluster_and_a_cif_needs_none_of_it(cifs, tmp_path):
    # The preload holds what a CIF's work imports (a unit imports nothing more), without scipy.cluster and what
    # it brings; the items are those of a process that imported pymatgen the plain way, scipy.cluster first.
    code = """
        import importlib, json, sys
        if sys.argv[-1] == "plain":
            import scipy.cluster, pymatgen.symmetry.analyzer
        from benchmint.xrd import build
        for name in build._WORKER_MODULES:
            importlib.import_module(name)
        preloaded = set(sys.modules)
        items = [build._build_items(str(p), "k" * 64, "out", "db", build.BuildConfig())
                 for p in sorted(__import__("pathlib").Path("cif").glob("*.cif"))]
        print(json.dumps({"preloaded": sorted(preloaded), "unit": sorted(set(sys.modules) - preloaded),
                          "items": items}))
    """
    (tmp_path / "cif").symlink_to(cifs)
    lean = run_python(code.replace('sys.argv[-1] == "plain"', "False"), tmp_path)
    plain = run_python(code.replace('sys.argv[-1] == "plain"', "True"), tmp_path)
    assert [m for m in lean["preloaded"] if m == "scipy.cluster" or m.startswith(("scipy.spatial", "scipy.linalg"))] \
        == []
    assert {"pymatgen.symmetry.analyzer", "pymatgen.io.cif", "gemmi", "matplotlib.figure",
            "matplotlib.backends.backend_agg"} <= set(lean["preloaded"])
    assert loaded(HEAVY, lean["unit"]) == []
    assert "scipy.cluster" in plain["preloaded"]
    assert [it["spacegroup_number"] for it in lean["items"]] == [225, 136]
    assert lean["items"] == plain["items"]


def test_scipy_cluster_comes_when_the_analyzer_calls_it(tmp_path):
    # The stand-in is gone after the import: pymatgen's clustering helper gets the real module on its first call.
    got = run_python("""
        import json, sys
        import benchmint.xrd.preload
        before = "scipy.cluster" in sys.modules
        from pymatgen.core import Molecule
        from pymatgen.symmetry.analyzer import cluster_sites
        ch4 = Molecule(["C", "H", "H", "H", "H"], [[0, 0, 0], [0.63, 0.63, 0.63], [-0.63, -0.63, 0.63],
                                                   [-0.63, 0.63, -0.63], [0.63, -0.63, -0.63]])
        origin, clustered = cluster_sites(ch4, 0.1)
        import scipy.cluster
        print(json.dumps({"before": before, "origin": str(origin.specie), "shells": len(clustered),
                          "real": scipy.cluster.__file__ is not None and hasattr(scipy.cluster, "hierarchy")}))
    """, tmp_path)
    assert got == {"before": False, "origin": "C", "shells": 1, "real": True}


def test_an_analyzer_that_reads_scipy_cluster_at_import_is_imported_the_plain_way(tmp_path):
    # A pymatgen release whose analyzer ran ``from scipy.cluster import hierarchy`` at its top would fail beside
    # the stand-in: the preload then imports it plainly, with the real scipy.cluster.
    got = run_python("""
        import importlib.abc, importlib.machinery, json, sys

        class Reads(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name != "pymatgen.symmetry.analyzer":
                    return None
                spec = importlib.machinery.PathFinder.find_spec(name, path)
                run = spec.loader.exec_module

                def exec_module(module):
                    exec("from scipy.cluster import hierarchy", module.__dict__)
                    run(module)

                spec.loader.exec_module = exec_module
                return spec

        sys.meta_path.insert(0, Reads())
        import benchmint.xrd.preload
        from pymatgen.symmetry import analyzer
        import scipy
        print(json.dumps({"hierarchy": analyzer.hierarchy is sys.modules["scipy.cluster.hierarchy"],
                          "real": sys.modules["scipy.cluster"] is scipy.cluster
                                  and hasattr(sys.modules["scipy.cluster"], "vq"),
                          "renderer": "matplotlib.backends.backend_agg" in sys.modules}))
    """, tmp_path)
    assert got == {"hierarchy": True, "real": True, "renderer": True}


@pytest.mark.parametrize(("cores", "shared"), [(4, False), (1, True)])
def test_xrd_build_driver_imports(cifs, tmp_path, cores, shared):
    # 2 workers with a core each beside the selection helper: each imports its own preload and the driver
    # needs no pymatgen, matplotlib or scikit-learn; on fewer cores it imports the preload once, before forking
    # (and still without scipy.cluster).
    got = run_python(f"""
        import json, os, sys
        os.cpu_count = lambda: {cores}
        from benchmint.cli import main
        code = main(["xrd", "build", "cif", "--out", "out", "--workers", "2"])
        print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
    """, _linked(tmp_path, cifs))
    assert got["code"] == 0
    assert [m for m in got["modules"] if m == "scipy.cluster" or m.startswith("sklearn")] == []
    if shared:
        assert "pymatgen.symmetry.analyzer" in got["modules"]
    else:
        assert loaded(("pymatgen", "matplotlib", "gemmi", "spglib"), got["modules"]) == []
    assert len((tmp_path / "out" / "items.jsonl").read_text().splitlines()) == 2


def _linked(where: Path, cifs: Path) -> Path:
    (where / "cif").symlink_to(cifs)
    return where


def test_harvest_triage_driver_imports_none_of_the_stack(tmp_path):
    # The triage's driver hashes, records and writes: not even PyMuPDF (its workers read the pages), nor the
    # email modules arXiv's dates need when a metadata snapshot is indexed.
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "paper.pdf").write_bytes(files("benchmint.samples").joinpath("sample_paper.pdf").read_bytes())
    got = run_python("""
        import json, sys
        from benchmint.cli import main
        code = main(["harvest", "pdf", "--out", "out", "--workers", "2", "--triage-only"])
        print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules if sys.modules[m] is not None)}))
    """, tmp_path)
    assert got["code"] == 0
    assert loaded((*HEAVY, "pymupdf", "email"), got["modules"]) == []
    assert (tmp_path / "out" / "pages.jsonl").read_text().count("\n") >= 1
