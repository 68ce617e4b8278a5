"""eval, grade and generate with --engine ray on a local Ray cluster (127.0.0.1, 2 CPUs) against the scripted
chat server: the same files as the local engine, the actor pool bounding the calls in flight, a killed driver
resumed without paying a call twice, a killed actor costing only its call (retried, then an error row)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from benchmint import benchmarks  # noqa: E402
from benchmint.benchmarks.evaluate import EvalConfig, evaluate  # noqa: E402
from benchmint.cli import main  # noqa: E402
from benchmint.models import Endpoint, Engine, RetryPolicy  # noqa: E402
from benchmint.models.ray_calls import RayCalls  # noqa: E402
from benchmint.run.ray_engine import ray_session  # noqa: E402

from chat_server import ChatServer, Reply, Status, prompt_of  # noqa: E402

OPTIONS = ["Phase alpha dissolves.", "The inset shows subunits.", "A solid-state transition.", "Two phases coexist."]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Ray's socket paths live under its temp folder and must stay short: a folder of its own near the root of tmp.
    temp = tmp_path_factory.mktemp("ray")
    with ray_session(None, num_cpus=2, temp_dir=str(temp)) as r:
        yield r.get_runtime_context().gcs_address


def spm_items(folder: Path, n: int) -> Path:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    Image.new("L", (32, 24), 90).save(folder / "fig.png")
    rows = [{"id": f"q{i:02d}", "question": f"Q{i}: which statements fit the panels?", "options": OPTIONS,
             "answer": "A, B", "image": "fig.png"} for i in range(n)]
    path = folder / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def question(body) -> str:
    return re.search(r"Q\d+(?=:)", prompt_of(body)).group(0)


def answer(body) -> str:
    q = question(body)
    return f"{q}: the answer is {'AB'[int(q[1:]) % 2]}\nConfidence: 0.5"


def scripted_server(delay: float = 0.0) -> ChatServer:
    server = ChatServer().start()
    server.default = Reply(text=answer, delay=delay)
    server.when_contains["Q3:"] = Status(400)  # final at once: an error row
    return server


def eval_argv(items: Path, out: Path, server: ChatServer, *more: str) -> list[str]:
    more = more if "--concurrency" in more else ("--concurrency", "2", *more)
    return ["eval", str(items), "--benchmark", "spm", "--model", "m", "--base-url", server.url, "--out", str(out),
            "--retry-delay", "0", *more]


def files_of(out: Path) -> dict:
    """Every output file's bytes, run.json without its timings and with the folder's own path replaced."""
    got = {}
    for p in sorted(out.rglob("*")):
        if p.suffix in (".jsonl", ".json") and p.is_file():
            text = p.read_text(encoding="utf-8").replace(str(out), "OUT")
            if p.name in ("run.json", "summary.json"):
                text = json.dumps(_untimed(json.loads(text)), sort_keys=True)
            got[str(p.relative_to(out))] = text
    return got


def _untimed(x):
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items()
                if not (k.endswith("_s") or k.endswith("seconds") or k in ("started", "finished"))}
    if isinstance(x, list):
        return [_untimed(v) for v in x]
    return x


def differences(a, b, path="") -> list[str]:
    """The paths where two JSON values differ (for a readable failure)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def assert_same_files(got: dict, expected: dict) -> None:
    assert sorted(got) == sorted(expected)
    for name in expected:
        if name.endswith(".json"):
            assert not differences(json.loads(got[name]), json.loads(expected[name])), (
                name, differences(json.loads(got[name]), json.loads(expected[name])))
        assert got[name] == expected[name], name


def prompts_asked(server: ChatServer) -> list[str]:
    return [question(b) for b in server.bodies]


def test_eval_on_ray_writes_what_the_local_engine_writes(cluster, tmp_path):
    items = spm_items(tmp_path / "bench", 12)
    outs = {}
    server = scripted_server(delay=0.3)
    try:
        for engine in ("local", "ray"):
            server.reset()
            server.queue(Status(500))  # the first call to arrive fails and is asked again
            assert main(eval_argv(items, tmp_path / engine, server, "--engine", engine, "--score")) == 1
            # the pool of 2 actors bounds the calls in flight as --concurrency 2 does locally
            assert server.max_in_flight == 2, engine
            asked = prompts_asked(server)
            assert len(asked) == 13 and set(asked) == {f"Q{i}" for i in range(12)}
            outs[engine] = files_of(tmp_path / engine)
    finally:
        server.stop()
    assert_same_files(outs["ray"], outs["local"])
    errors = [json.loads(x) for x in outs["ray"]["errors.jsonl"].splitlines()]
    assert [(e["id"], e["cause"]) for e in errors] == [("q03", "http_status")]
    assert len(outs["ray"]["predictions.jsonl"].splitlines()) == 11
    assert "scores/summary.json" in outs["ray"]


def test_grade_on_ray_writes_what_the_local_engine_writes(cluster, tmp_path):
    from test_grade import ITEMS, PREDS, _judge, _write

    outs = {}
    with ChatServer() as server:
        server.default = Reply(text=_judge)
        for engine in ("local", "ray"):
            server.reset()
            folder = tmp_path / engine
            folder.mkdir()
            _write(folder / "items.jsonl", ITEMS)
            _write(folder / "preds.jsonl", PREDS)
            argv = ["grade", str(folder / "preds.jsonl"), "--gold", str(folder / "items.jsonl"), "--benchmark",
                    "seephys", "--out", str(folder / "out"), "--judge-model", "judge", "--judge-base-url",
                    server.url, "--retry-delay", "0", "--workers", "1", "--quiet", "--concurrency", "2",
                    "--engine", engine]
            assert main(argv) == 1  # one answer undecided, as test_grade works out
            assert server.count == 6  # 1 extraction + 2 decided judge calls + 3 attempts of the failing one
            outs[engine] = {k: v.replace(str(folder), "DIR") for k, v in files_of(folder / "out").items()}
    assert_same_files(outs["ray"], outs["local"])
    assert "p6" in outs["ray"]["errors.jsonl"]


def test_generate_seephys_on_ray_writes_what_the_local_engine_writes(cluster, tmp_path):
    from test_generate_seephys import model_args, problems, scripted

    refuse = {"id": "refuse", "question": "A lens of focal length 5.0 cm.", "answer": "10 cm",
              "images": ["scale.png"], "caption": "A lens."}
    outs = {}
    with ChatServer() as server:
        for engine in ("local", "ray"):
            server.reset()
            (tmp_path / engine).mkdir()
            src = problems(tmp_path / engine, [refuse])
            server.default = Reply(text=scripted({}))
            assert main(model_args(src, tmp_path / engine / "built", server, "--concurrency", "2",
                                   "--engine", engine)) == 0
            assert server.count == 7  # as the local test counts them
            outs[engine] = {k: v.replace(str(tmp_path / engine), "DIR")
                            for k, v in files_of(tmp_path / engine / "built").items()}
    assert_same_files(outs["ray"], outs["local"])
    assert {"items.jsonl", "rejected.jsonl", "trace.jsonl", "run.json"} <= set(outs["ray"])


def test_the_rate_limit_holds_across_the_pool(cluster, tmp_path):
    items = spm_items(tmp_path / "bench", 10)
    with ChatServer() as server:
        server.default = Reply(text=answer)
        # 240 a minute: 4 a second after a burst of 4 (one second's worth), whichever actor sends them
        assert main(eval_argv(items, tmp_path / "out", server, "--engine", "ray", "--concurrency", "4",
                              "--rpm", "240")) == 0
        times = server.times()
    assert len(times) == 10
    # Past the burst, one call each quarter second (granted in the driver; a fresh actor's first call arrives
    # late, so the burst's own times say little). Unlimited, the ten fast replies would take some 50 ms.
    assert times[9] - times[4] >= 5 / 4 - 0.1, [round(t - times[0], 3) for t in times]


def test_the_budget_holds_across_the_pool(cluster, tmp_path):
    items = spm_items(tmp_path / "bench", 12)
    (tmp_path / "protocol.json").write_text(json.dumps({"max_tokens": 1000}))
    out = tmp_path / "out"
    with ChatServer() as server:
        server.default = Reply(text=answer, prompt_tokens=10, completion_tokens=1000, delay=0.2)  # the worst case
        assert main(eval_argv(items, out, server, "--engine", "ray", "--concurrency", "4", "--protocol",
                              str(tmp_path / "protocol.json"), "--max-tokens", "3500")) == 1
        asked = server.count
    # 4 actors could hold 4 calls at once; the one accountant reserved each call's worst case first, so the
    # server saw no more than the budget: 3 replies of 1,010 tokens
    assert 1 <= asked <= 3
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    errors = [json.loads(x) for x in (out / "errors.jsonl").read_text().splitlines()]
    assert len(preds) == asked and {e["cause"] for e in errors} == {"budget"}
    assert sorted([p["id"] for p in preds] + [e["id"] for e in errors]) == [f"q{i:02d}" for i in range(12)]
    run = json.loads((out / "run.json").read_text())
    assert run["engine"]["stop_reason"] == "max_tokens" and run["engine"]["total"]["charged_tokens"] <= 3500


def test_a_killed_driver_resumes_without_paying_a_call_twice(cluster, tmp_path):
    n = 30
    items = spm_items(tmp_path / "bench", n)
    server = scripted_server(delay=0.1)
    try:
        assert main(eval_argv(items, tmp_path / "local", server)) == 1
        server.reset()
        cmd = [sys.executable, "-m", "benchmint.cli", *eval_argv(items, tmp_path / "ray", server, "--engine", "ray",
                                                                 "--ray-address", cluster)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 90
        while server.count < 10 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first = server.count
        assert 10 <= first < n
        assert main(eval_argv(items, tmp_path / "ray", server, "--engine", "ray")) == 1
        asked = prompts_asked(server)
        twice = {q for q in set(asked) if asked.count(q) > 1}
        # Only the calls in flight at the kill (at most --concurrency) were asked again, and Q3, whose failure
        # is not final (the next run tries a failed call again, as the local engine does); the rest never.
        assert len(twice - {"Q3"}) <= 2 and sorted(set(asked)) == sorted(f"Q{i}" for i in range(n))
        assert len(asked) <= n + 2 + 1
    finally:
        server.stop()
    for name in ("predictions.jsonl", "errors.jsonl", "gold.jsonl"):
        assert (tmp_path / "ray" / name).read_text() == (tmp_path / "local" / name).read_text(), name


def ray_engine(server: ChatServer, cache: Path, attempts: int) -> tuple[Engine, RayCalls]:
    calls = RayCalls(server.url, "no-key", 30.0, 2)
    engine = Engine(Endpoint(server.url), cache=cache, concurrency=2, transport=calls, answer_attempts=1,
                    retry=RetryPolicy(max_attempts=attempts, base_delay_s=0.0))
    return engine, calls


def kill_the_busy_actor(server: ChatServer, calls: RayCalls, everyone: set[int], n: int) -> int:
    """Once the server has every request and one actor is left busy (with the slow call), kill that actor."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        idle = set(calls.pids())
        if server.count >= n and len(idle) == 1:
            (busy,) = everyone - idle
            server.when_contains.clear()  # the call asked again is answered at once
            os.kill(busy, signal.SIGKILL)
            return busy
        time.sleep(0.05)
    raise AssertionError("the slow call never was the only one in flight")


@pytest.mark.parametrize("attempts", [3, 1])
def test_a_killed_actor_loses_only_its_call(cluster, tmp_path, attempts):
    n = 6
    items = spm_items(tmp_path / "bench", n)
    bench = benchmarks.get("spm")
    with ChatServer() as server:
        server.default = Reply(text=answer)
        server.when_contains["Q1:"] = Reply(text=answer, delay=30)
        engine, calls = ray_engine(server, tmp_path / "out" / "requests.sqlite", attempts)
        everyone = set(calls.pids())
        assert len(everyone) == 2
        killer = threading.Thread(target=kill_the_busy_actor, args=(server, calls, everyone, n))
        killer.start()
        t0 = time.monotonic()
        try:
            evaluate(items, tmp_path / "out", bench, EvalConfig(model="m"), engine)
        finally:
            killer.join()
            engine.close()
        assert time.monotonic() - t0 < 25  # the slow reply was not waited for: its actor's death ended the call
        assert calls.replaced == 1
        asked = prompts_asked(server)
        predicted = [json.loads(x)["id"] for x in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
        errors = [json.loads(x) for x in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
        if attempts > 1:  # asked again on the fresh actor; no other call was asked twice
            assert sorted(asked) == sorted([f"Q{i}" for i in range(n)] + ["Q1"])
            assert predicted == [f"q{i:02d}" for i in range(n)] and errors == []
        else:  # no retry left: an error row saying the actor died, the other items answered once each
            assert sorted(asked) == sorted(f"Q{i}" for i in range(n))
            assert [(e["id"], e["cause"]) for e in errors] == [("q01", "connection")]
            assert "Ray actor" in errors[0]["message"]
            assert predicted == [f"q{i:02d}" for i in range(n) if i != 1]
            # not final: the next run asks it alone
            engine, _ = ray_engine(server, tmp_path / "out" / "requests.sqlite", attempts)
            try:
                evaluate(items, tmp_path / "out", bench, EvalConfig(model="m"), engine)
            finally:
                engine.close()
            assert prompts_asked(server).count("Q1") == 2 and server.count == n + 1
            assert len((tmp_path / "out" / "predictions.jsonl").read_text().splitlines()) == n


def test_a_pool_that_cannot_start_says_why(cluster, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConnectionError, match="could not start.*api_key"):
        RayCalls("http://127.0.0.1:9/v1", None, 5.0, 1)  # the SDK's client refuses to be made without a key
