"""score_table and benchmint score-table: a VLMEvalKit-shaped result table scores as benchmint grade / score do."""

import base64
import csv
import gc
import io
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from PIL import Image

from benchmint import benchmarks
from benchmint.cli import main
from benchmint.grade.judge import Judge
from benchmint.integrations.tables import read_table, score_table
from benchmint.io import InputError
from benchmint.models.engine import Endpoint, Engine
from benchmint.models.retry import RetryPolicy

from chat_server import ChatServer, Reply, prompt_of


def _png():
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


# SeePhys as its VLMEvalKit TSV ships it (base64 images) and the replies of one model.
SEEPHYS = [
    {"index": 1, "question": "An engine does 1.2e5 J of work in 2 min. Its power?", "answer": "1 kW",
     "subject": "CM", "level": 2, "language": "English", "sig_figs": ""},
    {"index": 2, "question": "Which ray leaves the prism?", "answer": "Ray E", "subject": "OPT", "level": 5,
     "language": "English", "sig_figs": ""},
    {"index": 3, "question": "求加速度。", "answer": "2 m/s^2", "subject": "CM", "level": 3, "language": "Chinese",
     "sig_figs": ""},
    {"index": 4, "question": "Where is the field zero?", "answer": "Both Regions II and III", "subject": "EM",
     "level": 4, "language": "English", "sig_figs": ""},
    {"index": 5, "question": "The charge?", "answer": "1.5e-7 C", "subject": "EM", "level": 1,
     "language": "English", "sig_figs": "2"},
    {"index": 6, "question": "The bit string?", "answer": "0101", "subject": "QMIT", "level": 8,
     "language": "English", "sig_figs": ""},
]
REPLIES = {
    1: "P = W/t = 1000 W. <answer>1000 W</answer>",  # screen: units converted -> 1
    2: "The final answer is ray e.",  # rule: the same words -> 1
    3: "<answer>3 m/s^2</answer>",  # the screen differs; the judge says 0
    4: "<answer>regions II and III</answer>",  # the judge says 1
    5: "<answer>1.5e-7 C</answer>",  # -> 1
    6: "",  # empty: unparsed, wrong, never judged
}


def _judge_reply(body):
    return "Judgement: 1" if "regions II and III" in prompt_of(body) else "Judgement: 0"


def _write_release_tsv(path):
    header = ["index", "image", *[k for k in SEEPHYS[0] if k != "index"]]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(header)
        for it in SEEPHYS:
            w.writerow([it["index"], _png(), *[it[k] for k in header[2:]]])


def _result_table():
    """VLMEvalKit's result shape: the dataset's columns without the image, plus prediction."""
    return pd.DataFrame([{**it, "prediction": REPLIES[it["index"]]} for it in SEEPHYS])


def _judge(server, tmp_path):
    engine = Engine(Endpoint(server.url), cache=tmp_path / "judge.sqlite", retry=RetryPolicy(base_delay_s=0))
    return Judge(engine, "judge")


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_seephys_table_scores_as_benchmint_grade_on_the_release(tmp_path):
    release = tmp_path / "SeePhys_total.tsv"
    _write_release_tsv(release)
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps({"id": str(i), "model": "m", "output": r}) + "\n"
                                                  for i, r in REPLIES.items()), encoding="utf-8")
    with ChatServer() as server:
        server.default = Reply(text=_judge_reply)
        assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(release), "--benchmark", "seephys",
                     "--out", str(tmp_path / "grade"), "--judge-model", "judge", "--judge-base-url", server.url,
                     "--retry-delay", "0", "--workers", "1", "--quiet"]) == 0
        judge = _judge(server, tmp_path)
        try:
            got = score_table(_result_table(), "seephys", model="m", judge=judge, workers=1)
        finally:
            judge.engine.close()
    by_hand = {1: (1.0, "symbolic"), 2: (1.0, "rule"), 3: (0.0, "judge"), 4: (1.0, "judge"), 5: (1.0, "rule"),
               6: (0.0, "rule")}
    assert {int(r["id"]): (r["score"], r["stage"]) for r in got.rows} == by_hand
    assert [r["row"] for r in got.rows] == [1, 2, 3, 4, 5, 6]
    grades = {g["id"]: g for g in _lines(tmp_path / "grade" / "grades.jsonl")}
    for r in got.rows:
        g = grades[r["id"]]
        assert (r["score"], r["verdict"], r["stage"], r["answer"]) == (g["score"], g["verdict"], g["stage"],
                                                                         g["answer"])
    summary = json.loads((tmp_path / "grade" / "summary.json").read_text())
    assert got.summary["models"] == summary["models"] and got.summary["counts"] == summary["counts"]
    assert got.summary["models"][0]["accuracy"]["mean"] == pytest.approx(4 / 6)
    assert got.errors == [] and got.summary["inputs"] == {"table": "table"}
    table = got.table  # the input with the scores appended; the gold "answer" column keeps its name
    assert list(table["score"]) == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0] and list(table["answer"])[5] == "0101"


def test_seephys_table_needs_only_what_grading_reads(tmp_path):
    # no language, no image, no caption: a result table of another evaluator still grades
    rows = [{"index": it["index"], "question": it["question"], "answer": it["answer"], "sig_figs": it["sig_figs"],
             "prediction": REPLIES[it["index"]]} for it in SEEPHYS if it["index"] in (1, 2, 6)]
    got = score_table(pa.Table.from_pylist(rows), "seephys", workers=1)
    assert [(r["id"], r["score"]) for r in got.rows] == [("1", 1.0), ("2", 1.0), ("6", 0.0)]
    assert got.table.column("score").to_pylist() == [1.0, 1.0, 0.0]  # a pyarrow table in, a pyarrow table out


def test_bad_rows_are_listed_by_row_and_the_rest_is_scored(tmp_path):
    rows = [{"index": 1, "answer": "1 kW", "prediction": "<answer>1000 W</answer>"},
            {"index": 2, "answer": None, "prediction": "<answer>3</answer>"},  # no gold answer
            {"index": 1, "answer": "1 kW", "prediction": "<answer>2 W</answer>"},  # the same item again
            {"index": 3, "answer": "2 s", "prediction": "<answer>5 m</answer>"}]  # undecided without a judge
    got = score_table(pd.DataFrame(rows), "seephys", name="m_SeePhys.xlsx", workers=1)
    assert [(r["row"], r["score"]) for r in got.rows] == [(1, 1.0), (2, None), (3, None), (4, None)]
    kinds = sorted((e["row"], e["kind"]) for e in got.errors)
    assert kinds == [(2, "bad_item"), (3, "duplicate"), (4, "undecided")]
    bad = next(e for e in got.errors if e["row"] == 2)
    assert bad["location"] == "m_SeePhys.xlsx:row 2" and bad["field"] == "answer"
    assert all("table_" not in json.dumps(e) for e in got.errors)  # no file written on the way is named
    with pytest.raises(InputError, match="no column 'prediction'"):
        score_table(pd.DataFrame([{"index": 1, "answer": "1"}]), "seephys")


CIF = "data_x\n_cell_length_a 3.6\n"
XRD = [  # CrystalXRD-Bench release rows (gt_hkls a JSON string), the image file elsewhere
    {"file_name": "images/cantor_hea/bel1.png", "sample_id": "bel1", "dataset": "cantor_hea", "formula": "Fe",
     "cif_content": CIF, "hkl_convention": "3-index", "gt_theta_argmax": 43.5,
     "gt_hkls": "[[3, 0, -3], [3, -3, 0], [0, 3, -3]]"},
    {"file_name": "images/mp/mp-2.png", "sample_id": "mp-2", "dataset": "mp", "formula": "ZnO",
     "cif_content": CIF, "hkl_convention": "4-index", "gt_theta_argmax": 36.25, "gt_hkls": "[[1, 0, -1, 1]]"},
    {"file_name": "images/mp/mp-3.png", "sample_id": "mp-3", "dataset": "mp", "formula": "NaCl",
     "cif_content": CIF, "hkl_convention": "3-index", "gt_theta_argmax": 31.7, "gt_hkls": "[[2, 0, 0]]"},
]
XRD_REPLIES = ['{"max_peak_hkls": [[3, 0, -3], [3, -3, 0]]}',  # 2 of 3: Jaccard 2/3, SPC 2/3
               '{"max_peak_hkls": [[1, 0, -1, 1]]}',  # exact
               "no idea"]  # unparsed: empty prediction, 0


def test_crystalxrd_table_scores_as_benchmint_score(tmp_path):
    bench = benchmarks.get("crystalxrd")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "file_name"}) + "\n"
                                                 for r in XRD))
    gold = [it.gold() for _, it in bench.read_items(tmp_path / "rows.jsonl", check=False)]
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps({"id": r["sample_id"], "model": "m", "output": o}) + "\n"
                                                  for r, o in zip(XRD, XRD_REPLIES)))
    assert main(["score", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "gold.jsonl"), "--task", "hkl",
                 "--out", str(tmp_path / "score"), "--workers", "1", "--quiet"]) == 0
    table = pd.DataFrame([{**r, "prediction": o} for r, o in zip(XRD, XRD_REPLIES)])
    got = score_table(table, "crystalxrd", model="m", workers=1)
    assert [round(r["jaccard"], 6) for r in got.rows] == [round(2 / 3, 6), 1.0, 0.0]
    assert [r["status"] for r in got.rows] == ["ok", "ok", "unparsed"]
    rows = {r["id"]: r for r in _lines(tmp_path / "score" / "scores.jsonl")}
    for r in got.rows:
        assert {c: r[c] for c in got.columns} == {c: rows[r["id"]][c] for c in got.columns}
    summary = json.loads((tmp_path / "score" / "summary.json").read_text())
    assert got.summary["models"] == summary["models"]
    assert got.summary["models"]["m"]["metrics"]["jaccard"]["mean"] == pytest.approx((2 / 3 + 1) / 3)


def test_score_table_command_on_a_vlmevalkit_tsv(tmp_path):
    table = tmp_path / "m_SeePhys.tsv"
    _result_table().to_csv(table, sep="\t", index=False)
    read = read_table(table)
    assert read["answer"].tolist()[5] == "0101" and read["sig_figs"].tolist()[4] == "2"  # every cell as its text
    with ChatServer() as server:
        server.default = Reply(text=_judge_reply)
        assert main(["score-table", str(table), "--benchmark", "seephys", "--model", "m", "--out",
                     str(tmp_path / "out"), "--judge-model", "judge", "--judge-base-url", server.url,
                     "--retry-delay", "0", "--workers", "1", "--quiet"]) == 0
    rows = _lines(tmp_path / "out" / "rows.jsonl")
    assert [r["score"] for r in rows] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["models"][0]["accuracy"]["mean"] == pytest.approx(4 / 6)
    assert main(["score-table", str(tmp_path / "missing.tsv"), "--benchmark", "seephys", "--out",
                 str(tmp_path / "o2"), "--quiet"]) == 2


def test_xlsx_result_file(tmp_path):
    pytest.importorskip("openpyxl")
    path = tmp_path / "m_SeePhys.xlsx"
    _result_table().to_excel(path, index=False)  # how VLMEvalKit writes its result files
    assert read_table(path)["answer"].tolist()[5] == "0101"
    assert main(["score-table", str(path), "--benchmark", "seephys", "--out", str(tmp_path / "out"), "--workers", "1",
                 "--quiet"]) == 1  # rows 3 and 4 need a judge: listed, not wrong
    rows = _lines(tmp_path / "out" / "rows.jsonl")
    assert [r["score"] for r in rows] == [1.0, 1.0, None, None, 1.0, 0.0]
    assert sorted(e["row"] for e in _lines(tmp_path / "out" / "errors.jsonl")) == [3, 4]


def test_set_scored_tables_need_no_image_question_or_formula():
    # what eval needs to make the prompt is not asked of a result table (SPM-Bench's figure and question,
    # CrystalXRD-Bench's formula); benchmint eval still asks for them
    spm = pd.DataFrame([{"id": "s1", "options": json.dumps(["a", "b", "c", "d", "e", "f"]), "answer": "A, C",
                         "prediction": "Answer: A, C"},
                        {"id": "s2", "options": json.dumps(["a", "b", "c", "d", "e", "f"]), "answer": "B",
                         "prediction": "Answer: B, D"}])
    got = score_table(spm, "spm", workers=1)
    assert [r["em"] for r in got.rows] == [1.0, 0.0] and [r["spc"] for r in got.rows] == [1.0, 0.0]
    xrd = pd.DataFrame([{"sample_id": "a", "gt_hkls": "[[1, 1, 1]]", "prediction": '{"max_peak_hkls": [[1,1,1]]}'}])
    assert score_table(xrd, "crystalxrd", workers=1).rows[0]["jaccard"] == 1.0
    with pytest.raises(benchmarks.PromptError, match="formula"):
        bench = benchmarks.get("crystalxrd")
        (item,) = [it for _, it in bench.read_items(_write_rows(xrd), check=False)]
        bench.prompt(item, "cif_only")


def test_matvqa_table_needs_no_figure_or_question(tmp_path):
    # grading reads the option number only; the figure and question are what eval's prompt needs
    table = pd.DataFrame([{"id": "m1", "options": json.dumps(["fcc", "bcc", "hcp"]), "answer": 2, "task": "phase",
                           "prediction": "The answer is (2)"},
                          {"id": "m2", "options": json.dumps(["fcc", "bcc", "hcp"]), "answer": "(3)", "task": "phase",
                           "prediction": "(1)"}])
    got = score_table(table, "matvqa", workers=1)
    assert [(r["id"], r["answer"], r["score"]) for r in got.rows] == [("m1", [2], 1.0), ("m2", [1], 0.0)]
    assert got.errors == [] and got.summary["models"][0]["accuracy"]["mean"] == 0.5
    items = _write_rows(table)
    bench = benchmarks.get("matvqa")
    assert [(e.field, e.message) for _, e in bench.read_items(items)] == [("question", 'missing field "question"')] * 2
    (items.parent / "f.png").write_bytes(base64.b64decode(_png()))
    items.write_text("".join(json.dumps({**r, "question": "Which phase?", "image": "f.png"}) + "\n"
                             for r in table.drop(columns="prediction").to_dict("records")))
    assert [it.id for _, it in bench.read_items(items)] == ["m1", "m2"]
    items.write_text(json.dumps({"id": "m3", "question": "Q?", "options": ["a", "b"], "answer": 1}) + "\n")
    assert [(e.field, e.message) for _, e in bench.read_items(items)] == [("image", 'missing field "image" or "images"')]


def _write_rows(df):
    import tempfile

    path = Path(tempfile.mkdtemp()) / "rows.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "prediction"}) + "\n"
                            for r in df.to_dict("records")))
    return path


def _spm_rows(n, seed=0):
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        k = rng.randint(4, 6)
        gold = sorted(rng.sample("ABCDEF"[:k], rng.randint(1, 3)))
        pred = sorted(rng.sample("ABCDEF"[:k], rng.randint(0, 3)))
        reply = rng.choice([f"Answer: {', '.join(pred)}\nConfidence: 0.{rng.randint(1, 9)}", "I cannot tell."])
        rows.append({"id": f"q{i}", "question": f"Which artefacts in figure {i}?",
                     "options": json.dumps([f"option {c}" for c in "abcdef"[:k]]), "answer": ", ".join(gold),
                     "domain": rng.choice(["STM", "AFM", "TEM"]), "prediction": reply})
    return rows


def _own_spm_scores(tmp_path, rows):
    """benchmint's own path on the same rows: an items file -> gold.jsonl -> benchmint score; scores.jsonl by key."""
    items, preds, gold = tmp_path / "items.jsonl", tmp_path / "preds.jsonl", tmp_path / "gold.jsonl"
    items.write_text("".join(json.dumps({k: v for k, v in r.items() if k not in ("prediction", "model")}) + "\n"
                             for r in rows), encoding="utf-8")
    preds.write_text("".join(json.dumps({"id": r["id"], "model": r.get("model", "model"), "output": r["prediction"]})
                             + "\n" for r in rows), encoding="utf-8")
    bench = benchmarks.get("spm")
    gold.write_text("".join(json.dumps(it.gold()) + "\n" for _, it in bench.read_items(items, check=False)
                            if not isinstance(it, benchmarks.ItemError)), encoding="utf-8")
    assert main(["score", str(preds), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "own"),
                 "--workers", "1", "--quiet"]) in (0, 1)
    scores = {(r["id"], r["model"]): r for r in _lines(tmp_path / "own" / "scores.jsonl")}
    return scores, json.loads((tmp_path / "own" / "summary.json").read_text())


def test_spm_table_of_20000_rows_scores_as_benchmint_score(tmp_path):
    # 20,000 generated rows, a fifth of the replies unreadable: every row's answer, status and metrics as
    # benchmint score writes them from the same rows read as an items file, and the same summary
    rows = _spm_rows(20000)
    own, summary = _own_spm_scores(tmp_path, rows)
    got = score_table(pd.DataFrame(rows), "spm", workers=1)
    assert gc.isenabled()  # paused while the table is scored, then as it was
    assert got.errors == [] and len(got.rows) == 20000
    for k, r in enumerate(got.rows, 1):
        want = own[(r["id"], "model")]
        assert r["row"] == k and r["id"] == rows[k - 1]["id"]
        assert {c: r[c] for c in ("answer", *got.columns)} == {c: want[c] for c in ("answer", *got.columns)}
    assert got.summary["models"] == summary["models"]
    assert sum(r["status"] == "unparsed" for r in got.rows) == sum(w["status"] == "unparsed" for w in own.values())


def test_spm_table_with_rejected_and_repeated_rows(tmp_path):
    # a row with a bad answer, an id the flow refuses (a lone surrogate), the same (id, model) twice and an item
    # of a second model: every scored row gets its own scores (the rows are matched by key, not by position),
    # the others None and an error naming them
    rows = _spm_rows(6, seed=1)
    rows[1]["answer"] = "G"  # not an option
    rows[3]["id"] = "q3\udc80"
    rows.append({**rows[2], "prediction": "Answer: A"})  # row 7: q2 again, same model: a duplicate
    rows.append({**rows[4], "model": "other"})  # row 8: q4 by another model, scored
    gc.disable()
    try:
        got = score_table(rows, "spm", workers=1)  # a list of rows (pandas' string columns refuse the surrogate)
        assert not gc.isenabled()
    finally:
        gc.enable()
    listed = sorted({(e["row"], e["kind"]) for e in got.errors if "row" in e})
    assert listed == [(2, "bad_item"), (4, "bad_field"), (7, "duplicate_id")]
    own, _ = _own_spm_scores(tmp_path, [r for k, r in enumerate(rows, 1) if k not in (2, 4, 7)])
    names = ("answer", *got.columns)
    for r in got.rows:
        if r["row"] in (2, 4, 7):
            assert {c: r[c] for c in names} == dict.fromkeys(names)
        else:
            want = own[(r["id"], r["model"])]
            assert {c: r[c] for c in names} == {c: want[c] for c in names}
    assert [(r["id"], r["model"]) for r in got.rows][-1] == ("q4", "other") and got.rows[7]["status"] == "ok"
