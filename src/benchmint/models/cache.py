"""The request cache: replies by request key in one SQLite file, so no call is paid for twice.

Only replies with text are stored; errors and empty replies never are, so they are asked again on the next run.
Each reply is committed on its own (WAL journal) before the engine hands it on: a process killed at any moment
loses at most the replies still in flight. Several processes may share one file. The file also remembers, per
endpoint and model, which form of structured output the server accepted.

Commits only append to the WAL file; copying the WAL into the database (a checkpoint, the one step that waits for
the disk) runs in a thread of its own every ``CHECKPOINT_EVERY`` replies, so a caller's event loop never waits for
an fsync.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import NamedTuple

SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key               TEXT PRIMARY KEY,
    text              TEXT NOT NULL,
    finish_reason     TEXT,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    model             TEXT,
    structured_mode   TEXT,
    latency_s         REAL,
    created           REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS structured_modes (
    endpoint  TEXT NOT NULL,
    model     TEXT NOT NULL,
    mode      TEXT NOT NULL,
    confirmed INTEGER NOT NULL,
    PRIMARY KEY (endpoint, model)
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
FORMAT = "benchmint-reply-cache-1"
CHECKPOINT_EVERY = 1000


class CachedReply(NamedTuple):
    """A stored reply (a tuple: rows are read in bulk on the warm path)."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    model: str | None
    structured_mode: str | None


class ReplyCache:
    """Replies by key in ``path`` (``":memory:"`` for one that lives as long as the object)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            # One connection, used by one thread at a time (the engine's event loop, wherever it runs).
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # a committed reply survives a killed process
            self._db.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run in their own thread (see above)
            self._db.executescript(SCHEMA)
            stored = self._db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"cannot use {self.path} as a reply cache: {exc}") from None
        if stored is None:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
        elif stored[0] != FORMAT:
            raise ValueError(f"{self.path} is not a benchmint reply cache of this version ({stored[0]!r})")
        self.hits = self.misses = self.writes = 0
        self._checkpointer: threading.Thread | None = None
        self._closed = False

    def get(self, key: str) -> CachedReply | None:
        row = self._db.execute("SELECT text, finish_reason, prompt_tokens, completion_tokens, model, structured_mode "
                               "FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return CachedReply._make(row)

    def get_many(self, keys: list[str]) -> dict[str, CachedReply]:
        """The cached replies among ``keys`` (one query for up to 500 keys at a time)."""
        found: dict[str, CachedReply] = {}
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            sql = ("SELECT key, text, finish_reason, prompt_tokens, completion_tokens, model, structured_mode "
                   f"FROM replies WHERE key IN ({','.join('?' * len(part))})")
            for row in self._db.execute(sql, part):
                found[row[0]] = CachedReply._make(row[1:])
        self.hits += len(found)
        self.misses += len(keys) - len(found)
        return found

    def put(self, key: str, reply: CachedReply, latency_s: float) -> None:
        """Store a reply with text (committed before returning); an empty text is refused."""
        self.put_many([(key, reply, latency_s)])

    def put_many(self, rows: list[tuple[str, CachedReply, float]]) -> None:
        """Store (key, reply, latency) rows in one transaction, committed before returning."""
        if any(not reply.text for _, reply, _ in rows):
            raise ValueError("an empty reply is never cached")
        now = time.time()
        values = [(key, r.text, r.finish_reason, r.prompt_tokens, r.completion_tokens, r.model, r.structured_mode,
                   latency_s, now) for key, r, latency_s in rows]
        before = self.writes
        if len(values) == 1:
            self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values[0])
        else:
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        self.writes += len(values)
        if (self.writes // CHECKPOINT_EVERY > before // CHECKPOINT_EVERY and self.path != ":memory:"
                and not self._checkpointing()):
            self._checkpointer = threading.Thread(target=self._checkpoint, name="reply-cache-checkpoint", daemon=True)
            self._checkpointer.start()

    def _checkpointing(self) -> bool:
        return self._checkpointer is not None and self._checkpointer.is_alive()

    def _checkpoint(self, mode: str = "PASSIVE") -> None:
        """Copy the WAL into the database from a connection of this thread's own (PASSIVE: blocks no one)."""
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        try:
            db.execute(f"PRAGMA wal_checkpoint({mode})")
        except sqlite3.OperationalError:
            pass  # busy: the next checkpoint (or the one at close) copies it
        finally:
            db.close()

    def __contains__(self, key: str) -> bool:
        return self._db.execute("SELECT 1 FROM replies WHERE key = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def structured_mode(self, endpoint: str, model: str) -> tuple[str, bool] | None:
        row = self._db.execute("SELECT mode, confirmed FROM structured_modes WHERE endpoint = ? AND model = ?",
                               (endpoint, model)).fetchone()
        return None if row is None else (row[0], bool(row[1]))

    def set_structured_mode(self, endpoint: str, model: str, mode: str, confirmed: bool) -> None:
        self._db.execute("INSERT OR REPLACE INTO structured_modes VALUES (?, ?, ?, ?)",
                         (endpoint, model, mode, int(confirmed)))

    def stats(self) -> dict:
        return {"path": self.path, "hits": self.hits, "misses": self.misses, "writes": self.writes}

    def close(self) -> None:
        if not self._closed:
            if self._checkpointer is not None:
                self._checkpointer.join()
            self._db.close()  # the last connection to close checkpoints what is left
            self._closed = True
