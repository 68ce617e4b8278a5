"""XRD build per CIF: CIF text -> (pattern, 2θ*, HKL ground truth), fast path vs the reference path.

fast: benchmint.xrd.cifread.read_structure (gemmi route where it reproduces pymatgen's parse)
      + benchmint.xrd.sticks.compute_sticks + benchmint.xrd.profile.pattern (compiled kernel)
reference: pymatgen CifParser + pymatgen XRDCalculator.get_pattern + the dense reference profile
      (benchmint.xrd.reference.broaden)

Run: .venv/bin/python -m pytest benches/bench_xrd_build.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import random
import statistics

import pytest
from conftest import best_time

from benchmint.xrd import reference
from benchmint.xrd.cifread import pymatgen_structure, read_structure
from benchmint.xrd.profile import ProfileParams, pattern
from benchmint.xrd.sticks import compute_sticks, reference_sticks

N_AFLOW = 40
PARAMS = ProfileParams()


def fast_path(text: str):
    structure, _ = read_structure(text)
    s = compute_sticks(structure)
    res = pattern(s.two_theta, s.intensity, s.hkls, PARAMS)
    return res.curve, res.two_theta_star, res.ground_truth


def reference_path(text: str):
    structure = pymatgen_structure(text)
    s = reference_sticks(structure)
    curve, star, _, truth = reference.broaden(s.two_theta, s.intensity, PARAMS)
    ground_truth = sorted({h for i in truth.tolist() for h in s.hkls[i] if any(h)})
    return curve, float(PARAMS.grid()[star]), ground_truth


def outcome(result):
    return result[1], result[2]


@pytest.fixture(scope="module")
def aflow():
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    idx = sorted(random.Random(20261121).sample(range(len(AFLOW_PROTOTYPE_LIBRARY)), N_AFLOW))
    texts = [str(CifWriter(AFLOW_PROTOTYPE_LIBRARY[i]["snl"].structure, symprec=0.01)) for i in idx]
    return texts, [outcome(reference_path(t)) for t in texts]


@pytest.fixture(scope="module")
def big():
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    text = str(CifWriter(nacl * (3, 3, 3)))  # P1, 216 atom rows
    return text, outcome(reference_path(text))


def test_aflow_fast(benchmark, aflow):
    texts, want = aflow
    benchmark.group = f"xrd-build-aflow-{N_AFLOW}"
    got = benchmark(lambda: [fast_path(t) for t in texts])
    assert [outcome(g) for g in got] == want
    routes = [read_structure(t)[1] for t in texts]
    fast = [best_time(fast_path, t, 5) for t in texts]
    ref = [best_time(reference_path, t, 3) for t in texts]
    benchmark.extra_info["gemmi_route"] = routes.count("gemmi")
    benchmark.extra_info["median_ms_fast"] = 1e3 * statistics.median(fast)
    benchmark.extra_info["median_ms_reference"] = 1e3 * statistics.median(ref)
    benchmark.extra_info["median_speedup"] = statistics.median(r / f for r, f in zip(ref, fast))
    read_fast = [best_time(lambda x: read_structure(x), t, 5) for t in texts]
    read_ref = [best_time(pymatgen_structure, t, 3) for t in texts]
    benchmark.extra_info["median_ms_read_fast"] = 1e3 * statistics.median(read_fast)
    benchmark.extra_info["median_ms_read_pymatgen"] = 1e3 * statistics.median(read_ref)


def test_aflow_reference(benchmark, aflow):
    texts, want = aflow
    benchmark.group = f"xrd-build-aflow-{N_AFLOW}"
    got = benchmark.pedantic(lambda: [reference_path(t) for t in texts], rounds=3, iterations=1)
    assert [outcome(g) for g in got] == want


def test_big_fast(benchmark, big):
    text, want = big
    benchmark.group = "xrd-build-nacl-3x3x3-216-atoms"
    assert read_structure(text)[1] == "gemmi"
    got = benchmark(fast_path, text)
    assert outcome(got) == want


def test_big_reference(benchmark, big):
    text, want = big
    benchmark.group = "xrd-build-nacl-3x3x3-216-atoms"
    got = benchmark.pedantic(reference_path, args=(text,), rounds=3, iterations=1)
    assert outcome(got) == want


@pytest.mark.benchmark(group="xrd-build-command-40-cifs")
@pytest.mark.parametrize("workers", [1, -1])
def test_build_command(benchmark, aflow, tmp_path, workers):
    """The whole `benchmint xrd build` (images, KMeans selection, ledger) in worker processes: structures/s."""
    import shutil

    from conftest import record_throughput

    from benchmint.xrd.build import BuildConfig, build

    cifs = tmp_path / "cifs"
    cifs.mkdir()
    for i, text in enumerate(aflow[0]):  # (texts, reference outcomes)
        (cifs / f"c{i:02d}.cif").write_text(text)
    out = tmp_path / "out"

    def fresh():
        shutil.rmtree(out, ignore_errors=True)
        return (cifs, out, BuildConfig(per_db=5), workers), {}

    res = benchmark.pedantic(lambda *a: build([a[0]], *a[1:]), setup=fresh, rounds=2, iterations=1)
    assert res.items == N_AFLOW and not res.errors
    record_throughput(benchmark, N_AFLOW)  # structures per second
