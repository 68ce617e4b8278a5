"""Where units run: in the calling thread, on threads, or in worker processes.

An executor takes a function and a list of argument tuples and yields
(index, result) pairs as they finish, in any order; an exception raised by the
function comes back as the result (the runner decides what it means). The
runner alone touches the ledger, so an executor never sees it: a distributed
executor (Ray) implements the same two methods.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from multiprocessing import connection as mp_connection
from multiprocessing.context import DefaultContext, SpawnContext
from typing import Any, Protocol

from benchmint.parallel import die_with_parent, resolve_workers, watch_parent, worker_context


class WorkerDied(RuntimeError):
    """The worker process running a unit died (a crash inside a C library, the OOM killer)."""

    def __init__(self, index: int, exitcode: int | None = None) -> None:
        how = f" (exit code {exitcode})" if exitcode is not None else ""
        super().__init__(f"the worker process died while running this unit{how}")
        self.index, self.exitcode = index, exitcode


class UnitTimeout(RuntimeError):
    """A unit ran past a time limit: ``limit`` is "unit" (the whole unit) or "stage" (one stage of it).

    ``stage`` is the label the unit last reported through ``stage()`` (None: none yet).
    """

    def __init__(self, limit: str, seconds: float, stage: str | None) -> None:
        what = f"{stage!r}" if stage else "the unit"
        super().__init__(f"{what} ran past the {limit} time limit of {seconds:g} s; its worker was stopped")
        self.limit, self.seconds, self.stage = limit, seconds, stage

    def as_dict(self) -> dict:
        return {"limit": self.limit, "seconds": self.seconds, "stage": self.stage}


class Executor(Protocol):
    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """Yield ``(i, fn(*args[i]))`` as calls finish; an exception is yielded as the value.

        ``args`` is read by index as calls are started, so units the caller appends to it while
        iterating (the runner's follow-up units) are run too.
        """
        ...

    def close(self) -> None: ...


class SerialExecutor:
    """One unit after another in the calling thread: for tests, debugging and tiny runs."""

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
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

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
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
                except Exception as exc:
                    yield i, exc

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class ThreadExecutor(_PoolExecutor):
    """Threads: for work that waits (model calls) or releases the GIL (compiled kernels)."""

    def __init__(self, workers: int = -1) -> None:
        n = resolve_workers(workers)
        super().__init__(ThreadPoolExecutor(max_workers=n, thread_name_prefix="benchmint-unit"), n)


class ProcessExecutor:
    """Worker processes, each running one unit at a time: for Python-bound work on many files.

    Units go out in chunks of up to ``chunk_units`` (one message a chunk, results still sent back one a unit as
    each ends): a unit costing the driver a pickle and a pipe write of its own cost more than its share of the
    driver's time at many workers. A chunk shrinks as the units left run short (the last ones go one at a time,
    so no worker idles while another works through a chunk) and, with ``costs`` given to ``map_unordered``
    (the runner's ``Unit.cost``), holds at most ``1 / (CHUNK_COST_SHARE × workers)`` of the total cost, so a
    long unit goes alone.

    ``unit_seconds`` bounds a unit's whole run and ``stage_seconds`` the time
    between two ``stage()`` reports of a unit (say, one page of a document),
    unless the stage reported a limit of its own (``stage(label, seconds)``); both
    start when the worker, its ``preload`` imported, takes the unit. A
    unit past either limit has its worker killed (MuPDF or a CIF parser stuck in
    C code cannot be interrupted any other way) and yields ``UnitTimeout``; a
    worker that dies yields ``WorkerDied``. Either way a fresh worker takes the
    next unit, so one bad input never stops the run. Workers exit when the
    calling process dies, even while stuck in C code holding the GIL.

    ``preload`` names modules each worker imports as it starts; with ``start()``
    called before the caller's own preparation (hashing inputs, opening the
    ledger), the workers' imports overlap it instead of delaying the first units.
    With ``share_preload`` and several workers, the calling process imports them
    once before the first fork instead, and the workers share them: worth it
    for heavy imports on cores that other work (a helper process) keeps busy.
    Workers spawned rather than forked (``parallel.worker_context``) import it each.
    A module that fails to import is left to the unit that needs it.
    """

    # The workers run on this machine: a file they write is one the caller reads (``run_files``' result files).
    shares_files = True
    # A chunk holds at most this many units, and so many chunks' worth stay for each worker (below which chunks
    # shrink), and a chunk's cost at most 1 / (CHUNK_COST_SHARE × workers) of the run's.
    CHUNK_UNITS = 8
    CHUNKS_LEFT = 4
    CHUNK_COST_SHARE = 64
    # How late a stage's time limit may be noticed at most (the driver reads the stage reports this often).
    STAGE_POLL_SECONDS = 0.1

    def __init__(self, workers: int = -1, *, unit_seconds: float | None = None,
                 stage_seconds: float | None = None, preload: Sequence[str] = (),
                 share_preload: bool = False, chunk_units: int | None = None) -> None:
        for name, value in (("unit_seconds", unit_seconds), ("stage_seconds", stage_seconds)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        self._n = resolve_workers(workers)
        self._unit_s, self._stage_s = unit_seconds, stage_seconds
        self._preload = tuple(preload)
        self._share_preload = share_preload and self._n > 1
        self._chunk_units = self.CHUNK_UNITS if chunk_units is None else chunk_units
        if self._chunk_units < 1:
            raise ValueError(f"chunk_units must be 1 or more, got {chunk_units!r}")
        self._workers: list[_Worker] = []

    def start(self) -> None:
        """Start every worker now rather than as the first units are given out."""
        while len(self._workers) < self._n:
            self._start()

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple],
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
        """As ``Executor.map_unordered``; ``costs[i]``: the work expected of ``args[i]`` (read as ``args`` is, so
        a caller appending to one appends to both), which bounds the chunks."""
        # Workers persist across calls. One still holding a unit belongs to a call whose caller stopped
        # reading; its late result would be taken for this call's, so it is replaced.
        for stale in [w for w in self._workers if w.index >= 0]:
            self._replace(stale)
        idle = list(self._workers)
        busy: dict[Any, _Worker] = {}  # connection -> worker
        chunks = _Chunks(args, costs, self._n, self._chunk_units, self.CHUNKS_LEFT, self.CHUNK_COST_SHARE)
        while chunks.left() or busy:
            while chunks.left() and (idle or len(self._workers) < self._n):
                w = idle.pop() if idle else self._start()
                w.give(fn, chunks.take(), args)
                busy[w.conn] = w
            for conn in mp_connection.wait(list(busy), timeout=self._wait_seconds(busy.values())):
                w = busy[conn]
                got = w.receive()
                if got is None:  # the worker's word that it is ready
                    continue
                if isinstance(got[1], WorkerDied):
                    del busy[conn]
                    chunks.hand_back(w.unstarted())
                    self._replace(w)
                elif w.index >= 0:  # the rest of its chunk runs on
                    pass
                elif chunks.left():  # the next chunk goes out before the caller records this result
                    w.give(fn, chunks.take(), args)
                else:
                    del busy[conn]
                    idle.append(w)
                yield got
            for w in [w for w in busy.values() if w.overdue(self._unit_s, self._stage_s)]:
                del busy[w.conn]
                timeout = w.overdue(self._unit_s, self._stage_s)
                index = w.index
                chunks.hand_back(w.unstarted())
                self._replace(w)
                yield index, timeout

    def _wait_seconds(self, busy) -> float | None:
        # A running unit's stage reports are read, not received (``_StageSlot``): one may bring a limit nearer than
        # any known now, so the driver looks again at least every STAGE_POLL_SECONDS while a unit runs.
        busy = list(busy)
        deadlines = [d for w in busy for d in w.deadlines(self._unit_s, self._stage_s)]
        if any(w.started is not None for w in busy):
            deadlines.append(time.monotonic() + self.STAGE_POLL_SECONDS)
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _start(self) -> _Worker:
        ctx = worker_context()
        if self._share_preload and ctx.get_start_method() == "fork":
            _import_all(self._preload)  # once: a module imported is not imported again
            w = _Worker(ctx, ())
        else:
            w = _Worker(ctx, self._preload)
        self._workers.append(w)
        return w

    def _replace(self, w: _Worker) -> None:
        w.kill()
        self._workers.remove(w)

    def close(self) -> None:
        for w in self._workers:
            if w.index >= 0:  # a unit nobody will wait for (the run was interrupted)
                w.proc.kill()
            w.stop()
        for w in self._workers:
            w.join()
        self._workers.clear()


class _Chunks:
    """The indexes of ``args`` handed out in chunks, in order (``ProcessExecutor``); units handed back (their
    chunk's worker died or was stopped before it reached them) go out first, one at a time: a unit that kills
    its worker then fails alone, so each unit runs at most twice in a call."""

    def __init__(self, args: Sequence[tuple], costs: Sequence[float] | None, workers: int, most: int,
                 chunks_left: int, cost_share: int) -> None:
        self.args, self.costs, self.workers, self.most, self.chunks_left = args, costs, workers, most, chunks_left
        self.cost_share = cost_share
        self.next = 0
        self.back: list[int] = []
        self.total = float(sum(costs)) if costs is not None else 0.0
        self.counted = len(args)  # costs summed up to here (a caller may append units)

    def left(self) -> bool:
        return bool(self.back) or self.next < len(self.args)

    def hand_back(self, indexes: Sequence[int]) -> None:
        self.back.extend(indexes)

    def take(self) -> list[int]:
        if self.back:
            return [self.back.pop(0)]
        remaining = len(self.args) - self.next
        most = min(self.most, max(1, remaining // (self.chunks_left * self.workers)))
        costs = self.costs
        if costs is not None and self.counted < len(costs):
            self.total += float(sum(costs[self.counted:len(self.args)]))
            self.counted = len(self.args)
        cap = self.total / (self.cost_share * self.workers) if costs is not None else 0.0
        chunk = [self.next]
        spent = costs[self.next] if costs is not None else 0.0
        self.next += 1
        while len(chunk) < most and self.next < len(self.args):
            if costs is not None:
                if spent + costs[self.next] > cap:
                    break
                spent += costs[self.next]
            chunk.append(self.next)
            self.next += 1
        return chunk


class _Reports(Protocol):
    def send(self, msg: tuple) -> None: ...


# Where ``stage()`` reports while a unit runs in a worker (its ``_StageSlot``; a Ray task's queue), None elsewhere.
_REPORT_TO: _Reports | None = None


def stage(label: str, seconds: float | None = None) -> None:
    """Report that the running unit enters a stage (its stage time limit restarts); a no-op outside a worker.

    ``seconds`` is this stage's own limit in place of the executor's ``stage_seconds`` (opening a whole
    document is not one page's work).
    """
    if seconds is not None and not seconds > 0:
        raise ValueError(f"a stage's time limit must be a positive number of seconds, got {seconds!r}")
    if _REPORT_TO is not None:
        _REPORT_TO.send(("stage", str(label), seconds))


def _worker_main(conn, slot: _StageSlot, parent: int, preload: tuple[str, ...]) -> None:
    global _REPORT_TO
    _die_with(parent)
    _import_all(preload)
    conn.send(("ready",))  # a unit's time limits start now: the imports are no unit's work
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        fn, chunk, ticket = task
        for k, (i, args) in enumerate(chunk):  # each result goes back as its unit ends: the driver's clock moves on
            _REPORT_TO = _SlotReports(slot, ticket + k)
            try:
                reply = ("done", i, fn(*args))
            except Exception as exc:  # the unit's failure, reported as its result
                reply = ("done", i, exc)
            finally:
                _REPORT_TO = None
            try:
                conn.send(reply)
            except Exception as exc:  # the result or exception does not pickle: say so instead
                conn.send(("done", i, RuntimeError(f"the unit's result cannot be sent back: "
                                                   f"{type(exc).__name__}: {exc}")))


def _import_all(names: Sequence[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the unit that needs the module imports it again and reports why not
            pass


def _die_with(parent: int) -> None:
    # The parent-death signal reaches a worker stuck in C code holding the GIL, where the watching thread
    # (parallel.watch_parent) cannot run. Linux sends it when the forking *thread* ends; these workers are
    # started and stopped by one call of map_unordered/close in one thread, so that thread outlives them.
    die_with_parent()
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    watch_parent()


_LABEL_BYTES = 240  # a stage's label is cut to this many bytes of UTF-8 in its slot


class _Stage(ctypes.Structure):
    _fields_ = [("seq", ctypes.c_uint64), ("unit", ctypes.c_int64), ("started", ctypes.c_double),
                ("limit", ctypes.c_double), ("length", ctypes.c_uint32), ("label", ctypes.c_char * _LABEL_BYTES)]


class _StageSlot:
    """A worker's running stage in memory it shares with the driver: ``stage()`` writes it there rather than
    sending a message, which cost the driver a wake-up and a read per report (a page's, several a unit), and the
    driver reads it when it checks the time limits. A sequence number odd while the worker writes, read again
    after the fields, keeps a read from mixing two reports. The times are ``time.monotonic()``'s, one clock for
    every process of the machine."""

    def __init__(self, ctx: DefaultContext | SpawnContext) -> None:
        self.shared = ctx.RawValue(_Stage)
        self.shared.unit = -1

    def write(self, ticket: int, label: str, seconds: float | None) -> None:
        s = self.shared
        data = label.encode("utf-8", "replace")[:_LABEL_BYTES]
        s.seq += 1
        s.unit, s.started, s.limit, s.length = ticket, time.monotonic(), seconds or 0.0, len(data)
        ctypes.memmove(ctypes.addressof(s) + _Stage.label.offset, data, len(data))
        s.seq += 1

    def read(self) -> tuple[int, int, str, float | None, float] | None:
        """(sequence number, unit's ticket, label, its own limit, started), or None while a write is under way."""
        s = self.shared
        for _ in range(64):
            seq = s.seq
            if seq % 2:
                continue
            got = (seq, s.unit, s.label[:s.length].decode("utf-8", "replace"), s.limit or None, s.started)
            if s.seq == seq:
                return got
        return None


class _SlotReports:
    """``run.stage()``'s connection in a local worker while it runs the unit its driver numbered ``ticket``."""

    def __init__(self, slot: _StageSlot, ticket: int) -> None:
        self.slot, self.ticket = slot, ticket

    def send(self, msg: tuple) -> None:
        self.slot.write(self.ticket, msg[1], msg[2])


class UnitClock:
    """When a running unit and its current stage started, and which of their time limits has passed: one rule
    for the local workers and the Ray executor's tasks. ``started`` is None while no worker has the unit."""

    __slots__ = ()
    started: float | None
    stage: str | None
    stage_limit: float | None  # the running stage's own limit, if it has one
    stage_started: float

    def deadlines(self, unit_s: float | None, stage_s: float | None) -> list[float]:
        if self.started is None:
            return []
        stage_s = self.stage_limit or stage_s
        return ([self.started + unit_s] if unit_s else []) + ([self.stage_started + stage_s] if stage_s else [])

    def overdue(self, unit_s: float | None, stage_s: float | None) -> UnitTimeout | None:
        if self.started is None:
            return None
        now = time.monotonic()
        stage_s = self.stage_limit or stage_s
        if unit_s and now >= self.started + unit_s:
            return UnitTimeout("unit", unit_s, self.stage)
        if stage_s and now >= self.stage_started + stage_s:
            return UnitTimeout("stage", stage_s, self.stage)
        return None


class _Worker(UnitClock):
    def __init__(self, ctx: DefaultContext | SpawnContext, preload: tuple[str, ...] = ()) -> None:
        self.conn, child = ctx.Pipe()
        self.slot = _StageSlot(ctx)
        self.seen = 0  # the slot's sequence number last read
        self.ticket = -1  # the running unit's number among those this worker was given (its stage reports carry it)
        self.proc = ctx.Process(target=_worker_main, args=(child, self.slot, os.getpid(), preload), daemon=True,
                                name="benchmint-unit-worker")
        self.proc.start()
        child.close()
        self.index = -1  # the unit it runs (the first of its chunk not yet reported), -1 for none
        self.queue: list[int] = []  # the rest of its chunk, in the order it runs them
        self.ready = False  # the preload imported (the worker said so)
        self.started = None
        self.stage_started = 0.0
        self.stage = None
        self.stage_limit = None

    def give(self, fn, chunk: list[int], args: Sequence[tuple]) -> None:
        self.index, self.queue = chunk[0], chunk[1:]
        self.ticket += 1
        self._next_clock()
        self.conn.send((fn, [(i, args[i]) for i in chunk], self.ticket))

    def _next_clock(self) -> None:
        self.stage, self.stage_limit = None, None
        self._start_clock()

    def unstarted(self) -> list[int]:
        """The units of its chunk it has not reached (its current one excluded)."""
        rest, self.queue = self.queue, []
        return rest

    def deadlines(self, unit_s: float | None, stage_s: float | None) -> list[float]:
        self._read_stage()
        return super().deadlines(unit_s, stage_s)

    def overdue(self, unit_s: float | None, stage_s: float | None) -> UnitTimeout | None:
        self._read_stage()
        return super().overdue(unit_s, stage_s)

    def _read_stage(self) -> None:
        """Take the running unit's newest stage report from the slot (one of an earlier unit is not its)."""
        got = self.slot.read()
        if got is None or got[0] == self.seen:
            return
        seq, ticket, label, limit, started = got
        if ticket == self.ticket and self.started is not None:
            self.seen = seq
            self.stage, self.stage_limit, self.stage_started = label, limit, started

    def _start_clock(self) -> None:
        # A worker still importing its preload has not started the unit: its clock starts once it is ready.
        self.started = time.monotonic() if self.ready else None
        self.stage_started = self.started or 0.0

    def receive(self) -> tuple[int, Any] | None:
        """(index, result) when the unit ended, None for the worker's word that it is ready."""
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(1)
            return self.index, WorkerDied(self.index, self.proc.exitcode)
        if msg[0] == "ready":
            self.ready = True
            if self.index >= 0:
                self._start_clock()
            return None
        if self.queue:  # the worker went on to the next unit of its chunk as it sent this
            self.index = self.queue.pop(0)
            self.ticket += 1
            self._next_clock()
        else:
            self.index, self.started = -1, None
        return msg[1], msg[2]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass

    def join(self) -> None:
        self.proc.join(5)
        if self.proc.is_alive():  # still inside a unit nobody waits for
            self.proc.kill()
            self.proc.join()
        self.conn.close()


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
