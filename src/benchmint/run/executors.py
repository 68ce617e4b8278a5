"""Where units run: in the calling thread, on threads, or in worker processes.

An executor takes a function and a list of argument tuples and yields
(index, result) pairs as they finish, in any order; an exception raised by the
function comes back as the result (the runner decides what it means). The
runner alone touches the ledger, so an executor never sees it: a distributed
executor (Ray) implements the same two methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from benchmint.parallel import process_pool, resolve_workers


class WorkerDied(RuntimeError):
    """A worker process died (a crash inside a C library, the OOM killer): the pool is unusable."""

    def __init__(self, index: int) -> None:
        super().__init__(f"a worker process died while running unit {index}")
        self.index = index


class Executor(Protocol):
    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """Yield ``(i, fn(*args[i]))`` as calls finish; an exception is yielded as the value."""
        ...

    def close(self) -> None: ...


class SerialExecutor:
    """One unit after another in the calling thread: for tests, debugging and tiny runs."""

    def map_unordered(self, fn, args):
        for i, a in enumerate(args):
            try:
                yield i, fn(*a)
            except Exception as exc:  # the unit's failure, reported as its result
                yield i, exc

    def close(self) -> None:
        pass


class _PoolExecutor:
    """Keeps at most ``2 × workers`` calls submitted, so memory stays flat in the number of units."""

    def __init__(self, pool, workers: int) -> None:
        self._pool, self._window = pool, 2 * workers

    def map_unordered(self, fn, args):
        pending: dict[Future, int] = {}
        next_i = 0
        while next_i < len(args) or pending:
            while next_i < len(args) and len(pending) < self._window:
                pending[self._pool.submit(fn, *args[next_i])] = next_i
                next_i += 1
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=pending.__getitem__):  # ties in input order
                i = pending.pop(fut)
                try:
                    yield i, fut.result()
                except BrokenProcessPool as exc:
                    raise WorkerDied(i) from exc
                except Exception as exc:
                    yield i, exc

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class ThreadExecutor(_PoolExecutor):
    """Threads: for work that waits (model calls) or releases the GIL (compiled kernels)."""

    def __init__(self, workers: int = -1) -> None:
        n = resolve_workers(workers)
        super().__init__(ThreadPoolExecutor(max_workers=n, thread_name_prefix="benchmint-unit"), n)


class ProcessExecutor(_PoolExecutor):
    """Worker processes (which exit if the run is killed): for Python-bound work on many files."""

    def __init__(self, workers: int = -1) -> None:
        n = resolve_workers(workers)
        super().__init__(process_pool(n), n)


def executor_for(kind: str, workers: int) -> Executor:
    """``kind`` is "process", "thread" or "serial"; ``workers`` follows the project's rule (-1: all cores)."""
    resolve_workers(workers)
    if kind == "process":
        return ProcessExecutor(workers)
    if kind == "thread":
        return ThreadExecutor(workers)
    if kind == "serial":
        return SerialExecutor()
    raise ValueError(f"executor must be 'process', 'thread' or 'serial', not {kind!r}")
