"""The generation flow's own work per item, against the model calls it makes (engine time excluded).

``benchmint generate spm`` over a synthetic harvest of N figures of the sample article (each a different box on
its first page, so every crop is its own question), against the scripted chat server in its own process that
answers at once: every question is drafted, audited, revised once and audited again (4 calls). The time the flow
spends waiting on the engines (``RoleExecutor``'s event loop: the engine, the HTTP calls, the server) is measured
apart, as is the time rendering the 300-DPI crops; what is left is the flow's own work (reading the harvest,
building prompts and requests, unit keys, the ledger, follow-up units, reading the loop back, writing outputs).
The bench checks every item and the request count at the server.

Run: BENCHMINT_GENERATE_ITEMS=200 .venv/bin/python -m pytest benches/bench_generate.py -s -p no:cacheprovider
(default 20 items so that the test command runs it quickly).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import benchmint
from benchmint.cli import main
from benchmint.generate import executor, spm

N = int(os.environ.get("BENCHMINT_GENERATE_ITEMS", "20"))
TESTS = Path(__file__).resolve().parents[1] / "tests"
PDF = Path(benchmint.__file__).parent / "samples" / "sample_paper.pdf"

SERVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import asyncio
from chat_server import ChatServer, Reply, prompt_of
sys.path.insert(0, sys.argv[2])
from bench_generate import scripted
server = ChatServer()
server.default = Reply(text=scripted)
async def main():
    await server.serve()
    print(server.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print(json.dumps(server.stats()["count"]), flush=True)
asyncio.run(main())
"""

DIMS = ["scientific_consistency", "distractor_plausibility", "logical_depth", "visual_dependence",
        "answer_key_validity", "clarity"]


def scripted(body: dict) -> str:
    """Replies that depend on the request alone: a question (its revision ends in "+"), and an audit that passes
    a revised question."""
    from chat_server import prompt_of

    prompt = prompt_of(body)
    if prompt.startswith("You audit"):
        draft = json.loads(prompt.split("as JSON:\n", 1)[1].split("\n", 1)[0])
        verdict, score = ("pass", 5) if draft["step2_question"].endswith("+") else ("revise", 2)
        return json.dumps({"scores": dict.fromkeys(DIMS, score), "critiques": dict.fromkeys(DIMS, "ok"),
                           "verdict": verdict})
    label = prompt.split("Caption of the figure (", 1)[1].split(")", 1)[0]
    question = {"step1_reasoning": "r", "step2_question": f"Which statements about figure {label} hold?",
                "step3_options": [f"Option {c}" for c in "ABCDEF"], "step4_answer": ["A", "C"],
                "step5_rubric": [{"competency": "Reading", "criterion": "reads it"}],
                "step6_labels": {"domain": "Crystal Structure Analysis", "bloom_level": 3, "question_type": "EU",
                                 "level": "PhD", "discipline": "Surface Science", "technique": "STM", "topic": "t"}}
    if prompt.startswith("You wrote"):
        question["step2_question"] += "+"
    return json.dumps(question)


@pytest.fixture(scope="module")
def harvest(tmp_path_factory):
    """N figure records on the sample article's first page, boxes 0.5 pt apart."""
    root = tmp_path_factory.mktemp("bench-harvest")
    assert main(["harvest", str(PDF), "--out", str(root / "h")]) == 0
    first = json.loads((root / "h" / "figures.jsonl").read_text().splitlines()[0])
    x0, y0, x1, y1 = first["body_box"]
    rows = [{**first, "label": str(i + 1), "caption": f"Figure {i + 1}. {first['caption']}",
             "body_box": [x0, y0 + 0.5 * (i % 200), x1, y1 - 0.5 * (i // 200)]} for i in range(N)]
    (root / "h" / "figures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "h"


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(TESTS), str(Path(__file__).parent)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield proc, f"http://127.0.0.1:{port}/v1"
    finally:
        proc.stdin.close()
        proc.wait(10)


def test_flow_overhead_per_item(harvest, server, tmp_path, monkeypatch):
    proc, url = server
    timings = {"engine": 0.0, "crop": 0.0}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timings[name] += time.perf_counter() - t0
        return wrapper

    monkeypatch.setattr(executor._Drive, "next_outcomes", timed("engine", executor._Drive.next_outcomes))
    monkeypatch.setattr(spm.SPMGenerator, "_crop", timed("crop", spm.SPMGenerator._crop))
    out = tmp_path / "gen"
    t0 = time.perf_counter()
    status = main(["generate", "spm", str(harvest), "--out", str(out), "--pdfs", str(PDF.parent), "--base-url", url,
                   "--gen-model", "g", "--advisor-model", "a", "--min-panels", "1", "--concurrency", "32"])
    total = time.perf_counter() - t0
    assert status == 0
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert len(items) == N and all(i["meta"]["outcome"] == "PASSED_REVISED" and i["meta"]["audits"] == 2
                                   for i in items)
    run = json.loads((out / "run.json").read_text())
    calls = run["calls"]["total"]["requests"]
    assert calls == 4 * N
    own = total - timings["engine"] - timings["crop"]
    print(f"\n{N} items, {calls} calls: total {total:.3f} s, engine wait {timings['engine']:.3f} s, "
          f"crops {timings['crop']:.3f} s ({timings['crop'] / N * 1e3:.1f} ms/item), flow's own work {own:.3f} s: "
          f"{own / N * 1e3:.2f} ms per item, {own / calls * 1e3:.2f} ms per call")
    shutil.rmtree(out)
