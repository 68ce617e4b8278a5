"""Model calls shared by the units whose requests coincide: one call per request, one result per unit.

Units are keyed by what they record (an item, its setting and repeat), calls by what they send (the request's
content key): two items whose prompts coincide (a blind setting, a duplicated question, one structure filed under
two databases) are two units and one call. ``SharedCallExecutor`` is the engine as ``benchmint.run.run_units``'
executor for such units.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from benchmint.models.call import BUDGET, ChatReply, ChatRequest, Failure
from benchmint.models.engine import Engine

# build(wanted) -> (i, request or the failure to build it) for each (i, args) of wanted, in that order
Builder = Callable[[Sequence[tuple[int, tuple]]], Iterator[tuple[int, "ChatRequest | Failure"]]]


class SharedCallExecutor:
    """The engine as an executor of ``run_units`` for units whose calls may coincide.

    Each unit's arguments start with its call's key (``Engine.key`` of its request). The units sharing a key share
    one call: its request is made by ``build`` when its turn comes (so requests, images included, are built as
    the engine takes them, never all at once), sent once through the engine (concurrency, limits, cache, retries,
    budget), and its outcome is handed to ``fn(outcome, *args[1:])`` for every unit of the key, the first in unit
    order first; the others get the reply marked ``cached`` with no request of their own. A request ``build``
    could not make is its units' failure. When the budget stops the run, every call not yet started ends as a
    ``budget`` failure of each of its units: every unit gets a result.
    """

    def __init__(self, engine: Engine, build: Builder, stage: str = "default",
                 parse: Callable[[str], Any] | None = None) -> None:
        self.engine, self.build, self.stage, self.parse = engine, build, stage, parse

    def map_unordered(self, fn: Callable[..., Any], args,
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
        args = list(args)
        groups: dict[str, list[int]] = {}
        for i, a in enumerate(args):
            groups.setdefault(a[0], []).append(i)
        unbuilt: collections.deque[tuple[int, Failure]] = collections.deque()
        answered: set[str] = set()

        def requests() -> Iterator[tuple[int, ChatRequest]]:
            for i, got in self.build([(g[0], args[g[0]]) for g in groups.values()]):
                if isinstance(got, ChatRequest):
                    yield i, got
                else:
                    unbuilt.append((i, got))

        def deliver(i: int, outcome) -> Iterator[tuple[int, Any]]:
            key = args[i][0]
            answered.add(key)
            for n, j in enumerate(groups[key]):
                got = outcome._replace(cached=True, requests=0) if n and isinstance(outcome, ChatReply) else outcome
                try:
                    yield j, fn(got, *args[j][1:])
                except Exception as exc:  # noqa: BLE001 - the unit's error row, as run_units records any failure
                    yield j, exc

        for i, outcome in self.engine.run_sync(requests(), stage=self.stage, parse=self.parse):
            while unbuilt:
                yield from deliver(*unbuilt.popleft())
            yield from deliver(i, outcome)
        while unbuilt:
            yield from deliver(*unbuilt.popleft())
        # The engine takes no more requests once the budget is spent: the calls it never took are not asked.
        for key, group in groups.items():
            if key not in answered:
                yield from deliver(group[0], Failure(key, BUDGET, f"not asked: the budget "
                                                     f"({self.engine.stop_reason or 'spent'}) stopped the run "
                                                     "before its turn", stage=self.stage))

    def close(self) -> None:
        """Nothing to stop: the engine belongs to the caller."""


__all__ = ["SharedCallExecutor"]
