"""Client-side rate limits: requests per minute and tokens per minute, as token buckets.

Each bucket refills continuously at ``limit / 60`` per second and holds at most ``burst_s`` seconds' worth (at
least one request). A caller reserves its amount at once, in call order, and sleeps until the bucket covers it,
so waiting callers are served first come, first served without a lock. A single amount larger than the bucket
goes as soon as the bucket is full and leaves a debt the next callers wait out. Tokens are reserved at the
call's worst case (prompt estimate + max_tokens) and the unused part is given back when the reply reports its
usage.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


class TokenBucket:
    def __init__(self, per_minute: float, burst_s: float = 1.0, minimum: float = 1.0) -> None:
        if not per_minute > 0:
            raise ValueError(f"a rate limit must be positive, got {per_minute!r} per minute")
        if burst_s < 0:
            raise ValueError(f"burst_s must be >= 0, got {burst_s!r}")
        self.rate = per_minute / 60.0
        self.tau = max(minimum, self.rate * burst_s) / self.rate  # the bucket's size, in seconds of refill
        self._tat = 0.0  # when the bucket will be full again ("theoretical arrival time")

    def reserve(self, amount: float, now: float) -> float:
        """Take ``amount`` and return how long to wait before using it."""
        cost = amount / self.rate
        tat = max(self._tat, now)
        start = max(now, tat - self.tau + min(cost, self.tau))
        self._tat = tat + cost
        return start - now

    def give_back(self, amount: float) -> None:
        if amount > 0:
            self._tat -= amount / self.rate


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
        self.requests = TokenBucket(limits.requests_per_minute, limits.burst_s) if limits.requests_per_minute else None
        self.tokens = TokenBucket(limits.tokens_per_minute, limits.burst_s) if limits.tokens_per_minute else None
        self.waited_s = 0.0

    async def request(self) -> None:
        if self.requests is not None:
            await self._sleep(self.requests.reserve(1, time.monotonic()))

    async def tokens_for(self, amount: int) -> None:
        if self.tokens is not None:
            await self._sleep(self.tokens.reserve(amount, time.monotonic()))

    def refund(self, amount: int) -> None:
        if self.tokens is not None:
            self.tokens.give_back(amount)

    async def _sleep(self, wait: float) -> None:
        if wait > 0:
            self.waited_s += wait
            await asyncio.sleep(wait)
