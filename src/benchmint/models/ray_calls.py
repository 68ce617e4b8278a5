"""Model calls sent by a pool of Ray actors (``--engine ray`` on eval, grade and generate).

The engine stays in the driver and remains the one accountant: it reads the request cache, reserves the budget
and the rate limits before each call, settles them with the reply's usage, retries, parses and writes the cache
(one writer, the existing SQLite file). Only the HTTP call itself is made by an actor: ``RayCalls`` is the
engine's ``transport``. Each actor makes one call at a time and the pool has ``size`` actors (the engine's
``--concurrency``), so the pool's size bounds the calls in flight across every run of the engine, and budgets
and rate limits hold across the pool because one party grants every call. Prompts and images are built where
the local engine builds them, so requests, replies and outputs are the same as the local engine's.

An actor that dies (its node lost, its process killed) fails the call it was making as a dropped connection:
the engine's retry policy asks again (bounded by ``--retries``), on a fresh actor that replaces the dead one;
past the bound the call is a failure, an error row of the run like any other. Only the calls in flight on that
actor are affected.
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
from typing import Any

from benchmint.models.call import BAD_RESPONSE, CONNECTION
from benchmint.models.retry import CallProblem, Problem, classify

# How long the pool may take to start (Ray's workers are processes importing the SDK; a busy cluster is slow).
READY_SECONDS = 600.0


class _Sender:
    """One actor: an HTTP client of the endpoint, one call at a time (the SDK's own retries off, as the engine's)."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float) -> None:
        import openai

        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s)

    def send(self, kwargs: dict) -> tuple[str, Any]:
        # The SDK's exceptions hold HTTP objects that need not travel: the problem is classified here.
        try:
            return "ok", self.client.chat.completions.create(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the engine, classified
            problem = classify(exc)
            return ("problem", problem) if problem is not None else ("error", f"{type(exc).__name__}: {exc}")

    def pid(self) -> int:
        return os.getpid()


class RayCalls:
    """The engine's transport over ``size`` Ray actors; needs a Ray connection (``run.ray_engine.ray_session``).

    The pool is made ready (every actor started, its client made) before it is returned, or ConnectionError says
    why it could not be: the rate limits grant a
    call just before it is sent, and a call granted while its actor was still starting would be sent late, in a
    burst with the ones granted after it. ``close()`` ends the actors.
    """

    def __init__(self, base_url: str, api_key: str, timeout_s: float, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"the actor pool's size must be an integer >= 1, got {size!r}")
        from benchmint.run.ray_engine import require_ray

        self._ray = ray = require_ray()
        if not ray.is_initialized():
            raise RuntimeError("RayCalls needs a Ray connection: run it inside ray_session()")
        # No CPU reserved: an actor waits on the network. SPREAD puts the pool across the cluster's nodes.
        self._actor = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0,
                                 scheduling_strategy="SPREAD")(_Sender)
        self._args = (base_url, api_key, timeout_s)
        self._lock = threading.Lock()  # idle actors are given back from Ray's callback thread too
        self._all = [self._actor.remote(*self._args) for _ in range(size)]  # busy or idle, for close()
        try:  # every actor up and its client made
            ray.get([a.pid.remote() for a in self._all], timeout=READY_SECONDS)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            self.close()
            # Ray's message ends with the actor's own traceback: its last line names the error
            why = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
            raise ConnectionError(f"the Ray actors that send the model calls could not start: "
                                  f"{why[-1][:300]}") from None
        self._idle: collections.deque = collections.deque(self._all)
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self.size = size
        self.replaced = 0  # actors found dead and replaced

    def pids(self) -> list[int]:
        """The process ids of the idle actors (for tests that stop one)."""
        with self._lock:
            actors = list(self._idle)
        return self._ray.get([a.pid.remote() for a in actors])

    async def send(self, **kwargs: Any) -> Any:
        actor = await self._take()
        ref = actor.send.remote(kwargs)
        done = False
        try:
            kind, got = await ref
            done = True
        except self._ray.exceptions.RayActorError as exc:
            done = True
            actor = await self._replace(actor)
            raise CallProblem(Problem(CONNECTION, f"the Ray actor sending the call died: {type(exc).__name__}",
                                      maybe_billed=True)) from None
        except self._ray.exceptions.RayError as exc:
            done = True
            raise CallProblem(Problem(BAD_RESPONSE, f"the reply did not come back from the Ray actor: "
                                      f"{type(exc).__name__}: {exc}"[:300], retryable=False,
                                      maybe_billed=True)) from None
        finally:
            if done:
                self._give_back(actor)
            else:  # cancelled here (the engine's timeout, a stopped run): the actor is busy until its call ends
                ref.future().add_done_callback(lambda _f, a=actor: self._give_back(a))
        if kind == "ok":
            return got
        if kind == "problem":
            raise CallProblem(got)
        raise RuntimeError(f"the model call failed in its Ray actor: {got}")

    async def _take(self):
        while True:
            with self._lock:
                if self._idle:
                    return self._idle.popleft()
                loop = asyncio.get_running_loop()
                fut = loop.create_future()
                self._waiters.append((loop, fut))
            await fut

    def _give_back(self, actor) -> None:
        with self._lock:
            self._idle.append(actor)
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:  # each looks again; the ones that find no actor wait again
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, fut)

    async def _replace(self, dead):
        self.replaced += 1
        try:
            self._ray.kill(dead)
        except Exception:  # noqa: BLE001 - already gone
            pass
        fresh = self._actor.remote(*self._args)
        with self._lock:
            self._all = [a for a in self._all if a is not dead] + [fresh]
        await fresh.pid.remote()  # up before the retry is granted and sent, as the pool's others are
        return fresh

    def close(self) -> None:
        if not self._ray.is_initialized():
            return
        with self._lock:
            actors, self._all, self._idle = self._all, [], collections.deque()
        for a in actors:
            try:
                self._ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)

