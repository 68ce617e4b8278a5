"""The three forms of every hot path: one naming rule, one reader of BENCHMINT_IMPL, every reference forceable."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

from benchmint import _core, _dispatch

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "benchmint"


def table() -> list[tuple[str, str, str, str]]:
    """(public module, reference module, compiled submodule, C++ source) rows of _dispatch's docstring table."""
    rows = re.findall(r"^(\S+\.py)\s+(\S+_ref\.py)\s+(\S+|\(.*?\))\s+(\S+)\s*$", _dispatch.__doc__, re.MULTILINE)
    assert len(rows) >= 9
    return rows


def test_table_names_the_files_and_submodules():
    for public, ref, compiled, source in table():
        assert (SRC / public).is_file(), public
        assert (SRC / ref).is_file(), ref
        assert Path(public).with_name(Path(public).stem + "_ref.py") == Path(ref)  # X.py <-> X_ref.py
        module = Path(public).stem
        if compiled.startswith("benchmint._core."):
            assert compiled == f"benchmint._core.{module}"
            assert source == f"csrc/{module}.cpp" and (ROOT / source).is_file()
            assert hasattr(_core, module)
        importlib.import_module("benchmint." + public[:-3].replace("/", "."))
        importlib.import_module("benchmint." + ref[:-3].replace("/", "."))


def test_every_compiled_submodule_is_in_the_table():
    named = {c.rsplit(".", 1)[1] for _, _, c, _ in table() if c.startswith("benchmint._core.")}
    submodules = {name for name in dir(_core) if not name.startswith("_") and hasattr(getattr(_core, name), "__doc__")
                  and type(getattr(_core, name)).__name__ == "module"}
    assert submodules == named


def test_only_dispatch_reads_the_variable():
    readers = []
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"os\.(environ|getenv)", text) and ("BENCHMINT_IMPL" in text or "ENV_VAR" in text):
            readers.append(path.relative_to(SRC).as_posix())
    assert readers == ["_dispatch.py"]


def test_tests_switch_implementations_only_through_the_fixtures():
    # The impl / forced_impl fixtures of conftest.py are the one way a test picks a form.
    hand_set = []
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name == "conftest.py":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"setenv\(\s*[\"']BENCHMINT_IMPL|environ\[\s*[\"']BENCHMINT_IMPL[\"']\s*\]\s*=", text):
            hand_set.append(path.name)
    assert hand_set == []


def test_every_dispatching_module_uses_the_helper():
    # A module with a compiled form picks it through _dispatch.use_reference with its own kernel name.
    for public, _, _, _ in table():
        text = (SRC / public).read_text(encoding="utf-8")
        assert f'use_reference("{Path(public).stem}"' in text, public


def test_counts_and_fallbacks(forced_impl):
    _dispatch.reset_counts()
    with forced_impl("compiled"):
        assert _dispatch.use_reference("k") is False
        assert _dispatch.use_reference("k", available=False) is True
        _dispatch.fallback("k", 3)
        _dispatch.fallback("k", 0)
    with forced_impl("reference"):
        assert _dispatch.use_reference("k") is True
        assert _dispatch.use_reference("k", available=False) is True
        assert _dispatch.use_reference() is True  # no kernel: not counted
    assert _dispatch.counts("k") == {"compiled": 1, "reference": 2, "fallback": 4}
    assert _dispatch.counts("other") == {"compiled": 0, "reference": 0, "fallback": 0}
    with forced_impl(" Compiled "):
        assert _dispatch.implementation() == "compiled"
    with forced_impl(""):
        assert _dispatch.implementation() == "compiled"
    with forced_impl("fast"), pytest.raises(ValueError, match="BENCHMINT_IMPL must be one of compiled, reference"):
        _dispatch.implementation()


def _one_call_per_kernel(tmp_path):
    """One public call of each dispatching module; returns the kernel names exercised."""
    import pymupdf
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    from benchmint.grade.sts import gelu
    from benchmint.metrics import aggregate, extract_answer, score_batch
    from benchmint.metrics.pipeline import ScoreConfig, score_files
    from benchmint.metrics.user import evaluate, metric
    from benchmint.pdf.geometry import transform
    from benchmint.pdf.triage import page_counts
    from benchmint.xrd import cluster, pattern
    from benchmint.xrd.cifread import read_sites
    from benchmint.xrd.sticks import compute_sticks

    score_batch([{"A"}], [{"A"}], task="mcq")
    extract_answer("Answer: B", "mcq")
    aggregate.group_counts(np.array([0, 1]), np.array([1, 1]), 2, 2)
    (tmp_path / "g.jsonl").write_text('{"id": "a", "answer": ["A"]}\n', encoding="utf-8")
    (tmp_path / "p.jsonl").write_text('{"id": "a", "output": "Answer: A"}\n', encoding="utf-8")
    score_files(tmp_path / "p.jsonl", tmp_path / "g.jsonl", tmp_path / "out", ScoreConfig(task="mcq"))
    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    sites, _ = read_sites(str(CifWriter(nacl, symprec=0.01)))
    compute_sticks(sites)
    pattern([30.0], [1.0], [[(1, 1, 1)]])
    transform([[0, 0, 1, 1]], (1, 0, 0, 1, 0, 0))
    doc = pymupdf.open()
    doc.new_page().draw_rect(pymupdf.Rect(10, 10, 50, 50), fill=(1, 0, 0))
    page_counts(doc[0])
    ones = np.ones(3, np.int32)
    evaluate(metric(lambda tp, fp, fn, g: tp / (tp + fp + fn), name="dispatch_probe"), ones, ones, ones, 2 * ones)
    gelu(np.zeros(3, np.float32))
    line = np.array([[0.0], [1.0], [4.0], [6.0]])
    cluster.kmeans(line, 2, 0, 2, threads_from=0)  # small: the threads and the kernel asked for
    cluster.silhouette(line, np.array([0, 0, 1, 1]), 2, kernel_from=0)
    return {"batch", "extract", "aggregate", "pipeline", "cifread", "sticks", "profile", "geometry", "triage", "user",
            "sts", "cluster"}


def test_reference_forces_every_reference(forced_impl, monkeypatch, tmp_path):
    # BENCHMINT_IMPL=reference: no kernel of benchmint._core runs, not even inside the CIF reader.
    def no_kernels():
        raise AssertionError("the reference path called the compiled module")

    monkeypatch.setattr(_dispatch, "core", no_kernels)
    _dispatch.reset_counts()
    with forced_impl("reference"):
        kernels = _one_call_per_kernel(tmp_path)
    assert kernels == {Path(p).stem for p, _, _, _ in table()}
    for kernel in kernels:
        counts = _dispatch.counts(kernel)
        assert counts["compiled"] == 0 and counts["fallback"] == 0 and counts["reference"] >= 1, (kernel, counts)


def test_compiled_is_the_default(forced_impl, tmp_path):
    _dispatch.reset_counts()
    with forced_impl("compiled"):
        kernels = _one_call_per_kernel(tmp_path)
    for kernel in kernels:
        counts = _dispatch.counts(kernel)
        assert counts["reference"] == 0 and counts["fallback"] == 0 and counts["compiled"] >= 1, (kernel, counts)
