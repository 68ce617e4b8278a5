"""Real database CIFs (the corpus of scripts/fetch_corpus.py): the fast path gives pymatgen's structure and item.

Skipped when the corpus is absent. For each CIF the XRD item of ``simulate`` (the gemmi route where it applies)
has the same strongest-peak position and ground-truth HKL set as the reference path (pymatgen's CifParser,
XRDCalculator and the dense reference profile); a CIF pymatgen cannot read must fail on the fast path too.
"""

import json
import warnings
from pathlib import Path

import pytest
from test_cifread import assert_same_structure
from test_xrd_simulate import _reference_item

from benchmint.xrd import cifread_ref
from benchmint.xrd.cifread import read_structure
from benchmint.xrd.profile import ProfileParams
from benchmint.xrd.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus" / "files" / "cif"

pytestmark = [pytest.mark.real,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: python scripts/fetch_corpus.py")]


def _cifs() -> list[Path]:
    return sorted(CORPUS.glob("*/*.cif")) if CORPUS.is_dir() else []


def test_corpus_is_what_the_manifest_lists():
    manifest = json.loads((ROOT / "corpus" / "manifest.json").read_text(encoding="utf-8"))
    listed = {f"{s['name']}/{m['file']}" for s in manifest["sources"] if s["kind"] == "cif"
              for m in s["members"].values()}
    assert {f"{p.parent.name}/{p.name}" for p in _cifs()} == listed and len(listed) >= 500


@pytest.mark.parametrize("path", _cifs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_path_gives_pymatgens_item(path, forced_impl):
    text = path.read_text(encoding="utf-8", errors="replace")
    params = ProfileParams()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pymatgen's notes on rounded occupancies and the like
        try:
            structure = cifread_ref.structure(text)
            want = _reference_item(structure, params)
        except Exception:  # noqa: BLE001 - pymatgen cannot read it: neither may the fast path
            with forced_impl("compiled"), pytest.raises(Exception):  # noqa: B017 - whatever pymatgen raised
                simulate(text, params)
            return
        with forced_impl("compiled"):
            sim = simulate(text, params)
            fast_structure, _ = read_structure(text)
    assert (sim.pattern.two_theta_star, sim.pattern.ground_truth) == want
    assert_same_structure(fast_structure, structure)  # the same sites and species (oxidation states included)
