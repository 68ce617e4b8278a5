"""Units on a Ray cluster: the runner's executor interface over Ray tasks (``--engine ray``).

The runner stays the driver: it hands units to ``RayExecutor.map_unordered``, records each result in the
ledger as it comes back, and writes the outputs in unit order, exactly as with the local executors; Ray only
runs the work function. So outputs do not depend on the engine, and a killed driver resumes from its ledger.

Each unit is one Ray task that streams its messages back as it goes (a Ray streaming generator): "start"
when a worker takes it, each ``run.stage()`` report, then its result. The driver keeps the deadlines, as
``ProcessExecutor`` does: a unit past its unit or stage time limit has its task cancelled with force (the
Ray worker process is killed: MuPDF stuck in C code cannot be stopped otherwise) and yields ``UnitTimeout``.
A unit whose worker died is run again up to ``retries`` times, then yields ``WorkerDied``. At most
``in_flight`` tasks are submitted at once, so a run of millions of units holds a window of them, not all.

Ray is imported only here and only when used: benchmint runs without it (``benchmint[ray]`` installs it).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from benchmint.run import executors
from benchmint.run.executors import UnitClock, WorkerDied

INSTALL_HINT = "Ray is not installed: pip install 'benchmint[ray]'"


class RayMissing(ImportError):
    """``--engine ray`` without Ray installed; the message says how to install it."""


def require_ray():
    """The ``ray`` module, or ``RayMissing`` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RayMissing(INSTALL_HINT) from exc
    return ray


# True inside ``ray_session(shared_out=True)``: the user says the run's output folder is the same folder, at the
# same path, on every node of the cluster (``cluster_shares_files``).
_SHARED_OUT = False


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None, temp_dir: str | None = None,
                runtime_env: dict | None = None, shared_out: bool = False) -> Iterator[Any]:
    """Ray, connected for the body of the ``with``; yields the ``ray`` module.

    ``address`` is "auto" (the cluster this machine belongs to), "ray://host:port" (Ray Client) or a cluster's
    address; None starts a local instance for this run alone: ``num_cpus`` (default: the machine's), no
    dashboard, its files under ``temp_dir`` (default: a fresh folder, removed afterwards). Ray on Linux gives
    its node the machine's address even when told 127.0.0.1, and its servers listen on every interface: run it
    where the network is trusted, or with Ray's token authentication on.
    Only what this call started or connected is shut down; inside an existing connection it is reused as is.
    ValueError when there is no cluster to connect to. ``shared_out``: every node sees the output folders at the
    paths the driver gives (``cluster_shares_files``).
    """
    global _SHARED_OUT
    ray = require_ray()
    before, _SHARED_OUT = _SHARED_OUT, _SHARED_OUT or shared_out
    try:
        with _connected(ray, address, num_cpus, temp_dir, runtime_env):
            yield ray
    finally:
        _SHARED_OUT = before


def cluster_shares_files(ray) -> bool:
    """Whether a file a Ray worker writes under the driver's output folder is one the driver can read: the user
    said so (``ray_session(shared_out=True)``, ``--ray-shared-out``), or every live node of the cluster is the
    driver's own (a local instance, or ``auto`` on a one-machine cluster). A Ray Client connection (ray://) is
    never taken as local: its driver runs elsewhere."""
    if _SHARED_OUT:
        return True
    try:
        from ray.util.client import ray as client

        if client.is_connected():
            return False
        here = ray.get_runtime_context().get_node_id()
        return all(n["NodeID"] == here for n in ray.nodes() if n.get("Alive"))
    except Exception:  # noqa: BLE001 - no answer from the cluster: results come back inline, which always works
        return False


@contextmanager
def _connected(ray, address: str | None, num_cpus: int | None, temp_dir: str | None,
               runtime_env: dict | None) -> Iterator[None]:
    if ray.is_initialized():  # the caller's own connection: neither ours to change nor to shut down
        yield
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reports to Ray's servers, no prompt about them
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False, "runtime_env": runtime_env}
    own_dir = None
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            if temp_dir is None:  # short: Ray's socket paths under it must stay within the system's limit
                temp_dir = own_dir = tempfile.mkdtemp(prefix="benchmint-ray-")
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                     _temp_dir=os.path.abspath(temp_dir), **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster there, or a wrong address
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise ValueError(f"cannot connect to {where}: {exc}") from exc
    try:
        yield
    finally:
        ray.shutdown()
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


# How long a unit's stage report waits for the task to pass it on before the unit goes on regardless.
_REPORT_WAIT_SECONDS = 5.0


class _Reporter:
    """``run.stage()``'s connection inside a Ray task: hands each report to the task's generator and waits until
    it was sent, so a report is out before the unit goes on (perhaps into C code holding the GIL)."""

    def __init__(self, q: queue.Queue) -> None:
        self.q = q

    def send(self, msg: tuple) -> None:
        sent = threading.Event()
        self.q.put((msg, sent))
        sent.wait(_REPORT_WAIT_SECONDS)


# Values the driver put once (``RayExecutor.put``), kept by each worker process for the units after the first.
_FETCHED: dict[str, Any] = {}
_FETCHED_KEEP = 2


def _fetched(ref) -> Any:
    import ray

    key = ref.hex()
    if key not in _FETCHED:
        while len(_FETCHED) >= _FETCHED_KEEP:
            _FETCHED.pop(next(iter(_FETCHED)))
        _FETCHED[key] = ray.get(ref)
    return _FETCHED[key]


def _unit_task(fn: Callable[..., Any], args: tuple, preload: tuple[str, ...]) -> Iterator[tuple]:
    """The body of one unit's Ray task: yields ("start", pid), ("stage", label, seconds)..., ("done", result)."""
    import ray

    # Imported once per Ray worker process (later units find them in sys.modules): ProcessExecutor's preload.
    executors._import_all(preload)
    yield ("start", os.getpid())
    args = tuple(_fetched(a) if isinstance(a, ray.ObjectRef) else a for a in args)
    q: queue.Queue = queue.Queue()

    def body() -> None:
        executors._REPORT_TO = _Reporter(q)
        try:
            result = fn(*args)
        except Exception as exc:  # the unit's failure, reported as its result
            result = exc
        finally:
            executors._REPORT_TO = None
        q.put((("done", result), None))

    # The unit runs on a thread of its own; this generator passes its reports on as they come.
    threading.Thread(target=body, name="benchmint-ray-unit", daemon=True).start()
    while True:
        msg, sent = q.get()
        yield msg
        if sent is None:
            return
        sent.set()


def _warm(preload: tuple[str, ...]) -> int:
    executors._import_all(preload)
    return os.getpid()


class _Task(UnitClock):
    __slots__ = ("index", "attempts", "started", "stage", "stage_limit", "stage_started")

    def __init__(self, index: int, attempts: int = 0) -> None:
        self.index, self.attempts = index, attempts
        self.started = None  # when a worker took it (queued tasks have no deadline yet)
        self.stage = None
        self.stage_limit = None
        self.stage_started = 0.0


class RayExecutor:
    """Each unit a Ray task on the connected cluster (``ray_session``), one CPU each.

    ``unit_seconds``, ``stage_seconds`` and ``preload`` mean what they mean to ``ProcessExecutor``; the
    preload modules (and the compiled module) are imported by each Ray worker process once (``start()`` has
    the idle workers import them while the driver prepares). ``retries``: how often a unit whose worker died
    is run again before it is reported as ``WorkerDied``. ``in_flight``: tasks submitted at once (default:
    twice the cluster's CPUs).
    """

    def __init__(self, *, unit_seconds: float | None = None, stage_seconds: float | None = None,
                 preload: Sequence[str] = (), retries: int = 2, in_flight: int | None = None) -> None:
        for name, value in (("unit_seconds", unit_seconds), ("stage_seconds", stage_seconds)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries!r}")
        if in_flight is not None and in_flight < 1:
            raise ValueError(f"in_flight must be 1 or more, got {in_flight!r}")
        self._ray = require_ray()
        if not self._ray.is_initialized():
            raise RuntimeError("RayExecutor needs a Ray connection: run it inside ray_session()")
        self._unit_s, self._stage_s = unit_seconds, stage_seconds
        # The compiled module first: every flow's units use it, and a Ray worker process serves many units.
        self._preload = tuple(dict.fromkeys(("benchmint._core", *preload)))
        self._retries = retries
        cpus = int(self._ray.cluster_resources().get("CPU", 1)) or 1
        self._window = in_flight or 2 * cpus
        # Ray retries nothing itself: a retry here is counted, and a cancelled (timed-out) unit stays cancelled.
        self._remote = self._ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")(_unit_task)
        # Workers may append results to files under the output folder (run_files) only where the driver reads them.
        self.shares_files = cluster_shares_files(self._ray)
        self._live: dict[Any, _Task] = {}  # generator -> its unit, for close()
        self._warmers: list = []

    def put(self, value: Any) -> Any:
        """``value`` stored once in the cluster; given among a unit's arguments, the unit receives ``value`` (each
        worker process fetches it once): for what every unit reads, like the gold answers of a scoring run."""
        return self._ray.put(value)

    def start(self) -> None:
        """Have the cluster's workers import the preload modules now (the driver does not wait for them)."""
        if self._preload and not self._warmers:
            warm = self._ray.remote(num_cpus=1, max_retries=0)(_warm)
            self._warmers = [warm.remote(self._preload) for _ in range(self._window // 2)]

    def map_unordered(self, fn: Callable[..., Any], args: Sequence[tuple],
                      costs: Sequence[float] | None = None) -> Iterator[tuple[int, Any]]:
        ray = self._ray
        fn_ref = ray.put(fn)  # once per call, not once per unit
        self._cancel_live()  # units of an earlier call whose caller stopped reading
        pending = self._live
        next_i = 0
        while next_i < len(args) or pending:
            while next_i < len(args) and len(pending) < self._window:
                pending[self._remote.remote(fn_ref, args[next_i], self._preload)] = _Task(next_i)
                next_i += 1
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=self._wait_seconds())
            for gen in ready:
                task = pending[gen]
                try:
                    msg = ray.get(next(gen))
                except StopIteration:  # ended without a result: taken as a crash
                    msg = None
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.ObjectLostError, ray.exceptions.TaskUnschedulableError) as exc:
                    msg = exc
                except ray.exceptions.RayError as exc:  # the result or its exception did not travel back
                    del pending[gen]
                    yield task.index, RuntimeError(f"the unit's result cannot be sent back: {_cause(exc)}")
                    continue
                if msg is None or isinstance(msg, BaseException):
                    del pending[gen]
                    if task.attempts < self._retries:
                        pending[self._remote.remote(fn_ref, args[task.index], self._preload)] = _Task(
                            task.index, task.attempts + 1)
                    else:
                        yield task.index, WorkerDied(task.index)
                elif msg[0] == "start":
                    task.started = task.stage_started = time.monotonic()
                elif msg[0] == "stage":
                    task.stage, task.stage_limit, task.stage_started = msg[1], msg[2], time.monotonic()
                else:
                    del pending[gen]
                    yield task.index, msg[1]
            for gen in [g for g, t in pending.items() if t.overdue(self._unit_s, self._stage_s)]:
                task = pending.pop(gen)
                timeout = task.overdue(self._unit_s, self._stage_s)
                ray.cancel(gen, force=True)
                yield task.index, timeout

    def _wait_seconds(self) -> float | None:
        deadlines = [d for t in self._live.values() for d in t.deadlines(self._unit_s, self._stage_s)]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _cancel_live(self) -> None:
        for gen in self._live:
            try:
                self._ray.cancel(gen, force=True)
            except Exception:  # noqa: BLE001 - a task that ended meanwhile
                pass
        self._live.clear()

    def close(self) -> None:
        if self._ray.is_initialized():
            self._cancel_live()
        # The warm-up tasks are left to finish, never cancelled: Ray cancels a running task by raising
        # KeyboardInterrupt in it, and one raised inside ``import pymupdf`` leaves that worker process unable
        # to import PyMuPDF again ("partially initialized module 'pymupdf' has no attribute 'layout'"), so
        # every later unit it ran failed.
        self._warmers = []


def _held_to_one_cpu(fn: Callable[[Any, Any], Any], shared: Any, item: Any) -> Any:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # the native thread pools loaded so far (BLAS) at the task's one CPU
        return fn(shared, item)


class RayMap:
    """``map(fn, shared, items)``: ``[fn(shared, item) for item in items]`` as Ray tasks of one CPU each on the
    connected cluster, results in input order; ``shared`` is put in the object store once for all of them (a
    NumPy array reaches the tasks of one node without a copy). For the pure parallel parts of a step the driver
    runs, like the KMeans selection's restarts and silhouette units (``xrd.cluster``); a task whose worker died
    is run again by Ray (it has no side effects). ``workers``: the cluster's CPUs. ``tasks_per_worker``: how
    many tasks a caller grouping its work should make a CPU (a task costs about a millisecond of the driver's
    and the scheduler's time, so a task is a group of units, not one)."""

    tasks_per_worker = 4

    def __init__(self, retries: int = 2) -> None:
        self._ray = require_ray()
        if not self._ray.is_initialized():
            raise RuntimeError("RayMap needs a Ray connection: run it inside ray_session()")
        self.workers = int(self._ray.cluster_resources().get("CPU", 1)) or 1
        self._remote = self._ray.remote(num_cpus=1, max_retries=retries)(_held_to_one_cpu)
        self.tasks = 0  # submitted so far

    def map(self, fn: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any]) -> list:
        ref = self._ray.put(shared)
        refs = [self._remote.remote(fn, ref, item) for item in items]
        self.tasks += len(refs)
        return self._ray.get(refs)


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    return f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(exc).__name__}: {exc}"
