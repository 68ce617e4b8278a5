"""The model engine against a local chat-completions server that answers at once.

The server (tests/chat_server.py) runs in its own process, so it has a core of its own on a 2-core machine. Three
ways to get N replies at the same concurrency (32 requests in flight):

- the bare openai SDK (``AsyncOpenAI`` and a semaphore): the ceiling of a cold run;
- ``Engine.run`` with a cold cache (fresh file each round): cache look-ups, cache writes, accounting, limits and
  the retry policy on top of the same SDK calls;
- ``Engine.run_sync`` with a warm cache: every reply from the cache, no HTTP at all.

Every bench checks its replies. ``test_cold_engine_vs_bare_sdk`` runs the first two in turn (best of 5 each) and
records the ratio and the per-call overhead the engine adds. The sizes are small by default so that the test
command runs them quickly (BENCHMINT_MODELS_ITEMS, cold, default 200; BENCHMINT_MODELS_WARM_ITEMS, default 1,000);
the README figures use 2,000 and 20,000.

Run: .venv/bin/python -m pytest benches/bench_models.py --benchmark-only --benchmark-group-by=group
"""

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import openai
import pytest

from benchmint.models import ChatReply, ChatRequest, Endpoint, Engine, Message

from conftest import record_throughput

N_COLD = int(os.environ.get("BENCHMINT_MODELS_ITEMS", "200"))
N_WARM = int(os.environ.get("BENCHMINT_MODELS_WARM_ITEMS", "1000"))
CONCURRENCY = 32
MODEL = "bench-model"
SERVER = Path(__file__).resolve().parents[1] / "tests" / "chat_server.py"


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.stdin.close()  # the server stops when its stdin closes
        proc.wait(10)


def served(url):
    with urllib.request.urlopen(url + "/stats") as r:
        return json.load(r)["count"]


def prompts(tag, n):
    return [f"{tag} question {i}" for i in range(n)]


def bare_sdk(url, texts):
    """The replies of ``texts`` with the SDK alone: ``CONCURRENCY`` workers taking the next prompt in turn."""

    async def main():
        client = openai.AsyncOpenAI(base_url=url, api_key="no-key", max_retries=0)
        out = [None] * len(texts)
        pending = iter(enumerate(texts))

        async def worker():
            for i, text in pending:
                r = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}],
                                                         max_tokens=16, temperature=0.0)
                out[i] = r.choices[0].message.content

        try:
            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
            return out
        finally:
            await client.close()

    return asyncio.run(main())


def items(texts):
    for i, text in enumerate(texts):
        yield i, ChatRequest(MODEL, (Message.user(text),), max_tokens=16, temperature=0.0)


def engine_cold(url, texts, cache):
    async def main():
        eng = Engine(Endpoint(url), cache=cache, concurrency=CONCURRENCY)
        out = [None] * len(texts)
        async for i, reply in eng.run(items(texts)):
            out[i] = reply
        eng.close()
        return out

    return asyncio.run(main())


def check(replies, texts, cached):
    assert all(isinstance(r, ChatReply) and r.cached == cached for r in replies)
    assert [r.text for r in replies] == [f"echo: {t}" for t in texts]


def test_bare_sdk(benchmark, server):
    benchmark.group = f"models-cold-{N_COLD}"
    texts = prompts("bare", N_COLD)
    bare_sdk(server, prompts("warm-up", 64))
    got = benchmark.pedantic(bare_sdk, args=(server, texts), rounds=3, iterations=1)
    assert got == [f"echo: {t}" for t in texts]
    record_throughput(benchmark, N_COLD)


def test_engine_cold_cache(benchmark, server, tmp_path):
    benchmark.group = f"models-cold-{N_COLD}"
    texts = prompts("cold", N_COLD)
    rounds = iter(range(100))

    def fresh():
        return (server, texts, tmp_path / f"cache-{next(rounds)}.sqlite"), {}

    before = served(server)
    got = benchmark.pedantic(engine_cold, setup=fresh, rounds=3, iterations=1)
    check(got, texts, cached=False)
    assert (served(server) - before) % N_COLD == 0  # one request per item per round
    record_throughput(benchmark, N_COLD)


def test_engine_warm_cache(benchmark, server, tmp_path):
    benchmark.group = f"models-warm-{N_WARM}"
    texts = prompts("warm", N_WARM)
    cache = tmp_path / "warm.sqlite"
    check(engine_cold(server, texts, cache), texts, cached=False)
    eng = Engine(Endpoint(server), cache=cache, concurrency=CONCURRENCY)
    before = served(server)
    got = benchmark.pedantic(lambda: list(eng.run_sync(items(texts))), rounds=5, iterations=1)
    assert served(server) == before  # no HTTP at all
    check([r for _, r in sorted(got, key=lambda x: x[0])], texts, cached=True)
    record_throughput(benchmark, N_WARM)
    t = time.perf_counter()
    for _ in items(texts):
        pass
    benchmark.extra_info["request_building_us_per_item"] = 1e6 * (time.perf_counter() - t) / N_WARM
    if not benchmark.disabled:
        assert benchmark.extra_info["items_per_second"] >= 50_000


def test_cold_engine_vs_bare_sdk(benchmark, server, tmp_path):
    """Side by side, in turn: the engine's throughput against the bare SDK's and its overhead per call.

    Each round runs both once (new prompts, a fresh cache file); the timed figure is the pair. extra_info holds the
    best time of each over the rounds (and the ratio of the medians), since other work on the machine only ever
    slows a round down.
    """
    benchmark.group = f"models-cold-side-by-side-{N_COLD}"
    bare, eng = [], []
    rounds = iter(range(100))

    def pair():
        r = next(rounds)
        texts = prompts(f"pair-bare-{r}", N_COLD)
        t = time.perf_counter()
        assert bare_sdk(server, texts) == [f"echo: {x}" for x in texts]
        bare.append(time.perf_counter() - t)
        texts = prompts(f"pair-engine-{r}", N_COLD)
        t = time.perf_counter()
        check(engine_cold(server, texts, tmp_path / f"pair-{r}.sqlite"), texts, cached=False)
        eng.append(time.perf_counter() - t)

    benchmark.pedantic(pair, rounds=5, iterations=1)
    info = benchmark.extra_info
    info["bare_requests_per_second"] = N_COLD / min(bare)
    info["engine_requests_per_second"] = N_COLD / min(eng)
    info["engine_vs_bare"] = min(bare) / min(eng)
    info["engine_vs_bare_median"] = statistics.median(bare) / statistics.median(eng)
    info["engine_overhead_us_per_call"] = 1e6 * (min(eng) - min(bare)) / N_COLD
    info["bare_s"] = [round(t, 3) for t in bare]
    info["engine_s"] = [round(t, 3) for t in eng]
    if not benchmark.disabled:
        assert info["engine_vs_bare"] >= 0.9
