"""Budgets, --tpm and reply limits that hold against servers reporting large, missing or negative usage."""

import io
import os
import subprocess
import sys
import time

import pytest
from PIL import Image

from benchmint.models import (
    Accounting,
    Budget,
    ChatReply,
    ChatRequest,
    Endpoint,
    Engine,
    Failure,
    ImagePart,
    Message,
    PriceTable,
    RateLimits,
    RetryPolicy,
)
from benchmint.models.accounting import AccountStore, describe

from chat_server import ChatServer, Reply, Status

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, seed=3)
MODEL = "test-model"


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def req(prompt, max_tokens=5):
    return ChatRequest(MODEL, (Message.user(prompt),), max_tokens=max_tokens)


def engine(server, **kw):
    kw.setdefault("retry", FAST)
    return Engine(Endpoint(server.url, timeout_s=10.0), **kw)


# ---- token budgets


def test_token_budget_holds_at_concurrency_8_when_prompts_pass_their_estimate(server):
    # "q0" is estimated at 2 bytes + 8 = 10 prompt tokens: worst case 11 + 8,192 = 8,203. The server counts
    # 2,000 and uses the whole max_tokens: 10,192 a call. Three at once would be charged 30,576 of 30,000.
    # The first call goes alone and raises the estimate to 2,000 (factor 200): worst case 2,001 + 8,192 =
    # 10,193; the second fits (10,192 + 10,193), the third does not (20,384 + 10,193 > 30,000).
    server.default = Reply(prompt_tokens=2_000, completion_tokens=8_192)
    eng = engine(server, concurrency=8, accounting=Accounting(budget=Budget(max_tokens=30_000)))
    out = dict(eng.run_sync((f"q{i}", req(f"q{i}", max_tokens=8_192)) for i in range(3)))
    s = eng.summary()
    assert server.count == 2 and s["budget"]["charged_tokens"] == 20_384 <= 30_000
    assert eng.stop_reason == "max_tokens" and sum(isinstance(o, ChatReply) for o in out.values()) == 2
    (refused,) = [o for o in out.values() if isinstance(o, Failure)]
    assert refused.cause == "budget" and "its worst case (10,193 tokens) does not fit" in refused.detail
    assert (s["total"]["over_reservation"], s["total"]["unbudgeted_tokens"]) == (1, 10_192 - 8_203)


def test_prompts_with_images_calibrate_apart_from_text(server):
    # A text call calibrates text prompts only: image tokens may be counted very differently. "img" with a
    # 28x28 PNG is estimated at 8 + 3 + (1 patch + 16) = 28: worst case 29 + 100; the server counts 3,000.
    # The first image call goes alone (3,100 charged) and raises the estimate to 3,000: worst case 3,101, so
    # after the text call's 15 one more image call fits in 6,300 (6,215) and the third does not.
    server.when_contains["img"] = Reply(prompt_tokens=3_000, completion_tokens=100)
    png = io.BytesIO()
    Image.new("RGB", (28, 28), "white").save(png, format="PNG")

    def image_req():
        return ChatRequest(MODEL, (Message.user("img", ImagePart(png.getvalue())),), max_tokens=100)

    eng = engine(server, concurrency=8, accounting=Accounting(budget=Budget(max_tokens=6_300)))
    out = dict(eng.run_sync([("t", req("t", max_tokens=100))] + [(f"i{i}", image_req()) for i in range(3)]))
    assert server.count == 3 and eng.summary()["budget"]["charged_tokens"] == 6_215
    assert [o.cause for o in out.values() if isinstance(o, Failure)] == ["budget"]


def test_negative_absurd_and_missing_usage_is_charged_the_worst_case_and_flagged(server):
    # Each prompt is 3 bytes: estimate 11, worst case 12 + 8,192 = 8,204.
    server.script("neg", Reply(prompt_tokens=-20_000_000, completion_tokens=5))
    server.script("big", Reply(prompt_tokens=10, completion_tokens=16_384))  # more than max_tokens
    server.script("nil", Reply(usage=False))
    server.script("ok!", Reply(prompt_tokens=10, completion_tokens=5))
    eng = engine(server, concurrency=8, accounting=Accounting(budget=Budget(max_tokens=100_000)))
    out = dict(eng.run_sync((p, req(p, max_tokens=8_192)) for p in ("neg", "big", "nil", "ok!")))
    s = eng.summary()
    t = s["total"]
    assert s["budget"]["charged_tokens"] == 3 * 8_204 + 15 and t["charged_tokens"] == 3 * 8_204 + 15
    assert (t["bad_usage"], t["unknown_usage"], t["over_reservation"]) == (2, 1, 0)
    assert t["usage_known"] is False and t["prompt_tokens"] is None and t["completion_tokens"] is None
    assert (t["reported_prompt_tokens"], t["reported_completion_tokens"]) == (10, 5)
    # what cannot be true is not passed on as the reply's usage
    assert out["neg"].prompt_tokens is None and out["big"].completion_tokens is None
    assert out["ok!"].prompt_tokens == 10
    line = describe(s)
    assert "tokens unknown (3 calls without believable usage; at least 10 in / 5 out)" in line


def test_replies_without_usage_are_not_free(server):
    server.default = Reply(usage=False)
    eng = engine(server, accounting=Accounting(PriceTable({MODEL: {"input": 1.0, "output": 2.0}})))
    dict(eng.run_sync((f"q{i}", req(f"q{i}")) for i in range(3)))
    s = eng.summary()
    assert s["total"]["cost_usd"] is None and s["by_stage_model"][0]["cost_usd"] is None
    assert s["total"]["unknown_usage"] == 3 and s["total"]["prompt_tokens"] is None
    assert "tokens unknown" in describe(s) and "cost unknown (at least $0.0000)" in describe(s)
    assert "$0.0000;" not in describe(s).replace("at least $0.0000", "")


def test_a_request_that_alone_passes_the_whole_budget_says_so(server):
    eng = engine(server, accounting=Accounting(budget=Budget(max_tokens=512)))
    out = dict(eng.run_sync([("a", req("a", max_tokens=8_192))]))
    assert server.count == 0 and out["a"].cause == "budget"
    assert "its worst case (8,202 tokens) exceeds the whole budget (--max-tokens 512)" in out["a"].detail


# ---- tokens per minute


@pytest.mark.parametrize("reply", [Reply(prompt_tokens=10, completion_tokens=490), Reply(text="x" * 500, usage=False)],
                         ids=["reported", "no-usage"])
def test_tokens_per_minute_counts_what_replies_used(server, reply):
    # No max_tokens: a call takes its prompt estimate (11) and its model's mean reply so far (none for the first
    # two, at once), and is charged the 500 its reply reports (without usage: the estimate and the reply's 500
    # bytes) when it settles. 60,000 a minute holds 1,000 and refills 1,000 a second: the first two replies
    # empty the bucket, and each later call waits for its ~500 tokens, the fifth some 1.5 s after the first.
    server.default = reply
    eng = engine(server, concurrency=2, limits=RateLimits(tokens_per_minute=60_000))
    out = dict(eng.run_sync((f"q{i}", req(f"q{i}", max_tokens=None)) for i in range(5)))
    assert all(isinstance(o, ChatReply) for o in out.values())
    times = server.times()
    assert 0.9 <= times[-1] - times[0] < 3.0


@pytest.mark.parametrize("concurrency", [1, 8])
def test_waiting_calls_look_again_when_replies_give_tokens_back(server, concurrency):
    # Each call takes its worst case (8,203 tokens) from a bucket of 1,000 and gives back all but the 15 its
    # reply reports: a waiting call goes as soon as that refund lands, whatever the concurrency.
    eng = engine(server, concurrency=concurrency, limits=RateLimits(tokens_per_minute=60_000))
    t0 = time.monotonic()
    out = dict(eng.run_sync((f"q{i}", req(f"q{i}", max_tokens=8_192)) for i in range(5)))
    assert all(isinstance(o, ChatReply) for o in out.values())
    assert time.monotonic() - t0 < 2.5


# ---- messages and reply size


def test_a_retry_after_longer_than_allowed_says_why(server):
    server.script("a", Status(429, retry_after="100000"))
    eng = engine(server, retry=RetryPolicy(max_attempts=5, max_retry_after_s=300))
    (fail,) = dict(eng.run_sync([("a", req("a"))])).values()
    assert isinstance(fail, Failure) and fail.status == 429 and server.count == 1
    assert "the server asked to wait 100,000 s (Retry-After), more than the 300 s allowed" in fail.detail


def test_a_reply_over_the_size_cap_is_a_failure_kept_nowhere(server, tmp_path):
    server.script("wide", Reply(text="é" * 600))  # 600 characters, 1,200 bytes
    server.script("fits", Reply(text="a" * 1_000))
    eng = engine(server, cache=tmp_path / "c.sqlite", max_reply_bytes=1_000,
                 accounting=Accounting(budget=Budget(max_tokens=1_000)))
    out = dict(eng.run_sync([("wide", req("wide")), ("fits", req("fits"))]))
    assert out["fits"].text == "a" * 1_000
    assert out["wide"].cause == "reply_too_large" and out["wide"].text is None and out["wide"].requests == 1
    assert "1,200 bytes, over the cap of 1,000" in out["wide"].detail
    assert len(eng.cache) == 1 and server.count == 2
    assert eng.summary()["budget"]["charged_tokens"] == 30  # the oversized reply was billed: it is charged


# ---- the accounting of a run across invocations


def test_accounting_covers_every_invocation_and_the_budget_what_they_spent(server, tmp_path):
    path = tmp_path / "accounting.sqlite"
    first = engine(server, accounting=Accounting(store=AccountStore(path)))
    dict(first.run_sync((f"q{i}", req(f"q{i}")) for i in range(3)))  # 15 tokens each
    first.close()
    # Given again, a budget of 50 covers the 45 charged: a worst case of 11 + 5 does not fit.
    again = engine(server, accounting=Accounting(budget=Budget(max_tokens=50), store=AccountStore(path)))
    out = dict(again.run_sync([("q9", req("q9"))]))
    assert out["q9"].cause == "budget" and server.count == 3
    assert "45 tokens charged over 2 invocations" in out["q9"].detail
    s = again.summary()
    assert s["invocations"] == 2 and s["total"]["requests"] == 3 and s["total"]["prompt_tokens"] == 30
    assert s["this_invocation"]["requests"] == 0 and s["budget"]["charged_tokens"] == 45
    again.close()
    alone = engine(server, accounting=Accounting(budget=Budget(max_tokens=50), store=AccountStore(path),
                                                 budget_scope="invocation"))
    out = dict(alone.run_sync([("q9", req("q9"))]))
    assert out["q9"].text == "echo: q9" and server.count == 4
    s = alone.summary()
    assert s["invocations"] == 3 and s["total"]["charged_tokens"] == 60 and s["budget"]["charged_tokens"] == 15


def test_a_call_in_flight_when_a_run_was_killed_is_charged_its_worst_case(tmp_path):
    path = tmp_path / "accounting.sqlite"
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(child.stdout)
    store = AccountStore(path)
    store._db.execute("INSERT INTO pending VALUES ('r1', ?, 'eval', 'm', 8203, 0.5)", (dead,))
    store._db.execute("INSERT INTO pending VALUES ('r2', ?, 'eval', 'm', 100, 0.1)", (os.getppid(),))  # alive
    store.close()
    acct = Accounting(budget=Budget(max_tokens=10_000), store=AccountStore(path))
    t = acct.summary()["total"]
    assert (t["charged_tokens"], t["unknown_usage"], t["charged_cost_usd"]) == (8_203, 1, 0.5)
    assert acct.spent() == (8_203, 0.5)


KILLED = """
import sys
from benchmint.models import Accounting, AccountStore, Budget, ChatRequest, Endpoint, Engine, Message
url, store = sys.argv[1], sys.argv[2]
acct = Accounting(budget=Budget(max_tokens=1_000), store=AccountStore(store))
engine = Engine(Endpoint(url), concurrency=4, accounting=acct)
items = ((f"q{i}", ChatRequest("m", (Message.user(f"q{i}"),), max_tokens=5)) for i in range(20))
for item_id, outcome in engine.run_sync(items):
    print(item_id, flush=True)
"""


def test_calls_in_flight_when_a_run_is_killed_are_charged_by_the_next(tmp_path):
    # q0 answers at once (15 tokens); q1-q4 are in flight when the run is killed. Each "qN" has a worst case
    # of 10 + 1 + 5 = 16: the next invocation is charged 15 + 4 * 16 = 79 before it asks anything. (Requests
    # are stored as their calls settle: the four in flight count as charged calls, not as requests.)
    path = tmp_path / "accounting.sqlite"
    with ChatServer() as server:
        server.default = Reply(delay=30)
        server.script("q0", Reply())
        proc = subprocess.Popen([sys.executable, "-c", KILLED, server.url, str(path)], stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout.readline().strip() == "q0"
        deadline = time.monotonic() + 30
        while server.in_flight < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.in_flight == 4
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
    acct = Accounting(budget=Budget(max_tokens=1_000), store=AccountStore(path))
    s = acct.summary()
    assert s["invocations"] == 2 and s["budget"]["charged_tokens"] == 79
    assert (s["total"]["unknown_usage"], s["total"]["requests"], s["total"]["reported_prompt_tokens"]) == (4, 1, 10)
    acct.close()
