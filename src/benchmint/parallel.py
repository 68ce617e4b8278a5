"""Worker counts and an ordered thread map, shared by the batch APIs and the file runner."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def resolve_workers(workers: int) -> int:
    """-1 -> all cores; n >= 1 -> n; anything else is a ValueError."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers == 0 or workers < -1:
        raise ValueError("workers must be -1 (all cores) or >= 1")
    return (os.cpu_count() or 1) if workers == -1 else workers


def thread_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """``[fn(x) for x in items]`` on up to ``workers`` threads (-1: all cores), results in input order.

    Worth it where ``fn`` spends its time in compiled code that releases the GIL.
    The first failing item's exception (in input order) is raised.
    """
    n = resolve_workers(workers)
    items = list(items)
    if n == 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(n, len(items))) as pool:
        return list(pool.map(fn, items))
