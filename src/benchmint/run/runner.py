"""The one runner: keyed units, the ledger deciding what is left, results read back in unit order."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchmint.io import InputError
from benchmint.parallel import resolve_workers, thread_map
from benchmint.run.archives import Listings, Member, is_archive, list_members
from benchmint.run.executors import Executor, ProcessExecutor, UnitTimeout, WorkerDied
from benchmint.run.ledger import Encoded, Filed, Ledger, encode_result, file_result, settings_text

if TYPE_CHECKING:
    from benchmint.run.ray_engine import RayExecutor

LEDGER_NAME = "ledger.sqlite"
ENGINES = ("local", "ray")


def executor_for_files(engine: str, workers: int, *, unit_seconds: float | None = None,
                       stage_seconds: float | None = None, preload: Sequence[str] = (),
                       share_preload: bool = False) -> ProcessExecutor | RayExecutor:
    """The executor of a run over files: worker processes here ("local"), or tasks on the Ray cluster this
    process is connected to ("ray", inside ``ray_engine.ray_session``; ``workers`` and ``share_preload`` are
    the local engine's). Both take the time limits and the preload, and ``start()`` early."""
    if engine == "local":
        return ProcessExecutor(workers, unit_seconds=unit_seconds, stage_seconds=stage_seconds, preload=preload,
                               share_preload=share_preload)
    if engine == "ray":
        from benchmint.run.ray_engine import RayExecutor

        return RayExecutor(unit_seconds=unit_seconds, stage_seconds=stage_seconds, preload=preload)
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


@dataclass(frozen=True, slots=True)
class Unit:
    """One piece of work: its content ``key``, the arguments of the work function, and a label for messages.

    ``cost``: the work expected of it, in any unit shared by the units of one run (a file's bytes, a range's
    pages); it decides only the order in which units are handed out (``dispatch_order``), never what is written.
    """

    key: str
    args: tuple
    label: str
    cost: float = 0.0


# BENCHMINT_DISPATCH=input hands units out in input order (for comparing the two orders; the outputs are the same).
DISPATCH_ENV = "BENCHMINT_DISPATCH"


# A unit costing at least this share of the run's total is handed out before the rest (see dispatch_order).
LONG_UNIT_SHARE = 1 / 512


def dispatch_order(units: list[Unit]) -> list[Unit]:
    """``units`` in the order they are handed to the executor: the long units first, costliest first, then the
    others in input order (ties in input order throughout).

    A long unit started last keeps one worker busy after the others ran out of work; started first, it runs
    while the short ones fill the other workers (the longest-processing-time rule). A unit is long when it costs
    at least ``LONG_UNIT_SHARE`` of the run's total: one of the others started last delays the end by at most
    that share of the total work, 3% of the ideal time at 16 workers. The short ones keep their input order so
    that results finish in that order and the runs that write as they go (``run_units``' ``in_order``) can write
    them while the rest run; sorting them all by cost held back all but a few items of xrd build to the end.
    Results are read back in unit order, so the order changes when units finish, not what a run writes.
    """
    mode = os.environ.get(DISPATCH_ENV, "longest-first")
    if mode == "input":
        return units
    if mode != "longest-first":
        raise ValueError(f"{DISPATCH_ENV} must be 'longest-first' or 'input', not {mode!r}")
    bar = LONG_UNIT_SHARE * sum(u.cost for u in units)
    is_long = [u.cost > 0 and u.cost >= bar for u in units]
    long = sorted((u for u, lg in zip(units, is_long) if lg), key=lambda u: -u.cost)  # stable: ties in input order
    return long + [u for u, lg in zip(units, is_long) if not lg]


def run_units(ledger: Ledger, units: Sequence[Unit], work: Callable[..., dict | Encoded | Filed], executor: Executor,
              desc: str = "units", progress: bool = False,
              on_recorded: Callable[[Unit, dict], None] | None = None,
              then: Callable[[Unit, dict], Sequence[Unit]] | None = None,
              redo: Callable[[dict], bool] | None = None, read_back: bool = True,
              in_order: Callable[[int, dict], None] | None = None,
              read: Callable[[bytes], dict | None] | None = None) -> tuple[list[dict], int]:
    """Run ``work(*unit.args)`` for every unit whose key the ledger lacks; return (results in unit order, skipped).

    A result is a JSON-able dict, with "error" when the unit failed, or such a dict
    already encoded where it was computed (``Encoded``, from ``encoded``), or filed there (``Filed``, from
    ``filed``); such a result reaches ``on_recorded`` and ``then`` as the ledger stored it; an exception
    raised by ``work`` becomes that unit's ``{"error": "Type: message"}``; a unit
    that ran past a time limit (``ProcessExecutor``) also carries ``"time_limit"``
    ({limit, seconds, stage}); such units, those whose worker died, and those
    whose result says ``"retry": true`` (a model call that failed: it may not
    fail again) are tried again by the next run. Each
    result is committed to the ledger as it arrives, before it is
    reported (``on_recorded``, the progress bar), so a killed run keeps every
    unit it reported finished (filed results: below). Units sharing a key run once. Units are handed
    out costliest first (``Unit.cost``, ``dispatch_order``).

    ``then(unit, result)`` names units that follow from a unit's result (the
    rest of a document once its first pages told its length): they join the
    run as results arrive, and for units the ledger held already, before it
    starts. Their results are read from the ledger by their keys; the returned
    list covers ``units`` only.

    ``redo(result)``: True for a recorded result to be done again all the same (a reply asked again on the user's
    word, an answer that ran out of attempts when more are given now). ``read_back=False``: the results are
    left in the ledger for the caller to read one at a time (the list returned is empty).

    Results filed with their keys (``in_workers`` on an executor whose workers write where this process reads:
    ``FiledWork``) are committed several at once: every ``COMMIT_EVERY`` results or ``COMMIT_SECONDS`` after the
    first one held, whichever comes first, and when the run ends. They are reported as they arrive; a run killed
    before their commit finds them in their files when it resumes (``Ledger.recover``), so it still keeps every
    unit it reported finished and runs none of them again. Any other result is committed as it arrives.

    ``in_order(i, result)``: the read-back streamed instead of returned (the list is empty): each of ``units``
    with its result as the ledger stored it, in unit order, as soon as it and every unit before it are recorded,
    while the rest still run. Results arrive in any order (costliest first), so what waits is keys, not results:
    the caller's memory holds one result at a time, and after the last unit only the rest of the order is read.
    ``read``: how the streamed results are read from the ledger (``Ledger.get``'s ``read``).
    """
    ledger.recover()  # results a killed run's workers filed and its driver had not committed yet
    have = ledger.final_keys()  # one query: only these are read and checked one by one (``_kept``)
    todo = dispatch_order(list({u.key: u for u in units if u.key not in have or not _kept(ledger, u.key, redo)}
                               .values()))
    stream = _InOrder(ledger, units, todo, in_order, read) if in_order is not None else None
    keyed = isinstance(work, FiledWork)  # the worker is given each unit's key first, to file the result under

    def args_of(unit: Unit) -> tuple:
        return (unit.key, *unit.args) if keyed else unit.args

    args = [args_of(u) for u in todo]
    costs = [u.cost for u in todo]  # for an executor that groups units (the local workers' chunks)
    bar = None
    if progress and todo:
        from benchmint.progress import Progress

        bar = Progress(desc, total=len(todo), unit="units")
    follow = _FollowUps(ledger, then, units, todo, args, args_of, costs, bar)
    results = executor.map_unordered(work, args, costs=costs)
    try:
        # ``args`` grows while the executor reads it: every executor takes the next unit by index.
        for i, result in results:
            if isinstance(result, (Encoded, Filed)):  # encoded, or filed, in the worker: only inserted here
                hold = isinstance(result, Filed) and result.framed
                ledger.record(todo[i].key, result, ok=not result.error, final=not result.retry, hold=hold)
                if hold and (ledger.held >= COMMIT_EVERY or time.monotonic() - ledger.held_since >= COMMIT_SECONDS):
                    ledger.commit()
                stored = ledger.get(todo[i].key) if on_recorded is not None or then is not None else None
                if stored is not None:
                    _report(todo[i], stored[1], not result.retry, on_recorded, follow)
            else:
                final = not isinstance(result, (UnitTimeout, WorkerDied)) and not (
                    isinstance(result, dict) and result.get("retry") is True)
                if isinstance(result, UnitTimeout):
                    result = {"error": f"UnitTimeout: {result}", "time_limit": result.as_dict()}
                elif isinstance(result, BaseException):
                    result = {"error": f"{type(result).__name__}: {result}"}
                ledger.record(todo[i].key, result, ok="error" not in result, final=final)
                _report(todo[i], result, final, on_recorded, follow)
            if stream is not None:
                stream.recorded(todo[i].key, result if isinstance(result, Filed) else None)
            if bar is not None:
                bar.update(1)
    finally:
        ledger.commit()  # the results held: each was reported
        executor.close()
        if bar is not None:
            bar.close()
    skipped = len({u.key for u in units}) - len(todo)
    if stream is not None:
        stream.waiting.clear()  # every unit is recorded now: one without a result is an error of _read_back's
        stream.flush()
        return [], skipped
    return [_read_back(ledger, u) for u in units] if read_back else [], skipped


# Results filed with their keys are committed this many at once, or this long after the first one held: one
# commit instead of many (a commit costs the driver about 0.09 ms), and a bound on what a resume reads from the
# result files to recover.
COMMIT_EVERY = 256
COMMIT_SECONDS = 0.5


def _read_back(ledger: Ledger, unit: Unit, read: Callable[[bytes], dict | None] | None = None) -> dict:
    got = ledger.get(unit.key, read)
    if got is None:  # every unit was recorded by run_units or by an earlier run
        raise RuntimeError(f"unit {unit.label} has no result in {ledger.path}")
    return got[1]


class _InOrder:
    """``run_units``' read-back as results are recorded: the next units in order go out once their keys are in
    the ledger. A unit waits while its key is one this run has yet to record (results are read back, never
    kept, so a stalled order costs a set of keys and, for results filed by the workers, where each is)."""

    def __init__(self, ledger: Ledger, units: Sequence[Unit], todo: list[Unit],
                 emit: Callable[[int, dict], None], read: Callable[[bytes], dict | None] | None = None) -> None:
        self.ledger, self.units, self.emit, self.read = ledger, units, emit, read
        self.waiting = {u.key for u in todo}
        self.filed: dict[str, Filed] = {}  # key -> where this run recorded its filed result, until it goes out
        self.next = 0
        self.flush()  # units an earlier run recorded, up to the first one this run has to do

    def recorded(self, key: str, filed: Filed | None = None) -> None:
        self.waiting.discard(key)
        if filed is not None:
            self.filed[key] = filed
        self.flush()

    def flush(self) -> None:
        while self.next < len(self.units) and (key := self.units[self.next].key) not in self.waiting:
            where = self.filed.pop(key, None)  # read from its file as recorded: no query of the ledger
            self.emit(self.next, _read_back(self.ledger, self.units[self.next], self.read) if where is None
                      else self.ledger.read_filed(key, where, self.read))
            self.next += 1


def _report(unit: Unit, result: dict, final: bool, on_recorded: Callable[[Unit, dict], None] | None,
            follow: _FollowUps) -> None:
    if on_recorded is not None:
        on_recorded(unit, result)
    if final:
        follow.after(unit, result)


def encoded(work: Callable[..., dict | Encoded], *args) -> Encoded:
    """``work(*args)``'s result encoded for the ledger where it is computed: pass ``functools.partial(encoded,
    work)`` to ``run_units`` and the worker processes do the JSON encoding and its read-back check (half a
    millisecond for a result of 20 kB), which the one process recording every result would otherwise do."""
    return encode_result(work(*args))


def filed(folder: str, work: Callable[..., dict | Encoded], *args) -> Filed | Encoded:
    """``work(*args)``'s result appended by the worker to its own file in ``folder`` (the ledger's
    ``results_folder``, by absolute path), which sends back only where it went (``ledger.file_result``): the
    driver records a row of a few numbers instead of receiving and inserting the result. Only for executors
    whose workers write where the driver reads (``shares_files``)."""
    return file_result(folder, work(*args))


@dataclass(frozen=True, slots=True)
class FiledWork:
    """``work`` whose result its worker files in ``folder`` under the unit's key, given first (``run_units`` gives
    it): ``filed`` with a frame head naming the unit, so that its commit may wait (``run_units``)."""

    folder: str
    work: Callable[..., dict | Encoded]

    def __call__(self, key: str, *args) -> Filed | Encoded:
        return file_result(self.folder, self.work(*args), key)


def in_workers(work: Callable[..., dict | Encoded], executor: Executor,
               ledger: Ledger) -> Callable[..., Encoded | Filed]:
    """``work`` as the workers of ``executor`` are to run it: its result filed beside ``ledger`` under its unit's
    key (``FiledWork``) when they write where this process reads (the executor's ``shares_files``), else
    encoded (``encoded``)."""
    if getattr(executor, "shares_files", False):
        return FiledWork(str(ledger.results_folder.resolve()), work)
    return functools.partial(encoded, work)


def _kept(ledger: Ledger, key: str, redo: Callable[[dict], bool] | None) -> bool:
    if not ledger.done(key):
        return False
    if redo is None:
        return True
    got = ledger.get(key)
    return got is None or not redo(got[1])


class _FollowUps:
    """The units ``then`` names after each result: run when the ledger lacks them, followed further when not."""

    def __init__(self, ledger: Ledger, then: Callable[[Unit, dict], Sequence[Unit]] | None, units: Sequence[Unit],
                 todo: list[Unit], args: list[tuple], args_of: Callable[[Unit], tuple], costs: list[float],
                 bar) -> None:
        self.ledger, self.then, self.todo, self.args, self.bar = ledger, then, todo, args, bar
        self.args_of, self.costs = args_of, costs
        self.seen = {u.key for u in units} if then is not None else set()
        if then is not None:  # units done by an earlier run name their follow-ups now
            waiting = {t.key for t in todo}
            for u in units:
                got = None if u.key in waiting else ledger.get(u.key)
                if got is not None:
                    self.after(u, got[1])

    def after(self, unit: Unit, result: dict) -> None:
        for nxt in self.then(unit, result) if self.then is not None else ():
            if nxt.key in self.seen:
                continue
            self.seen.add(nxt.key)
            got = self.ledger.get(nxt.key) if self.ledger.done(nxt.key) else None
            if got is not None:
                self.after(nxt, got[1])
            else:  # the executor reads ``args`` by index as it goes: appended units are run too
                self.todo.append(nxt)
                self.costs.append(nxt.cost)  # first: the executor reads ``args``' length
                self.args.append(self.args_of(nxt))
                if self.bar is not None:
                    self.bar.add_total(1)


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A file ``find_files`` found: its path as found from the input as given, and what keeps it out of the run.

    ``problem`` says why it cannot be read (a symbolic-link loop, a link to nothing); ``same_as`` is the path
    under which the same file (same device and inode: a hard or symbolic link, a relative and an absolute
    spelling) was found earlier. Both are per-file error rows of the run, never silent drops.

    A file inside an archive has its ``member`` and the path ``archive/member name``; for it, ``same_as`` names
    the earlier member of the same name in that archive, or of the same identity (name, size, stamp) in another.
    A damaged archive is a row of its own (``path`` the archive, ``problem`` the damage, ``member`` the last
    member listed before it, if any).
    """

    path: Path
    problem: str | None = None
    same_as: Path | None = None
    member: Member | None = None
    # Whether the path found is itself a symbolic link, as its folder's listing told (None: not known).
    link: bool | None = field(default=None, compare=False)

    def where(self) -> dict:
        """The archive and member of a row, for a file inside an archive."""
        return {} if self.member is None else self.member.where()

    def error_row(self) -> dict | None:
        """The run's error fields for a file left out (None for a file that runs)."""
        if self.same_as is not None:
            kind = "duplicate_file" if self.member is None else "duplicate_member"
            return {"error": f"the same {'file' if self.member is None else 'member'} as {self.same_as} (given "
                             "twice); left out", "kind": kind, "duplicate_of": str(self.same_as), **self.where()}
        if self.problem is not None:
            return {"error": self.problem, "kind": "unreadable", **self.where()}
        return None


def find_files(inputs: Sequence[str | os.PathLike], suffix: str, listings: Listings | None = None) -> list[FoundFile]:
    """Files named, or found recursively with ``suffix`` in the folders named; stable order. Archives (tar,
    compressed tar, zip: ``ARCHIVE_SUFFIXES``) named or found stand for their members with ``suffix``, in
    archive order; they are listed, not read (``listings``: the listings kept by an earlier run, used while
    the archive has not changed).

    A name found again for a file already found is kept with ``same_as``; a link that cannot be followed
    with ``problem``. InputError when a name does not exist or nothing is found.
    """
    found: list[FoundFile] = []
    first: dict[tuple[int, int], Path] = {}  # (device, inode) -> the first path found for it
    first_member: dict[tuple, Path] = {}  # (name, size, stamp) and (archive, name) -> the first member found

    def add(path: Path, st: os.stat_result, link: bool | None, archive: bool) -> None:
        ident = (st.st_dev, st.st_ino)
        same_as = first.get(ident)
        first.setdefault(ident, path)
        if same_as is not None or not archive:
            found.append(FoundFile(path, same_as=same_as, link=link))
            return
        try:
            members, damage = (listings.members(path, suffix) if listings is not None
                               else list_members(path, suffix))
        except OSError as exc:  # gone or unreadable since it was found
            members, damage = [], f"cannot read the archive: {type(exc).__name__}: {exc.strerror or exc}"
        for m in members:
            again = first_member.get(("in", m.archive, m.name)) or first_member.get((m.name, m.size, m.stamp))
            found.append(FoundFile(m.path, member=m, same_as=again))
            first_member.setdefault(("in", m.archive, m.name), m.path)
            first_member.setdefault((m.name, m.size, m.stamp), m.path)
        if damage is not None:
            found.append(FoundFile(path, problem=damage, member=members[-1] if members else None))

    for item in inputs:
        p = Path(item)
        if p.is_dir():
            for q, entry, archive in _walk(p, suffix):
                try:
                    st = entry.stat()
                except OSError as exc:  # a link to nothing, a loop of links, a file gone since the listing
                    why = "a loop of symbolic links" if exc.errno == errno.ELOOP else (
                        "a symbolic link to nothing" if q.is_symlink() else "gone since the folder was listed")
                    found.append(FoundFile(q, problem=f"cannot be read: {why} ({exc.strerror})"))
                    continue
                if stat.S_ISREG(st.st_mode):
                    add(q, st, entry.is_symlink(), archive)
        elif p.is_file():
            add(p, p.stat(), None, is_archive(p))
        else:
            raise InputError(f"no such file or directory: {p}")
    if not found:
        raise InputError(f"no {suffix} files found in " + ", ".join(map(str, inputs)))
    return found


def _walk(root: Path, suffix: str) -> list[tuple[Path, os.DirEntry, bool]]:
    """The entries under ``root`` named with ``suffix`` (any case) or as an archive (the third field), with
    their paths, in ``sorted(root.rglob("*"))``'s order and from the same folders (links to folders not
    followed, a folder that cannot be listed skipped). Listed by ``os.scandir``: its entries know whether they
    are links without a call a file, and each path is made once and sorted by its parts as strings, where
    rglob made, hashed and compared ``Path`` objects."""
    found: list[tuple[tuple[str, ...], Path, os.DirEntry, bool]] = []
    folders: list[tuple[tuple[str, ...], Path]] = [((), root)]
    while folders:
        parts, folder = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except PermissionError:  # as rglob: a folder that cannot be listed adds nothing
            continue
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(((*parts, name), folder / name))
            except OSError:
                pass
            dot = name.rfind(".")  # Path.suffix: from the last dot, if the name neither starts nor ends there
            archive = is_archive(name)
            if archive or (name[dot:] if 0 < dot < len(name) - 1 else "").lower() == suffix:
                found.append(((*parts, name), folder / name, entry, archive))
    found.sort(key=lambda f: f[0])  # a path's order is its parts' (Path's own), not its text's
    return [(path, entry, archive) for _, path, entry, archive in found]


def read_error(exc: OSError) -> dict:
    """The error fields of a file that could not be read."""
    return {"error": f"cannot be read: {type(exc).__name__}: {exc.strerror or exc}", "kind": "unreadable"}


def hash_file(path: str | os.PathLike, settings: dict | None = None) -> tuple[str, str]:
    """(the file's key with ``settings``, as ``content_key(bytes, settings)``; the SHA-256 of its bytes alone).

    Read in blocks, so a large file costs a block of memory, not its size. OSError when it cannot be read.
    """
    got = _hash_one(path, settings_text(settings))
    return got.key, got.sha256


@dataclass(frozen=True, slots=True)
class Hashed:
    """A file as ``hash_files`` read it: its key with its settings, the SHA-256 of its bytes, its size."""

    key: str
    sha256: str
    size: int


# Below this many files a run hashes its inputs on its own thread: a pool's hand-offs would cost more than they
# save. Above, the pool's tasks take HASH_CHUNK files each, so a task's overhead is small beside its files'.
HASH_POOL_MIN_FILES = 256
HASH_CHUNK = 64
HASH_THREADS_MAX = 8


def hash_threads(workers: int) -> int:
    """The threads that hash a run's inputs: as many as the run's workers, at least 4 and at most
    HASH_THREADS_MAX. Reads from a disk overlap on more threads than cores (20,000 CIFs read cold on 2 cores:
    4.4 s on one thread, 1.2 s on 4); files already in memory gain little, since the per-file Python work
    holds the GIL, which is why the count stays small."""
    return max(4, min(HASH_THREADS_MAX, resolve_workers(workers)))


def hash_files(paths: Sequence[str | os.PathLike], settings: Sequence[dict | None],
               threads: int = 1) -> list[Hashed | OSError]:
    """``hash_file`` of each of ``paths`` with ``settings[i]``, in input order: a ``Hashed``, or the OSError of a
    file that cannot be read, in its place. With ``threads`` > 1 and at least HASH_POOL_MIN_FILES files, on a
    pool of that many threads (hashlib and the reads release the GIL). The same settings object given for
    many files is encoded once."""
    if len(paths) != len(settings):
        raise ValueError(f"{len(paths)} paths but {len(settings)} settings")
    texts: dict[int, bytes] = {}  # id(settings) -> its text; the objects live in ``settings`` meanwhile
    jobs = [(p, texts[id(s)] if id(s) in texts else texts.setdefault(id(s), settings_text(s)))
            for p, s in zip(paths, settings)]
    if threads <= 1 or len(jobs) < HASH_POOL_MIN_FILES:
        return _hash_chunk(jobs)
    chunks = [jobs[i:i + HASH_CHUNK] for i in range(0, len(jobs), HASH_CHUNK)]
    return [got for part in thread_map(_hash_chunk, chunks, threads) for got in part]


def _hash_chunk(jobs: Sequence[tuple[str | os.PathLike, bytes]]) -> list[Hashed | OSError]:
    out: list[Hashed | OSError] = []
    for path, text in jobs:
        try:
            out.append(_hash_one(path, text))
        except OSError as exc:  # this file's error row, not the run's
            out.append(exc)
    return out


def _hash_one(path: str | os.PathLike, text: bytes) -> Hashed:
    # os.open, fstat and read in place of open(): fewer calls per file, and the size of the file read.
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        h = hashlib.sha256()
        while block := os.read(fd, 1 << 20):
            h.update(block)
    finally:
        os.close(fd)
    keyed = h.copy()
    keyed.update(text)
    return Hashed(keyed.hexdigest(), h.hexdigest(), size)


ARCHIVES_NAME = "archives.sqlite"


def find_files_into(inputs: Sequence[str | os.PathLike], suffix: str, out: Path) -> list[FoundFile]:
    """``find_files`` for a run into ``out``, its archive listings kept in ``out/archives.sqlite``, so that a
    rerun lists a compressed tar without decompressing it."""
    listings = Listings(out / ARCHIVES_NAME)
    try:
        return find_files(inputs, suffix, listings)
    finally:
        listings.close()


def run_files(inputs: Sequence[str | os.PathLike], suffix: str, out_dir: str | os.PathLike, kind: str,
              work: Callable[..., dict | Encoded], args_of: Callable[[Path], tuple],
              settings_of: Callable[[Path], dict],
              workers: int = 1, progress: bool = False, unit_seconds: float | None = None,
              stage_seconds: float | None = None, preload: Sequence[str] = (),
              share_preload: bool = False, engine: str = "local",
              on_row: Callable[[FoundFile, str | None, dict], None] | None = None,
              read: Callable[[bytes], dict | None] | None = None,
              ) -> tuple[Path, list[tuple[FoundFile, str | None, dict]], int]:
    """A resumable run over the files in ``inputs``: ``work(source, key, out_dir, *args_of(path))`` per file.

    A file's key hashes its bytes with ``settings_of(path)``; ``source`` is its path, as a string. A member of
    an archive (``find_files``) is keyed by its identity in the archive instead, so a finished one is skipped
    without being read, and ``source`` is the ``Member`` (``read_source`` reads either); files run in worker
    processes (a crash in a C library takes down a worker, not the run's
    ledger), which also encode each result's JSON for the ledger and, when the executor's workers write where
    this process reads (``shares_files``: local workers, a Ray cluster on this machine or one that shares the
    output folder), append it to a result file of their own and send back only where it is (``filed``);
    otherwise the encoded result comes back (``encoded``).
    Results come back in input order from ``out_dir/ledger.sqlite``.
    A file that cannot be read (no permission, gone, a loop of links) or that was found twice has no
    key and an error result of its own (``FoundFile.error_row``); the run goes on.
    ``unit_seconds`` and ``stage_seconds`` are the ``ProcessExecutor`` time limits; the workers start
    before the files are hashed (``hash_files``, on ``hash_threads(workers)`` threads) and import the
    ``preload`` modules meanwhile (``share_preload``: as ``ProcessExecutor`` has it). ``engine``: "local",
    or "ray" for tasks on the connected Ray cluster (``executor_for_files``); the outputs are the same.
    A file's size is its unit's ``cost``: the largest files are handed out first.
    Returns (output folder, [(FoundFile, key or None, result)], files already done); with ``on_row``, each
    (FoundFile, key or None, result) goes to it instead, in input order while the files run (``run_units``'
    ``in_order``), and the list is empty; ``read``: how they are read from the ledger (``Ledger.get``'s).
    """
    resolve_workers(workers)
    out = Path(out_dir)
    files = find_files_into(inputs, suffix, out)
    out.mkdir(parents=True, exist_ok=True)
    executor = executor_for_files(engine, workers, unit_seconds=unit_seconds, stage_seconds=stage_seconds,
                                  preload=preload, share_preload=share_preload)
    executor.start()
    try:
        units, rows = [], []
        hashing = [f for f in files if f.error_row() is None and f.member is None]
        hashed = iter(hash_files([f.path for f in hashing], [settings_of(f.path) for f in hashing],
                                 hash_threads(workers)))
        for f in files:
            left_out = f.error_row()
            if left_out is None and f.member is not None:  # keyed by its identity in the archive: not read here
                key = f.member.key(settings_of(f.path))
                units.append(Unit(key, (f.member, key, str(out), *args_of(f.path)), str(f.path), f.member.size))
            elif left_out is None:
                got = next(hashed)
                if isinstance(got, OSError):  # no permission, gone since the listing: this file's error
                    left_out = read_error(got)
                else:
                    units.append(Unit(got.key, (str(f.path), got.key, str(out), *args_of(f.path)), str(f.path),
                                      got.size))
            rows.append((f, None, left_out) if left_out is not None else (f, units[-1].key, None))
        stream = None if on_row is None else _RowsInOrder(rows, on_row)
        with Ledger(out / LEDGER_NAME, kind) as ledger:
            results, skipped = run_units(ledger, units, in_workers(work, executor, ledger), executor, kind, progress,
                                         in_order=None if stream is None else stream.unit_result, read=read)
    finally:
        executor.close()  # workers of a run that failed before its units ran
    if stream is not None:
        stream.until(len(rows))
        return out, [], skipped
    ran = iter(results)
    return out, [(p, key, row if row is not None else next(ran)) for p, key, row in rows], skipped


class _RowsInOrder:
    """``run_files``' rows to ``on_row`` in input order: a file left out goes when the units before it went."""

    def __init__(self, rows: Sequence[tuple[FoundFile, str | None, dict | None]],
                 on_row: Callable[[FoundFile, str | None, dict], None]) -> None:
        self.rows, self.on_row = rows, on_row
        self.of_unit = [i for i, row in enumerate(rows) if row[2] is None]  # unit index -> row index
        self.next = 0

    def until(self, stop: int) -> None:
        """The files left out before row ``stop``."""
        while self.next < stop:
            f, key, left_out = self.rows[self.next]
            assert left_out is not None, "a unit's row goes with its result"
            self.on_row(f, key, left_out)
            self.next += 1

    def unit_result(self, i: int, result: dict) -> None:
        row = self.of_unit[i]
        self.until(row)
        f, key, _ = self.rows[row]
        self.on_row(f, key, result)
        self.next = row + 1
