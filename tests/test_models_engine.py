"""The model engine against a real chat-completions server on 127.0.0.1 with scripted replies and faults."""

import asyncio
import base64
import contextlib
import io
import json
import time
import tracemalloc

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
from benchmint.models.cache import CachedReply

from chat_server import ChatServer, Close, EmptyChoices, Malformed, Raw, Reply, Status, Trickle

FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, seed=7)
MODEL = "test-model"


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def req(prompt, max_tokens=5, **kw):
    return ChatRequest(MODEL, (Message.user(prompt),), max_tokens=max_tokens, **kw)


def engine(server, tmp_path=None, **kw):
    kw.setdefault("retry", FAST)
    cache = tmp_path / "cache.sqlite" if tmp_path is not None else ":memory:"
    endpoint = kw.pop("endpoint", Endpoint(server.url, timeout_s=kw.pop("timeout_s", 10.0)))
    return Engine(endpoint, cache=cache, **kw)


def run(eng, prompts, **kw):
    """Every outcome by item id, for prompts (their own ids) or (id, request) pairs."""
    items = [(p, req(p)) if isinstance(p, str) else p for p in prompts]
    out = dict(eng.run_sync(items, **kw))
    assert len(out) == len(items)
    return out


# ---- transport retries


def test_429_waits_at_least_retry_after_then_succeeds(server):
    server.script("a", Status(429, retry_after="0.4"), Reply(text="done"))
    t0 = time.monotonic()
    out = run(engine(server), ["a"])
    elapsed = time.monotonic() - t0
    first, second = server.times("a")
    assert second - first >= 0.4 and elapsed >= 0.4  # FAST's own backoff is 10 ms: the header decided
    assert out["a"].text == "done" and out["a"].requests == 2 and not out["a"].cached


def test_retry_after_longer_than_allowed_gives_up_at_once(server):
    server.script("a", Status(429, retry_after="3600"), Reply())
    eng = engine(server, retry=RetryPolicy(max_attempts=5, max_retry_after_s=60))

    async def collect():
        return [o async for _, o in eng.run([("a", req("a"))])]

    (out,) = asyncio.run(asyncio.wait_for(collect(), 10))
    assert isinstance(out, Failure) and out.status == 429 and server.count == 1


@pytest.mark.parametrize("fault", [Status(408), Status(500), Status(502), Status(503), Close(), Malformed()],
                         ids=["408", "500", "502", "503", "close", "malformed"])
def test_transient_faults_are_retried(server, fault):
    server.script("a", fault, fault, Reply(text="ok"))
    out = run(engine(server), ["a", "b"])
    assert out["a"].text == "ok" and out["a"].requests == 3
    assert out["b"].text == "echo: b"
    assert server.by_prompt == {"a": 3, "b": 1}


@pytest.mark.parametrize("fault,cause,status", [(Status(503), "http_status", 503), (Close(), "connection", None),
                                                (Malformed(), "bad_response", None)], ids=["503", "close", "malformed"])
def test_bounded_give_up_is_a_failure_and_the_run_goes_on(server, fault, cause, status):
    server.script("bad", fault)
    eng = engine(server, retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, seed=1))
    out = run(eng, ["bad", "good1", "good2"])
    fail = out["bad"]
    assert isinstance(fail, Failure) and fail.cause == cause and fail.status == status
    assert fail.requests == 3 and "after 3 attempts" in fail.detail
    assert server.by_prompt["bad"] == 3
    assert out["good1"].text == "echo: good1" and out["good2"].text == "echo: good2"
    row = fail.row("bad")
    assert row["id"] == "bad" and row["cause"] == cause and row["model"] == MODEL and json.dumps(row)
    assert eng.summary()["total"]["failed"] == 1


def test_odd_but_valid_json_replies(server):
    server.script("array", Raw(b"[]"))
    server.script("number", Raw(b'{"object": "chat.completion", "choices": [{"index": 0, "message": {"content": 7}}]}'))
    server.script("parts", Reply(text=[{"type": "text", "text": "two "}, {"type": "text", "text": "parts"}]))
    out = run(engine(server, retry=RetryPolicy(max_attempts=2, base_delay_s=0.01)), ["array", "number", "parts"])
    assert out["array"].cause == "bad_response" and out["number"].cause == "bad_response"
    assert "content is int" in out["number"].detail
    assert out["parts"].text == "two parts"


def test_client_error_is_final_without_retry(server):
    server.script("a", Status(400))
    out = run(engine(server), ["a"])
    assert out["a"].cause == "http_status" and out["a"].status == 400 and server.count == 1


def test_timeout_is_retried_then_reported(server):
    server.script("slow-once", Reply(delay=1.0), Reply(text="fast"))
    server.script("always-slow", Reply(delay=1.0))
    eng = engine(server, timeout_s=0.15, retry=RetryPolicy(max_attempts=2, base_delay_s=0.01))
    t0 = time.monotonic()
    out = run(eng, ["slow-once", "always-slow"])
    assert time.monotonic() - t0 < 0.9  # the client gave up; it did not wait for the server's 1 s
    assert out["slow-once"].text == "fast" and out["slow-once"].requests == 2
    assert out["always-slow"].cause == "timeout" and server.by_prompt["always-slow"] == 2
    # A timed-out request may have been billed: its usage is unknown, so it is counted as such.
    assert eng.summary()["total"]["unknown_usage"] == 3


def test_a_reply_trickling_in_is_cut_at_the_call_timeout(server):
    # Bytes keep arriving (each within the client's read timeout), but the call as a whole has a deadline.
    server.script("drip", Trickle(0.05))
    eng = engine(server, timeout_s=0.3, retry=RetryPolicy(max_attempts=1))
    t0 = time.monotonic()
    out = run(eng, ["drip"])
    assert out["drip"].cause == "timeout" and time.monotonic() - t0 < 2.0


def test_jitter_is_seeded_and_bounded():
    policy = RetryPolicy(base_delay_s=1.0, multiplier=2.0, max_delay_s=5.0, jitter=0.25, seed=3)
    from benchmint.models.retry import Problem

    p = Problem("http_status", "HTTP 503", 503)
    delays = [policy.delay(p, k, "key") for k in range(1, 7)]
    assert delays == [policy.delay(p, k, "key") for k in range(1, 7)]  # same seed, key, attempt: same wait
    assert delays != [policy.delay(p, k, "other") for k in range(1, 7)]
    for k, d in enumerate(delays[:-1], 1):
        base = min(5.0, 2.0 ** (k - 1))
        assert 0.75 * base <= d <= 1.25 * base
    assert delays[-1] is None  # the 6th failed attempt is the last (max_attempts = 6)
    assert policy.delay(Problem("http_status", "HTTP 400", 400, retryable=False), 1, "key") is None
    assert policy.delay(Problem("http_status", "429", 429, retry_after=2.5), 1, "key") >= 2.5


# ---- empty replies and answer retries


def test_empty_replies_are_never_cached_and_are_asked_again(server, tmp_path):
    server.script("none", EmptyChoices())
    server.script("blank", Reply(text=""))
    eng = engine(server, tmp_path, answer_attempts=2)
    out = run(eng, ["none", "blank"])
    for name in ("none", "blank"):
        assert out[name].cause == "empty_reply" and out[name].answer_attempts == 2
    assert len(eng.cache) == 0
    out = run(engine(server, tmp_path, answer_attempts=2), ["none", "blank"])
    assert server.by_prompt == {"none": 4, "blank": 4}  # a failure is asked again on the next run


def test_empty_then_good_is_answered_and_the_rerun_asks_nothing(server, tmp_path):
    server.script("a", Reply(text=""), Reply(text="second"))
    out = run(engine(server, tmp_path), ["a"])
    assert out["a"].text == "second" and out["a"].answer_attempt == 2 and out["a"].requests == 2
    again = run(engine(server, tmp_path), ["a"])
    assert again["a"].text == "second" and again["a"].cached and server.count == 2


def test_unparseable_reply_is_asked_again_up_to_the_bound(server, tmp_path):
    server.script("n", Reply(text="forty-two"), Reply(text="42"))
    server.script("never", Reply(text="no number"))
    out = run(engine(server, tmp_path, answer_attempts=3), ["n", "never"], parse=int)
    assert out["n"].value == 42 and out["n"].answer_attempt == 2
    fail = out["never"]
    assert fail.cause == "unparseable" and fail.answer_attempts == 3 and fail.requests == 3
    assert fail.text == "no number" and "ValueError" in fail.detail
    assert server.by_prompt == {"n": 2, "never": 3}
    # Each attempt is its own cached call: the rerun replays them without asking.
    again = run(engine(server, tmp_path, answer_attempts=3), ["n", "never"], parse=int)
    assert again["n"].value == 42 and again["n"].cached and again["never"].cause == "unparseable"
    assert server.count == 5
    # One more attempt allowed: exactly one more request.
    run(engine(server, tmp_path, answer_attempts=4), ["never"], parse=int)
    assert server.by_prompt["never"] == 4


# ---- the cache


def test_rerun_reads_the_cache_and_refresh_bypasses_it(server, tmp_path):
    prompts = [f"q{i}" for i in range(12)]
    first = run(engine(server, tmp_path, concurrency=3), prompts)
    assert server.count == 12 and not any(r.cached for r in first.values())
    second = run(engine(server, tmp_path, concurrency=3), prompts)
    assert server.count == 12  # no request at all
    assert all(r.cached and r.requests == 0 for r in second.values())
    assert {k: r.text for k, r in second.items()} == {k: r.text for k, r in first.items()}
    assert second["q3"].prompt_tokens == 10 and second["q3"].model == MODEL
    refreshed = run(engine(server, tmp_path, refresh=True), prompts)
    assert server.count == 24 and not any(r.cached for r in refreshed.values())


def test_a_reply_is_committed_before_its_item_is_handed_on(server, tmp_path):
    import sqlite3

    server.script("q3", Reply(text="no"), Reply(text="7"))
    eng = engine(server, tmp_path, concurrency=8)
    observer = sqlite3.connect(tmp_path / "cache.sqlite")  # another connection: it sees committed rows only
    seen = 0
    for _item_id, reply in eng.run_sync((f"q{i}", req(f"q{i}")) for i in range(200)):
        assert observer.execute("SELECT text FROM replies WHERE key = ?", (reply.key,)).fetchone() == (reply.text,)
        seen += 1
    assert seen == 200
    # An unparseable reply is kept too: the next attempt is asked once, and a rerun asks nothing.
    first = run(engine(server, tmp_path), ["q3"], parse=int)
    again = run(engine(server, tmp_path), ["q3"], parse=int)
    assert first["q3"].value == 7 and first["q3"].requests == 1 and again["q3"].cached
    assert server.by_prompt["q3"] == 2


def test_every_setting_is_part_of_the_key(server):
    eng = engine(server)
    base = req("q")
    variants = [req("q", temperature=0.0), req("q", top_p=0.5), req("q", max_tokens=6), req("q", seed=1),
                req("q", schema={"type": "object"}), req("q", reasoning_effort="low"),
                req("q", extra_body={"top_k": 5}), ChatRequest("other", (Message.user("q"),), max_tokens=5),
                ChatRequest(MODEL, (Message.system("s"), Message.user("q")), max_tokens=5)]
    keys = {eng.key(v) for v in variants}
    assert len(keys) == len(variants) and eng.key(base) not in keys
    assert eng.key(base) == eng.key(req("q"))
    other_endpoint = Engine(Endpoint("http://127.0.0.1:1/v1"))
    assert other_endpoint.key(base) != eng.key(base)


def test_settings_reach_the_server(server):
    request = ChatRequest(MODEL, (Message.system("be brief"), Message.user("q")), temperature=0.2, top_p=0.9,
                          max_tokens=7, seed=11, reasoning_effort="low", extra_body={"top_k": 5})
    run(engine(server), [("q", request)])
    body = server.bodies[0]
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"}]
    assert (body["model"], body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
        MODEL, 0.2, 0.9, 7, 11)
    assert body["reasoning_effort"] == "low" and body["top_k"] == 5 and "response_format" not in body
    run(engine(server, endpoint=Endpoint(server.url, max_tokens_field="max_completion_tokens")), [("q", request)])
    assert server.bodies[1]["max_completion_tokens"] == 7 and "max_tokens" not in server.bodies[1]


def test_items_may_come_from_an_async_iterable(server):
    async def items():
        for i in range(5):
            await asyncio.sleep(0)
            yield f"q{i}", req(f"q{i}")

    async def main():
        return {k: o async for k, o in engine(server, concurrency=2).run(items())}

    out = asyncio.run(main())
    assert {k: o.text for k, o in out.items()} == {f"q{i}": f"echo: q{i}" for i in range(5)}


# ---- concurrency, rate limits, streaming


def test_concurrency_bound_is_what_the_server_sees(server):
    server.default = Reply(delay=0.05)
    out = run(engine(server, concurrency=4), [f"q{i}" for i in range(24)])
    assert all(isinstance(r, ChatReply) for r in out.values())
    assert server.max_in_flight == 4


def test_requests_per_minute_spaces_requests(server):
    limits = RateLimits(requests_per_minute=1200, burst_s=0)  # one request every 50 ms
    run(engine(server, concurrency=4, limits=limits), [f"q{i}" for i in range(8)])
    times = server.times()
    # Sent 50 ms apart; arrival times jitter by some ms (the first also opens a connection), hence the slack.
    assert len(times) == 8 and times[-1] - times[1] >= 6 * 0.05 - 0.02
    gaps = [b - a for a, b in zip(times[1:], times[2:])]
    assert min(gaps) >= 0.03


def test_tokens_per_minute_charges_reported_usage(server):
    # 6,000 tokens/min = 100 per second. Each request reserves its worst case (~1,010 tokens: prompt estimate +
    # max_tokens 1000), the server reports 15, and the difference is given back: requests go ~150 ms apart, where
    # the worst case alone would space them ~10 s apart.
    limits = RateLimits(tokens_per_minute=6_000, burst_s=0)
    items = [(f"q{i}", req(f"q{i}", max_tokens=1000)) for i in range(4)]
    t0 = time.monotonic()
    run(engine(server, concurrency=1, limits=limits), items)
    times = server.times()
    # From the second request on: the first one's arrival is late by the client's set-up and a new connection.
    gaps = [b - a for a, b in zip(times[1:], times[2:])]
    assert len(times) == 4 and min(gaps) >= 0.12
    assert time.monotonic() - t0 < 3.0


def test_items_are_read_only_as_fast_as_they_are_answered(server):
    server.default = Reply(delay=0.01)
    pulled = 0

    def items():
        nonlocal pulled
        for i in range(400):
            pulled += 1
            yield i, req(f"q{i}")

    eng = engine(server, concurrency=4, max_buffered=8)
    gen = eng.run_sync(items())
    ahead = []
    for n, _ in enumerate(gen, 1):
        ahead.append(pulled - n)
        if n == 100:
            break
    gen.close()
    from benchmint.models.engine import FEED_CHUNK

    # One chunk being fed, the items queued for a call and those in flight, the answers waiting.
    assert max(ahead) <= FEED_CHUNK + 2 * 4 + 8
    assert pulled < 400


def test_memory_is_flat_in_the_number_of_items(tmp_path):
    eng = Engine(Endpoint("http://127.0.0.1:9/v1"), cache=tmp_path / "c.sqlite")  # nothing listens: cache only

    def items(n):
        for i in range(n):
            yield i, req(f"question {i}")

    for i, r in items(10_000):
        eng.cache.put(eng.key(r), CachedReply(f"answer {i}", "stop", 10, 5, MODEL, None), 0.0)

    def peak(n):
        tracemalloc.start()
        count = sum(1 for _, r in eng.run_sync(items(n)) if r.cached)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert count == n
        return top

    small, large = peak(1_000), peak(10_000)
    assert large < small + 256 * 1024, (small, large)  # keeping each answer would add ~4 MB


def test_async_run_closes_cleanly_when_stopped_early(server):
    server.default = Reply(delay=0.05)

    async def main():
        eng = engine(server, concurrency=3)
        async with contextlib.aclosing(eng.run((f"q{i}", req(f"q{i}")) for i in range(50))) as results:
            async for _ in results:
                break
        return eng

    asyncio.run(main())
    time.sleep(0.1)
    assert server.count <= 4 + 3  # the calls in flight were cancelled, nothing new started


def test_stopping_early_keeps_every_reply_received(server, tmp_path):
    # Replies arrive a few at a time, in most turns of the event loop; the consumer stops at various points,
    # when some replies are still waiting for their commit. Every reply received must be in the cache.
    for i in range(300):
        server.script(f"q{i}", Reply(delay=(i % 13) * 0.001))
    for stop_after in (7, 19, 31, 43, 57):
        eng = engine(server, tmp_path / str(stop_after), concurrency=16)

        async def main(eng=eng, stop_after=stop_after):
            async with contextlib.aclosing(eng.run((f"q{i}", req(f"q{i}")) for i in range(300))) as results:
                n = 0
                async for _ in results:
                    n += 1
                    if n == stop_after:
                        break

        asyncio.run(main())
        # The server reports 10 prompt tokens per reply (the calls cancelled in flight make the total unknown).
        received = eng.summary()["total"]["reported_prompt_tokens"] // 10
        assert received >= stop_after and len(eng.cache) == received


def test_stopping_early_leaves_no_budget_reserved(server):
    server.default = Reply(delay=0.05)
    acct = Accounting(budget=Budget(max_tokens=100_000))
    eng = engine(server, concurrency=4, accounting=acct, limits=RateLimits(requests_per_minute=600, burst_s=0))

    async def main():
        async with contextlib.aclosing(eng.run((f"q{i}", req(f"q{i}")) for i in range(50))) as results:
            async for _ in results:
                break  # the other calls are waiting for the rate limit or in flight

    asyncio.run(main())
    assert acct.reserved_tokens == 0 and acct.reserved_cost == 0


# ---- budget and accounting


PRICES = PriceTable({MODEL: {"input": 1.0, "output": 2.0}})  # USD per million tokens


def test_budget_on_cost_stops_before_it_is_exceeded(server):
    # Each call costs 10 * 1e-6 + 5 * 2e-6 = 2e-5 USD as reported; room for 5 and a half.
    acct = Accounting(PRICES, Budget(max_cost_usd=1.1e-4))
    eng = engine(server, concurrency=4, accounting=acct)
    outcomes = list(eng.run_sync((f"q{i}", req(f"q{i}")) for i in range(40)))
    assert server.count == 5
    summary = eng.summary()
    assert summary["budget"]["charged_cost_usd"] <= 1.1e-4 and summary["stop_reason"] == "max_cost"
    assert eng.stop_reason == "max_cost"
    replies = [o for _, o in outcomes if isinstance(o, ChatReply)]
    refused = [o for _, o in outcomes if isinstance(o, Failure)]
    assert len(replies) == 5 and refused and all(f.cause == "budget" and f.requests == 0 for f in refused)
    assert len(outcomes) < 40  # the run stopped taking items


def test_after_a_budget_stop_nothing_more_is_asked(server):
    # The large request cannot fit; the small ones queued behind it could, but the run has stopped.
    acct = Accounting(PRICES, Budget(max_cost_usd=1e-4))
    items = [("small0", req("small0")), ("big", req("big", max_tokens=1000))]
    items += [(f"small{i}", req(f"small{i}")) for i in range(1, 6)]
    outcomes = dict(engine(server, concurrency=1, accounting=acct).run_sync(items))
    assert server.count == 1 and outcomes["small0"].text == "echo: small0"
    assert outcomes["big"].cause == "budget"
    assert all(o.cause == "budget" and o.requests == 0 for k, o in outcomes.items() if k != "small0")


def test_engines_sharing_one_budget_wait_for_each_other(server):
    # Worst case 5e-5 USD a call (10 prompt tokens estimated + max_tokens 20), 2e-5 reported: both worst cases
    # do not fit in 7.5e-5 together, so the second engine waits for the first engine's call to settle.
    acct = Accounting(PRICES, Budget(max_cost_usd=7.5e-5))
    server.default = Reply(delay=0.05)

    async def answers(eng, prompt):
        return [o async for _, o in eng.run([(prompt, req(prompt, max_tokens=20))])]

    async def main():
        a, b = engine(server, concurrency=1, accounting=acct), engine(server, concurrency=1, accounting=acct)
        return await asyncio.wait_for(asyncio.gather(answers(a, "a"), answers(b, "b")), 5)

    (ra,), (rb,) = asyncio.run(main())
    assert ra.text == "echo: a" and rb.text == "echo: b" and server.count == 2
    assert acct.charged_cost == pytest.approx(4e-5)


def test_budget_on_tokens_learns_from_reported_prompt_sizes(server):
    # The server reports 50 prompt tokens where the estimate is 10 ("q0": 2 bytes + 8): the first call reserved
    # 11 + 5 and is charged the 55 it reported (counted: 39 beyond its worst case); then the engine reserves
    # 5 * 10 + 1 + 5 = 56 a call, so the third call is the last that fits in 200 tokens (165 + 56 > 200).
    server.default = Reply(prompt_tokens=50, completion_tokens=5)
    eng = engine(server, concurrency=4, accounting=Accounting(budget=Budget(max_tokens=200)))
    list(eng.run_sync((f"q{i}", req(f"q{i}")) for i in range(10)))
    assert server.count == 3
    s = eng.summary()
    assert s["budget"]["charged_tokens"] == 165 and eng.stop_reason == "max_tokens"
    assert (s["total"]["over_reservation"], s["total"]["unbudgeted_tokens"]) == (1, 39)


def test_accounting_totals(server, tmp_path):
    server.script("fail", Status(503))
    prompts = ["fail"] + [f"q{i}" for i in range(6)]
    eng = engine(server, tmp_path, retry=RetryPolicy(max_attempts=2, base_delay_s=0.01),
                 accounting=Accounting(PRICES))
    run(eng, prompts, stage="answer")
    run(eng, prompts[:4], stage="judge")  # served from the cache, except the failure (asked again)
    s = eng.summary()
    rows = {r["stage"]: r for r in s["by_stage_model"]}
    a, j = rows["answer"], rows["judge"]
    assert (a["items"], a["replies"], a["cached"], a["failed"], a["requests"]) == (7, 6, 0, 1, 8)
    assert (a["prompt_tokens"], a["completion_tokens"]) == (60, 30)
    assert a["cost_usd"] == pytest.approx(6 * 2e-5)
    assert (j["items"], j["replies"], j["cached"], j["failed"], j["requests"]) == (4, 3, 3, 1, 2)
    assert (j["prompt_tokens"], j["cached_prompt_tokens"], j["cached_completion_tokens"]) == (0, 30, 15)
    assert s["total"]["requests"] == 10 and s["total"]["cost_usd"] == pytest.approx(6 * 2e-5)
    assert server.count == 10 and json.dumps(s)


def test_budget_configuration_errors_are_clear(server):
    eng = engine(server, accounting=Accounting(PRICES, Budget(max_cost_usd=1.0)))
    with pytest.raises(ValueError, match="needs a price for model 'unpriced'"):
        list(eng.run_sync([("x", ChatRequest("unpriced", (Message.user("x"),), max_tokens=5))]))
    with pytest.raises(ValueError, match="needs a bound on every reply, and the request sets no max_tokens"):
        list(eng.run_sync([("x", ChatRequest(MODEL, (Message.user("x"),)))]))
    assert server.count == 0


# ---- structured output


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def json_reply(body):
    return json.dumps({"answer": "A"})


def schema_req(prompt):
    return prompt, req(prompt, schema=SCHEMA)


def test_json_schema_is_used_where_the_server_supports_it(server, tmp_path):
    server.default = Reply(text=json_reply)
    out = run(engine(server, tmp_path), [schema_req("a"), schema_req("b")])
    assert out["a"].value == {"answer": "A"} and out["a"].structured_mode == "json_schema"
    assert all(b["response_format"]["type"] == "json_schema" for b in server.bodies)
    assert server.bodies[0]["response_format"]["json_schema"] == {"name": "answer", "schema": SCHEMA}


def test_schema_fallback_on_a_server_that_500s_json_schema(server, tmp_path):
    server.default = Reply(text=json_reply)
    server.reject_formats = {"json_schema": 500}
    out = run(engine(server, tmp_path, concurrency=1), [schema_req(f"q{i}") for i in range(3)])
    assert all(r.value == {"answer": "A"} and r.structured_mode == "json_object_schema" for r in out.values())
    # The next form is llama-cpp-python's: json_object with the schema beside it (which its server enforces).
    assert [b["response_format"] for b in server.bodies] == [
        {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}},
        *[{"type": "json_object", "schema": SCHEMA}] * 3]
    # A plain-text prompt stays plain text with the schema after it (llama.cpp's templates of text-only models
    # fail on content parts).
    last_text = server.bodies[-1]["messages"][-1]["content"]
    assert last_text.startswith("q2\n\n") and "JSON Schema" in last_text and '"required":["answer"]' in last_text
    # Remembered in the cache file: a new run on new prompts starts at json_object with the schema.
    eng = engine(server, tmp_path)
    run(eng, [schema_req("new")])
    assert server.bodies[-1]["response_format"] == {"type": "json_object", "schema": SCHEMA} and server.count == 5
    assert eng.summary()["structured_modes"][MODEL] == {"mode": "json_object_schema", "confirmed": True}


def test_schema_falls_back_to_the_prompt_when_json_object_fails_too(server):
    server.default = Reply(text=lambda body: "Sure: ```json\n{\"answer\": \"B\"}\n```")
    server.reject_formats = {"json_schema": 500, "json_object": 400}
    out = run(engine(server), [schema_req("a")])
    assert out["a"].value == {"answer": "B"} and out["a"].structured_mode == "prompt"
    assert [b.get("response_format") for b in server.bodies] == [
        {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}},
        {"type": "json_object", "schema": SCHEMA}, {"type": "json_object"}, None]


def test_a_confirmed_form_is_not_given_up_on_a_server_error(server):
    server.default = Reply(text=json_reply)
    eng = engine(server, concurrency=1)
    run(eng, [schema_req("first")])
    server.script("second", Status(500), Reply(text=json_reply))
    out = run(eng, [schema_req("second")])
    assert out["second"].structured_mode == "json_schema" and out["second"].requests == 2
    assert all(b["response_format"]["type"] == "json_schema" for b in server.bodies)


def test_reply_missing_a_required_key_is_unparseable(server):
    server.default = Reply(text='{"other": 1}')
    out = run(engine(server, answer_attempts=2), [schema_req("a")])
    assert out["a"].cause == "unparseable" and "required keys ['answer']" in out["a"].detail


# ---- images


def png_bytes(size, color=(200, 30, 30)):
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


def test_images_are_downscaled_sent_as_data_urls_and_keyed_by_hash(server):
    big = png_bytes((3000, 1500))
    part = ImagePart(big, max_side=1024)
    request = ChatRequest(MODEL, (Message.user("what is this?", part),), max_tokens=5)
    eng = engine(server)
    out = run(eng, [("img", request)])
    assert out["img"].text == "echo: what is this?"
    content = server.bodies[0]["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "what is this?"}
    url = content[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert sent.size == (1024, 512)
    # The key holds the hash of the image, not its bytes.
    form = json.dumps(request.key_form())
    assert part.sha256 in form and len(form) < 400
    same = ChatRequest(MODEL, (Message.user("what is this?", ImagePart(big, max_side=1024)),), max_tokens=5)
    other = ChatRequest(MODEL, (Message.user("what is this?", ImagePart(png_bytes((3000, 1500), (0, 0, 0)))),),
                        max_tokens=5)
    smaller = ChatRequest(MODEL, (Message.user("what is this?", ImagePart(big, max_side=512)),), max_tokens=5)
    assert eng.key(same) == eng.key(request)
    assert len({eng.key(request), eng.key(other), eng.key(smaller)}) == 3


def test_an_image_that_cannot_be_decoded_is_a_failure_of_its_item(server):
    data = png_bytes((64, 64))
    truncated = data[: len(data) // 2]  # the header reads, the pixels do not
    bad = ChatRequest(MODEL, (Message.user("x", ImagePart(truncated, max_side=16)),), max_tokens=5)
    out = run(engine(server), [("bad", bad), "fine"])
    assert out["bad"].cause == "bad_request" and out["fine"].text == "echo: fine"
    assert server.by_prompt == {"fine": 1}


# ---- configuration


def test_configuration_errors_are_clear(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="http:// or https://"):
        Endpoint("localhost:8000/v1")
    monkeypatch.delenv("BENCHMINT_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="BENCHMINT_TEST_KEY is not set"):
        Engine(Endpoint("http://127.0.0.1:1/v1", api_key_env="BENCHMINT_TEST_KEY"))
    monkeypatch.setenv("BENCHMINT_TEST_KEY", "secret")
    assert Engine(Endpoint("http://127.0.0.1:1/v1", api_key_env="BENCHMINT_TEST_KEY"))._api_key == "secret"
    for bad in ({"concurrency": 0}, {"answer_attempts": 0}, {"structured": "xml"}):
        with pytest.raises(ValueError):
            Engine(Endpoint("http://127.0.0.1:1/v1"), **bad)
    not_sqlite = tmp_path / "cache.sqlite"
    not_sqlite.write_text("not a database" * 100)
    with pytest.raises(ValueError, match="cannot use .* as a reply cache"):
        Engine(Endpoint("http://127.0.0.1:1/v1"), cache=not_sqlite)


def test_a_bad_item_stops_the_run_with_a_clear_error(server, tmp_path):
    eng = engine(server)
    with pytest.raises(ValueError, match=r"takes \(item_id, ChatRequest\) pairs"):
        list(eng.run_sync([("a", req("a")), "not a pair"]))
    # Answers ready before the bad item are still handed over, then the error.
    from benchmint.models.engine import FEED_CHUNK

    good = [(f"q{i}", req(f"q{i}")) for i in range(FEED_CHUNK)]
    run(engine(server, tmp_path), good)
    got = []
    with pytest.raises(ValueError, match="pairs"):
        for item_id, _outcome in engine(server, tmp_path).run_sync([*good, ["a", "list"]]):
            got.append(item_id)
    assert sorted(got) == sorted(i for i, _ in good)


def test_api_key_is_sent_from_the_named_variable(server, monkeypatch):
    monkeypatch.setenv("BENCHMINT_TEST_KEY", "sk-test-123")
    eng = Engine(Endpoint(server.url, api_key_env="BENCHMINT_TEST_KEY"), retry=FAST)
    run(eng, ["a"])
    assert server.headers[0]["authorization"] == "Bearer sk-test-123"
