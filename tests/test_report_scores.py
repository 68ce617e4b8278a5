"""benchmint report: "does seeing help" for the set-scored benchmarks (SPM-Bench SIP-F1, CrystalXRD-Bench Jaccard)
across score runs, and eval runs without a score or grade step scored by the report; values worked out by hand,
every new figure opened."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchmint.cli import main
from benchmint.report.style import PALETTE


def _jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _score(pred: Path, gold: Path, task: str, out: Path) -> None:
    assert main(["score", str(pred), "--gold", str(gold), "--task", task, "--out", str(out), "--quiet",
                 "--workers", "1"]) == 0


def _opened(path: Path) -> int:
    """The figure opens, is of a readable size and drawn; the number of palette colours it uses."""
    img = Image.open(path)
    assert img.width >= 500 and img.height >= 300, path.name
    assert (np.asarray(img.convert("L")) < 250).mean() > 0.02, f"{path.name} is blank"
    rgb = np.asarray(img.convert("RGB")).reshape(-1, 3)
    return sum(int((rgb == [int(c[i:i + 2], 16) for i in (1, 3, 5)]).all(axis=1).sum() >= 20) for c in PALETTE[:7])


def test_seeing_helps_set_scored_by_hand(tmp_path):
    runs = tmp_path / "runs"
    # SPM-Bench, gold {A, B} on four items: with the figure exact on all (SIP-F1 1); blind exact on two and {C}
    # on two (no true positive: SIP-F1 0): gain (0 + 0 + 1 + 1) / 4 = 0.5
    gold = _jsonl(tmp_path / "spm_gold.jsonl", [{"id": f"q{i}", "answer": ["A", "B"]} for i in range(4)])
    seen = _jsonl(tmp_path / "spm_tv.jsonl", [{"id": f"q{i}", "model": "m", "setting": "default",
                                               "output": "Answer: A, B"} for i in range(4)])
    blind = _jsonl(tmp_path / "spm_blind.jsonl", [{"id": f"q{i}", "model": "m", "setting": "default-blind",
                                                   "output": "Answer: A, B" if i < 2 else "Answer: C"}
                                                  for i in range(4)])
    _score(seen, gold, "mcq", runs / "spm-seen")
    _score(blind, gold, "mcq", runs / "spm-blind")
    # CrystalXRD-Bench, gold {(100), (110)}: full exact on four (Jaccard 1); cif_only exact on one and {(222)} on
    # three (Jaccard 0): gain 3/4
    hkl = _jsonl(tmp_path / "hkl_gold.jsonl", [{"id": f"x{i}", "answer": [[1, 0, 0], [1, 1, 0]]} for i in range(4)])
    full = _jsonl(tmp_path / "hkl_full.jsonl", [{"id": f"x{i}", "model": "m", "setting": "full",
                                                 "answer": [[1, 0, 0], [1, 1, 0]]} for i in range(4)])
    cif = _jsonl(tmp_path / "hkl_cif.jsonl", [{"id": f"x{i}", "model": "m", "setting": "cif_only",
                                               "answer": [[1, 0, 0], [1, 1, 0]] if i == 0 else [[2, 2, 2]]}
                                              for i in range(4)])
    _score(full, hkl, "hkl", runs / "hkl-full")
    _score(cif, hkl, "hkl", runs / "hkl-cif")
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out)]) == 0
    rows = {(r["task"], r["with"], r["without"]): r for r in _csv(out / "tables" / "vision-gain-scores.csv")}
    assert set(rows) == {("mcq", "default", "default-blind"), ("hkl", "full", "cif_only")}
    spm = rows[("mcq", "default", "default-blind")]
    assert (spm["metric"], spm["model"], spm["items"], float(spm["gain"])) == ("sip_f1", "m", "4", 0.5)
    xrd = rows[("hkl", "full", "cif_only")]
    assert (xrd["metric"], float(xrd["gain"])) == ("jaccard", 0.75)
    for r in rows.values():
        assert 0 <= float(r["low"]) <= float(r["gain"]) <= float(r["high"]) <= 1
    assert _opened(out / "figures" / "vision-gain-scores.png") == 1  # one series: the gain


@pytest.fixture(scope="module")
def xrd_items(tmp_path_factory):
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    root = tmp_path_factory.mktemp("xrd")
    for i, entry in enumerate(AFLOW_PROTOTYPE_LIBRARY[:4]):
        (root / "cifs").mkdir(exist_ok=True)
        CifWriter(entry["snl"].structure).write_file(root / "cifs" / f"p{i}.cif")
    assert main(["xrd", "build", str(root / "cifs"), "--out", str(root / "build"), "--workers", "1"]) == 0
    return root / "build" / "items.jsonl"


def test_eval_runs_are_scored_by_the_report(tmp_path, xrd_items):
    runs = tmp_path / "runs"
    # CrystalXRD-Bench's deterministic baseline through eval, no --score: the report scores it (Jaccard 1.0)
    assert main(["eval", str(xrd_items), "--benchmark", "crystalxrd", "--baseline", "--out",
                 str(runs / "ev-xrd")]) == 0
    # A MatVQA eval run (its run.json and predictions as eval writes them): alpha right on 4 of 6; the report
    # grades it by rule (accuracy 4/6)
    items = _jsonl(tmp_path / "mv_items.jsonl", [{"id": f"m{i}", "question": "Which?", "options": ["a", "b", "c"],
                                                  "answer": 1 + i % 3} for i in range(6)])
    mv = runs / "ev-mv"
    _jsonl(mv / "predictions.jsonl", [{"id": f"m{i}", "model": "alpha", "setting": "default",
                                       "output": f"The answer is ({1 + i % 3 if i < 4 else 1 + (i + 1) % 3})"}
                                      for i in range(6)])
    (mv / "run.json").write_text(json.dumps({"benchmark": "matvqa", "model": "alpha", "setting": "default",
                                             "items_file": str(items)}))
    # SeePhys answers are open: the report names the grade step instead of grading without a judge
    sp = runs / "ev-sp"
    _jsonl(sp / "predictions.jsonl", [{"id": "1", "model": "alpha", "setting": "TV", "output": "<answer>2 s</answer>"}])
    (sp / "run.json").write_text(json.dumps({"benchmark": "seephys", "items_file": "seephys_items.jsonl"}))
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out)]) == 0
    table2 = _csv(out / "tables" / "xrd-table2-ev-xrd.csv")
    assert [(r["model"], float(r["jaccard"])) for r in table2] == [("benchmint-simulator", 1.0)]
    accuracy = _csv(out / "tables" / "matvqa-accuracy-ev-mv.csv")
    assert [(r["model"], r["graded"], float(r["accuracy"])) for r in accuracy] == [("alpha", "6", pytest.approx(4 / 6))]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "scored here as" in page and "benchmint grade" in page and "--judge-model" in page
    assert (out / "from-eval" / "ev-xrd" / "scores.jsonl").is_file()
    for png in (out / "figures").glob("*ev-*.png"):
        _opened(png)
    assert _opened(out / "figures" / "xrd-radar-ev-xrd.png") == 1  # one model

    # a report inside the folder it reads (as eval --report writes it) does not read its own outputs back
    inside = runs / "report"
    assert main(["report", str(runs), "--out", str(inside)]) == 0
    assert main(["report", str(runs), "--out", str(inside)]) == 0
    assert (inside / "tables" / "xrd-table2-ev-xrd.csv").read_bytes() == (out / "tables" / "xrd-table2-ev-xrd.csv").read_bytes()
    assert sorted(p.name for p in (inside / "tables").iterdir()) == sorted(p.name for p in (out / "tables").iterdir())

    # eval with --score: the score run read the predictions, so the report does not score them again
    chained = tmp_path / "chained"
    assert main(["eval", str(xrd_items), "--benchmark", "crystalxrd", "--baseline", "--score", "--out",
                 str(chained / "ev")]) == 0
    assert main(["report", str(chained), "--out", str(tmp_path / "r2")]) == 0
    assert not (tmp_path / "r2" / "from-eval").exists()
    assert "scored here as" not in (tmp_path / "r2" / "index.html").read_text(encoding="utf-8")
