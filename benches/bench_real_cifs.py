"""simulate() on real database CIFs (the corpus of scripts/fetch_corpus.py) against the pymatgen reference path.

Per CIF: the fast path (``simulate``: gemmi route where it reproduces CifParser, compiled sticks and profile) and
the reference path (pymatgen CifParser + XRDCalculator + the dense reference profile), best of 3 and of 1; the
figure is the median of the per-CIF ratios, with the share of CIFs on the gemmi route. Every CIF's strongest-peak
position and ground truth must be the same on both paths. Skipped when the corpus is absent.

Run: .venv/bin/python scripts/fetch_corpus.py && .venv/bin/python -m pytest benches/bench_real_cifs.py --benchmark-only
"""

from __future__ import annotations

import statistics
import warnings
from pathlib import Path

import pytest
from bench_xrd_build import fast_path, outcome, reference_path

from benchmint.xrd.cifread import read_sites

from conftest import best_time

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "files" / "cif"

pytestmark = [pytest.mark.real,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: python scripts/fetch_corpus.py")]


@pytest.fixture(scope="module")
def texts(forced_impl):
    with forced_impl("compiled"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, unreadable = [], 0
        for path in sorted(CORPUS.glob("*/*.cif")):
            text = path.read_text(encoding="utf-8", errors="replace")
            try:
                want = outcome(reference_path(text))
            except Exception:  # noqa: BLE001 - pymatgen cannot read it: not a timing case
                unreadable += 1
                continue
            out.append((path, text, want))
        yield out, unreadable


def test_real_cifs_per_cif(benchmark, texts, forced_impl):
    cases, unreadable = texts
    benchmark.group = "xrd-simulate-real-cifs"
    with forced_impl("compiled"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = benchmark.pedantic(lambda: [outcome(fast_path(t)) for _, t, _ in cases], rounds=1, iterations=1)
        assert got == [want for _, _, want in cases]
        routes = [read_sites(t)[1] for _, t, _ in cases]
        ratios = [best_time(reference_path, t, 1) / best_time(fast_path, t, 3) for _, t, _ in cases]
    info = benchmark.extra_info
    info["cifs"], info["unreadable_by_pymatgen"] = len(cases), unreadable
    info["gemmi_route_share"] = routes.count("gemmi") / len(routes)
    info["median_speedup"] = statistics.median(ratios)
    info["p10_speedup"] = sorted(ratios)[len(ratios) // 10]
    if not benchmark.disabled:
        # The goals: 20x pymatgen per CIF (median of ratios) with 90% of the CIFs on the fast route.
        assert info["median_speedup"] >= 20 and info["gemmi_route_share"] >= 0.9
