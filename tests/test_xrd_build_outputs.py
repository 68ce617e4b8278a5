"""`xrd build`'s output files, byte for byte, against digests of the files it wrote before its driver's work
moved to the workers (the JSON of each result encoded where it is computed, the KMeans selection on one thread,
the CIFs' paths resolved once per folder), then rewritten once when the silhouette came to be written rounded to
6 decimals (computed exactly over several threads, it differs from scikit-learn's by 1e-11 to 1e-7): only selection.jsonl
changed, and it is the file before with each silhouette rounded, byte for byte.

The digests in tests/data/xrd_build_digests.json were written by ``python tests/test_xrd_build_outputs.py``
with the code before that change; the same files must come out with one worker and with two, under the
compiled implementations and under the reference ones (``BENCHMINT_IMPL=reference``, whose files have digests
of their own: they name the CIF route taken, and a peak's height may differ in its last digit). They hold for
the dependency versions recorded beside them (a newer pymatgen, spglib, scikit-learn or matplotlib may move a
digit or a pixel): on a mismatch the message names the versions, and the file is rewritten only once the
difference is understood.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus" / "files" / "cif"
DIGESTS = Path(__file__).parent / "data" / "xrd_build_digests.json"
FILES = ("items.jsonl", "errors.jsonl", "selection.jsonl")
VERSIONED = ("numpy", "scipy", "pymatgen", "spglib", "gemmi", "scikit-learn", "matplotlib")


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in VERSIONED}


def digests(out: Path) -> dict[str, str]:
    """SHA-256 of each JSONL output, and one over every image (its name and bytes, in name order)."""
    got = {name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in FILES}
    images = hashlib.sha256()
    for png in sorted((out / "images").iterdir()):
        images.update(png.name.encode() + b"\0" + png.read_bytes())
    got["images"] = images.hexdigest()
    return got


def aflow_cifs(root: Path) -> None:
    """The demo's sample: 36 AFLOW prototypes in three "databases"."""
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    for i, entry in enumerate(AFLOW_PROTOTYPE_LIBRARY[:36]):
        db = root / ("ICSD-like", "MP-like", "OQMD-like")[i % 3]
        db.mkdir(parents=True, exist_ok=True)
        CifWriter(entry["snl"].structure).write_file(db / f"aflow-{i:03d}.cif")


CASES = {
    "aflow36": (aflow_cifs, ["--db-from-dirname", "--per-db", "6"]),
    "corpus": (lambda root: shutil.copytree(CORPUS, root), []),
}


def build_in(where: Path, case: str, workers: int, impl: str = "compiled", engine: str = "local") -> dict[str, str]:
    """Run ``benchmint xrd build cif --out out`` in ``where`` as a whole process (relative paths, so the files
    do not depend on where the folder is) and return the digests of its outputs."""
    if not (where / "cif").exists():
        CASES[case][0](where / "cif")
    out = where / f"out-{workers}-{impl}-{engine}"
    env = {**os.environ, "BENCHMINT_IMPL": impl}
    done = subprocess.run([sys.executable, "-m", "benchmint.cli", "xrd", "build", "cif", "--out", out.name,
                           "--workers", str(workers), "--engine", engine, *CASES[case][1]], cwd=where, env=env,
                          capture_output=True,
                          text=True)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: some CIFs failed, as the corpus has
    return digests(out)


def _check(tmp_path: Path, case: str, workers: int, impl: str, engine: str = "local") -> None:
    got = build_in(tmp_path, case, workers, impl, engine)
    recorded = json.loads(DIGESTS.read_text(encoding="utf-8"))
    assert got == recorded[case][impl], (f"{case}, {workers} worker(s), {impl}: other files than before; recorded with "
                                   f"{recorded['versions']}, now {versions()}")


@pytest.mark.parametrize(("workers", "impl"), [(1, "compiled"), (2, "compiled"), (1, "reference"), (2, "reference")])
def test_sample_outputs_are_the_files_written_before(tmp_path, workers, impl):
    _check(tmp_path, "aflow36", workers, impl)


@pytest.mark.real
@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: python scripts/fetch_corpus.py")
@pytest.mark.parametrize(("workers", "impl"), [(1, "compiled"), (2, "compiled"), (2, "reference")])
def test_corpus_outputs_are_the_files_written_before(tmp_path, workers, impl):
    _check(tmp_path, "corpus", workers, impl)


def _ray_or_skip() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("ray is not installed (pip install 'benchmint[ray]')")


@pytest.mark.parametrize("case", ["aflow36", pytest.param("corpus", marks=[pytest.mark.real, pytest.mark.skipif(
    not CORPUS.is_dir(), reason="corpus absent: python scripts/fetch_corpus.py")])])
def test_outputs_on_ray_are_the_files_written_before(tmp_path, case):
    """--engine ray (a local instance the command starts: its workers file their results beside the ledger)."""
    _ray_or_skip()
    _check(tmp_path, case, 1, "compiled", "ray")


if __name__ == "__main__":  # write the digests (with the code whose files the tests are to keep)
    import tempfile

    recorded = {"versions": versions()}
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            recorded[case] = {impl: build_in(Path(tmp), case, 1, impl) for impl in ("compiled", "reference")}
    DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(recorded, indent=1))
