"""The run ledger: one SQLite file per output directory, so a killed run resumes.

Every unit of work (a PDF, a CIF, a model call) is keyed by the hash of its
content and of the settings that shape its result. A finished unit's result is
committed to the ledger, in a transaction of its own, before it counts as done;
a rerun skips every key already there. The exception: results their workers filed
with a frame head naming the unit (``file_result``'s ``key``) may be held and
committed several at once (``record``'s ``hold``), since a run killed before the
commit finds them in their files (``recover``).
Output files are written from the ledger at the end of a run, in a stable
order, so a run killed half way and rerun produces the same files as one
uninterrupted run, with no duplicates.

A result is stored in its row (``result``), or, when the worker that computed it appended it to a result file
of its own (``file_result``), in that file: the row then holds where (``file``, ``start``, ``length``) and the
bytes' CRC-32, and every read checks them. See ``file_result`` for what a kill can lose and why that is safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import re
import secrets
import socket
import sqlite3
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmint.io import decode_line, escape_surrogates

SCHEMA = """
CREATE TABLE IF NOT EXISTS units (
    key      TEXT PRIMARY KEY,
    ok       INTEGER NOT NULL,
    result   TEXT NOT NULL,
    recorded REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# The columns of a result kept in a result file (NULL for one stored inline), added to ledgers written before.
FILED_COLUMNS = (("file", "TEXT"), ("start", "INTEGER"), ("length", "INTEGER"), ("crc", "INTEGER"))


def results_folder(ledger_path: str | os.PathLike) -> Path:
    """Where the workers of a ledger's run append their results: ``ledger.results/`` beside ``ledger.sqlite``."""
    return Path(ledger_path).with_suffix(".results")


def content_key(data: bytes, settings: dict | None = None) -> str:
    """SHA-256 of the content and of the settings that shape its result."""
    return extend_key(hashlib.sha256(data), settings)


def extend_key(h, settings: dict | None = None) -> str:
    """The key of a content already fed to the SHA-256 object ``h`` (read in blocks, say) with ``settings``."""
    h.update(settings_text(settings))
    return h.hexdigest()


def settings_text(settings: dict | None) -> bytes:
    """What a key hashes after the content for ``settings``: their JSON, keys sorted, no spaces; nothing for
    none. Encoded once, it keys any number of contents (``runner.hash_files``)."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":")).encode("utf-8") if settings else b""


@dataclass(frozen=True, slots=True)
class Encoded:
    """A unit's result as the ledger stores it, encoded and checked by ``encode_result`` where it was computed
    (a worker process), so that the one process writing the ledger only inserts it. ``error``: the result is a
    failure ("error" in it, or not storable); ``retry``: it asked to be tried again (``"retry": true``)."""

    text: str
    error: bool
    retry: bool


def encode_result(result: dict | Encoded) -> Encoded:
    """``result`` as ``Ledger.record`` stores it (one its work encoded already, with ``encode_text``, as it is)."""
    if isinstance(result, Encoded):
        return result
    text, problem = _stored_text(result)
    retry = isinstance(result, dict) and result.get("retry") is True
    return Encoded(text, problem is not None or "error" in result, retry)


def encode_text(text: str) -> Encoded:
    """A result its work encoded itself (a JSON object in a form of its own, say with parts its reader slices
    out without decoding them: ``Ledger.get``'s ``read``), checked as ``encode_result`` checks a dict's."""
    result, problem = decode_line(text.encode("utf-8"))
    if problem is None and not isinstance(result, dict):
        problem = "not a JSON object"
    if problem is not None:
        return Encoded(json.dumps({"error": f"result not storable as JSON: {problem}"}), True, False)
    return Encoded(text, "error" in result, result.get("retry") is True)


@dataclass(frozen=True, slots=True)
class Filed:
    """A unit's result appended by its worker to a result file (``file_result``): the file's name in the
    results folder, where the bytes start, their length and CRC-32, and ``Encoded``'s two flags. This, not the
    result, is what the worker sends back; the ledger records it as the unit's row."""

    file: str
    start: int
    length: int
    crc: int
    error: bool
    retry: bool
    framed: bool = False  # the file says whose it is (a frame head with the key): ``Ledger.recover`` finds it

    def __reduce__(self) -> tuple:
        # Sent back by a worker for every unit: unpickled by the constructor, not the frozen dataclass's state
        # set field by field (a microsecond less of the driver's a unit).
        return Filed, (self.file, self.start, self.length, self.crc, self.error, self.retry, self.framed)


# A filed result's frame head: one JSON line before the result's own, naming the unit, so that a result filed but
# never recorded (its driver killed before the commit) is found in its file (``Ledger.recover``).
FRAME_HEAD = b'{"frame":'


def frame_head(key: str, length: int, crc: int, error: bool, retry: bool) -> bytes:
    """The line a filed result of unit ``key`` follows in its file: the key, the result's length and CRC-32 and
    ``Encoded``'s two flags, in JSON (``FRAME_HEAD`` first)."""
    return json.dumps({"frame": key, "length": length, "crc": crc, "error": error, "retry": retry},
                      ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def read_frames(data, pos: int = 0) -> Iterator[tuple[str, int, int, int, bool, bool]]:
    """The frames of a result file's bytes ``data`` from byte ``pos`` on: (key, start, length, crc, error,
    retry) of each result after a frame head whose bytes pass their check. Lines of results filed without a
    head (files of the code before frames), torn tails and damaged frames are passed over."""
    size = len(data)
    while pos < size:
        end = data.find(b"\n", pos)
        if end < 0:
            return
        head = _frame_head(data[pos:end]) if data[pos:pos + len(FRAME_HEAD)] == FRAME_HEAD else None
        if head is not None:
            key, length, crc, error, retry = head
            start = end + 1
            body = data[start:start + length]
            if len(body) == length and data[start + length:start + length + 1] == b"\n" and zlib.crc32(body) == crc:
                yield key, start, length, crc, error, retry
                pos = start + length + 1
                continue
        pos = end + 1


def _frame_head(line: bytes) -> tuple[str, int, int, bool, bool] | None:
    try:
        head = json.loads(line)
    except ValueError:
        return None
    if not isinstance(head, dict):
        return None
    key, length, crc = head.get("frame"), head.get("length"), head.get("crc")
    if not (isinstance(key, str) and type(length) is int and length >= 0 and type(crc) is int):
        return None
    return key, length, crc, head.get("error") is True, head.get("retry") is True


class _Shard:
    """The result file a process appends to: opened with the process's first result, never shared."""

    __slots__ = ("pid", "fd", "name", "end")

    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "host"
        # Host, process and a random part: processes of several nodes, or a pid used again, never meet in a file.
        self.pid, self.name, self.end = os.getpid(), f"{host}-{os.getpid()}-{secrets.token_hex(4)}.jsonl", 0
        self.fd = os.open(os.path.join(folder, self.name),
                          os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)


_SHARDS: dict[str, _Shard] = {}  # results folder -> this process's file in it
_SHARDS_LOCK = threading.Lock()  # units on threads of one process append to its one file in turn


def file_result(folder: str, result: dict | Encoded, key: str | None = None) -> Filed | Encoded:
    """``result``, encoded as the ledger stores it (``encode_result``), appended to this process's result file in
    ``folder`` (one file a process: appends need no lock between processes, and an offset counted here is the
    file's); returns where it went. When the file cannot be written (disk full, folder gone), the result
    comes back inline (``Encoded``) instead, and the process starts a new file with its next result.

    With ``key`` (the unit's), the result follows a frame head naming it (``frame_head``), written in the same
    call: a result filed whose row the driver had not committed yet when it was killed is recorded from its
    file by the next run (``Ledger.recover``) instead of being run again.

    No fsync: once ``os.write`` returned, the bytes are the kernel's and survive a SIGKILL of this process or
    of the driver, and the driver records the unit only after this returned. A worker killed mid-write leaves
    a torn tail no row points to, and its unit is run again (it was never recorded); a driver killed before it
    committed a row leaves bytes no row points to, and the unit runs again too. A power cut may lose bytes a
    committed row points to (the ledger's own commits are not fsynced either): the CRC shows it, and that
    unit is run again.
    """
    enc = encode_result(result)
    data = enc.text.encode("utf-8")
    crc = zlib.crc32(data)
    head = b"" if key is None else frame_head(key, len(data), crc, enc.error, enc.retry)
    with _SHARDS_LOCK:
        shard = _SHARDS.get(folder)
        try:
            if shard is None or shard.pid != os.getpid():  # a forked child has its parent's: not its own
                shard = _SHARDS[folder] = _Shard(folder)
            start = shard.end + len(head)
            view = memoryview(head + data + b"\n")  # one line a result (and its head): the file reads as JSONL
            while view:
                view = view[os.write(shard.fd, view):]
            shard.end = start + len(data) + 1
        except OSError:
            if shard is not None and _SHARDS.get(folder) is shard:
                del _SHARDS[folder]  # the file may end in a torn record: later results go to a new one
                with contextlib.suppress(OSError):
                    os.close(shard.fd)
            return enc
    return Filed(shard.name, start, len(data), crc, enc.error, enc.retry, key is not None)


def _stored_text(result: dict) -> tuple[str, str | None]:
    """(the JSON stored for ``result``, None), or, when that would not read back (not JSON-able, nested too
    deep), (the unit's error saying so, the problem)."""
    try:
        text = escape_surrogates(json.dumps(result, sort_keys=True, ensure_ascii=False))
        problem = decode_line(text.encode("utf-8"))[1]
    except (TypeError, ValueError, RecursionError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        return json.dumps({"error": f"result not storable as JSON: {problem}"}), problem
    return text, None


_INSERT = ("INSERT OR REPLACE INTO units (key, ok, result, recorded, file, start, length, crc) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


class Ledger:
    """Results by key in ``path`` (SQLite, WAL journal); one writer, the calling process.

    Each ``record`` is its own transaction (save rows ``hold`` keeps for one ``commit``): in WAL mode with
    synchronous=NORMAL a commit is an append to the log without an fsync, so it survives a killed
    process (not a power cut) and costs about a tenth of a millisecond (benches/bench_ledger.py).
    A result its worker filed (``Filed``) is recorded as where it is; reading it checks its length and CRC-32,
    and one that fails (a torn or changed file, a file gone) counts as not done, with a warning, so it runs again.
    """

    # Result files held open for reading at once (a run has one a worker process; more are opened again as needed).
    OPEN_FILES = 64

    def __init__(self, path: str | os.PathLike, kind: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.results_folder = results_folder(self.path)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._closed = False
        self._files: dict[str, int] = {}  # result file name -> its descriptor, oldest first
        self.held = 0  # rows recorded with ``hold`` and not committed yet
        self.held_since = 0.0  # time.monotonic() of the first of them
        self._to_insert: list[tuple] = []  # rows held and not inserted yet: one statement for all, when needed
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a committed unit survives a killed process
        self._db.executescript(SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(units)")}
        for name, kind_ in FILED_COLUMNS:  # a ledger written before results were filed: its rows stay inline
            if name not in have:
                self._db.execute(f"ALTER TABLE units ADD COLUMN {name} {kind_}")
        stored = self._db.execute("SELECT value FROM meta WHERE name = 'kind'").fetchone()
        if stored is None:
            self._db.execute("INSERT INTO meta VALUES ('kind', ?)", (kind,))
        elif stored[0] != kind:
            raise ValueError(f"{self.path} is the ledger of a {stored[0]!r} run, not {kind!r}; "
                             "use another output directory")

    def note(self, name: str) -> str | None:
        """A value the run keeps beside its results (``set_note``), None when not set."""
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (f"note:{name}",)).fetchone()
        return None if row is None else row[0]

    def set_note(self, name: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"note:{name}", value))

    def done(self, key: str) -> bool:
        """The unit has a final result (one recorded with ``final=False`` runs again on the next run) that reads
        back: a filed result is read and checked."""
        self._insert_held()
        row = self._db.execute("SELECT file, start, length, crc FROM units WHERE key = ? AND ok >= 0",
                               (key,)).fetchone()
        if row is None:
            return False
        if row[0] is None or self._filed_bytes(key, *row)[1] is None:
            return True
        self._db.execute("UPDATE units SET ok = -1 WHERE key = ?", (key,))  # one warning: not read again
        return False

    def final_keys(self) -> set[str]:
        """The keys with a final result recorded, not yet checked: ``done`` is False for any other key."""
        self._insert_held()
        return {key for (key,) in self._db.execute("SELECT key FROM units WHERE ok >= 0")}

    def record(self, key: str, result: dict | Encoded | Filed, ok: bool = True, final: bool = True,
               hold: bool = False) -> None:
        """Store a unit's result (a JSON-able dict, or one ``encode_result`` encoded, or where ``file_result``
        filed it), committed before this returns (with any rows held before it).

        A result that would not read back (not JSON-able, nested too deep) is
        stored as that unit's error instead. ``final=False`` (a failure that
        may not happen again: a time limit, a crashed worker) keeps the result
        for this run's outputs and lets the next run try the unit again.

        ``hold``: the row joins a transaction left open for more rows, committed by ``commit`` (or the next
        record without ``hold``, or ``close``): one commit for many rows. Only for a result filed with its frame
        head (``Filed.framed``), which a killed run finds again (``recover``); this connection reads it at once
        (the rows held are inserted together before any read, or at the commit).
        """
        where: tuple = (None, None, None, None)
        if isinstance(result, Filed):
            text, where = "", (result.file, result.start, result.length, result.crc)
        elif isinstance(result, Encoded):
            text = result.text
        else:
            text, problem = _stored_text(result)
            ok = ok and problem is None
        # ok column: 1 done, 0 failed, -1 failed and to be tried again by the next run
        state = int(ok) if final else -1
        row = (key, state, text, time.time(), *where)
        if hold:
            if not self.held:
                self.held_since = time.monotonic()
            self._to_insert.append(row)
            self.held += 1
            return
        self._insert_held()  # first: a key recorded twice keeps its last row
        self._db.execute(_INSERT, row)
        self.commit()

    def _insert_held(self) -> None:
        """The rows held and not inserted yet, inserted in the open transaction (one begun for them if none is)."""
        if self._to_insert:
            if not self._db.in_transaction:
                self._db.execute("BEGIN")
            self._db.executemany(_INSERT, self._to_insert)
            self._to_insert.clear()

    def commit(self) -> None:
        """Commit the rows ``record`` held."""
        self._insert_held()
        if self._db.in_transaction:
            self._db.execute("COMMIT")
        self.held = 0

    def recover(self) -> int:
        """Record the results filed with a frame head (``file_result``'s ``key``) that no committed row points
        to, for units without a final result: those of a run killed between its workers' filing and its commit.
        Returns how many. A worker appends its results in the order the driver records them, so each file is
        read from the end of the last result a row points to in it (a file no row points to, from its start)."""
        folder = self.results_folder
        if not folder.is_dir():
            return 0
        self._insert_held()
        ends = dict(self._db.execute("SELECT file, MAX(start + length) FROM units WHERE file IS NOT NULL "
                                     "GROUP BY file").fetchall())
        found = 0
        for path in sorted(folder.iterdir()):
            try:
                with open(path, "rb") as fh:
                    size = os.fstat(fh.fileno()).st_size
                    if size <= ends.get(path.name, 0):
                        continue
                    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                        frames = list(read_frames(data, ends.get(path.name, 0)))
            except OSError as exc:  # its units run again, as any unit without a row
                warnings.warn(f"{self.path}: the result file {path} cannot be read for results to recover "
                              f"({type(exc).__name__}: {exc.strerror or exc}); their units run again",
                              RuntimeWarning, stacklevel=2)
                continue
            for key, start, length, crc, error, retry in frames:
                self._insert_held()  # a key filed twice: its first row is seen
                row = self._db.execute("SELECT ok FROM units WHERE key = ?", (key,)).fetchone()
                if row is not None and row[0] >= 0:
                    continue
                self.record(key, Filed(path.name, start, length, crc, error, retry, True), ok=not error,
                            final=not retry, hold=True)
                found += 1
        self.commit()
        return found

    def _filed_bytes(self, key: str, file: str, start: int, length: int, crc: int) -> tuple[bytes, str | None]:
        """(the bytes of a filed result, None), or (b"", why they cannot be used) after a warning naming them."""
        try:
            fd = self._files.pop(file, None)  # re-inserted below: the dict's order is the use order
            if fd is None:
                if os.path.basename(file) != file:  # a name in the folder, never a path out of it
                    raise OSError(f"not a result file name: {file!r}")
                fd = os.open(self.results_folder / file, os.O_RDONLY | os.O_CLOEXEC)
                while len(self._files) >= self.OPEN_FILES:
                    os.close(self._files.pop(next(iter(self._files))))
            self._files[file] = fd
            data = os.pread(fd, length, start)
        except OSError as exc:
            problem = f"cannot be read: {type(exc).__name__}: {exc.strerror or exc}"
        else:
            if len(data) < length:
                problem = f"cut short ({len(data)} of {length} bytes at byte {start})"
            elif zlib.crc32(data) != crc:
                problem = f"damaged (its CRC-32 differs; {length} bytes at byte {start})"
            else:
                return data, None
        warnings.warn(f"{self.path}: the result of unit {key} in {self.results_folder / file} {problem}; "
                      "the unit counts as not done and runs again", RuntimeWarning, stacklevel=3)
        return b"", problem

    def _decode(self, key: str, ok, stored: bytes, file: str | None = None, start: int = 0, length: int = 0,
                crc: int = 0, read: Callable[[bytes], dict | None] | None = None) -> tuple[bool, dict]:
        if file is not None:
            stored, problem = self._filed_bytes(key, file, start, length, crc)
            if problem is not None:  # the next run does it again
                self._insert_held()
                self._db.execute("UPDATE units SET ok = -1 WHERE key = ?", (key,))
                return False, {"error": f"stored result unreadable: the result file {problem}"}
        got = read(stored) if read is not None else None
        if got is not None:
            return ok == 1 and "error" not in got, got
        # Read as bytes: a damaged file may hold text that is not UTF-8, which is that unit's error, not the run's.
        result, problem = decode_line(stored)
        if problem is None and not isinstance(result, dict):
            problem = "not a JSON object"
        if problem:
            return False, {"error": f"stored result unreadable: {problem}"}
        return ok == 1, result

    def get(self, key: str, read: Callable[[bytes], dict | None] | None = None) -> tuple[bool, dict] | None:
        """(ok, result) of ``key``, None when not recorded. ``read``: the caller's reader of the stored bytes (a
        filed result's checked first), for a form of its own; it returns None for any other, which is decoded."""
        self._insert_held()
        row = self._db.execute("SELECT ok, CAST(result AS BLOB), file, start, length, crc FROM units WHERE key = ?",
                               (key,)).fetchone()
        if row is None:
            return None
        ok, stored, file, start, length, crc = row
        return self._decode(key, ok, stored, file, start, length, crc, read)

    def read_filed(self, key: str, where: Filed, read: Callable[[bytes], dict | None] | None = None) -> dict:
        """The result of ``key`` as ``get`` gives it, read from where its worker filed it (``where``, as recorded
        for it by this process): no query, for a caller that has the ``Filed`` in hand."""
        return self._decode(key, 1, b"", where.file, where.start, where.length, where.crc, read)[1]

    def results(self) -> Iterator[tuple[str, bool, dict]]:
        """Every recorded unit, ordered by key (callers re-order by their inputs)."""
        # A filed result that fails its check is marked on the way (an update of a row already read: allowed).
        self._insert_held()
        for key, *row in self._db.execute("SELECT key, ok, CAST(result AS BLOB), file, start, length, crc "
                                          "FROM units ORDER BY key"):
            yield (key, *self._decode(key, *row))

    def __len__(self) -> int:
        self._insert_held()
        return self._db.execute("SELECT COUNT(*) FROM units").fetchone()[0]

    def close(self) -> None:
        if not self._closed:
            self.commit()  # rows held are results the run reported
            self._db.close()
            for fd in self._files.values():
                os.close(fd)
            self._files.clear()
            self._closed = True

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
