"""The one retry policy for transport problems, and how an exception from the client becomes a problem.

Transport retries cover what the server or the network may fix by itself: HTTP 408, 409, 429 and 5xx,
timeouts, dropped connections and replies that are not valid JSON. Other statuses (400, 401, 403, 404, 422, ...)
are final at once, and so is a 5xx whose body says the request's content is wrong (``CONTENT_ERROR``): asked
again, the same request fails the same way. Waits grow exponentially with a jitter drawn from a generator seeded by (seed, request key,
attempt), so a run waits the same whatever order its calls finish in; a Retry-After header (seconds, an HTTP
date, or OpenAI's retry-after-ms) is a lower bound on the wait, and one longer than ``max_retry_after_s`` gives up
at once. Answer retries (a reply the stage cannot parse) are counted separately by the engine.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from dataclasses import dataclass

import openai

from benchmint.models.call import BAD_RESPONSE, CONNECTION, HTTP_STATUS, TIMEOUT

RETRY_STATUSES = frozenset({408, 409, 429})
# A server error caused by what the request holds, not by the server's state: an OpenAI-style error typed as the
# request's fault, or the words servers use when a model cannot take a message's parts (llama.cpp's server
# answers 500 "can only concatenate str (not "list") to str" when a text-only chat template meets image parts).
CONTENT_ERROR_TYPES = frozenset({"invalid_request_error", "BadRequestError"})
CONTENT_ERROR = re.compile(r'\(not "(?:list|dict)"\)|does not support (?:image|vision|multimodal)|'
                           r"image input is not supported|images? (?:are|is) not supported", re.IGNORECASE)


@dataclass(frozen=True)
class Problem:
    """One failed HTTP attempt. ``maybe_billed``: the server may have generated a reply we never got."""

    cause: str
    detail: str
    status: int | None = None
    retry_after: float | None = None
    retryable: bool = True
    maybe_billed: bool = False


class CallProblem(Exception):
    """A problem already classified where the call was made (a transport in another process, whose client's
    exceptions do not travel): ``classify`` returns it as it is."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail)
        self.problem = problem


def parse_retry_after(headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date); None if absent/bad."""
    if headers is None:
        return None
    raw = headers.get("retry-after-ms")
    if raw is not None:
        try:
            return max(0.0, float(raw) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return None if when is None else max(0.0, when.timestamp() - time.time())


def _body_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(exc.message)[:300]


def _content_error(exc: openai.APIStatusError) -> bool:
    """Whether a server error's body blames the request's content (see ``CONTENT_ERROR``)."""
    err = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
    if isinstance(err, dict) and err.get("type") in CONTENT_ERROR_TYPES:
        return True
    return bool(CONTENT_ERROR.search(_body_message(exc)))


def classify(exc: BaseException) -> Problem | None:
    """The problem an exception raised by a chat-completions call stands for; None if it is none of them."""
    if isinstance(exc, CallProblem):
        return exc.problem
    if isinstance(exc, openai.APITimeoutError) or isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return Problem(TIMEOUT, "no reply within the call timeout", maybe_billed=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return Problem(CONNECTION, f"{type(cause).__name__}: {cause}"[:300], maybe_billed=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return Problem(HTTP_STATUS, f"HTTP {status}: {_body_message(exc)}", status,
                       parse_retry_after(exc.response.headers),
                       retryable=status in RETRY_STATUSES or (status >= 500 and not _content_error(exc)))
    if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
        return Problem(BAD_RESPONSE, f"reply is not a chat completion: {type(exc).__name__}: {exc}"[:300],
                       maybe_billed=True)
    if isinstance(exc, openai.OpenAIError):
        return Problem(BAD_RESPONSE, f"{type(exc).__name__}: {exc}"[:300], retryable=False, maybe_billed=True)
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded transport retries with exponential backoff and seeded jitter.

    ``max_attempts`` counts every transport attempt of one call, the first included. The wait before attempt
    k+1 is ``min(max_delay_s, base_delay_s * multiplier**(k-1))`` times a factor drawn in
    ``[1 - jitter, 1 + jitter]``, and at least the server's Retry-After (itself stretched by up to ``jitter``
    so that callers told the same time do not all return at once).
    """

    max_attempts: int = 6
    base_delay_s: float = 1.0
    multiplier: float = 2.0
    max_delay_s: float = 60.0
    jitter: float = 0.25
    max_retry_after_s: float = 300.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        if not (self.base_delay_s >= 0 and self.max_delay_s >= 0 and self.max_retry_after_s >= 0):
            raise ValueError("retry delays must be >= 0")
        if not self.multiplier >= 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier!r}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter!r}")

    def delay(self, problem: Problem, attempt: int, key: str) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based) of the call keyed ``key``; None: give up."""
        if not problem.retryable or attempt >= self.max_attempts:
            return None
        if problem.retry_after is not None and problem.retry_after > self.max_retry_after_s:
            return None
        rng = random.Random(f"{self.seed}:{key}:{attempt}")
        backoff = min(self.max_delay_s, self.base_delay_s * self.multiplier ** (attempt - 1))
        backoff *= 1.0 + self.jitter * rng.uniform(-1.0, 1.0)
        if problem.retry_after is None:
            return backoff
        return max(backoff, problem.retry_after * (1.0 + self.jitter * rng.random()))

    def why_not(self, problem: Problem, attempt: int) -> str:
        """Why ``delay`` gave up after failed attempt ``attempt``, for the failure's message."""
        tries = f"after {attempt} attempt{'s' if attempt > 1 else ''}"
        if not problem.retryable:
            return f"{tries}; not retried: the status is final"
        if attempt >= self.max_attempts:
            return f"{tries}, the most allowed (--retries {self.max_attempts})"
        return (f"{tries}; the server asked to wait {problem.retry_after:,.0f} s (Retry-After), more than the "
                f"{self.max_retry_after_s:g} s allowed (--max-retry-after)")
