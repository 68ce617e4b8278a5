"""XRD build per CIF: CIF text -> (pattern, 2θ*, HKL ground truth), fast path vs the reference path.

fast: benchmint.xrd.simulate.simulate(text): cifread.read_sites (gemmi route where it reproduces
      pymatgen's parse) + sticks.compute_sticks + profile.sticks_pattern (compiled kernels)
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
from benchmint.xrd.cifread import pymatgen_structure, read_sites
from benchmint.xrd.profile import ProfileParams
from benchmint.xrd.simulate import simulate
from benchmint.xrd.sticks import reference_sticks

N_AFLOW = 40
PARAMS = ProfileParams()


def fast_path(text: str):
    res = simulate(text, PARAMS).pattern
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
    routes = [read_sites(t)[1] for t in texts]
    fast = [best_time(fast_path, t, 5) for t in texts]
    ref = [best_time(reference_path, t, 3) for t in texts]
    benchmark.extra_info["gemmi_route"] = routes.count("gemmi")
    benchmark.extra_info["median_ms_fast"] = 1e3 * statistics.median(fast)
    benchmark.extra_info["median_ms_reference"] = 1e3 * statistics.median(ref)
    benchmark.extra_info["median_speedup"] = statistics.median(r / f for r, f in zip(ref, fast))
    read_fast = [best_time(read_sites, t, 5) for t in texts]
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
    assert read_sites(text)[1] == "gemmi"
    got = benchmark(fast_path, text)
    assert outcome(got) == want


def test_big_reference(benchmark, big):
    text, want = big
    benchmark.group = "xrd-build-nacl-3x3x3-216-atoms"
    got = benchmark.pedantic(reference_path, args=(text,), rounds=3, iterations=1)
    assert outcome(got) == want


N_LARGE = 8


@pytest.fixture(scope="module")
def large():
    """Supercells of 8 AFLOW prototypes (seed 20261121) grown to 200-2000 atoms, as P1 CIFs."""
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    rng = random.Random(20261121)
    texts = []
    for i in rng.sample(range(len(AFLOW_PROTOTYPE_LIBRARY)), N_LARGE):
        s = AFLOW_PROTOTYPE_LIBRARY[i]["snl"].structure
        scale = [1, 1, 1]
        while len(s) * scale[0] * scale[1] * scale[2] < 200:  # grow the shortest axis
            k = min(range(3), key=lambda a: s.lattice.abc[a] * scale[a])
            scale[k] += 1
        texts.append(str(CifWriter(s * scale)))
    return texts, [outcome(reference_path(t)) for t in texts]


def test_large_cells(benchmark, large):
    """Per-structure ratios on cells of >= 200 atoms (median of ratios in extra_info)."""
    texts, want = large
    benchmark.group = f"xrd-build-large-{N_LARGE}-cells"
    got = benchmark.pedantic(lambda: [fast_path(t) for t in texts], rounds=3, iterations=1)
    assert [outcome(g) for g in got] == want
    atoms = [len(read_sites(t)[0]) for t in texts]
    assert min(atoms) >= 200 and max(atoms) <= 2000
    fast = [best_time(fast_path, t, 3) for t in texts]
    ref = [best_time(reference_path, t, 2) for t in texts]
    benchmark.extra_info["atoms"] = atoms
    benchmark.extra_info["median_ms_fast"] = 1e3 * statistics.median(fast)
    benchmark.extra_info["median_ms_reference"] = 1e3 * statistics.median(ref)
    benchmark.extra_info["median_speedup"] = statistics.median(r / f for r, f in zip(ref, fast))
    benchmark.extra_info["min_speedup"] = min(r / f for r, f in zip(ref, fast))


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
