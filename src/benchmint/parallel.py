"""Worker counts, an ordered thread map and how worker processes start and end, shared by the batch APIs and the
runner."""

from __future__ import annotations

import multiprocessing
import operator
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.context import DefaultContext, SpawnContext
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def resolve_workers(workers: int) -> int:
    """-1 -> all cores; n >= 1 -> n; anything else is a ValueError.

    The one worker-count rule of every ``workers=`` argument (the compiled
    kernels apply the same rule, csrc/parallel.hpp). Integers of any type
    (NumPy's too) are accepted; bools, floats and strings are not.
    """
    try:
        n = operator.index(workers) if not isinstance(workers, bool) else 0
    except TypeError:
        n = 0
    if n == 0 or n < -1:
        raise ValueError("workers must be -1 (all cores) or >= 1")
    return (os.cpu_count() or 1) if n == -1 else n


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


# How often a pool worker checks that the process that started it is still alive.
PARENT_CHECK_SECONDS = 0.2


def _exit_when_orphaned(parent: int) -> None:
    while True:
        time.sleep(PARENT_CHECK_SECONDS)
        if os.getppid() != parent:  # re-parented: the run that started us was killed
            os._exit(1)


def die_with_parent() -> None:
    """Ask Linux to kill this process when the thread that started it ends (PR_SET_PDEATHSIG; no-op elsewhere).

    For a child between fork and exec (``preexec_fn``), or a worker stuck in C code holding the GIL, where a
    watching thread cannot run.
    """
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        pass


def watch_parent() -> None:
    """Start a daemon thread that ends this (worker) process once its parent is gone."""
    # A pool worker blocks on its task queue forever once the parent is gone
    # (SIGKILL, OOM killer), so it watches the parent's PID from a daemon thread.
    # A parent-death signal is not used: Linux sends it when the *thread* that
    # forked the worker ends, which need not be when the run ends.
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True,
                     name="benchmint-parent-watch").start()


def worker_context() -> DefaultContext | SpawnContext:
    """How this process starts worker processes: the platform's default (fork on Linux), or spawn once Ray is
    connected in it.

    A fork copies the memory of every thread but runs only the forking one: the children of a process whose Ray
    client runs its gRPC threads inherit their locks and state mid-use and died of SIGSEGV (seen in harvest's
    local workers started by a process that had run a Ray harvest). Spawned workers start clean, at the cost
    of importing everything themselves.
    """
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context()

