"""Client-side rate limits: requests per minute and tokens per minute, as token buckets that wait in line.

Each bucket refills continuously at ``limit / 60`` per second and holds at most ``burst_s`` seconds' worth (at
least one request). Callers take their amount in arrival order: the first in line goes as soon as the bucket
holds its amount (an amount larger than the bucket goes when the bucket is full and leaves a debt the next
callers wait out); the others wait behind it. A waiting caller does not fix its wait when it joins the line: it
is woken whenever the bucket changes (a refund, a settlement, the one ahead leaving) and looks again.

Tokens are taken at the call's worst case known beforehand (prompt estimate + max_tokens, the prompt estimate
alone without max_tokens) and settled when the reply reports its usage: the unused part is given back, and a
reply that used more than was taken is charged the difference, which the next callers wait out. So over any
stretch of time the tokens the server reports stay within the limit, up to one bucket and the overrun of the
replies in flight.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass


class TokenBucket:
    """The arithmetic of one bucket, on times given by the caller (seconds)."""

    def __init__(self, per_minute: float, burst_s: float = 1.0, minimum: float = 1.0) -> None:
        if not per_minute > 0:
            raise ValueError(f"a rate limit must be positive, got {per_minute!r} per minute")
        if burst_s < 0:
            raise ValueError(f"burst_s must be >= 0, got {burst_s!r}")
        self.rate = per_minute / 60.0
        self.capacity = max(minimum, self.rate * burst_s)
        self._level = self.capacity  # what the bucket holds; negative: a debt
        self._at: float | None = None  # when _level was last brought up to date

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            self._level = min(self.capacity, self._level + (now - self._at) * self.rate)
        if self._at is None or now > self._at:
            self._at = now

    def take(self, amount: float, now: float) -> float:
        """Take ``amount`` and return 0.0, or return the seconds until it could be taken (nothing taken)."""
        self._refill(now)
        need = min(amount, self.capacity)
        if self._level >= need - 1e-9:
            self._level -= amount
            return 0.0
        return (need - self._level) / self.rate

    def adjust(self, amount: float, now: float) -> None:
        """Give ``amount`` back (> 0) or charge it too (< 0): a settlement of what was taken."""
        self._refill(now)
        self._level = min(self.capacity, self._level + amount)

    def level(self, now: float) -> float:
        self._refill(now)
        return self._level


class _Line:
    """Callers waiting for one bucket, first come first served, woken on every change."""

    def __init__(self, bucket: TokenBucket) -> None:
        self.bucket = bucket
        self._waiting: collections.deque = collections.deque()
        self._changed: asyncio.Future | None = None

    def changed(self) -> None:
        fut, self._changed = self._changed, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def take(self, amount: float) -> float:
        """Wait in line until ``amount`` is taken; the seconds waited."""
        loop = asyncio.get_running_loop()
        me = object()
        self._waiting.append(me)
        t0 = time.monotonic()
        try:
            while True:
                wait = self.bucket.take(amount, time.monotonic()) if self._waiting[0] is me else None
                if wait == 0.0:
                    return time.monotonic() - t0
                fut = self._changed
                if fut is None or fut.done() or fut.get_loop() is not loop:
                    fut = self._changed = loop.create_future()
                await asyncio.wait((fut,), timeout=wait)  # woken by a change, or when the wait is up
        finally:
            self._waiting.remove(me)
            self.changed()  # the next in line looks again


@dataclass(frozen=True)
class RateLimits:
    """Requests and tokens per minute (``None``: no limit); ``burst_s``: seconds' worth a bucket may hold."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        if not self.burst_s >= 0:
            raise ValueError(f"burst_s must be >= 0, got {self.burst_s!r}")


class Limiter:
    """The buckets of one engine."""

    def __init__(self, limits: RateLimits | None) -> None:
        limits = limits or RateLimits()
        self.requests = (_Line(TokenBucket(limits.requests_per_minute, limits.burst_s))
                         if limits.requests_per_minute else None)
        self.tokens = (_Line(TokenBucket(limits.tokens_per_minute, limits.burst_s))
                       if limits.tokens_per_minute else None)
        self.waited_s = 0.0

    async def request(self) -> None:
        if self.requests is not None:
            self.waited_s += await self.requests.take(1)

    async def tokens_for(self, amount: int) -> None:
        if self.tokens is not None:
            self.waited_s += await self.tokens.take(amount)

    def settle(self, taken: int, used: int) -> None:
        """A call that took ``taken`` tokens used ``used``: give back the rest, or charge the overrun."""
        if self.tokens is not None and used != taken:
            self.tokens.bucket.adjust(taken - used, time.monotonic())
            self.tokens.changed()
