"""benchmint generate review: sheets per reviewer with an overlap, read back with rejections and agreement
(% agreement and Cohen's kappa worked out by hand)."""

import csv
import json

import pytest

from benchmint.cli import main


def items_file(tmp_path, n=10):
    path = tmp_path / "gen" / "items.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"id": f"q{i:02d}", "question": f"Question {i}?",
                                        "options": [f"opt {c}" for c in "ABCDEF"], "answer": "A, C",
                                        "image": f"crops/{i}.png"}) + "\n" for i in range(n)))
    (path.parent / "rejected.jsonl").write_text(json.dumps({"stage": "qa", "reason": "generator_failed",
                                                            "id": "q99"}) + "\n")
    return path


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_sheets_round_trip_with_rejections_and_kappa(tmp_path):
    items = items_file(tmp_path)
    sheets = tmp_path / "sheets"
    assert main(["generate", "review", "export", str(items), "--out", str(sheets), "--sample", "10",
                 "--reviewers", "2", "--overlap", "0.4", "--seed", "3"]) == 0
    record = json.loads((sheets / "review.json").read_text())
    shared = record["overlap"]
    assert len(shared) == 4
    r1, r2 = read_csv(sheets / "reviewer1.csv"), read_csv(sheets / "reviewer2.csv")
    # 4 shared items on both sheets, the other 6 dealt in turn: 7 rows each, every item on some sheet.
    assert len(r1) == len(r2) == 7 and {r["id"] for r in r1 + r2} == {f"q{i:02d}" for i in range(10)}
    assert r1[0]["options"].splitlines()[1] == "B. opt B" and list(r1[0])[-5:] == [
        "answerability", "correctness", "distractor_quality", "verdict", "comment"]

    # On the overlap (in sheet order): answerability y y n y / y n n y -> 3 of 4 agree; yes rates 3/4 and 2/4,
    # chance 3/4*2/4 + 1/4*2/4 = 1/2, kappa (3/4 - 1/2) / (1 - 1/2) = 0.5. Correctness all yes: 100%, kappa
    # undefined (chance agreement 1). Distractors y n y n / n y n y: 0%, chance 1/2, kappa -1.
    marks1 = {"answerability": "yyny", "correctness": "yyyy", "distractor_quality": "ynyn"}
    marks2 = {"answerability": "ynny", "correctness": "yyyy", "distractor_quality": "nyny"}
    for rows, marks in ((r1, marks1), (r2, marks2)):
        k = 0
        for row in rows:
            if row["id"] in shared:
                for c, m in marks.items():
                    row[c] = {"y": "yes", "n": "no"}[m[k]]
                row["verdict"] = "keep"  # kept whatever the marks: the verdict decides
                k += 1
    own1 = [r for r in r1 if r["id"] not in shared]
    own1[0].update(answerability="no", correctness="yes", distractor_quality="yes")  # blank verdict + a no: reject
    own1[1].update(verdict="reject", comment="the image is a schematic")
    own1[2].update(answerability="yes", correctness="yes", distractor_quality="yes")  # kept; the rest unreviewed
    write_csv(sheets / "reviewer1.csv", r1)
    write_csv(sheets / "reviewer2.csv", r2)

    out = tmp_path / "reviewed"
    assert main(["generate", "review", "import", str(sheets / "reviewer1.csv"), str(sheets / "reviewer2.csv"),
                 "--items", str(items), "--out", str(out)]) == 0
    summary = json.loads((out / "review_summary.json").read_text())
    a = summary["agreement"]
    assert a["answerability"]["pairs"][0] == {"reviewers": ["reviewer1", "reviewer2"], "items": 4,
                                              "agreement": 0.75, "kappa": 0.5}
    assert a["correctness"]["mean_agreement"] == 1.0 and a["correctness"]["mean_kappa"] is None
    assert a["distractor_quality"]["mean_agreement"] == 0.0 and a["distractor_quality"]["mean_kappa"] == -1.0
    assert summary["rejected"] == 2 and summary["kept"] == 8 and summary["reviewed"] == 7
    rejected = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert rejected[0]["reason"] == "generator_failed"  # the generation's own rows come first
    assert [(r["id"], r["criteria_failed"], r["comment"]) for r in rejected[1:]] == sorted(
        [(own1[0]["id"], ["answerability"], ""), (own1[1]["id"], [], "the image is a schematic")])
    kept = {json.loads(line)["id"] for line in (out / "items.jsonl").read_text().splitlines()}
    assert kept == {f"q{i:02d}" for i in range(10)} - {own1[0]["id"], own1[1]["id"]}


def test_a_bad_cell_names_sheet_line_and_column(tmp_path, capsys):
    items = items_file(tmp_path)
    sheets = tmp_path / "sheets"
    assert main(["generate", "review", "export", str(items), "--out", str(sheets), "--sample", "3",
                 "--reviewers", "1", "--overlap", "0"]) == 0
    rows = read_csv(sheets / "reviewer1.csv")
    rows[1]["correctness"] = "maybe"
    write_csv(sheets / "reviewer1.csv", rows)
    assert main(["generate", "review", "import", str(sheets / "reviewer1.csv"), "--items", str(items),
                 "--out", str(tmp_path / "r")]) == 2
    assert "reviewer1.csv, line 3, column correctness: expected yes or no, got 'maybe'" in capsys.readouterr().err


@pytest.mark.parametrize("overlap", [0.0, 1.0])
def test_overlap_extremes(tmp_path, overlap):
    items = items_file(tmp_path)
    record_dir = tmp_path / "s"
    assert main(["generate", "review", "export", str(items), "--out", str(record_dir), "--sample", "6",
                 "--reviewers", "3", "--overlap", str(overlap)]) == 0
    record = json.loads((record_dir / "review.json").read_text())
    sizes = sorted(len(v) for v in record["sheets"].values())
    assert sizes == ([2, 2, 2] if overlap == 0 else [6, 6, 6])
