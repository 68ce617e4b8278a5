"""The run ledger: one SQLite file per output directory, so a killed run resumes.

Every unit of work (a PDF, a CIF, a model call) is keyed by the hash of its
content and of the settings that shape its result. A finished unit's result is
committed to the ledger, in a transaction of its own, before it counts as done;
a rerun skips every key already there.
Output files are written from the ledger at the end of a run, in a stable
order, so a run killed half way and rerun produces the same files as one
uninterrupted run, with no duplicates.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
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


def encode_result(result: dict) -> Encoded:
    """``result`` as ``Ledger.record`` stores it."""
    text, problem = _stored_text(result)
    retry = isinstance(result, dict) and result.get("retry") is True
    return Encoded(text, problem is not None or "error" in result, retry)


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


class Ledger:
    """Results by key in ``path`` (SQLite, WAL journal); one writer, the calling process.

    Each ``record`` is its own transaction: in WAL mode with synchronous=NORMAL
    a commit is an append to the log without an fsync, so it survives a killed
    process (not a power cut) and costs about a tenth of a millisecond (benches/bench_ledger.py).
    """

    def __init__(self, path: str | os.PathLike, kind: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._closed = False
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a committed unit survives a killed process
        self._db.executescript(SCHEMA)
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
        """The unit has a final result (one recorded with ``final=False`` runs again on the next run)."""
        return self._db.execute("SELECT 1 FROM units WHERE key = ? AND ok >= 0", (key,)).fetchone() is not None

    def record(self, key: str, result: dict | Encoded, ok: bool = True, final: bool = True) -> None:
        """Store a unit's result (a JSON-able dict, or one ``encode_result`` encoded), committed before this
        returns.

        A result that would not read back (not JSON-able, nested too deep) is
        stored as that unit's error instead. ``final=False`` (a failure that
        may not happen again: a time limit, a crashed worker) keeps the result
        for this run's outputs and lets the next run try the unit again.
        """
        if isinstance(result, Encoded):
            text = result.text
        else:
            text, problem = _stored_text(result)
            ok = ok and problem is None
        # ok column: 1 done, 0 failed, -1 failed and to be tried again by the next run
        state = int(ok) if final else -1
        self._db.execute("INSERT OR REPLACE INTO units VALUES (?, ?, ?, ?)", (key, state, text, time.time()))

    @staticmethod
    def _decode(ok, stored: bytes) -> tuple[bool, dict]:
        # Read as bytes: a damaged file may hold text that is not UTF-8, which is that unit's error, not the run's.
        result, problem = decode_line(stored)
        if problem is None and not isinstance(result, dict):
            problem = "not a JSON object"
        if problem:
            return False, {"error": f"stored result unreadable: {problem}"}
        return ok == 1, result

    def get(self, key: str) -> tuple[bool, dict] | None:
        row = self._db.execute("SELECT ok, CAST(result AS BLOB) FROM units WHERE key = ?", (key,)).fetchone()
        return None if row is None else self._decode(*row)

    def results(self) -> Iterator[tuple[str, bool, dict]]:
        """Every recorded unit, ordered by key (callers re-order by their inputs)."""
        for key, ok, result in self._db.execute("SELECT key, ok, CAST(result AS BLOB) FROM units ORDER BY key"):
            yield (key, *self._decode(ok, result))

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM units").fetchone()[0]

    def close(self) -> None:
        if not self._closed:
            self._db.close()
            self._closed = True

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
