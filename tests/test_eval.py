"""benchmint eval against a real chat-completions server on 127.0.0.1: predictions, errors, reruns, scoring."""

import io
import json

import pytest
from killing import kill_once_recorded
from PIL import Image

from benchmint.cli import main

from chat_server import ChatServer, Reply, Status, prompt_of

OPTIONS = ["Phase alpha dissolves.", "The inset shows subunits.", "A solid-state transition.",
           "Two phases coexist.", "Pure ripening.", "An amorphous precursor."]
# what the scripted model answers, by the first words of the question
ANSWERS = {"Q1": "Answer: A, B\nConfidence: 0.8\nDifficulty: 0.3", "Q2": "I would pick C.\nAnswer: C\nConfidence: 0.5",
           "Q3": "The answer is B, D, F", "Q4": "no idea"}


def png_bytes(shade):
    buf = io.BytesIO()
    Image.new("L", (32, 24), shade).save(buf, format="PNG")
    return buf.getvalue()


def reply_for(body):
    text = prompt_of(body)
    for q, answer in ANSWERS.items():
        if q in text:
            return answer
    return "?"


@pytest.fixture
def spm_items(tmp_path):
    (tmp_path / "fig.png").write_bytes(png_bytes(90))
    rows = [{"id": f"q{i}", "question": f"Q{i}: which statements fit the panels?", "options": OPTIONS,
             "answer": gold, "image": "fig.png", "technique": tech}
            for i, (gold, tech) in enumerate([("A, B", "SEM"), ("C", "TEM"), ("B, D", "SEM"), ("E", "AFM")], 1)]
    rows.insert(2, {"id": "broken", "question": "Q?", "options": OPTIONS})  # no answer: an item error
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def server():
    with ChatServer() as s:
        s.default = Reply(text=reply_for, completion_tokens=7)
        yield s


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_eval(items, out, server, *extra):
    return main(["eval", str(items), "--benchmark", "spm", "--model", "tiny", "--base-url", server.url,
                 "--out", str(out), "--retry-delay", "0", *extra])


def test_spm_eval_predictions_scores_and_a_rerun_that_asks_nothing(spm_items, server, tmp_path, capsys):
    out = tmp_path / "run"
    assert run_eval(spm_items, out, server, "--score") == 1  # the broken item is listed
    assert server.count == 4  # the SPM-Bench protocol asks once: an answer that cannot be read is scored empty
    preds = {p["id"]: p for p in read(out / "predictions.jsonl")}
    assert list(preds) == ["q1", "q2", "q3", "q4"]
    assert preds["q1"]["output"] == ANSWERS["Q1"] and preds["q1"]["confidence"] == 0.8
    assert preds["q1"]["difficulty"] == 0.3 and preds["q1"]["tokens"] == 7 and preds["q1"]["cached"] is False
    assert preds["q4"]["attempts"] == 1 and preds["q4"]["output"] == "no idea"
    errors = read(out / "errors.jsonl")
    assert [(e["kind"], e.get("id", ""), e.get("cause")) for e in errors] == [
        ("bad_item", "", None), ("model_call", "q4", "unparseable")]
    assert "answer" in errors[0]["message"] and "items.jsonl" in errors[0]["location"]
    gold = read(out / "gold.jsonl")
    assert [g["id"] for g in gold] == ["q1", "q2", "q3", "q4"] and gold[0]["answer"] == ["A", "B"]
    run = json.loads((out / "run.json").read_text())
    assert run["benchmark"] == "spm" and run["model"] == "tiny" and run["counts"]["predictions"] == 4
    assert run["engine"]["total"]["requests"] == 4 and len(run["prompts"][0]["sha256"]) == 64
    summary = json.loads((out / "scores" / "summary.json").read_text())
    m = summary["models"]["tiny"]
    # q1 exact, q2 exact, q3 {B,D,F} vs {B,D}: SIP-F1 = 0.6·F1γ, Pw = 2/(2+6) = 1/4, R = 1, F1γ = 0.4; q4 empty
    assert m["metrics"]["sip_f1"]["mean"] == pytest.approx((1 + 1 + 0.6 * 0.4 + 0) / 4)
    assert m["unparsed_ids"] == ["q4"]
    first = (out / "predictions.jsonl").read_bytes()
    first_errors = (out / "errors.jsonl").read_bytes()
    capsys.readouterr()
    server.reset()
    server.default = Reply(text=reply_for, completion_tokens=7)
    assert run_eval(spm_items, out, server) == 1
    assert server.count == 0  # every unit was done: nothing asked again
    assert (out / "predictions.jsonl").read_bytes() == first
    # q4's unreadable answer stays listed: outputs come from the ledger, not from what this run happened to ask
    assert (out / "errors.jsonl").read_bytes() == first_errors
    assert "4 predictions (4 already done)" in capsys.readouterr().out


def test_failed_calls_are_listed_and_asked_again_next_run(spm_items, server, tmp_path):
    out = tmp_path / "run"
    server.when_contains["Q2:"] = Status(500)  # q2 fails every time; the engine gives up after its retries
    assert run_eval(spm_items, out, server, "--retries", "2") == 1
    errors = [e for e in read(out / "errors.jsonl") if e["kind"] == "model_call" and e["id"] == "q2"]
    assert [(e["cause"], e["status"], e["requests"]) for e in errors] == [("http_status", 500, 2)]
    assert "q2" not in {p["id"] for p in read(out / "predictions.jsonl")}
    del server.when_contains["Q2:"]  # the server recovers
    asked = server.count
    run_eval(spm_items, out, server)
    assert server.count - asked == 1  # only q2 is asked again
    assert [p["id"] for p in read(out / "predictions.jsonl")] == ["q1", "q2", "q3", "q4"]
    assert [e["id"] for e in read(out / "errors.jsonl") if e["kind"] == "model_call"] == ["q4"]  # q2's row is gone


def test_answer_attempts_ask_an_unreadable_reply_again(spm_items, server, tmp_path):
    assert run_eval(spm_items, tmp_path / "run", server, "--answer-attempts", "3") == 1
    assert server.by_prompt and server.count == 4 + 2  # q4 twice more
    q4 = [p for p in read(tmp_path / "run" / "predictions.jsonl") if p["id"] == "q4"]
    assert q4[0]["attempts"] == 3


def test_crystalxrd_baseline_through_the_same_path_scores_jaccard_one(tmp_path, capsys):
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    cifs = tmp_path / "cifs"
    cifs.mkdir()
    CifWriter(Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"],
                                        [[0, 0, 0], [0.5, 0.5, 0.5]])).write_file(cifs / "nacl.cif")
    CifWriter(Structure.from_spacegroup("P6_3/mmc", Lattice.hexagonal(3.21, 5.21), ["Mg"],
                                        [[1 / 3, 2 / 3, 0.25]])).write_file(cifs / "mg.cif")
    assert main(["xrd", "build", str(cifs), "--out", str(tmp_path / "bench"), "--per-db", "1"]) == 0
    out = tmp_path / "eval"
    # the items carry their structures: no path outside the items folder is read
    assert main(["eval", str(tmp_path / "bench" / "items.jsonl"), "--benchmark", "crystalxrd", "--baseline",
                 "--out", str(out), "--score"]) == 0
    preds = read(out / "predictions.jsonl")
    assert [p["model"] for p in preds] == ["benchmint-simulator"] * 2
    summary = json.loads((out / "scores" / "summary.json").read_text())
    assert summary["models"]["benchmint-simulator"]["metrics"]["jaccard"]["mean"] == 1.0
    assert json.loads((out / "run.json").read_text())["protocol"]["answer_retries"] == 0
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "bench" / "items.jsonl"), "--benchmark", "seephys", "--baseline",
                 "--out", str(tmp_path / "x")]) == 2
    assert "no deterministic baseline" in capsys.readouterr().err


def test_killed_eval_resumes_asking_nothing_answered_again(tmp_path):
    """SIGKILL mid-run (the settings users get), then rerun: the predictions of an uninterrupted run, and no
    request answered before the kill asked again (only those in flight: at most --concurrency)."""
    import sqlite3
    import subprocess
    import sys

    (tmp_path / "fig.png").write_bytes(png_bytes(120))
    n = 150
    rows = [{"id": f"item{i:03d}", "question": f"Q1 number {i}: which fit?", "options": OPTIONS, "answer": "A, B",
             "image": "fig.png"} for i in range(n)]
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with ChatServer() as server:
        server.default = Reply(text=reply_for, delay=0.02)
        cmd = [sys.executable, "-m", "benchmint.cli", "eval", str(items), "--benchmark", "spm", "--model", "tiny",
               "--base-url", server.url, "--concurrency", "4", "--out"]
        killed = tmp_path / "killed"
        kill_once_recorded([*cmd, str(killed)], killed / "ledger.sqlite", 30)
        with sqlite3.connect(killed / "ledger.sqlite") as db:
            recorded = db.execute("SELECT COUNT(*) FROM units").fetchone()[0]
        assert 30 <= recorded < n
        asked_before = server.count
        assert subprocess.run([*cmd, str(killed)], capture_output=True).returncode == 0
        asked_twice = [p for p, k in server.by_prompt.items() if k > 1]
        assert len(asked_twice) <= 4 and server.count == n + len(asked_twice)
        assert asked_before - recorded <= 4 + len(asked_twice)
        clean = tmp_path / "clean"
        assert subprocess.run([*cmd, str(clean)], capture_output=True).returncode == 0

    def without_cached(path):  # "cached" says where this run got the reply; everything else is the same
        return [{k: v for k, v in r.items() if k != "cached"} for r in read(path)]

    assert without_cached(killed / "predictions.jsonl") == without_cached(clean / "predictions.jsonl")
    assert len(read(clean / "predictions.jsonl")) == n


# ---- items whose requests coincide: each its own unit and row, one call per distinct request


def write_items(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def coinciding_items(tmp_path):
    (tmp_path / "fig.png").write_bytes(png_bytes(90))
    (tmp_path / "other.png").write_bytes(png_bytes(200))
    same = {"question": "Q1: same question?", "options": OPTIONS, "answer": "A, B", "image": "fig.png"}
    return write_items(tmp_path / "items.jsonl", [
        {"id": "a1", **same}, {"id": "a2", **same},
        {"id": "b1", "question": "Q2: other question?", "options": OPTIONS, "answer": "C", "image": "fig.png"},
        # the same text as a1 with another figure: a request of its own, but the same one once blind
        {"id": "c1", **same, "image": "other.png"}])


@pytest.mark.parametrize("blind", [False, True])
def test_coinciding_prompts_give_each_item_its_own_prediction_and_one_call(tmp_path, server, blind):
    items = coinciding_items(tmp_path)
    out = tmp_path / "run"
    assert run_eval(items, out, server, *(["--blind"] if blind else [])) == 0
    preds = read(out / "predictions.jsonl")
    assert [p["id"] for p in preds] == ["a1", "a2", "b1", "c1"]
    assert [p["output"] for p in preds] == [ANSWERS["Q1"], ANSWERS["Q1"], ANSWERS["Q2"], ANSWERS["Q1"]]
    # a1 and a2 send one request (c1 too when blind): paid once, the copies marked as served without a call
    assert server.count == (2 if blind else 3)
    assert [p["cached"] for p in preds] == ([False, True, False, True] if blind else [False, True, False, False])
    assert [g["id"] for g in read(out / "gold.jsonl")] == ["a1", "a2", "b1", "c1"]
    assert json.loads((out / "run.json").read_text())["counts"]["predictions"] == 4


def test_coinciding_failures_are_an_error_row_per_item(tmp_path, server):
    items = coinciding_items(tmp_path)
    server.when_contains["Q1:"] = Status(500)
    out = tmp_path / "run"
    assert run_eval(items, out, server, "--retries", "1") == 1
    rows = [(e["id"], e["cause"], e["status"]) for e in read(out / "errors.jsonl")]
    assert rows == [("a1", "http_status", 500), ("a2", "http_status", 500), ("c1", "http_status", 500)]
    assert server.count == 3  # a1 and a2's request once, b1's, c1's (same text, another figure)
    del server.when_contains["Q1:"]
    assert run_eval(items, out, server) == 0
    assert [p["id"] for p in read(out / "predictions.jsonl")] == ["a1", "a2", "b1", "c1"]


def test_duplicate_ids_are_an_error_naming_both_lines_and_the_run_goes_on(tmp_path, server):
    (tmp_path / "fig.png").write_bytes(png_bytes(90))
    row = {"options": OPTIONS, "answer": "A", "image": "fig.png"}
    items = write_items(tmp_path / "items.jsonl", [
        {"id": "a1", "question": "Q1: first?", **row}, {"id": "b1", "question": "Q2: second?", **row},
        {"id": "a1", "question": "Q3: a third, filed under the first one's id?", **row}])
    out = tmp_path / "run"
    assert run_eval(items, out, server) == 1
    assert [(p["id"], p["output"]) for p in read(out / "predictions.jsonl")] == [("a1", ANSWERS["Q1"]),
                                                                                 ("b1", ANSWERS["Q2"])]
    (err,) = read(out / "errors.jsonl")
    assert err["location"] == f"{items}:3" and err["field"] == "id"
    assert err["message"] == f"duplicate id 'a1' (first at {items}:1)"
    assert server.count == 2


def test_killed_eval_with_coinciding_prompts_resumes_paying_each_request_once(tmp_path):
    """SIGKILL mid-run over items that share prompts in pairs, then rerun: every item has its own row, the outputs
    equal an uninterrupted run's, and each distinct request was paid once (bar those in flight at the kill)."""
    import sqlite3
    import subprocess
    import sys

    (tmp_path / "fig.png").write_bytes(png_bytes(120))
    n = 160  # 80 distinct questions, each asked by two items
    rows = [{"id": f"item{i:03d}", "question": f"Q1 number {i // 2}: which fit?", "options": OPTIONS,
             "answer": "A, B", "image": "fig.png"} for i in range(n)]
    items = write_items(tmp_path / "items.jsonl", rows)
    with ChatServer() as server:
        server.default = Reply(text=reply_for, delay=0.02)
        cmd = [sys.executable, "-m", "benchmint.cli", "eval", str(items), "--benchmark", "spm", "--model", "tiny",
               "--base-url", server.url, "--concurrency", "4", "--out"]
        killed = tmp_path / "killed"
        kill_once_recorded([*cmd, str(killed)], killed / "ledger.sqlite", 40)
        with sqlite3.connect(killed / "ledger.sqlite") as db:
            recorded = db.execute("SELECT COUNT(*) FROM units").fetchone()[0]
        assert 40 <= recorded < n
        assert subprocess.run([*cmd, str(killed)], capture_output=True).returncode == 0
        asked_twice = [p for p, k in server.by_prompt.items() if k > 1]
        assert len(server.by_prompt) == n // 2 and len(asked_twice) <= 4  # only requests in flight at the kill
        assert server.count == n // 2 + len(asked_twice)
        clean = tmp_path / "clean"
        server.reset()
        server.default = Reply(text=reply_for, delay=0.02)
        assert subprocess.run([*cmd, str(clean)], capture_output=True).returncode == 0
        assert server.count == n // 2

    def without_cached(path):  # "cached" says where this run got the reply; everything else is the same
        return [{k: v for k, v in r.items() if k != "cached"} for r in read(path)]

    assert [p["id"] for p in read(killed / "predictions.jsonl")] == [r["id"] for r in rows]
    assert without_cached(killed / "predictions.jsonl") == without_cached(clean / "predictions.jsonl")
    for name in ("gold.jsonl", "errors.jsonl"):
        assert (killed / name).read_bytes() == (clean / name).read_bytes()


def test_graded_items_whose_prompts_and_judge_requests_coincide_keep_their_ids(tmp_path):
    """Two SeePhys items with the same question and answer: one model call, one judge call, two grades."""
    row = {"question": "A block is pushed with what force?", "answer": "5 N", "language": "English"}
    items = write_items(tmp_path / "items.jsonl", [{"id": "p1", **row}, {"id": "p2", **row},
                                                   {"id": "p3", **row, "question": "And another block?"}])

    def model_or_judge(body):
        text = prompt_of(body)
        return "1" if text.startswith("You are a physics professor") else "<answer>five newtons</answer>"

    with ChatServer() as server:
        server.default = Reply(text=model_or_judge)
        assert main(["eval", str(items), "--benchmark", "seephys", "--setting", "TO", "--model", "m",
                     "--base-url", server.url, "--out", str(tmp_path / "run"), "--retry-delay", "0",
                     "--grade", "--judge-model", "judge"]) == 0
        judged = [p for p in server.by_prompt if p.startswith("You are a physics professor")]
        assert len(judged) == 2 and server.count == 4  # p1 and p2 share their model call and their judge call
    grades = read(tmp_path / "run" / "grades" / "grades.jsonl")
    assert sorted((g["id"], g["stage"], g["score"]) for g in grades) == [("p1", "judge", 1.0), ("p2", "judge", 1.0),
                                                                         ("p3", "judge", 1.0)]
