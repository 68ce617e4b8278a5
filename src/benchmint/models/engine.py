"""The model engine: chat requests in, replies or failures out, bounded, cached, accounted and resumable.

``Engine.run`` takes an iterable of ``(item_id, ChatRequest)`` pairs and yields ``(item_id, ChatReply | Failure)``
pairs in completion order, streaming: it reads items only as fast as it can answer them (at most
``concurrency`` requests in flight and ``max_buffered`` answers waiting for the caller), so memory does not grow
with the number of items.

Per item:

1. The cache is read first (unless ``refresh``): a reply found there that the stage's parser accepts is
   returned with ``cached=True`` and no request is made.
2. Otherwise the request is sent, after the budget (``Accounting``) and the rate limits (``Limiter``) allow it,
   with a per-call timeout. Transport problems are retried by the ``RetryPolicy``; a give-up is a ``Failure``
   with its cause and status.
3. A reply with text goes to the cache (an empty reply does not), committed before its item is handed on; one
   whose text passes ``max_reply_bytes`` is a failure (``reply_too_large``) and is kept nowhere.
   The parser (``parse``) turns the text into the item's value; when it raises (or the reply was empty) the
   engine asks again, up to ``answer_attempts`` answer attempts in all. Each answer attempt is a call of its own
   with its own cache key, so a rerun replays the same attempts from the cache and asks only those that never got
   a reply.

A failure never stops the run; a configuration error (a model without a price under ``--max-cost``, ...) does.
When the budget is spent the run stops taking items and ends once the requests in flight settle;
``stop_reason`` says why.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import openai
from openai.types.chat import ChatCompletion

from benchmint.models import structured
from benchmint.models.accounting import Accounting, Verdict, usage_problem
from benchmint.models.cache import CachedReply, ReplyCache
from benchmint.models.call import (
    BAD_REQUEST,
    BAD_RESPONSE,
    BUDGET,
    EMPTY_REPLY,
    REPLY_TOO_LARGE,
    UNPARSEABLE,
    ChatReply,
    ChatRequest,
    Failure,
    attempt_key,
    attempts_phrase,
    request_key,
)
from benchmint.models.limits import Limiter, RateLimits
from benchmint.models.local import cache_endpoint
from benchmint.models.retry import Problem, RetryPolicy, classify
from benchmint.models.structured import MODES as STRUCTURED_MODES

Item = tuple[Any, ChatRequest]
FEED_CHUNK = 64
MAX_REPLY_BYTES = 1 << 20  # a reply's text; 8,192 tokens of text are some 40 kB
BUDGET_RECHECK_S = 0.1
Outcome = ChatReply | Failure


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server: base URL (``.../v1``), the environment variable holding its API key (``None``
    for servers without keys), the per-call timeout in seconds, and the name of the reply-length field
    (``max_tokens``, or ``max_completion_tokens`` for OpenAI's reasoning models)."""

    base_url: str
    api_key_env: str | None = None
    timeout_s: float = 120.0
    max_tokens_field: str = "max_tokens"

    def __post_init__(self) -> None:
        url = str(self.base_url).strip().rstrip("/")
        if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
            raise ValueError(f"endpoint base URL must start with http:// or https://, got {self.base_url!r}")
        object.__setattr__(self, "base_url", url)
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s!r}")
        if self.max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(f"max_tokens_field must be max_tokens or max_completion_tokens, got "
                             f"{self.max_tokens_field!r}")

    def api_key(self) -> str:
        if self.api_key_env is None:
            return "no-key"  # the SDK insists on a string; keyless servers ignore it
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ValueError(f"the API key variable {self.api_key_env} is not set (or empty) in the environment")
        return value


class Transport(Protocol):
    """Sends one chat-completions call: ``send(**kwargs)`` takes the SDK's arguments and returns its
    ``ChatCompletion``, or raises what ``retry.classify`` reads (``retry.CallProblem`` for a problem classified
    elsewhere). ``close()`` ends it (the engine's ``close`` calls it)."""

    async def send(self, **kwargs: Any) -> Any: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class _Got:
    """One HTTP reply: text (maybe empty) and what the server reported."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    model: str | None
    mode: str | None
    latency_s: float
    note: str = ""


class CallExecutor:
    """The engine as an executor of ``benchmint.run.run_units``: the units' model calls, on the engine's loop.

    Each unit's first argument is its ``ChatRequest``. ``map_unordered(fn, args)`` sends every request through
    the engine (its concurrency, rate limits, cache, retries and budget) and yields ``(i, fn(outcome,
    *args[i][1:]))`` as replies arrive, ``outcome`` being the reply or the call's failure; ``fn`` runs in the
    calling thread (it turns an outcome into the unit's result, so it should be short). An exception it raises
    is the unit's result. Another executor of calls (Ray, later) keeps this contract.
    """

    def __init__(self, engine: Engine, stage: str = "default", parse: Callable[[str], Any] | None = None) -> None:
        self.engine, self.stage, self.parse = engine, stage, parse

    def map_unordered(self, fn: Callable[..., Any], args,
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
        args = list(args)
        for i, outcome in self.engine.run_sync(((i, a[0]) for i, a in enumerate(args)), stage=self.stage,
                                               parse=self.parse):
            try:
                yield i, fn(outcome, *args[i][1:])
            except Exception as exc:  # noqa: BLE001 - the unit's error row, as run_units records any failure
                yield i, exc

    def close(self) -> None:
        """Nothing to stop: the engine belongs to the caller."""


class Engine:
    """Chat calls against one endpoint; see the module docstring.

    ``cache``: path of the SQLite request cache (``":memory:"``: not kept). ``concurrency``: requests in flight at
    most. ``answer_attempts``: answer attempts per item (a reply the parser rejects, or an empty one, is asked
    again). ``refresh``: ignore cached replies (new ones are still stored). ``structured``: ``"auto"`` (fallback
    ladder) or a fixed form (see ``benchmint.models.structured``).

    ``transport``: what sends the HTTP calls, in place of the engine's own client (``models.ray_calls.RayCalls``:
    a pool of Ray actors); everything else (cache, budget, rate limits, retries, parsing) stays with the engine.

    One engine serves one thread (its runs may overlap on one event loop); give each thread its own engine,
    sharing the cache file if they like.
    """

    def __init__(self, endpoint: Endpoint, *, cache: str | os.PathLike = ":memory:", concurrency: int = 8,
                 limits: RateLimits | None = None, accounting: Accounting | None = None,
                 retry: RetryPolicy | None = None, answer_attempts: int = 3, refresh: bool = False,
                 structured: str = "auto", max_buffered: int = 1024,
                 max_reply_bytes: int = MAX_REPLY_BYTES, transport: Transport | None = None) -> None:
        if not isinstance(endpoint, Endpoint):
            raise ValueError("endpoint must be an Endpoint")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        if not isinstance(answer_attempts, int) or answer_attempts < 1:
            raise ValueError(f"answer_attempts must be an integer >= 1, got {answer_attempts!r}")
        if structured not in STRUCTURED_MODES:
            raise ValueError(f"structured must be one of {', '.join(STRUCTURED_MODES)}, got {structured!r}")
        if not isinstance(max_buffered, int) or max_buffered < 1:
            raise ValueError(f"max_buffered must be an integer >= 1, got {max_buffered!r}")
        if not isinstance(max_reply_bytes, int) or max_reply_bytes < 1:
            raise ValueError(f"max_reply_bytes must be an integer >= 1, got {max_reply_bytes!r}")
        self.endpoint = endpoint
        self._api_key = endpoint.api_key()
        self.cache = ReplyCache(cache)
        self.concurrency = concurrency
        self.limits = limits or RateLimits()
        self.limiter = Limiter(self.limits)
        self._replies_seen: dict[str, tuple[int, int]] = {}  # per model: completion tokens reported, replies
        self.accounting = accounting or Accounting()
        self.retry = retry or RetryPolicy()
        self.answer_attempts = answer_attempts
        self.refresh = refresh
        self.structured = structured
        self.max_buffered = max_buffered
        self.max_reply_bytes = max_reply_bytes
        self._modes: dict[str, tuple[str, bool]] = {}
        self._checked: set[tuple[str, int | None]] = set()
        self.transport = transport

    # ---- public
    def key(self, request: ChatRequest) -> str:
        """The request's cache key (its first answer attempt)."""
        return request_key(cache_endpoint(self.endpoint.base_url, request.model), request)

    def budget_detail(self) -> str:
        """The message of a request the budget did not let start."""
        acct = self.accounting
        return f"not started: the budget ({acct.stop_reason}) would be exceeded: {acct.stop_detail}"

    @property
    def stop_reason(self) -> str | None:
        """``"max_cost"`` or ``"max_tokens"`` once the budget stopped a run, else None."""
        return self.accounting.stop_reason

    async def run(self, items: Iterable[Item] | AsyncIterable[Item], *, stage: str = "default",
                  parse: Callable[[str], Any] | None = None) -> AsyncIterator[tuple[Any, Outcome]]:
        """Yield ``(item_id, ChatReply | Failure)`` for every item, in completion order.

        ``parse(text)`` returns the item's value or raises (any exception: the reply is unparseable). Without it
        the value is the text, or the JSON value (``structured.parse_json``) when the request has a schema.
        Close the iterator (``contextlib.aclosing``) when stopping early: that cancels the requests in flight.
        """
        run = _Run(self, stage, parse)
        await run.start(items)
        try:
            while True:
                await run.wait()
                for result in run.take():
                    yield result
                if run.finished():
                    break
        finally:
            await run.close()

    def run_sync(self, items: Iterable[Item], *, stage: str = "default",
                 parse: Callable[[str], Any] | None = None) -> Iterator[tuple[Any, Outcome]]:
        """``run`` for synchronous callers, on an event loop of its own in the calling thread.

        The loop runs while the caller waits for the next result, so per-item work between results should be
        short (writing a row); heavier consumers should use ``run``.
        """
        loop = asyncio.new_event_loop()
        run = None
        try:
            run = _Run(self, stage, parse)
            loop.run_until_complete(run.start(items))
            while True:
                loop.run_until_complete(run.wait())
                yield from run.take()
                if run.finished():
                    break
        finally:
            try:
                if run is not None:
                    loop.run_until_complete(run.close())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())  # image-encoding threads
            finally:
                loop.close()

    def summary(self) -> dict:
        """Accounting (per stage and model, totals, budget, stop reason), cache counters and structured forms."""
        out = self.accounting.summary()
        out["endpoint"] = self.endpoint.base_url
        out["cache"] = self.cache.stats()
        out["structured_modes"] = {m: {"mode": mode, "confirmed": ok} for m, (mode, ok) in sorted(self._modes.items())}
        out["rate_limit_wait_s"] = round(self.limiter.waited_s, 3)
        return out

    def close(self) -> None:
        self.accounting.flush()
        self.cache.close()
        if self.transport is not None:
            self.transport.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- per item
    def _check(self, request: ChatRequest) -> None:
        token = (request.model, request.max_tokens)
        if token not in self._checked:
            self.accounting.check(request.model, request.max_tokens)
            self._checked.add(token)

    def _from_cache(self, key: str, request: ChatRequest, run: _Run, found: dict[str, CachedReply],
                    complete: bool) -> Outcome | list[int]:
        """A cached usable reply, a failure (every attempt cached and unparseable), or the attempts to ask.

        ``found`` holds cached replies already looked up: the first attempt's, and the other attempts' too when
        ``complete``.
        """
        n = self.answer_attempts
        if self.refresh:
            return list(range(n))
        missing: list[int] = []
        last: tuple[str, str] | None = None
        for i in range(n):
            k = attempt_key(key, i)
            got = found.get(k) if i == 0 or complete else self.cache.get(k)
            if got is None:
                missing.append(i)
                continue
            value, error = run.parse_text(got.text, request)
            if error is None:
                return ChatReply(k, got.text, value, got.finish_reason, got.prompt_tokens, got.completion_tokens,
                                 got.model, True, 0, i + 1, 0.0, got.structured_mode)
            last = (got.text, error)
        if missing or last is None:
            return missing
        return Failure(key, UNPARSEABLE, f"{last[1]} (after {attempts_phrase(n)}, all from the cache)",
                       answer_attempts=n, text=last[0], stage=run.stage, model=request.model)

    async def _resolve(self, run: _Run, key: str, request: ChatRequest, attempts: list[int]) -> Outcome:
        """Ask the answer attempts not in the cache, in order, until one is usable."""
        requests = 0
        last: tuple[str, str, str | None] | None = None  # (cause, detail, text)
        messages: list[dict] | None = None
        for i in attempts:
            k = attempt_key(key, i)
            if messages is None:
                try:
                    messages = (await asyncio.to_thread(_messages, request) if request.has_images()
                                else _messages(request))
                except (OSError, ValueError) as exc:
                    return Failure(key, BAD_REQUEST, f"cannot build the request: {type(exc).__name__}: {exc}",
                                   stage=run.stage, model=request.model)
            got, made = await self._call(run, k, request, messages)
            requests += made
            if isinstance(got, Failure):
                return Failure(key, got.cause, got.detail, got.status, requests, i + 1,
                               last[2] if last else None, run.stage, request.model)
            if not got.text:
                last = (EMPTY_REPLY, f"empty reply (finish_reason {got.finish_reason}){got.note}", None)
                continue
            run.store(k, CachedReply(got.text, got.finish_reason, got.prompt_tokens, got.completion_tokens,
                                     got.model, got.mode), got.latency_s)
            value, error = run.parse_text(got.text, request)
            if error is None:
                return ChatReply(k, got.text, value, got.finish_reason, got.prompt_tokens, got.completion_tokens,
                                 got.model, False, requests, i + 1, got.latency_s, got.mode)
            last = (UNPARSEABLE, error, got.text)
        n = self.answer_attempts
        assert last is not None  # attempts is never empty: every attempt ended in an empty or unparseable reply
        cause, detail, text = last
        return Failure(key, cause, f"{detail} (after {attempts_phrase(n)})", None, requests, n, text,
                       run.stage, request.model)

    # ---- one answer attempt: one call with its transport retries
    async def _call(self, run: _Run, key: str, request: ChatRequest,
                    messages: list[dict]) -> tuple[_Got | Failure, int]:
        made = 0
        attempt = 0
        estimate = request.estimate_prompt_tokens()
        # made before any rate-limit wait, so that its set-up does not shift the first send
        send = run.http().chat.completions.create if self.transport is None else self.transport.send
        while True:
            res = await run.reserve(request, estimate)
            if res is None:
                return Failure(key, BUDGET, self.budget_detail(), stage=run.stage, model=request.model), made
            try:
                await self.limiter.request()
                taken = res.tokens + self._reply_guess(request)
                await self.limiter.tokens_for(taken)
            except asyncio.CancelledError:
                run.settle(res, None, None, False)  # never sent: nothing taken from the token bucket either
                raise
            mode = self._mode(request.model) if request.schema is not None else None
            kwargs = self._kwargs(request, messages, mode)
            attempt += 1
            made += 1
            self.accounting.count(run.stage, request.model, "requests")
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(self.endpoint.timeout_s):
                    completion = await send(**kwargs)
                problem = None
            except asyncio.CancelledError:
                self.limiter.settle(taken, max(taken, run.settle(res, None, None, True)[1]))
                raise
            except Exception as exc:
                problem = classify(exc)
                if problem is None:
                    self.limiter.settle(taken, max(taken, run.settle(res, None, None, True)[1]))
                    raise
            latency = time.perf_counter() - t0
            if problem is None:
                got = _reply_of(completion, mode, latency)
                if isinstance(got, Problem):
                    problem = got
                else:
                    _, used = run.settle(res, got.prompt_tokens, got.completion_tokens, True)
                    reply_tokens = got.completion_tokens or 0
                    if usage_problem(got.prompt_tokens, got.completion_tokens, request.max_tokens) is not None:
                        got.prompt_tokens = got.completion_tokens = None  # not passed on as if it were true
                        # Rate limits count at least the reply's bytes (a token covers one byte or more): without
                        # max_tokens the reservation alone says nothing of the reply.
                        reply_tokens = len(got.text.encode("utf-8", "replace"))
                        used = max(used, taken, estimate + reply_tokens)
                    if request.max_tokens is None:
                        n, total = self._replies_seen.get(request.model, (0, 0))
                        self._replies_seen[request.model] = (n + 1, total + reply_tokens)
                    self.limiter.settle(taken, used)
                    size = len(got.text) if len(got.text) * 4 <= self.max_reply_bytes else len(got.text.encode())
                    if size > self.max_reply_bytes:
                        # Never cached nor stored: asking again would most likely bring the same size back.
                        return Failure(key, REPLY_TOO_LARGE, f"the reply's text is {size:,} bytes, over the cap "
                                       f"of {self.max_reply_bytes:,} (--max-reply-bytes); not kept, not asked "
                                       f"again in this run (finish_reason {got.finish_reason})", stage=run.stage,
                                       model=request.model), made
                    if mode is not None:
                        self._confirm(request.model, mode)
                    return got, made
            billed = run.settle(res, None, None, problem.maybe_billed)[1]
            self.limiter.settle(taken, max(taken, billed) if problem.maybe_billed else 0)
            if (mode is not None and problem.status in structured.FALLBACK_STATUSES
                    and self._fall_back(request.model, mode)):
                attempt -= 1  # another form of the request, not a transport retry
                continue
            delay = self.retry.delay(problem, attempt, key)
            if delay is None:
                return Failure(key, problem.cause, f"{problem.detail} ({self.retry.why_not(problem, attempt)})",
                               problem.status, stage=run.stage, model=request.model), made
            await asyncio.sleep(delay)

    def _reply_guess(self, request: ChatRequest) -> int:
        """What a request without max_tokens takes from the tokens-per-minute bucket for its reply: the mean
        reply of its model so far (settled against the reported usage), so that a steady run keeps to the
        limit instead of paying in arrears."""
        if request.max_tokens is not None or self.limiter.tokens is None:
            return 0
        n, total = self._replies_seen.get(request.model, (0, 0))
        return total // n if n else 0

    def _kwargs(self, request: ChatRequest, messages: list[dict], mode: str | None) -> dict:
        kwargs: dict[str, Any] = {"model": request.model, "messages": messages, "timeout": self.endpoint.timeout_s}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        if request.max_tokens is not None:
            kwargs[self.endpoint.max_tokens_field] = request.max_tokens
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.reasoning_effort is not None:
            kwargs["reasoning_effort"] = request.reasoning_effort
        if request.extra_body:
            kwargs["extra_body"] = request.extra_body
        if mode is not None and request.schema is not None:
            fmt = structured.response_format(mode, request.schema_name, request.schema)
            if fmt is not None:
                kwargs["response_format"] = fmt
            if mode != structured.JSON_SCHEMA:
                kwargs["messages"] = _with_instruction(messages, structured.instruction(request.schema))
        return kwargs

    # ---- structured-output form per model on this endpoint
    def _mode(self, model: str) -> str:
        if self.structured != "auto":
            return self.structured
        state = self._modes.get(model)
        if state is None:
            state = self.cache.structured_mode(self.endpoint.base_url, model) or (structured.JSON_SCHEMA, False)
            self._modes[model] = state
        return state[0]

    def _set_mode(self, model: str, mode: str, confirmed: bool) -> None:
        self._modes[model] = (mode, confirmed)
        self.cache.set_structured_mode(self.endpoint.base_url, model, mode, confirmed)

    def _confirm(self, model: str, mode: str) -> None:
        if self.structured == "auto" and self._modes.get(model) == (mode, False):
            self._set_mode(model, mode, True)

    def _fall_back(self, model: str, failed: str) -> bool:
        """True when the request should be sent again at once in the (now) current form."""
        if self.structured != "auto":
            return False
        current, confirmed = self._modes[model]
        if current != failed:
            return True  # another call has already moved on
        if confirmed:
            return False
        nxt = structured.next_mode(current)
        if nxt is None:
            return False
        self._set_mode(model, nxt, False)
        return True


def _messages(request: ChatRequest) -> list[dict]:
    return [m.payload() for m in request.messages]


def _with_instruction(messages: list[dict], text: str) -> list[dict]:
    """The messages with ``text`` appended to the last user message (a new user message if there is none)."""
    out = list(messages)
    for i in range(len(out) - 1, -1, -1):
        if out[i]["role"] == "user":
            content = out[i]["content"]
            if isinstance(content, str):  # stays plain text: chat templates of text-only models take no parts
                out[i] = {"role": "user", "content": f"{content}\n\n{text}"}
            else:
                out[i] = {"role": "user", "content": [*content, {"type": "text", "text": text}]}
            return out
    return [*out, {"role": "user", "content": text}]


def _reply_of(completion: Any, mode: str | None, latency: float) -> _Got | Problem:
    """The text and usage of a completion, or the problem with it."""
    if not isinstance(completion, ChatCompletion):
        return Problem(BAD_RESPONSE, f"reply is not a chat completion JSON object: {str(completion)[:200]!r}",
                       maybe_billed=True)
    usage = completion.usage
    p = getattr(usage, "prompt_tokens", None) if usage is not None else None
    c = getattr(usage, "completion_tokens", None) if usage is not None else None
    if not completion.choices:
        return _Got("", None, p, c, completion.model, mode, latency, "; no choices")
    choice = completion.choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    if content is not None and not isinstance(content, str):
        return Problem(BAD_RESPONSE, f"message content is {type(content).__name__}, not text", maybe_billed=True)
    text = content or ""
    note = ""
    refusal = getattr(message, "refusal", None) if message is not None else None
    if not text and refusal:
        note = f"; refusal: {refusal[:200]}"
    return _Got(text, getattr(choice, "finish_reason", None), p, c, completion.model, mode, latency, note)


class _Run:
    """The state of one ``Engine.run``: the feeder task, the calls in flight and the answers waiting."""

    def __init__(self, engine: Engine, stage: str, parse: Callable[[str], Any] | None) -> None:
        if not isinstance(stage, str) or not stage:
            raise ValueError("stage must be a non-empty string")
        if parse is not None and not callable(parse):
            raise ValueError("parse must be a callable taking the reply text")
        self.engine = engine
        self.stage = stage
        self.parse = parse
        self.ready: collections.deque = collections.deque()
        self.workers: set[asyncio.Task] = set()
        self.feeder: asyncio.Task | None = None
        self.feeding = True
        self.stopped = False
        self.error: BaseException | None = None
        self.client: openai.AsyncOpenAI | None = None
        self.unstored: list[tuple[str, CachedReply, float]] = []
        self.unpushed: list[tuple[Any, Outcome, ChatRequest]] = []

    async def start(self, items) -> None:
        self.wake = asyncio.Event()
        self.space = asyncio.Event()
        self.settled = asyncio.Event()
        # Items that need a call wait here for one of ``concurrency`` workers. Long-lived workers, each taking the
        # next item as soon as it is done with one, keep every connection busy; a task per item would leave
        # connections idle between items, and the HTTP pool pays for every idle connection on every request.
        self.jobs: asyncio.Queue = asyncio.Queue(maxsize=self.engine.concurrency)
        self.feeder = asyncio.create_task(self._feed(items))

    # ---- the consumer side
    async def wait(self) -> None:
        if not self.ready and not self.finished() and self.error is None:
            self.wake.clear()
            await self.wake.wait()

    def take(self) -> list:
        """The answers waiting; once they are all taken, the error that ended the run, if one did."""
        if self.error is not None and not self.ready:
            raise self.error
        out = list(self.ready)
        self.ready.clear()
        self.space.set()
        return out

    def finished(self) -> bool:
        return (not self.feeding and not self.workers and not self.ready and not self.unpushed
                and self.error is None)

    def http(self) -> openai.AsyncOpenAI:
        """The run's client, made on first use (a run served from the cache needs none)."""
        if self.client is None:
            # The SDK's own retries are off: the engine's RetryPolicy is the only one.
            self.client = openai.AsyncOpenAI(base_url=self.engine.endpoint.base_url, api_key=self.engine._api_key,
                                             max_retries=0, timeout=self.engine.endpoint.timeout_s)
        return self.client

    async def close(self) -> None:
        # A commit already scheduled (replies of the last turn) runs while this waits for the cancelled tasks.
        pending = [t for t in (self.feeder, *self.workers) if t is not None and not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if self.client is not None:
            await self.client.close()
            self.client = None

    # ---- the producer side
    def push(self, item_id: Any, outcome: Outcome, request: ChatRequest) -> None:
        if type(outcome) is ChatReply:
            self.engine.accounting.count_item(self.stage, request.model, True, outcome.cached,
                                              outcome.prompt_tokens, outcome.completion_tokens)
        else:
            self.engine.accounting.count_item(self.stage, request.model, False)
        self.ready.append((item_id, outcome))
        if not self.wake.is_set():
            self.wake.set()

    def store(self, key: str, reply: CachedReply, latency_s: float) -> None:
        """Queue a reply for the cache; it is committed at the start of the next turn of the event loop."""
        if not self.unstored and not self.unpushed:
            asyncio.get_running_loop().call_soon(self._commit)
        self.unstored.append((key, reply, latency_s))

    def push_stored(self, item_id: Any, outcome: Outcome, request: ChatRequest) -> None:
        """Hand an outcome on once the replies queued before it are committed."""
        if not self.unstored and not self.unpushed:
            asyncio.get_running_loop().call_soon(self._commit)
        self.unpushed.append((item_id, outcome, request))

    def _commit(self) -> None:
        """Commit the queued replies in one transaction, then hand on the outcomes that waited for them.

        The replies of one turn of the event loop share a transaction, and a worker goes on to its next item
        without waiting for it: a reply is durable before its item counts as done, and only replies that arrived
        in the last turn (at most ``concurrency``) are lost when the process is killed.
        """
        rows, outcomes = self.unstored, self.unpushed
        self.unstored, self.unpushed = [], []
        if rows:
            try:
                self.engine.cache.put_many(rows)
            except Exception as exc:  # the cache cannot be written: nothing can be kept, so the run ends
                self.error = exc
                self.wake.set()
                return
        for outcome in outcomes:
            self.push(*outcome)

    def parse_text(self, text: str, request: ChatRequest) -> tuple[Any, str | None]:
        try:
            if self.parse is not None:
                return self.parse(text), None
            if request.schema is not None:
                return structured.parse_json(text, request.schema), None
            return text, None
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"[:300]

    async def _feed(self, items) -> None:
        try:
            if isinstance(items, AsyncIterable):
                async for item in items:
                    if not await self._feed_chunk([item]):
                        break
            else:
                it = iter(items)
                # Chunks share one cache query; a chunk is small enough not to hold back the first request.
                while chunk := list(itertools.islice(it, FEED_CHUNK)):
                    if not await self._feed_chunk(chunk):
                        break
            for _ in range(len(self.workers)):
                await self.jobs.put(None)  # no more items: each worker stops after the items queued before
        except Exception as exc:  # a bad item or a configuration error ends the run
            self.error = exc
        finally:
            self.feeding = False
            self.wake.set()

    async def _feed_chunk(self, chunk: list) -> bool:
        """Answer the chunk's items from the cache or start their calls; False once the run is stopped."""
        engine = self.engine
        checked = engine._checked
        endpoint = engine.endpoint.base_url
        keys = []
        for item in chunk:
            if type(item) is not tuple or len(item) != 2 or not isinstance(item[1], ChatRequest):
                raise ValueError(f"Engine.run takes (item_id, ChatRequest) pairs, got {type(item).__name__}: "
                                 f"{str(item)[:100]}")
            request = item[1]
            if (request.model, request.max_tokens) not in checked:
                engine._check(request)
            keys.append(request_key(cache_endpoint(endpoint, request.model), request))
        found = {} if engine.refresh else engine.cache.get_many(keys)
        n = engine.answer_attempts
        if n > 1 and not engine.refresh and len(found) < len(keys):
            # Where the first attempt is not cached, a later one may be: one query for all of them.
            found.update(engine.cache.get_many([attempt_key(k, i) for k in keys if k not in found
                                                for i in range(1, n)]))
        plain = self.parse is None
        for (item_id, request), key in zip(chunk, keys):
            if self.stopped:
                return False
            got = found.get(key)
            if got is not None and plain and request.schema is None:
                # The common warm case, inline: the first attempt is cached and the text is the value.
                outcome: Outcome | list[int] = ChatReply(key, got.text, got.text, got.finish_reason,
                                                         got.prompt_tokens, got.completion_tokens, got.model, True,
                                                         0, 1, 0.0, got.structured_mode)
            else:
                outcome = engine._from_cache(key, request, self, found, got is None)
            if not isinstance(outcome, list):
                self.push(item_id, outcome, request)
                if len(self.ready) >= engine.max_buffered:
                    self.space.clear()
                    await self.space.wait()
                continue
            if not self.workers:
                self.workers = {asyncio.create_task(self._work()) for _ in range(engine.concurrency)}
            await self.jobs.put((item_id, key, request, outcome))
        return True

    async def _work(self) -> None:
        try:
            while (job := await self.jobs.get()) is not None:
                item_id, key, request, attempts = job
                if self.stopped:  # queued before the budget ran out: not asked
                    self.push(item_id, Failure(key, BUDGET, self.engine.budget_detail(), stage=self.stage,
                                               model=request.model), request)
                    continue
                self.push_stored(item_id, await self.engine._resolve(self, key, request, attempts), request)
        except Exception as exc:  # a fault of the engine itself, not of a call: it ends the run
            self.error = exc
        finally:
            self.workers.discard(asyncio.current_task())
            if not self.workers:
                self.wake.set()

    # ---- budget
    async def reserve(self, request: ChatRequest, estimate: int):
        acct = self.engine.accounting
        while True:
            verdict = acct.reserve(self.stage, request.model, estimate, request.max_tokens, request.has_images())
            if verdict is Verdict.REFUSE:
                self.stopped = True
                return None
            if verdict is not Verdict.WAIT:
                return verdict
            # Woken when a call of this run settles; the timeout covers reservations held by other runs that share
            # the accounting (a judge's engine beside the answering one).
            # (asyncio.timeout, not wait_for: Python 3.11's wait_for may turn a cancellation that meets the timeout
            # into a TimeoutError, and the cancelled worker would go on.)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(BUDGET_RECHECK_S):
                    await self.settled.wait()

    def settle(self, res, prompt_tokens, completion_tokens, maybe_billed: bool) -> tuple[int, int]:
        """Settle ``res`` (``Accounting.settle``: tokens charged, tokens used) and wake the calls it held up."""
        out = self.engine.accounting.settle(res, prompt_tokens, completion_tokens, maybe_billed)
        # Wake the calls waiting for the budget; they take a fresh event before waiting again.
        event, self.settled = self.settled, asyncio.Event()
        event.set()
        return out
