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
import pickle
import struct
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
    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple],
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
        """Yield ``(i, fn(*args[i]))`` as calls finish; an exception is yielded as the value.

        ``args`` is read by index as calls are started, so units the caller appends to it while
        iterating (the runner's follow-up units) are run too. ``costs[i]``, when given, is the work expected
        of ``args[i]`` (grown with ``args``): an executor may use it to group units, or ignore it.
        """
        ...

    def close(self) -> None: ...


class SerialExecutor:
    """One unit after another in the calling thread: for tests, debugging and tiny runs."""

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple],
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
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

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple],
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
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

    Units go out in chunks of up to ``chunk_units`` (one message a chunk) and come back the same way: a worker
    writes each result into memory it shares with the driver (``_ResultRing``; one too big for it goes by the
    pipe at once) and wakes the driver once, when its chunk ends; the driver also reads that memory at least
    every ``POLL_SECONDS`` while a worker holds units, so a result made early in a long chunk is not held back.
    A unit costing the driver a message, a wake-up and an unpickling of its own, both ways, cost more than its
    share of the driver's time at many workers. A chunk shrinks as the units left run short (the last ones go
    one at a time, so no worker idles while another works through a chunk) and, with ``costs`` given to
    ``map_unordered`` (the runner's ``Unit.cost``), holds at most ``1 / (CHUNK_COST_SHARE × workers)`` of the
    total cost, so a long unit goes alone.

    ``unit_seconds`` bounds a unit's whole run and ``stage_seconds`` the time
    between two ``stage()`` reports of a unit (say, one page of a document),
    unless the stage reported a limit of its own (``stage(label, seconds)``); both
    start when the worker, its ``preload`` imported, marks the unit started in its ``_StageSlot``. A
    unit past either limit has its worker killed (MuPDF or a CIF parser stuck in
    C code cannot be interrupted any other way) and yields ``UnitTimeout``; a
    worker that dies yields ``WorkerDied`` for the unit it was running. Either way the results it had finished
    are read from its shared memory, the units of its chunk it had not started go out again, and a fresh
    worker takes the next unit, so one bad input never stops the run and costs no other unit's work. Workers
    exit when the calling process dies, even while stuck in C code holding the GIL.

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
    # How late a stage's time limit, or a finished unit's result, may be noticed at most: the driver reads the
    # workers' shared memory this often while they hold units (and whenever one's chunk ends).
    POLL_SECONDS = 0.1

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
        # Workers persist across calls. One still holding units belongs to a call whose caller stopped reading;
        # its late results would be taken for this call's, so it is replaced.
        for stale in [w for w in self._workers if w.pending]:
            self._replace(stale)
        idle = list(self._workers)
        busy: dict[Any, _Worker] = {}  # connection -> worker
        chunks = _Chunks(args, costs, self._n, self._chunk_units, self.CHUNKS_LEFT, self.CHUNK_COST_SHARE)
        while chunks.left() or busy:
            while chunks.left() and (idle or len(self._workers) < self._n):
                w = idle.pop() if idle else self._start()
                w.give(fn, chunks.take(), args)
                busy[w.conn] = w
            ready = mp_connection.wait(list(busy), timeout=self._wait_seconds(busy.values()))
            # Everything below is decided on one fresh look at each worker; the results go to the caller after.
            out: list[tuple[int, Any]] = []
            dead = []
            for conn in ready:
                got, alive = busy[conn].receive()
                out.extend(got)
                if not alive:
                    dead.append(busy[conn])
            for w in busy.values():
                if w not in dead:  # a finished unit's result waits in shared memory at most POLL_SECONDS
                    out.extend(w.look())
            for w in dead:
                del busy[w.conn]
                w.proc.join(1)  # its exit code, for the report
                out.extend(self._end(w, chunks))
            for w, timeout in [(w, w.overdue(self._unit_s, self._stage_s)) for w in busy.values()]:
                if timeout is not None:
                    del busy[w.conn]
                    out.extend(self._end(w, chunks, timeout))
            for w in list(busy.values()):
                if w.pending:  # the rest of its chunk runs on
                    continue
                if chunks.left():  # the next chunk goes out before the caller records these results
                    w.give(fn, chunks.take(), args)
                else:
                    del busy[w.conn]
                    idle.append(w)
            yield from out

    def _end(self, w: _Worker, chunks: _Chunks, timeout: UnitTimeout | None = None) -> list[tuple[int, Any]]:
        """Stop a worker that died (``timeout`` None) or ran past a limit: the results it had finished, then
        ``WorkerDied`` or ``timeout`` for the unit at fault; the units it had not started are handed back."""
        late = w.index  # the unit found past its limit
        w.kill()
        results, running, rest = w.lost()
        if timeout is None:
            if running is not None:
                results.append((running, WorkerDied(running, w.proc.exitcode)))
        else:
            # If the late unit finished before its worker was stopped, the unit started after it was stopped
            # through no fault of its own and goes out again.
            rest += [running] if running is not None else []
            if late in rest:
                rest.remove(late)
                results.append((late, timeout))
        chunks.hand_back(rest)
        self._workers.remove(w)
        return results

    def _wait_seconds(self, busy) -> float | None:
        # A running unit's stage reports and finished results are read from shared memory, not received: a
        # report may bring a limit nearer than any known now, and a result is due to the caller (its commit,
        # its progress), so the driver looks again at least every POLL_SECONDS while a worker holds units.
        busy = list(busy)
        deadlines = [d for w in busy for d in w.deadlines(self._unit_s, self._stage_s)]
        if busy:
            deadlines.append(time.monotonic() + self.POLL_SECONDS)
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
            if w.pending:  # a unit nobody will wait for (the run was interrupted)
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


def _worker_main(conn, slot: _StageSlot, ring: _ResultRing, parent: int, preload: tuple[str, ...]) -> None:
    global _REPORT_TO
    _die_with(parent)
    _import_all(preload)  # before any unit is marked started: the imports are no unit's work
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        fn, chunk, ticket = task
        for k, (i, args) in enumerate(chunk):
            slot.begin(ticket + k)  # the driver's clock for this unit starts here
            _REPORT_TO = _SlotReports(slot, ticket + k)
            try:
                result = fn(*args)
            except Exception as exc:  # the unit's failure, reported as its result
                result = exc
            finally:
                _REPORT_TO = None
            try:
                data = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # the result or exception does not pickle: say so instead
                why = f"{type(exc).__name__}: {exc}"
                data = pickle.dumps(RuntimeError(f"the unit's result cannot be sent back: {why}"))
            # Into the shared ring, where the driver finds it even if this worker dies before the chunk ends;
            # what does not fit goes by the pipe now. The driver is woken once, as the chunk ends.
            if not ring.put(i, data):
                conn.send_bytes(_INDEX.pack(i) + data)
            elif k == len(chunk) - 1:
                conn.send_bytes(b"")


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
    _fields_ = [("seq", ctypes.c_uint64), ("unit", ctypes.c_int64), ("unit_started", ctypes.c_double),
                ("started", ctypes.c_double), ("limit", ctypes.c_double), ("staged", ctypes.c_uint32),
                ("length", ctypes.c_uint32), ("label", ctypes.c_char * _LABEL_BYTES)]


class _StageSlot:
    """A worker's running unit and stage in memory it shares with the driver: the worker marks each unit's start
    (``begin``) and ``stage()`` writes each report there rather than sending a message, which cost the driver a
    wake-up and a read a unit or a report (a page's, several a unit); the driver reads it when it checks the
    time limits. A sequence number odd while the worker writes, read again after the fields, keeps a read from
    mixing two writes. The times are ``time.monotonic()``'s, one clock for every process of the machine."""

    def __init__(self, ctx: DefaultContext | SpawnContext) -> None:
        self.shared = ctx.RawValue(_Stage)
        self.shared.unit = -1

    def begin(self, ticket: int) -> None:
        """The unit numbered ``ticket`` starts now, with no stage reported yet."""
        s = self.shared
        s.seq += 1
        now = time.monotonic()
        s.unit, s.unit_started, s.started, s.limit, s.staged, s.length = ticket, now, now, 0.0, 0, 0
        s.seq += 1

    def write(self, ticket: int, label: str, seconds: float | None) -> None:
        s = self.shared
        data = label.encode("utf-8", "replace")[:_LABEL_BYTES]
        s.seq += 1
        s.unit, s.started, s.limit, s.staged, s.length = ticket, time.monotonic(), seconds or 0.0, 1, len(data)
        ctypes.memmove(ctypes.addressof(s) + _Stage.label.offset, data, len(data))
        s.seq += 1

    def read(self) -> tuple[int, int, float, str | None, float | None, float] | None:
        """(sequence number, running unit's ticket, its start, its stage's label (None: none yet), the stage's
        own limit, the stage's start), or None while a write is under way."""
        s = self.shared
        for _ in range(64):
            seq = s.seq
            if seq % 2:
                continue
            label = s.label[:s.length].decode("utf-8", "replace") if s.staged else None
            got = (seq, s.unit, s.unit_started, label, s.limit or None, s.started)
            if s.seq == seq:
                return got
        return None


class _SlotReports:
    """``run.stage()``'s connection in a local worker while it runs the unit its driver numbered ``ticket``."""

    def __init__(self, slot: _StageSlot, ticket: int) -> None:
        self.slot, self.ticket = slot, ticket

    def send(self, msg: tuple) -> None:
        self.slot.write(self.ticket, msg[1], msg[2])


_INDEX = struct.Struct("<q")  # a result's unit index, before its pickle (in the ring and on the pipe)
_RECORD = struct.Struct("<Iq")  # a result's record in the ring: the pickle's length, the unit's index
_LENGTH = struct.Struct("<I")
_WRAP = 0xFFFFFFFF  # a record length meaning "the rest of the ring is unused: go on at its start"


class _Ends(ctypes.Structure):
    _fields_ = [("head", ctypes.c_uint64), ("tail", ctypes.c_uint64)]


class _ResultRing:
    """A worker's finished results in memory it shares with the driver: a ring written by the worker alone
    (``head``: bytes written, moved past a record once it is whole) and read by the driver alone (``tail``:
    bytes taken). A result stays readable after its worker dies, so a worker killed in the middle of a chunk
    loses only the unit it was running, and the results of a chunk cost the driver one wake-up, not one each."""

    SIZE = 1 << 20

    def __init__(self, ctx: DefaultContext | SpawnContext) -> None:
        self.ends = ctx.RawValue(_Ends)
        self.data = ctx.RawArray(ctypes.c_ubyte, self.SIZE)

    def put(self, index: int, data: bytes) -> bool:
        """Append one result; False (nothing written) when it does not fit in the space the driver left."""
        size, ends, need = self.SIZE, self.ends, _RECORD.size + len(data)
        head = ends.head
        at = head % size
        skip = size - at if size - at < need else 0  # a record is never split across the ring's end
        if size - (head - ends.tail) < skip + need:
            return False
        base = ctypes.addressof(self.data)
        if skip:
            if skip >= 4:
                ctypes.memmove(base + at, _LENGTH.pack(_WRAP), 4)
            at = 0
        ctypes.memmove(base + at, _RECORD.pack(len(data), index), _RECORD.size)
        ctypes.memmove(base + at + _RECORD.size, data, len(data))
        ends.head = head + skip + need  # last: the driver reads only whole records
        return True

    def drain(self) -> list[tuple[int, Any]]:
        """Every result written since the last drain, as (index, result)."""
        size, ends, view = self.SIZE, self.ends, memoryview(self.data)
        head, tail = ends.head, ends.tail
        out = []
        while tail < head:
            at = tail % size
            if size - at < 4 or _LENGTH.unpack_from(view, at)[0] == _WRAP:
                tail += size - at
                continue
            length, index = _RECORD.unpack_from(view, at)
            out.append((index, _load(view[at + _RECORD.size:at + _RECORD.size + length])))
            tail += _RECORD.size + length
        ends.tail = tail
        return out


def _load(data: bytes | memoryview) -> Any:
    try:
        return pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - a result that does not unpickle here is that unit's failure
        return RuntimeError(f"the unit's result cannot be read back: {type(exc).__name__}: {exc}")


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
        self.ring = _ResultRing(ctx)
        self.proc = ctx.Process(target=_worker_main, args=(child, self.slot, self.ring, os.getpid(), preload),
                                daemon=True, name="benchmint-unit-worker")
        self.proc.start()
        child.close()
        self.chunk: list[int] = []  # the units it was last given, in the order it runs them
        self.first = 0  # the ticket of the chunk's first unit; the k-th unit's is first + k
        self.tickets = 0  # tickets given out so far: a slot's ticket names one unit of one chunk
        self.pending: set[int] = set()  # units of its chunk whose results have not come back
        self.seen = -1  # the slot's sequence number at the last look
        self.index = -1  # the unit it runs, as last seen in its slot; -1 for none
        self.started = None
        self.stage_started = 0.0
        self.stage = None
        self.stage_limit = None

    def give(self, fn, chunk: list[int], args: Sequence[tuple]) -> None:
        self.chunk, self.first, self.pending = chunk, self.tickets, set(chunk)
        self.tickets += len(chunk)
        self.index, self.started = -1, None
        self.conn.send((fn, [(i, args[i]) for i in chunk], self.first))

    def look(self) -> list[tuple[int, Any]]:
        """The results finished since the last look; the running unit and its clocks taken from the slot."""
        ends = self.ring.ends
        if self.slot.shared.seq == self.seen and ends.head == ends.tail:
            return []  # nothing written since the last look: what it found holds
        # The slot first: a worker files a unit's result before it marks the next unit started, so a unit seen
        # in the slot whose result is not in the ring after it was still running when the slot was read.
        got = self.slot.read()
        results = self._take(self.ring.drain())
        self.index, self.started = -1, None
        self.seen = -1  # a slot read mid-write is read again next time
        if got is not None:
            self.seen, ticket, unit_started, label, limit, stage_started = got
            k = ticket - self.first
            if 0 <= k < len(self.chunk) and self.chunk[k] in self.pending:
                self.index, self.started = self.chunk[k], unit_started
                self.stage, self.stage_limit, self.stage_started = label, limit, stage_started
        return results

    def lost(self) -> tuple[list[tuple[int, Any]], int | None, list[int]]:
        """For a worker that has died or was stopped: (the results it finished, the unit it was running or None,
        the units of its chunk it had not started)."""
        got = self.slot.read()
        results = self._take(self.ring.drain())
        k = got[1] - self.first if got is not None else -1
        order = [i for i in self.chunk if i in self.pending]
        if 0 <= k < len(self.chunk):
            running = self.chunk[k] if self.chunk[k] in self.pending else None
        else:  # it died before it marked any unit of the chunk started: the first is blamed, as it may be at fault
            running = order[0] if order else None
        self.pending = set()
        self.index, self.started = -1, None
        return results, running, [i for i in order if i != running]

    def _take(self, results: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        for i, _ in results:
            self.pending.discard(i)
        return results

    def receive(self) -> tuple[list[tuple[int, Any]], bool]:
        """(the results sent by the pipe: those too big for the ring; none for its word that a chunk ended,
        whether the worker is still alive)."""
        out = []
        try:
            while True:
                msg = self.conn.recv_bytes()
                if msg:
                    out.append((_INDEX.unpack_from(msg)[0], _load(msg[_INDEX.size:])))
                    self.seen = -1  # the unit the slot shows may be this one: the next look reads it again
                if not self.conn.poll():
                    return self._take(out), True
        except (EOFError, OSError):
            return self._take(out), False

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
