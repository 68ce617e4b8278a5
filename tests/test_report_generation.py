"""benchmint report on generation outputs: result codes of generate runs and reviewers' kappas of review imports,
tables against values worked out by hand and every figure opened."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchmint.cli import main
from benchmint.generate.flow import code_counts
from benchmint.generate.matvqa import STAGE_CODES
from benchmint.report.style import PALETTE

SAMPLES = Path(__file__).resolve().parents[1] / "src" / "benchmint" / "samples"


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _colours(path: Path) -> int:
    rgb = np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3)
    return sum(int((rgb == [int(c[i:i + 2], 16) for i in (1, 3, 5)]).all(axis=1).sum() >= 20) for c in PALETTE[:7])


def _opened(path: Path) -> None:
    img = Image.open(path)
    assert img.width >= 500 and img.height >= 300, path.name
    assert (np.asarray(img.convert("L")) < 250).mean() > 0.02, f"{path.name} is blank"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    runs = root / "runs"
    # CSMBench questions from the four sample figures, no model: one question, three figures rejected
    src = root / "src"
    src.mkdir()
    shutil.copyfile(SAMPLES / "csmbench_open" / "micrograph.png", src / "micrograph.png")
    rows = [json.loads(x) for x in (SAMPLES / "csmbench_open" / "metadata.jsonl").read_text().splitlines()]
    (src / "figures.jsonl").write_text("".join(
        json.dumps({"image": "micrograph.png", "caption": r["image_caption"], "discussion": r["describe_paragraph"],
                    "label": str(r["index"])}) + "\n" for r in rows))
    assert main(["generate", "csmbench-mcq", str(src / "figures.jsonl"), "--out", str(runs / "csm-gen")]) in (0, 1)
    # A MatVQA generation's run.json as its generator writes the two stages (counts through its own helper):
    # stage 1, 10 questions: 6 NO_SHORTCUT, 3 REWRITTEN, 1 FAIL_ITERATIONS; stage 2, 4: 2 NO_SHORTCUT, 2 REWRITTEN
    mv = runs / "matvqa-gen"
    mv.mkdir(parents=True)
    for name in ("items.jsonl", "rejected.jsonl", "trace.jsonl"):
        (mv / name).write_text("")
    stage1 = ["NO_SHORTCUT"] * 6 + ["REWRITTEN"] * 3 + ["FAIL_ITERATIONS"]
    (mv / "run.json").write_text(json.dumps({
        "benchmark": "matvqa", "counts": {"figures": 10, "items": 4},
        "stage1": code_counts(stage1, STAGE_CODES), "stage2": code_counts(["NO_SHORTCUT"] * 2 + ["REWRITTEN"] * 2,
                                                                          STAGE_CODES)}))
    # Two reviewers on the same four SPM-Bench items (marks as in test_generate_review, worked out there):
    # answerability y y n y / y n n y: 75%, kappa 0.5; correctness all yes: 100%, kappa undefined; distractors
    # y n y n / n y n y: 0%, kappa -1
    items = root / "spm-gen" / "items.jsonl"
    items.parent.mkdir()
    items.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Q{i}?", "options": list("abcdef"),
                                         "answer": "A", "image": f"{i}.png"}) + "\n" for i in range(4)))
    sheets = root / "sheets"
    assert main(["generate", "review", "export", str(items), "--out", str(sheets), "--sample", "4", "--reviewers",
                 "2", "--overlap", "1.0"]) == 0
    marks = {"reviewer1": {"answerability": "yyny", "correctness": "yyyy", "distractor_quality": "ynyn"},
             "reviewer2": {"answerability": "ynny", "correctness": "yyyy", "distractor_quality": "nyny"}}
    for reviewer, m in marks.items():
        sheet = _csv(sheets / f"{reviewer}.csv")
        sheet.sort(key=lambda r: r["id"])
        for k, row in enumerate(sheet):
            row.update({c: {"y": "yes", "n": "no"}[v[k]] for c, v in m.items()}, verdict="keep")
        _write_csv(sheets / f"{reviewer}.csv", sheet)
    assert main(["generate", "review", "import", str(sheets / "reviewer1.csv"), str(sheets / "reviewer2.csv"),
                 "--items", str(items), "--out", str(runs / "spm-review")]) == 0
    out = root / "report"
    status = main(["report", str(runs), "--out", str(out)])
    return runs, out, status


def test_result_codes_by_hand(report):
    runs, out, status = report
    assert status == 0
    rows = _csv(out / "tables" / "generate-codes-matvqa-gen.csv")
    got = {(r["group"], r["code"]): (int(r["count"]), float(r["share"]), int(r["group_total"])) for r in rows}
    assert got[("stage1", "NO_SHORTCUT")] == (6, 0.6, 10) and got[("stage1", "REWRITTEN")] == (3, 0.3, 10)
    assert got[("stage1", "FAIL_ITERATIONS")] == (1, 0.1, 10) and got[("stage1", "FAIL_REWRITE")] == (0, 0.0, 10)
    assert got[("stage2", "REWRITTEN")] == (2, 0.5, 4)
    assert {c for g, c in got if g == "stage1"} == set(STAGE_CODES)  # every known code listed, zero or not
    csm = _csv(out / "tables" / "generate-codes-csm-gen.csv")
    item = next(r for r in csm if r["code"] == "ITEM")
    assert (item["group"], item["count"], float(item["share"]), item["group_total"]) == ("figures", "1", 0.25, "4")
    assert sum(int(r["count"]) for r in csm) == 4  # one question, three figures rejected with their reasons


def test_review_kappas_by_hand(report):
    _, out, _ = report
    rows = {(r["criterion"], r["reviewer_a"]): r for r in _csv(out / "tables" / "review-agreement-spm-review.csv")}
    a = rows[("answerability", "reviewer1")]
    assert (a["reviewer_b"], a["items"], float(a["agreement"]), float(a["kappa"])) == ("reviewer2", "4", 0.75, 0.5)
    assert rows[("correctness", "reviewer1")]["kappa"] == "" and float(rows[("correctness", "reviewer1")]["agreement"]) == 1
    assert float(rows[("distractor_quality", "reviewer1")]["kappa"]) == -1.0
    assert float(rows[("answerability", "(mean of pairs)")]["kappa"]) == 0.5


def test_generation_figures_open_and_are_drawn(report):
    _, out, _ = report
    codes = out / "figures" / "generate-codes-matvqa-gen.png"
    review = out / "figures" / "review-agreement-spm-review.png"
    for png in (codes, review, out / "figures" / "generate-codes-csm-gen.png"):
        _opened(png)
    assert _colours(codes) == 2  # one panel per stage, each in its colour
    assert _colours(review) == 1  # one pair of reviewers
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "Result codes of generate matvqa" in page and "Reviewers" in page and "Cohen" in page
