"""XRD build per CIF: CIF text -> (pattern, 2θ*, HKL ground truth), fast path vs the reference path.

fast: benchmint.xrd.simulate.simulate(text): cifread.read_sites (gemmi route where it reproduces
      pymatgen's parse) + sticks.compute_sticks + profile.sticks_pattern (compiled kernels)
reference: pymatgen CifParser + pymatgen XRDCalculator.get_pattern + the dense reference profile
      (cifread_ref, sticks_ref, profile_ref: the reference forms)

Each bench checks its outcomes (2θ*, ground truth) against the other path, computed apart from
the timed call: the fast benches against the reference path, the reference benches against the
fast path.

Run: .venv/bin/python -m pytest benches/bench_xrd_build.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import json
import random
import statistics

import pytest

from benchmint.xrd import cifread_ref, profile_ref, sticks_ref
from benchmint.xrd.cifread import read_sites
from benchmint.xrd.profile import ProfileParams
from benchmint.xrd.simulate import simulate

from conftest import best_time

N_AFLOW = 40
PARAMS = ProfileParams()


def fast_path(text: str):
    res = simulate(text, PARAMS).pattern
    return res.curve, res.two_theta_star, res.ground_truth


def reference_path(text: str):
    structure = cifread_ref.structure(text)
    s = sticks_ref.sticks(structure)
    curve, star, _, truth = profile_ref.broaden(s.two_theta, s.intensity, PARAMS)
    ground_truth = sorted({h for i in truth.tolist() for h in s.hkls[i] if any(h)})
    return curve, float(PARAMS.grid()[star]), ground_truth


def outcome(result):
    return result[1], result[2]


@pytest.fixture(scope="module")
def compiled_module(forced_impl):
    with forced_impl("compiled"):
        yield


def outcomes(texts):
    """(reference path outcomes, fast path outcomes) of every text, each computed once here."""
    return [outcome(reference_path(t)) for t in texts], [outcome(fast_path(t)) for t in texts]


@pytest.fixture(scope="module")
def aflow(compiled_module):
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    idx = sorted(random.Random(20261121).sample(range(len(AFLOW_PROTOTYPE_LIBRARY)), N_AFLOW))
    texts = [str(CifWriter(AFLOW_PROTOTYPE_LIBRARY[i]["snl"].structure, symprec=0.01)) for i in idx]
    return texts, *outcomes(texts)


@pytest.fixture(scope="module")
def big(compiled_module):
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    text = str(CifWriter(nacl * (3, 3, 3)))  # P1, 216 atom rows
    (want_ref,), (want_fast,) = outcomes([text])
    return text, want_ref, want_fast


def test_aflow_fast(benchmark, aflow):
    texts, want, _ = aflow
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
    read_ref = [best_time(cifread_ref.structure, t, 3) for t in texts]
    benchmark.extra_info["median_ms_read_fast"] = 1e3 * statistics.median(read_fast)
    benchmark.extra_info["median_ms_read_pymatgen"] = 1e3 * statistics.median(read_ref)


def test_aflow_reference(benchmark, aflow):
    texts, _, want = aflow
    benchmark.group = f"xrd-build-aflow-{N_AFLOW}"
    got = benchmark.pedantic(lambda: [reference_path(t) for t in texts], rounds=3, iterations=1)
    assert [outcome(g) for g in got] == want


def test_big_fast(benchmark, big):
    text, want, _ = big
    benchmark.group = "xrd-build-nacl-3x3x3-216-atoms"
    assert read_sites(text)[1] == "gemmi"
    got = benchmark(fast_path, text)
    assert outcome(got) == want


def test_big_reference(benchmark, big):
    text, _, want = big
    benchmark.group = "xrd-build-nacl-3x3x3-216-atoms"
    got = benchmark.pedantic(reference_path, args=(text,), rounds=3, iterations=1)
    assert outcome(got) == want


N_LARGE = 8


@pytest.fixture(scope="module")
def large(compiled_module):
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
    return texts, [outcome(reference_path(t)) for t in texts]  # the fast path's bench is checked against these


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

    from benchmint.xrd.build import BuildConfig, build

    from conftest import record_throughput

    cifs = tmp_path / "cifs"
    cifs.mkdir()
    for i, text in enumerate(aflow[0]):  # (texts, reference outcomes, fast outcomes)
        (cifs / f"c{i:02d}.cif").write_text(text)
    out = tmp_path / "out"

    def fresh():
        shutil.rmtree(out, ignore_errors=True)
        return (cifs, out, BuildConfig(per_db=5), workers), {}

    res = benchmark.pedantic(lambda *a: build([a[0]], *a[1:]), setup=fresh, rounds=2, iterations=1)
    assert res.items == N_AFLOW and not res.errors
    record_throughput(benchmark, N_AFLOW)  # structures per second
    # Each item's 2θ* and ground truth are the reference path's (items.jsonl is in input order).
    items = [json.loads(line) for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(it["two_theta_star"], [tuple(h) for h in it["answer"]]) for it in items] == \
           [(round(star, 2), truth) for star, truth in aflow[1]]
