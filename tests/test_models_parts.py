"""The engine's parts on their own: request records and keys, images, Retry-After, buckets, prices, JSON replies."""

import base64
import email.utils
import io
import json
import time

import pytest
from PIL import Image

from benchmint.io import InputError, dumps
from benchmint.models import (
    Accounting,
    Budget,
    ChatRequest,
    Failure,
    ImagePart,
    Message,
    PriceTable,
    ReplyCache,
    parse_json,
    request_key,
)
from benchmint.models.accounting import Verdict
from benchmint.models.cache import CachedReply
from benchmint.models.call import _CANONICAL
from benchmint.models.images import encode
from benchmint.models.limits import RateLimits, TokenBucket
from benchmint.models.retry import parse_retry_after


def image_bytes(size, fmt="PNG", mode="RGB", **save):
    buf = io.BytesIO()
    Image.new(mode, size, 128).save(buf, fmt, **save)
    return buf.getvalue()


# ---- requests and keys


def test_request_validation_is_clear():
    ok = (Message.user("q"),)
    cases = [({"model": ""}, "model must be a non-empty string"), ({"messages": ()}, "non-empty sequence"),
             ({"temperature": 3}, r"temperature must be a number in \[0, 2\]"),
             ({"top_p": float("nan")}, "top_p"), ({"max_tokens": 0}, "at least 1"),
             ({"max_tokens": 1.5}, "max_tokens must be an integer"), ({"seed": True}, "seed must be an integer"),
             ({"schema": [1]}, "schema must be a JSON object"),
             ({"extra_body": {"x": object()}}, "not JSON-serialisable"),
             ({"extra_body": {"response_format": {}}}, r"may not set \['response_format'\]")]
    for change, message in cases:
        kwargs = {"model": "m", "messages": ok, **change}
        with pytest.raises(ValueError, match=message):
            ChatRequest(**kwargs)
    with pytest.raises(ValueError, match="role must be one of"):
        Message("robot", "hi")
    with pytest.raises(ValueError, match="parts must be str or ImagePart"):
        Message("user", ("text", 3))
    with pytest.raises(ValueError, match="not a readable image"):
        ImagePart(b"not an image")


def test_key_form_omits_unset_fields_and_normalises_numbers():
    r = ChatRequest("m", [Message.system("s"), Message.user("q")], temperature=0)
    assert r.key_form() == {"model": "m", "temperature": 0.0,
                            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}
    assert request_key("http://x/v1", r) == request_key("http://x/v1", ChatRequest("m", (Message.system("s"),
                                                                                      Message.user("q")),
                                                                                   temperature=0.0))


def test_key_is_the_hash_of_the_canonical_json_form():
    import hashlib

    png = image_bytes((10, 10))
    requests = [
        ChatRequest("m", (Message.user("q"),)),
        ChatRequest("m", (Message.system("s"), Message("assistant", "a"), Message.user("é", ImagePart(png)))),
        ChatRequest("m", (Message.user("q"),), temperature=0.7, top_p=0.9, max_tokens=64, seed=3,
                    reasoning_effort="low", schema={"type": "object", "required": ["z", "a"],
                                                    "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}},
                    schema_name="verdict",
                    extra_body={"top_k": 20, "chat_template_kwargs": {"think": False, "a": [3, {"y": 1, "b": 2}]}}),
    ]
    for r in requests:
        form = {"v": 1, "endpoint": "http://h:1/v1", "request": r.key_form()}
        assert request_key("http://h:1/v1", r) == hashlib.sha256(dumps(form).encode()).hexdigest()


def test_canonical_encoder_is_the_project_json_form():
    form = {"b": [1, 2.5, "é", {"z": None, "a": True}], "a": "x\n"}
    assert _CANONICAL.encode(form) == dumps(form)
    with pytest.raises(ValueError):
        _CANONICAL.encode({"x": float("nan")})


def test_prompt_estimate_bounds_text_and_counts_images():
    r = ChatRequest("m", (Message.user("héllo"),))
    assert r.estimate_prompt_tokens() == 8 + len("héllo".encode())
    part = ImagePart(image_bytes((2000, 1000)), max_side=560)
    assert part.sent_size() == (560, 280)
    with_image = ChatRequest("m", (Message.user("", part),))
    assert with_image.estimate_prompt_tokens() == 8 + 20 * 10 + 16


def test_failure_row_is_json():
    f = Failure("k", "timeout", "no reply", None, 2, 1, None, "answer", "m")
    row = f.row("item-1")
    assert row == {"id": "item-1", "stage": "answer", "model": "m", "key": "k", "cause": "timeout",
                   "detail": "no reply", "status": None, "requests": 2, "answer_attempts": 1}
    assert json.loads(dumps(row)) == row


# ---- images


def test_image_that_fits_is_sent_byte_for_byte():
    for fmt, mime in (("PNG", "image/png"), ("JPEG", "image/jpeg")):
        data = image_bytes((300, 200), fmt)
        assert encode(data, 1024) == (mime, data)
        assert encode(data, None) == (mime, data)


def test_large_jpeg_is_downscaled_as_jpeg_and_other_formats_become_png():
    got_mime, got = encode(image_bytes((1600, 1200), "JPEG"), 800)
    assert got_mime == "image/jpeg" and Image.open(io.BytesIO(got)).size == (800, 600)
    got_mime, got = encode(image_bytes((90, 30), "BMP"), 1024)
    assert got_mime == "image/png" and Image.open(io.BytesIO(got)).size == (90, 30)
    got_mime, got = encode(image_bytes((100, 3000), "TIFF", mode="CMYK"), 300)
    assert got_mime == "image/png" and Image.open(io.BytesIO(got)).size == (10, 300)


def test_exif_orientation_is_applied_before_downscaling():
    img = Image.new("RGB", (400, 100), 50)
    exif = img.getexif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    buf = io.BytesIO()
    img.save(buf, "JPEG", exif=exif.tobytes())
    _, got = encode(buf.getvalue(), 200)
    assert Image.open(io.BytesIO(got)).size == (50, 200)


def test_data_url_round_trip(tmp_path):
    path = tmp_path / "fig.png"
    path.write_bytes(image_bytes((2048, 512)))
    part = ImagePart.from_file(path, max_side=1024)
    url = part.data_url()
    assert url.startswith("data:image/png;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (1024, 256)
    with pytest.raises(InputError, match="cannot read image"):
        ImagePart.from_file(tmp_path / "missing.png")


# ---- Retry-After and buckets


def test_retry_after_forms():
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after({"retry-after": when}) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


def test_token_bucket_spacing_burst_and_debt():
    b = TokenBucket(60, burst_s=0)  # one per second, holds one
    assert b.take(1, now=100.0) == 0.0
    assert b.take(1, now=100.0) == pytest.approx(1.0)  # nothing taken: the caller looks again later
    assert b.take(1, now=100.5) == pytest.approx(0.5)
    assert b.take(1, now=101.0) == 0.0
    burst = TokenBucket(600, burst_s=1.0)  # 10 per second, holds 10
    waits = [burst.take(1, now=0.0) for _ in range(11)]
    assert waits[:10] == [0.0] * 10 and waits[10] == pytest.approx(0.1)
    big = TokenBucket(60, burst_s=1.0)  # an amount larger than the bucket goes when it is full, then is owed
    assert big.take(10, now=0.0) == 0.0
    assert big.take(1, now=0.0) == pytest.approx(10.0)  # level -9: 10 s until it holds 1
    big.adjust(9, now=0.0)  # the reply used 1 of the 10 taken: level 0
    assert big.take(1, now=0.0) == pytest.approx(1.0)
    big.adjust(-5, now=0.0)  # a reply that used 5 more than it took: level -5
    assert big.take(1, now=0.0) == pytest.approx(6.0) and big.level(3.0) == pytest.approx(-2.0)
    with pytest.raises(ValueError, match="must be positive"):
        RateLimits(requests_per_minute=0)


# ---- prices, budget


def test_price_table_loading(tmp_path):
    good = tmp_path / "prices.json"
    good.write_text(json.dumps({"m": {"input": 0.15, "output": 0.6}}))
    table = PriceTable.load(good)
    assert table.get("m").cost(1_000_000, 500_000) == pytest.approx(0.45) and table.get("x") is None
    with pytest.raises(InputError, match="price table not found"):
        PriceTable.load(tmp_path / "none.json")
    for text, message in [("{", "cannot read price table"), ("[1]", "must be a JSON object"),
                          ('{"m": {"input": 1}}', "exactly 'input' and 'output'"),
                          ('{"m": {"input": -1, "output": 1}}', "price input must be a number >= 0")]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(InputError, match=message):
            PriceTable.load(bad)


def test_budget_reserve_wait_refuse():
    acct = Accounting(PriceTable({"m": {"input": 1e6, "output": 0}}), Budget(max_cost_usd=10.0))  # $1 per token in
    first = acct.reserve("s", "m", prompt_estimate=3, max_tokens=2)  # worst case 4 prompt tokens: $4
    assert first.cost == 4.0 and first.tokens == 6 and first.probe
    assert acct.reserve("s", "m", 3, 2) is Verdict.WAIT  # the model's first request is out: it calibrates
    acct.settle(first, 2, 0, True)  # reported 2 tokens: $2 charged
    second, third = acct.reserve("s", "m", 3, 2), acct.reserve("s", "m", 3, 2)  # 2 + 4 + 4 = 10
    assert second.cost == 4.0 and not second.probe and acct.charged_cost == 2.0
    assert acct.reserve("s", "m", 3, 2) is Verdict.WAIT  # 10 + 4 > 10, but 4 alone fits in the 8 left
    acct.settle(second, None, None, maybe_billed=True)  # unknown usage: its worst case is charged
    acct.settle(third, None, None, maybe_billed=False)  # never reached the server: nothing charged
    assert acct.charged_cost == 6.0 and acct.stop_reason is None
    assert acct.reserve("s", "m", 4, 2) is Verdict.REFUSE and acct.stop_reason == "max_cost"
    assert acct.stop_detail == ("its worst case ($5.0000) does not fit in what is left of the budget "
                                "(--max-cost 10; $6.0000 charged)")


# ---- JSON replies


def test_parse_json_tolerates_fences_and_text_around():
    schema = {"type": "object", "required": ["a"]}
    assert parse_json('{"a": 1}', schema) == {"a": 1}
    assert parse_json('```json\n{"a": [1, 2]}\n```', schema) == {"a": [1, 2]}
    assert parse_json('Here you go: {"a": "x"} -- done', schema) == {"a": "x"}
    for text, message in [("no json", "no JSON object"), ('{"a": }', "malformed JSON"),
                          ('{"b": 1}', r"lacks required keys \['a'\]"), ("[1]", "expected a JSON object")]:
        with pytest.raises(ValueError, match=message):
            parse_json(text, schema)


# ---- the cache file


def test_cache_refuses_empty_text_and_keeps_replies_across_opens(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ReplyCache(path)
    with pytest.raises(ValueError, match="never cached"):
        cache.put("k0", CachedReply("", "stop", 1, 0, "m", None), 0.1)
    cache.put("k1", CachedReply("hello", "stop", 3, 1, "m", "json_object"), 0.1)
    cache.set_structured_mode("http://x/v1", "m", "prompt", False)
    cache.close()
    again = ReplyCache(path)
    assert again.get("k1") == CachedReply("hello", "stop", 3, 1, "m", "json_object") and again.get("k0") is None
    assert again.get_many(["k1", "k0", "k2"]) == {"k1": again.get("k1")}
    assert again.structured_mode("http://x/v1", "m") == ("prompt", False) and len(again) == 1


# ---- command-line options


def test_options_build_the_engine_they_describe(tmp_path):
    import argparse

    from benchmint.models.options import add_arguments, engine_from_arguments

    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    prices = tmp_path / "prices.json"
    prices.write_text('{"m": {"input": 1, "output": 2}}')
    args = parser.parse_args(["--base-url", "http://127.0.0.1:9/v1/", "--concurrency", "3", "--rpm", "120",
                              "--prices", str(prices), "--max-cost", "0.5", "--max-tokens", "1000", "--refresh",
                              "--answer-attempts", "2", "--retries", "4", "--structured", "json_object"])
    eng = engine_from_arguments(args, tmp_path / "cache.sqlite", seed=5)
    assert eng.endpoint.base_url == "http://127.0.0.1:9/v1" and eng.concurrency == 3 and eng.refresh
    assert eng.limits.requests_per_minute == 120 and eng.limits.tokens_per_minute is None
    assert eng.accounting.budget == Budget(0.5, 1000) and eng.accounting.prices.get("m").output == 2
    assert (eng.retry.max_attempts, eng.retry.seed, eng.answer_attempts, eng.structured) == (4, 5, 2, "json_object")
    assert eng.cache.path == str(tmp_path / "cache.sqlite")
    for argv, message in [([], "--base-url is required"),
                          (["--base-url", "http://x/v1", "--max-cost", "1"], "--max-cost needs --prices"),
                          (["--base-url", "http://x/v1", "--rpm", "0"], "must be positive")]:
        with pytest.raises(ValueError, match=message):
            engine_from_arguments(parser.parse_args(argv), tmp_path / "c.sqlite")
    with pytest.raises(InputError, match="price table not found"):
        engine_from_arguments(parser.parse_args(["--base-url", "http://x/v1", "--prices", "nope.json"]), ":memory:")
    for argv in (["--concurrency", "0"], ["--max-cost", "-1"], ["--structured", "xml"]):
        with pytest.raises(argparse.ArgumentError):
            parser.parse_args(argv)


def test_checkpoints_run_beside_the_writes_and_close_leaves_one_file(tmp_path):
    import sqlite3

    from benchmint.models.cache import CHECKPOINT_EVERY

    path = tmp_path / "c.sqlite"
    cache = ReplyCache(path)
    n = 2 * CHECKPOINT_EVERY + 7
    for i in range(n):
        cache.put(f"k{i}", CachedReply(f"text {i}", "stop", 1, 1, "m", None), 0.0)
    assert cache._checkpointer is not None  # a checkpoint thread was started
    other = sqlite3.connect(path)  # another reader sees every committed reply before close
    assert other.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == n
    other.close()
    cache.close()
    assert not (tmp_path / "c.sqlite-wal").exists()
    assert len(ReplyCache(path)) == n
