"""Model calls of several roles as one executor of ``benchmint.run.run_units``.

A generator's loop alternates between models (the generator drafts, the advisor audits, the generator revises),
each possibly on its own server; a loop's next round is a follow-up unit (``run_units(then=...)``) of whichever
role it needs. ``RoleExecutor`` takes units whose arguments are ``(role, ChatRequest, *rest)`` and sends each
request through its role's engine (concurrency, limits, cache, retries and budget as ``models.CallExecutor``
does for one engine); ``fn(outcome, *rest)`` turns the outcome into the unit's result in the calling thread.
The roles' engine runs share one event loop, driven while the runner waits for the next result, so a follow-up
unit the runner appends while a result is handled is sent as soon as it is read.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Role:
    """One model's part in a flow: its engine, the stage its calls are counted under, the parser of its replies."""

    engine: Any  # benchmint.models.Engine
    stage: str
    parse: Callable[[str], Any] | None = None


class RoleExecutor:
    def __init__(self, roles: Mapping[str, Role]) -> None:
        self.roles = dict(roles)

    def map_unordered(self, fn: Callable[..., Any], args,
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
        drive = _Drive(self.roles)
        fed = 0
        try:
            while True:
                while fed < len(args):  # the runner appends follow-up units while results are handled
                    drive.send(fed, args[fed][0], args[fed][1])
                    fed += 1
                if not drive.waiting:
                    break
                for i, outcome in drive.next_outcomes():
                    if isinstance(outcome, Exception):
                        yield i, outcome
                        continue
                    try:
                        result = fn(outcome, *args[i][2:])
                    except Exception as exc:  # noqa: BLE001 - the unit's error row, as run_units records any failure
                        result = exc
                    yield i, result
        finally:
            drive.close()

    def close(self) -> None:
        """Nothing to stop: the engines belong to the caller."""


class _Drive:
    """The event loop of one ``map_unordered``: a run of each role's engine, fed through a queue."""

    def __init__(self, roles: dict[str, Role]) -> None:
        self.roles = roles
        self.loop = asyncio.new_event_loop()
        self.done: collections.deque = collections.deque()
        self.wake = asyncio.Event()
        self.queues: dict[str, asyncio.Queue] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.waiting = 0

    def send(self, i: int, role_name: str, request) -> None:
        self.waiting += 1
        role = self.roles.get(role_name)
        if role is None:
            self.done.append((i, ValueError(f"no model is given for the role {role_name!r}")))
            return
        if role_name not in self.tasks:
            self.queues[role_name] = asyncio.Queue()
            self.tasks[role_name] = self.loop.create_task(self._consume(role, self.queues[role_name]))
        self.queues[role_name].put_nowait((i, request))

    async def _consume(self, role: Role, queue: asyncio.Queue) -> None:
        async def items():
            while (got := await queue.get()) is not None:
                yield got

        try:
            async with contextlib.aclosing(role.engine.run(items(), stage=role.stage, parse=role.parse)) as run:
                async for i, outcome in run:
                    self.done.append((i, outcome))
                    self.wake.set()
        finally:
            self.wake.set()  # a run that ended with an error wakes the driver too

    async def _settle(self) -> None:
        if not self.done:
            self.wake.clear()
            await self.wake.wait()

    def next_outcomes(self) -> list[tuple[int, Any]]:
        """The outcomes that have arrived, after running the loop until there is one."""
        while not self.done:
            self.loop.run_until_complete(self._settle())
            for task in self.tasks.values():
                if task.done() and not self.done and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        out = list(self.done)
        self.done.clear()
        self.waiting -= len(out)
        return out

    def close(self) -> None:
        loop = self.loop
        for queue in self.queues.values():
            queue.put_nowait(None)
        pending = [t for t in self.tasks.values() if not t.done()]
        if self.waiting:  # stopped early: cancel the calls in flight
            for t in pending:
                t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
