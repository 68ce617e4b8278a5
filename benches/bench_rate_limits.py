"""--tpm as users meet it: waiting calls at concurrency 1 and 8, and the tokens per minute a run delivers.

Against tests/chat_server.py in this process (a thread of its own), no timing rounds: each case runs once and
prints its figures (run with ``-s`` to see them).

- Five items whose requests set max_tokens 8,192 (SeePhys's protocol) under ``--tpm 60000``, the server reporting
  15 tokens a reply: each call takes its worst case from a bucket of 1,000 tokens and gives nearly all of it back.
  The wall time at concurrency 1 and 8.
- Items without max_tokens (MatVQA's, SPM-Bench's, CSMBench's protocols) whose replies report 2,000 tokens,
  under ``--tpm 600000`` at concurrency 8: the tokens the replies report per minute of the run.

Run: .venv/bin/python -m pytest benches/bench_rate_limits.py -s -p no:cacheprovider
"""

import os
import time

import pytest

from benchmint.models import ChatReply, ChatRequest, Endpoint, Engine, Message, RateLimits

from chat_server import ChatServer, Reply

N_DELIVERED = int(os.environ.get("BENCHMINT_TPM_ITEMS", "60"))


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def run(server, n, concurrency, tpm, max_tokens):
    eng = Engine(Endpoint(server.url), concurrency=concurrency, limits=RateLimits(tokens_per_minute=tpm))
    t0 = time.monotonic()
    out = dict(eng.run_sync((f"q{i}", ChatRequest("m", (Message.user(f"q{i}"),), max_tokens=max_tokens))
                            for i in range(n)))
    elapsed = time.monotonic() - t0
    assert len(out) == n and all(isinstance(o, ChatReply) for o in out.values())
    return elapsed, eng


@pytest.mark.parametrize("concurrency", [1, 8])
def test_five_items_under_tpm(server, concurrency):
    elapsed, _ = run(server, 5, concurrency, 60_000, 8_192)
    print(f"\n5 items, max_tokens 8,192, --tpm 60000, concurrency {concurrency}: {elapsed:.2f} s")
    assert elapsed < 5.0


def test_tokens_per_minute_delivered(server):
    server.default = Reply(prompt_tokens=10, completion_tokens=1_990)
    tpm = 600_000
    elapsed, eng = run(server, N_DELIVERED, 8, tpm, None)
    total = N_DELIVERED * 2_000
    times = server.times()
    # Past the first second (a full bucket, 10,000 tokens, and the first replies in flight), the pace the
    # limit sets: the tokens of the requests sent after it, over the time they took.
    later = [t for t in times if t - times[0] >= 1.0]
    paced = len(later) * 2_000 / (times[-1] - later[0]) * 60 if len(later) > 1 else float("nan")
    print(f"\n{N_DELIVERED} replies of 2,000 tokens, no max_tokens, --tpm {tpm:,}, concurrency 8: {elapsed:.2f} s, "
          f"{total / elapsed * 60:,.0f} tokens/min over the run, {paced:,.0f} tokens/min after the first second; "
          f"waited {eng.limiter.waited_s:.1f} s in all")
    assert total / elapsed * 60 <= tpm * 1.5
