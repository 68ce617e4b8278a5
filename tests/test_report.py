"""benchmint report on small runs made by the real commands: tables against values worked out by hand, every figure
opened, the page self-contained (and rendered in headless Chromium where it is installed)."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from PIL import Image

from benchmint.cli import main
from benchmint.report.paired import paired_bootstrap
from benchmint.report.style import PALETTE

SAMPLES = Path(__file__).resolve().parents[1] / "src" / "benchmint" / "samples"


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _spm(root: Path) -> None:
    """Six items of gold {A, B} in three domains; four models: exact, {A} (under), {A, B, C} (over), and mixed
    (two of each)."""
    gold = [{"id": f"q{i}", "answer": ["A", "B"], "meta": {"domain": f"D{i // 2 + 1}", "level": 1 + i % 2}}
            for i in range(6)]
    answers = {"exact": ["A, B"] * 6, "under": ["A"] * 6, "over": ["A, B, C"] * 6,
               "mixed": ["A, B", "A, B", "A", "A", "A, B, C", "A, B, C"]}
    preds = [{"id": f"q{i}", "model": m, "output": f"The answer is {a}", "confidence": 0.5 + 0.08 * i,
              "difficulty": 0.1 + 0.15 * i, "tokens": 500 + 300 * i}
             for m, outs in answers.items() for i, a in enumerate(outs)]
    _jsonl(root / "spm_gold.jsonl", gold)
    _jsonl(root / "spm_pred.jsonl", preds)
    assert main(["score", str(root / "spm_pred.jsonl"), "--gold", str(root / "spm_gold.jsonl"), "--task", "mcq",
                 "--out", str(root / "runs" / "spm"), "--by", "domain,level", "--quiet", "--workers", "1"]) == 0


def _hkl(root: Path) -> None:
    """Four items of gold {(100), (110)}: model exact, and model over ({(100), (110), (111), (200)}: tp 2, fp 2)."""
    gold = [{"id": f"x{i}", "answer": [[1, 0, 0], [1, 1, 0]],
             "meta": {"db": "A" if i < 2 else "B", "union_size": "Double", "angle_range": ("low", "high")[i % 2]}}
            for i in range(4)]
    preds = [{"id": f"x{i}", "model": "exact", "answer": [[1, 0, 0], [1, 1, 0]]} for i in range(4)]
    preds += [{"id": f"x{i}", "model": "over", "answer": [[1, 0, 0], [1, 1, 0], [1, 1, 1], [2, 0, 0]]}
              for i in range(4)]
    _jsonl(root / "hkl_gold.jsonl", gold)
    _jsonl(root / "hkl_pred.jsonl", preds)
    assert main(["score", str(root / "hkl_pred.jsonl"), "--gold", str(root / "hkl_gold.jsonl"), "--task", "hkl",
                 "--out", str(root / "runs" / "hkl"), "--by", "db,union_size,angle_range", "--quiet",
                 "--workers", "1"]) == 0


def _matvqa(root: Path) -> None:
    """Six questions; alpha right on all in TV and on the first three in TO, beta right on the first four in both
    settings. A second run: an ablation set where alpha is right on two of six."""
    shutil.copy(SAMPLES / "csmbench_open" / "micrograph.png", root / "fig.png")
    items = [{"id": f"m{i}", "question": "Which?", "options": ["a", "b", "c", "d"], "answer": 1 + i % 4,
              "image": "fig.png", "task": ("comparative", "structure")[i % 2]} for i in range(6)]
    _jsonl(root / "mv_items.jsonl", items)

    def replies(model: str, right: int, setting: str | None = None) -> list[dict]:
        rows = []
        for i, it in enumerate(items):
            ans = it["answer"] if i < right else it["answer"] % 4 + 1
            rows.append({"id": it["id"], "model": model, "output": f"The answer is ({ans})",
                         **({"setting": setting} if setting else {})})
        return rows

    _jsonl(root / "mv_pred.jsonl", replies("alpha", 6, "TV") + replies("alpha", 3, "TO") + replies("beta", 4, "TV")
           + replies("beta", 4, "TO"))
    assert main(["grade", str(root / "mv_pred.jsonl"), "--gold", str(root / "mv_items.jsonl"), "--benchmark",
                 "matvqa", "--out", str(root / "runs" / "matvqa"), "--by", "task"]) == 0
    _jsonl(root / "mv_main.jsonl", replies("alpha", 6))
    _jsonl(root / "mv_lang.jsonl", replies("alpha", 2))
    assert main(["grade", str(root / "mv_main.jsonl"), "--gold", str(root / "mv_items.jsonl"), "--benchmark",
                 "matvqa", "--out", str(root / "runs" / "matvqa-ablation"), "--ablation", "language-removed",
                 str(root / "mv_items.jsonl"), str(root / "mv_lang.jsonl")]) == 0


def _xrd(root: Path) -> None:
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    for i, entry in enumerate(AFLOW_PROTOTYPE_LIBRARY[:6]):
        db = root / "cifs" / ("A", "B")[i % 2]
        db.mkdir(parents=True, exist_ok=True)
        CifWriter(entry["snl"].structure).write_file(db / f"p{i}.cif")
    assert main(["xrd", "build", str(root / "cifs"), "--out", str(root / "runs" / "xrd"), "--db-from-dirname",
                 "--per-db", "2", "--workers", "1"]) == 0


def _seephys(root: Path) -> None:
    """Four problems in TV, TC and TO, judged on 127.0.0.1 by two judges: alpha right on 4, 3 and 2 of them, beta on
    2 in each; people ann (right on s1, s2) and bob (s1) as students."""
    from chat_server import ChatServer, Reply

    items = [{"id": f"s{i}", "question": f"Problem {i}?", "answer": f"{i}.0 m/s^2", "language": "English",
              "subject": ("Mechanics", "Optics")[i % 2], "level": 1 + i % 3, "sig_figs": 2} for i in range(1, 5)]
    _jsonl(root / "sp_items.jsonl", items)

    def sheet(model: str, right: int, setting: str | None) -> list[dict]:
        return [{"id": it["id"], "model": model, "output": f"<answer>{it['answer'] if k < right else '99 m/s^2'}"
                 "</answer>", **({"setting": setting} if setting else {})} for k, it in enumerate(items)]

    rows = sheet("alpha", 4, "TV") + sheet("alpha", 3, "TC") + sheet("alpha", 2, "TO")
    rows += sheet("beta", 2, "TV") + sheet("beta", 2, "TC") + sheet("beta", 2, "TO")
    rows += sheet("ann", 2, None) + sheet("bob", 1, None)
    _jsonl(root / "sp_pred.jsonl", rows)
    # Both judges call every answer the screen could not accept wrong.
    with ChatServer() as first, ChatServer() as second:
        first.default = second.default = Reply(text="Judgement: 0")
        assert main(["grade", str(root / "sp_pred.jsonl"), "--gold", str(root / "sp_items.jsonl"), "--benchmark",
                     "seephys", "--out", str(root / "runs" / "seephys-judged"), "--judge-model", "j1",
                     "--judge-base-url", first.url, "--second-judge-model", "j2", "--second-judge-base-url",
                     second.url, "--retry-delay", "0", "--workers", "1", "--quiet", "--by", "subject",
                     "--human-group", "students=mean:ann,bob", "--audit-sample", "4"]) == 0


def _csmbench(root: Path) -> None:
    """The bundled open-answer sample and a third model (the careful answers cut to their first clause), so that
    each scale pair has three models for its correlation."""
    rows = [json.loads(line) for line in (SAMPLES / "csmbench_open_pred.jsonl").read_text().splitlines()]
    third = [{**r, "model": "terse-model", "output": r["output"].split(";")[0].split(",")[0]}
             for r in rows if r["model"] == "careful-model"]
    _jsonl(root / "csm_pred.jsonl", rows + third)
    assert main(["grade", str(root / "csm_pred.jsonl"), "--gold", str(SAMPLES / "csmbench_open"), "--benchmark",
                 "csmbench-open", "--out", str(root / "runs" / "csmbench"), "--by", "scale", "--bertscore", "minilm",
                 "--quiet"]) == 0


def _csmbench_mcq(root: Path) -> None:
    """Eight caption-matching items, two per scale, hybrid on every other one; m1 right on the first five, m2 on
    the even ones."""
    folder = root / "csm_mcq"
    folder.mkdir()
    shutil.copy(SAMPLES / "csmbench_open" / "micrograph.png", folder / "x.png")
    options = json.dumps([{"label": x, "caption": f"caption {x}"} for x in "ABCD"])
    scales = ("AtomScale", "Microscale", "Mesoscale", "Macroscale")
    items = [{"index": i, "file_name": "x.png", "options": options, "correct_answer": "ABCD"[i % 4],
              "scale": scales[i // 2], "hybrid": ("yes", "no")[i % 2]} for i in range(8)]
    _jsonl(folder / "metadata.jsonl", items)
    preds = [{"id": str(i), "model": m, "output": f"The answer is {it['correct_answer'] if ok(i) else 'D' if i % 4 < 3 else 'A'}"}
             for m, ok in (("m1", lambda i: i < 5), ("m2", lambda i: i % 2 == 0)) for i, it in enumerate(items)]
    _jsonl(root / "csm_mcq_pred.jsonl", preds)
    assert main(["grade", str(root / "csm_mcq_pred.jsonl"), "--gold", str(folder), "--benchmark", "csmbench-mcq",
                 "--out", str(root / "runs" / "csmbench-mcq"), "--by", "scale,hybrid", "--quiet"]) == 0


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    _spm(root)
    _hkl(root)
    _matvqa(root)
    _xrd(root)
    # The bundled SeePhys sample through grade (without a judge, some answers are undecided: exit 1, as the demo
    # expects).
    assert main(["grade", str(SAMPLES / "seephys_pred.jsonl"), "--gold", str(SAMPLES / "seephys_items.jsonl"),
                 "--benchmark", "seephys", "--out", str(root / "runs" / "seephys")]) == 1
    _seephys(root)
    _csmbench(root)
    _csmbench_mcq(root)
    out = root / "report"
    status = main(["report", str(root / "runs"), "--out", str(out)])
    return root, out, status


def _table(out: Path, name: str) -> list[dict]:
    with open(out / "tables" / f"{name}.csv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _row(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, rows)
    return found[0]


def test_table4_is_the_papers_by_hand(report):
    _, out, _ = report
    rows = _table(out, "spm-table4-sip-f1-sensitivity")
    # λ·2TP / (TP + Γ·FP + |Sc|): the paper's 0.240 (|Sc| 2, {2, 1}, Γ 6, λ 0.6), 0.300 (|Sc| 3, {3, 1}, Γ 6),
    # 0.400 (|Sc| 2, {1, 0}) and 0.200 (|Sc| 1, {1, 1}, Γ 1, λ 0.3).
    assert float(_row(rows, gold_size="2", tp="2", fp="1", gamma="6.0")["lambda_0.6"]) == pytest.approx(0.24)
    assert float(_row(rows, gold_size="3", tp="3", fp="1", gamma="6.0")["lambda_0.6"]) == pytest.approx(0.3)
    assert float(_row(rows, gold_size="2", tp="1", fp="0")["lambda_0.6"]) == pytest.approx(0.4)
    assert float(_row(rows, gold_size="1", tp="1", fp="1", gamma="1.0")["lambda_0.3"]) == pytest.approx(0.2)
    assert len(rows) == 3 * 6 + 5  # three scenarios with a wrong option over six Γ, five without


def test_figure5_by_hand(report):
    _, out, _ = report
    rows = _table(out, "spm-fig5-aggressive")
    # λ·4 / (2 + Γ + 2): 0.6·4/10 = 0.24 at (0.6, 6); 0.7·4/8 = 0.35 at (0.7, 4), the largest, still below 0.40
    assert float(_row(rows, gamma="6.0")["lambda_0.6"]) == pytest.approx(0.24)
    assert float(_row(rows, gamma="4.0")["lambda_0.7"]) == pytest.approx(0.35)
    assert max(float(v) for r in rows for k, v in r.items() if k != "gamma") == pytest.approx(0.35)


def test_lambda_gamma_grid_by_hand(report):
    _, out, _ = report
    rows = _table(out, "spm-lambda-gamma-spm")
    # mixed: two exact items (1), two {A} of {A, B} (λ·2/3), two {A, B, C} (λ·4/(4 + Γ)).
    for lam, gamma in ((0.4, 4.0), (0.7, 8.0), (0.6, 6.0)):
        hand = (2 + 2 * lam * 2 / 3 + 2 * lam * 4 / (4 + gamma)) / 6
        assert float(_row(rows, model="mixed", gamma=str(gamma))[f"lambda_{lam}"]) == pytest.approx(hand)
    assert float(_row(rows, model="exact", gamma="8.0")["lambda_0.4"]) == 1.0


def test_spm_metrics_by_hand(report):
    _, out, _ = report
    rows = _table(out, "spm-metrics-spm")
    under, over = _row(rows, model="under"), _row(rows, model="over")
    assert float(under["em"]) == 0 and float(under["spc"]) == 0.5 and float(under["sip_f1"]) == pytest.approx(0.4)
    assert float(over["spc"]) == 0 and float(over["sip_f1"]) == pytest.approx(0.24)
    assert float(_row(rows, model="mixed")["em"]) == pytest.approx(1 / 3)
    table1 = _table(out, "spm-table1-spm")
    assert [r["items"] for r in table1] == ["2", "2", "2", "6"]  # D1, D2, D3, all
    assert float(_row(table1, domain="all")["mean_gold_options"]) == 2.0
    labels = {r["model"]: r["label"] for r in _table(out, "spm-personalities-spm")}
    assert labels["under"] == "Conservative" and labels["over"] == "Aggressive"  # precision 2/3 > 0.65


def test_crystalxrd_tables_by_hand(report):
    root, out, _ = report
    over = _row(_table(out, "xrd-table2-hkl"), model="over")
    # tp 2, fp 2, |G| 2: Jaccard 2/4, precision 1/2, recall 1, J_pen 0.5 · min(1, 2/4)
    assert float(over["jaccard"]) == 0.5 and float(over["j_pen"]) == 0.25
    assert float(over["recall_over_precision"]) == 2.0
    assert float(over["over_prediction_rate"]) == 1.0
    by_db = _table(out, "xrd-top-two-by-db-hkl")
    assert [(r["db"], r["items"], r["difference"], r["low"], r["high"]) for r in by_db] == [
        ("A", "2", "0.5", "0.5", "0.5"), ("B", "2", "0.5", "0.5", "0.5")]  # Jaccard 1 against 2/4 on every item
    items = [json.loads(line) for line in (root / "runs" / "xrd" / "items.jsonl").read_text().splitlines()]
    table1 = _table(out, "xrd-table1-xrd")
    total = _row(table1, db="all")
    assert int(total["items"]) == 6 == len(items)
    assert int(_row(table1, db="A")["items"]) == 3 == int(_row(table1, db="B")["items"])
    sizes = [len(it["answer"]) for it in items]
    assert int(total["single"]) + int(total["double"]) + int(total["triple_plus"]) == 6
    assert float(total["mean_G"]) == pytest.approx(sum(sizes) / 6)
    assert int(total["three_index"]) + int(total["four_index"]) == 6


def test_vision_gain_and_pairs_by_hand(report):
    _, out, _ = report
    gain = _table(out, "vision-gain-matvqa")
    alpha = _row(gain, model="alpha")
    assert (alpha["with"], alpha["without"], alpha["items"]) == ("TV", "TO", "6")
    assert float(alpha["gain"]) == 0.5  # right on 6 with the image, 3 without
    beta = _row(gain, model="beta")
    assert float(beta["gain"]) == 0 and float(beta["low"]) == 0 and float(beta["high"]) == 0
    pairs = _row(_table(out, "pairs-matvqa"), model_a="alpha", model_b="beta", setting="TV")
    assert float(pairs["a_minus_b"]) == pytest.approx(2 / 6)  # 6 right against 4
    spm = _row(_table(out, "pairs-spm"), model_a="exact", model_b="over")
    assert float(spm["a_minus_b"]) == pytest.approx(1 - 0.24) and float(spm["p"]) == 0.0


def test_seephys_judges_and_people(report):
    _, out, _ = report
    acc = _table(out, "seephys-accuracy-seephys-judged")
    assert float(_row(acc, model="alpha", setting="TC")["accuracy"]) == 0.75
    # students: ann and bob's mean on each item they answered: s1 1, s2 1/2, s3 0, s4 0
    assert float(_row(acc, setting="people")["accuracy"]) == pytest.approx(1.5 / 4)
    judges = _row(_table(out, "judges-seephys-judged"), check="Cohen's kappa")
    # both judges decide the 14 answers the screen could not accept (alpha 0 + 1 + 2, beta 2 + 2 + 2, ann 2,
    # bob 3) and both say 0: chance agreement is certain, so kappa is undefined (an empty cell)
    assert (judges["judges_or_labels"], judges["n"], judges["value"]) == ("j1 vs j2", "14", "")
    # Table 5: the share of the four graded models (alpha and beta in TV, ann, bob) solving each item: s1 all,
    # s2 three (not bob), s3 and s4 one (alpha)
    tags = {r["tag"]: r for r in _table(out, "seephys-table5-seephys-judged")}
    assert {t: r["items"] for t, r in tags.items()} == {"100%": "1", "75%": "1", "25%": "2"}
    assert float(tags["25%"]["alpha"]) == 1.0 and float(tags["25%"]["beta"]) == 0.0
    stats = _table(out, "seephys-dataset-seephys-judged")
    assert [(r["field"], r["value"], r["items"]) for r in stats] == [
        ("level", "BO", "1"), ("level", "High", "2"), ("level", "Mid", "1"),  # levels 1 + i % 3 of s1..s4: 2, 3, 1, 2
        ("subject", "Mechanics", "2"), ("subject", "Optics", "2")]
    gain = _row(_table(out, "vision-gain-seephys-judged"), model="alpha")
    assert float(gain["gain"]) == 0.5 and gain["items"] == "4"


def test_judge_audit_error_rate(report, tmp_path):
    """The audit sheet of the judged run, labelled by a person who disagrees with the judge on its first row."""
    from chat_server import ChatServer, Reply

    root, _, _ = report
    with open(root / "runs" / "seephys-judged" / "audit.csv", newline="", encoding="utf-8") as fh:
        sheet = list(csv.DictReader(fh))
    assert len(sheet) == 4 and {r["judge"] for r in sheet} == {"0"}
    for k, r in enumerate(sheet):
        r["person"] = "1" if k == 0 else "0"
    labels = tmp_path / "labels.csv"
    with open(labels, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(sheet[0]))
        writer.writeheader()
        writer.writerows(sheet)
    with ChatServer() as judge:
        judge.default = Reply(text="Judgement: 0")
        assert main(["grade", str(root / "sp_pred.jsonl"), "--gold", str(root / "sp_items.jsonl"), "--benchmark",
                     "seephys", "--out", str(tmp_path / "runs" / "audited"), "--judge-model", "j1",
                     "--judge-base-url", judge.url, "--retry-delay", "0", "--workers", "1", "--quiet",
                     "--audit-labels", str(labels)]) == 0
    main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")])
    row = _row(_table(tmp_path / "report", "judges-audited"), check="judge error rate (audit)")
    assert (row["n"], float(row["value"])) == ("4", 0.25)  # one disagreement in four labelled decisions
    assert 0 < float(row["low"]) < 0.25 < float(row["high"]) < 1  # Wilson interval around 1/4


def test_panels_for_predictions_without_a_model(tmp_path):
    """Predictions without "model" are score's model "default": their stated confidences still reach the panels."""
    gold = _jsonl(tmp_path / "g.jsonl", [{"id": f"q{i}", "answer": ["A"]} for i in range(6)])
    pred = _jsonl(tmp_path / "p.jsonl", [{"id": f"q{i}", "output": "A" if i % 2 else "B", "confidence": i / 6}
                                         for i in range(6)])
    assert main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "runs" / "one"),
                 "--quiet", "--workers", "1"]) == 0
    main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")])
    assert (tmp_path / "report" / "figures" / "spm-confidence-difficulty-tokens-one.png").exists()


def test_csmbench_correlations_between_scales(report):
    root, out, _ = report
    summary = json.loads((root / "runs" / "csmbench" / "summary.json").read_text())
    r = summary["correlations"]["sts_across_scales"]["r"]
    assert r["AtomScale"]["AtomScale"] == pytest.approx(1.0)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "scale correlations need three or more models" not in page
    # Between metrics over the 12 answers: numpy's correlation of the grades' own columns
    grades = [json.loads(line) for line in (root / "runs" / "csmbench" / "grades.jsonl").read_text().splitlines()]
    want = np.corrcoef([g["sts"] for g in grades], [g["bertscore_minilm_f1"] for g in grades])[0, 1]
    got = _row(_table(out, "csmbench-metric-correlations-csmbench"), metric="sts")
    assert float(got["bertscore_minilm_f1"]) == pytest.approx(want) and float(got["sts"]) == pytest.approx(1.0)


def test_csmbench_mcq_table_by_hand(report):
    _, out, _ = report
    acc = _table(out, "csmbench-mcq-accuracy-csmbench-mcq")
    assert float(_row(acc, model="m1")["accuracy"]) == 5 / 8 and float(_row(acc, model="m2")["accuracy"]) == 0.5
    names = {p.stem for p in (out / "figures").glob("*.png")}
    assert {"csmbench-mcq-accuracy-by-scale-csmbench-mcq", "csmbench-mcq-accuracy-by-hybrid-csmbench-mcq",
            "csmbench-dataset-csmbench-mcq"} <= names


def test_matvqa_ablation_table(report):
    _, out, _ = report
    rows = _table(out, "matvqa-ablation-matvqa-ablation")
    lang = _row(rows, model="alpha", set="language-removed")
    assert float(lang["accuracy"]) == pytest.approx(2 / 6)
    assert float(lang["relative_drop"]) == pytest.approx((1 - 2 / 6) / 1)


def test_paired_bootstrap_by_hand():
    same = paired_bootstrap(np.ones(5), np.full(5, 0.5))
    assert (same["mean"], same["low"], same["high"], same["p"], same["n"]) == (0.5, 0.5, 0.5, 0.0, 5)
    none = paired_bootstrap(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    assert none["mean"] == 0 and none["p"] == 1.0
    assert paired_bootstrap(np.array([]), np.array([]))["mean"] is None


def _palette_count(path: Path) -> int:
    """How many of the palette's colours the image draws (markers and lines are drawn in them exactly; black, the
    eighth, is the text's too and is not counted)."""
    rgb = np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3)
    found = 0
    for hexcol in PALETTE[:7]:
        want = np.array([int(hexcol[i:i + 2], 16) for i in (1, 3, 5)])
        found += int((rgb == want).all(axis=1).sum() >= 20)
    return found


def test_every_figure_opens_and_is_drawn(report):
    _, out, status = report
    pngs = sorted((out / "figures").glob("*.png"))
    names = {p.stem for p in pngs}
    for expected in ("spm-dumbbell-spm", "spm-domain-radar-spm", "spm-by-level-spm", "spm-lambda-gamma-spm",
                     "spm-confidence-difficulty-tokens-spm", "spm-levels-spm", "spm-fig5-aggressive",
                     "xrd-jaccard-jpen-hkl", "xrd-radar-hkl",
                     "xrd-precision-recall-hkl", "xrd-jaccard-by-union_size-hkl", "xrd-jaccard-by-angle_range-hkl",
                     "xrd-jaccard-by-db-hkl", "xrd-top-two-hkl",
                     "xrd-top-two-by-db-hkl", "xrd-two-theta-xrd", "seephys-accuracy-by-setting-seephys",
                     "seephys-accuracy-by-level-seephys", "seephys-dataset-seephys", "csmbench-sts-by-scale-csmbench",
                     "csmbench-dataset-csmbench", "matvqa-accuracy-by-task-matvqa", "matvqa-ablation-matvqa-ablation",
                     "vision-gain-matvqa", "pairs-spm", "seephys-deltas-seephys-judged",
                     "csmbench-correlations-csmbench", "seephys-accuracy-by-subject-seephys-judged"):
        assert expected in names, expected
    for png in pngs:
        img = Image.open(png)
        assert img.width >= 500 and img.height >= 300, png.name
        grey = np.asarray(img.convert("L"))
        assert (grey < 250).mean() > 0.02, f"{png.name} is blank"
        svg = ElementTree.parse(out / "figures" / f"{png.stem}.svg").getroot()
        assert svg.tag == "{http://www.w3.org/2000/svg}svg" and len(list(svg.iter())) > 50, png.name
    assert _palette_count(out / "figures" / "spm-dumbbell-spm.png") == 3  # EM, SPC, SIP-F1
    assert _palette_count(out / "figures" / "spm-domain-radar-spm.png") == 4  # four models
    assert _palette_count(out / "figures" / "xrd-radar-hkl.png") == 2
    assert _palette_count(out / "figures" / "seephys-deltas-seephys-judged.png") == 2  # Δ1 and Δ2; no VO run
    assert status == 0


def test_page_is_self_contained(report):
    _, out, _ = report
    page = (out / "index.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == len(list((out / "figures").glob("*.png")))
    assert "http://" not in page and "https://" not in page
    assert "benchmint report " in page and "Runs read" in page


def test_same_runs_same_files(report, tmp_path):
    root, out, _ = report
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "from-an-earlier-report.png").write_bytes(b"")
    main(["report", str(root / "runs"), "--out", str(tmp_path)])
    assert not (tmp_path / "figures" / "from-an-earlier-report.png").exists()
    for sub in ("figures", "tables"):
        for f in (out / sub).iterdir():
            assert (tmp_path / sub / f.name).read_bytes() == f.read_bytes(), f.name


def test_eval_report_chains(report, tmp_path):
    root, _, _ = report
    ev = tmp_path / "ev"
    assert main(["eval", str(root / "runs" / "xrd" / "items.jsonl"), "--benchmark", "crystalxrd", "--baseline",
                 "--score", "--report", "--out", str(ev)]) == 0
    table2 = _row(_table(ev / "report", "xrd-table2-scores"), model="benchmint-simulator")
    assert float(table2["jaccard"]) == 1.0  # the answer simulated from each CIF
    assert "eval: " in (ev / "report" / "index.html").read_text(encoding="utf-8")  # the eval run is read too


def test_unreadable_run_is_listed_and_the_rest_drawn(tmp_path, capsys):
    good = tmp_path / "runs" / "a"
    bad = tmp_path / "runs" / "b"
    gold = _jsonl(tmp_path / "g.jsonl", [{"id": "q1", "answer": ["A"]}])
    pred = _jsonl(tmp_path / "p.jsonl", [{"id": "q1", "model": "m", "output": "A"}])
    for d in (good, bad):
        assert main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(d), "--quiet",
                     "--workers", "1"]) == 0
    (bad / "scores.jsonl").write_text('{"id": "q1", "model": "m"\n', encoding="utf-8")
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert f"{bad / 'scores.jsonl'}:1: not JSON" in err
    assert (tmp_path / "r" / "figures" / "spm-dumbbell-a.png").exists()
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "r2")]) == 2


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _render(page: Path, tmp: Path) -> tuple[np.ndarray, set[str], str]:
    """Headless Chromium's screenshot of a page, the URLs the page itself asked for (Chromium's own background
    requests have no origin as initiator and are left out; the page's own file is too), and the DOM as Chromium
    parsed it."""
    shot, netlog = tmp / f"{page.stem}.png", tmp / f"{page.stem}-net.json"
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", f"--user-data-dir={tmp / 'profile'}", f"--log-net-log={netlog}",
                           "--window-size=1100,2400", f"--screenshot={shot}", "--dump-dom", page.as_uri()],
                          check=True, timeout=240, capture_output=True, text=True)
    text = netlog.read_text(encoding="utf-8").rstrip().rstrip(",")
    log = json.loads(text if text.endswith("}") else text + "]}")  # a log cut at exit lacks its closing
    asked = {e["params"]["url"] for e in log["events"]
             if "url" in e.get("params", {}) and e["params"].get("initiator") not in (None, "not an origin")}
    return np.asarray(Image.open(shot).convert("L")), asked - {page.as_uri()}, done.stdout


def _headings(dom: str) -> set[str]:
    """The text of every h2 and h3 of a DOM Chromium dumped."""
    from html import unescape

    return {unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in re.findall(r"<h[23][^>]*>(.*?)</h[23]>", dom, re.S)}


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium (Debian package chromium) is not installed")
def test_page_renders_offline_in_chromium(report, tmp_path):
    _, out, _ = report
    grey, asked, _ = _render(out / "index.html", tmp_path)
    assert grey.shape == (2400, 1100)
    assert (grey < 200).mean() > 0.01  # text and figures, not a blank page
    assert not [u for u in asked if not u.startswith("data:")], sorted(asked)
    # The check sees a request when a page makes one: a page with an image from elsewhere.
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<html><body><img src="http://127.0.0.1:9/x.png">text</body></html>', encoding="utf-8")
    assert "http://127.0.0.1:9/x.png" in _render(leaky, tmp_path)[1]


def _new_sections(root: Path) -> Path:
    """Runs of what the report gained since the first page: a generation's result codes (a MatVQA run.json in
    its generator's shape), two reviewers' kappas (review export, marks, import), SIP-F1 with and without the
    image (two score runs), and an eval run with no score or grade step (MatVQA predictions the report grades)."""
    from benchmint.generate.flow import code_counts
    from benchmint.generate.matvqa import STAGE_CODES

    runs = root / "runs"
    gen = runs / "matvqa-gen"
    gen.mkdir(parents=True)
    for name in ("items.jsonl", "rejected.jsonl", "trace.jsonl"):
        (gen / name).write_text("")
    (gen / "run.json").write_text(json.dumps({
        "benchmark": "matvqa", "counts": {"figures": 4, "items": 3},
        "stage1": code_counts(["NO_SHORTCUT", "REWRITTEN", "REWRITTEN", "FAIL_ITERATIONS"], STAGE_CODES)}))
    items = _jsonl(root / "spm_items.jsonl", [{"id": f"q{i}", "question": f"Q{i}?", "options": list("abcdef"),
                                               "answer": "A", "image": f"{i}.png"} for i in range(4)])
    sheets = root / "sheets"
    assert main(["generate", "review", "export", str(items), "--out", str(sheets), "--sample", "4", "--reviewers",
                 "2", "--overlap", "1.0"]) == 0
    for reviewer, marks in (("reviewer1", "yyny"), ("reviewer2", "ynny")):
        with open(sheets / f"{reviewer}.csv", newline="", encoding="utf-8") as fh:
            sheet = sorted(csv.DictReader(fh), key=lambda r: r["id"])
        for row, mark in zip(sheet, marks):
            row.update(answerability={"y": "yes", "n": "no"}[mark], correctness="yes", distractor_quality="yes",
                       verdict="keep")
        with open(sheets / f"{reviewer}.csv", "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(sheet[0]))
            writer.writeheader()
            writer.writerows(sheet)
    assert main(["generate", "review", "import", str(sheets / "reviewer1.csv"), str(sheets / "reviewer2.csv"),
                 "--items", str(items), "--out", str(runs / "spm-review")]) == 0
    gold = _jsonl(root / "set_gold.jsonl", [{"id": f"q{i}", "answer": ["A", "B"]} for i in range(4)])
    for setting, outputs in (("default", ["A, B"] * 4), ("default-blind", ["A, B", "C", "C", "A, B"])):
        pred = _jsonl(root / f"{setting}.jsonl", [{"id": f"q{i}", "model": "m", "setting": setting,
                                                   "output": f"Answer: {o}"} for i, o in enumerate(outputs)])
        assert main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(runs / setting),
                     "--quiet", "--workers", "1"]) == 0
    mv_items = _jsonl(root / "mv_items.jsonl", [{"id": f"m{i}", "question": "Which?", "options": ["a", "b", "c"],
                                                 "answer": 1 + i % 3} for i in range(6)])
    ev = runs / "ev-mv"
    ev.mkdir()
    _jsonl(ev / "predictions.jsonl", [{"id": f"m{i}", "model": "alpha", "setting": "default",
                                       "output": f"The answer is ({1 + i % 3})"} for i in range(6)])
    (ev / "run.json").write_text(json.dumps({"benchmark": "matvqa", "model": "alpha", "setting": "default",
                                             "items_file": str(mv_items)}))
    out = root / "report"
    assert main(["report", str(runs), "--out", str(out)]) == 0
    return out


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium (Debian package chromium) is not installed")
def test_page_with_generation_review_set_gaps_and_eval_runs_renders_offline_in_chromium(tmp_path):
    out = _new_sections(tmp_path)
    grey, asked, dom = _render(out / "index.html", tmp_path)
    assert grey.shape == (2400, 1100)
    assert (grey < 200).mean() > 0.01  # not a blank page
    assert not [u for u in asked if not u.startswith("data:")], sorted(asked)
    headings = _headings(dom)
    # The sections and tables each new part of the report adds, as Chromium parsed the page
    assert {"Generation", "Result codes of generate matvqa (matvqa-gen)", "Reviewers' agreement (spm-review)",
            "Paired comparisons", "Does seeing help (set-scored benchmarks)", "MatVQA", "Accuracy per model",
            "Runs read", "Not drawn"} <= headings, sorted(headings)
    # The eval run was graded by the report (its note in the page) and drawn; every figure came inline.
    assert "scored here as" in dom and "ev-mv" in dom
    figures = re.findall(r'<img alt="([^"]*)"[^>]*src="data:image/png;base64,', dom)
    assert {"Result codes of generate matvqa", "Reviewers' agreement (Cohen's kappa)",
            "Does seeing help (SIP-F1, Jaccard)"} <= set(figures), figures
