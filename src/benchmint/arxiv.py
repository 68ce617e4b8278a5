"""arXiv papers in a dump: ids from file names, the metadata snapshot as an index beside the run, and filters.

arXiv's bulk PDFs are named by id and version: ``2301.05883v1.pdf`` (since April 2007: YYMM.NNNN, five
digits from 2015) and ``cond-mat0102536v1.pdf`` (before: the archive, then YYMMNNN; the id is
``cond-mat/0102536``). Its metadata is one JSON object a line (``id``, ``categories`` separated by spaces,
``versions`` with their ``created`` dates, ``update_date``, ``title``, ``doi``, ...), several GB: it is
streamed once into a SQLite file and looked up by id, so memory does not grow with the snapshot.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmint.io import InputError

_NEW_ID = re.compile(r"(\d{4}\.\d{4,5})(?:v(\d+))?")
_OLD_ID = re.compile(r"([a-z]+(?:-[a-z]+)?)(\d{7})(?:v(\d+))?")


def parse_id(name: str) -> tuple[str, int | None] | None:
    """(arXiv id, version or None) of a file named by arXiv, else None: ``2301.05883v2.pdf`` ->
    ("2301.05883", 2), ``cond-mat0102536v1.pdf`` -> ("cond-mat/0102536", 1)."""
    stem = Path(name).name
    stem = stem[:-4] if stem.lower().endswith(".pdf") else stem
    m = _NEW_ID.fullmatch(stem)
    if m:
        # Four-digit numbers from 0704 to 1412, five from 1501: anything else is not an arXiv name.
        yymm, number = m.group(1).split(".")
        if len(number) != (4 if yymm < "1501" else 5):
            return None
        return m.group(1), int(m.group(2)) if m.group(2) else None
    m = _OLD_ID.fullmatch(stem)
    if m:
        return f"{m.group(1)}/{m.group(2)}", int(m.group(3)) if m.group(3) else None
    return None


SCHEMA = """
CREATE TABLE papers (id TEXT PRIMARY KEY, categories TEXT, versions TEXT, update_date TEXT, title TEXT,
                     doi TEXT, journal_ref TEXT);
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE problems (line INTEGER PRIMARY KEY, error TEXT NOT NULL);
"""
BATCH = 2000  # records a transaction while indexing


@functools.cache
def _parsedate():
    # Imported when a metadata snapshot is indexed: email's modules are a tenth of a harvest driver's imports.
    from email.utils import parsedate_to_datetime

    return parsedate_to_datetime


def _date(created) -> str | None:
    """ISO date of a version's ``created`` ("Mon, 2 Apr 2007 19:18:42 GMT"); None when absent or unreadable."""
    try:
        return _parsedate()(created).date().isoformat()
    except (TypeError, ValueError, IndexError):
        return None


def _row(line: bytes) -> tuple:
    rec = json.loads(line)
    if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or not rec["id"].strip():
        raise ValueError("not a JSON object with an \"id\"")
    versions = {}
    for v in rec.get("versions") or ():
        if isinstance(v, dict) and isinstance(v.get("version"), str) and v["version"][1:].isdigit():
            versions[int(v["version"][1:])] = _date(v.get("created"))
    text = [rec.get(k) if isinstance(rec.get(k), str) else None for k in ("categories", "update_date", "title",
                                                                         "doi", "journal-ref")]
    title = " ".join(text[2].split()) if text[2] else None  # the snapshot folds long titles over lines
    return (rec["id"].strip(), text[0], json.dumps(versions, sort_keys=True), text[1], title, text[3], text[4])


def _lines(path: Path) -> Iterable[tuple[int, bytes]]:
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                yield number, line


class MetadataIndex:
    """The papers of an arXiv metadata snapshot by id, in a SQLite file built from it (``open``)."""

    def __init__(self, db_path: Path, snapshot: Path) -> None:
        self.path, self.snapshot = db_path, snapshot
        self._db = sqlite3.connect(db_path)

    @classmethod
    def open(cls, snapshot: str | os.PathLike, db_path: str | os.PathLike) -> MetadataIndex:
        """The index of ``snapshot`` at ``db_path``: kept from an earlier run when it was built from the same
        snapshot (path, size, modification time), else built again, into a new file moved in place when
        complete (a build killed half way leaves no index that looks whole)."""
        snapshot, db_path = Path(snapshot), Path(db_path)
        try:
            st = snapshot.stat()
        except OSError as exc:
            raise InputError(f"--metadata {snapshot}: {exc.strerror or exc}") from None
        stamp = json.dumps([str(snapshot.resolve()), st.st_size, st.st_mtime_ns])
        if db_path.exists():
            try:
                with sqlite3.connect(db_path) as db:
                    got = db.execute("SELECT value FROM meta WHERE name = 'snapshot'").fetchone()
                if got is not None and got[0] == stamp:
                    return cls(db_path, snapshot)
            except sqlite3.Error:
                pass  # not an index of ours, or damaged: built again
        cls._build(snapshot, db_path, stamp)
        return cls(db_path, snapshot)

    @staticmethod
    def _build(snapshot: Path, db_path: Path, stamp: str) -> None:
        tmp = db_path.with_name(db_path.name + ".building")
        tmp.unlink(missing_ok=True)
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")  # a build is all or nothing: the file is moved in place at the end
            db.executescript(SCHEMA)
            rows: list[tuple] = []
            problems: list[tuple[int, str]] = []
            for number, line in _lines(snapshot):
                try:
                    rows.append(_row(line))
                except (ValueError, UnicodeDecodeError) as exc:  # one bad line is listed, the index goes on
                    problems.append((number, f"{type(exc).__name__}: {exc}"))
                if len(rows) >= BATCH:
                    _insert(db, rows, problems)
                    rows, problems = [], []
            _insert(db, rows, problems)
            db.execute("INSERT INTO meta VALUES ('snapshot', ?)", (stamp,))
        finally:
            db.close()
        os.replace(tmp, db_path)

    def problems(self) -> list[tuple[int, str]]:
        """(line number, error) of every snapshot line that could not be read."""
        return self._db.execute("SELECT line, error FROM problems ORDER BY line").fetchall()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM papers").fetchone()[0]

    def lookup(self, ids: Iterable[str]) -> dict[str, dict]:
        """The records of those ``ids`` the snapshot has: {id: {categories: [...], versions: {n: date},
        update_date, title, doi, journal_ref}}."""
        wanted = sorted(set(ids))
        found: dict[str, dict] = {}
        for i in range(0, len(wanted), 500):  # under SQLite's limit of bound parameters
            chunk = wanted[i:i + 500]
            query = f"SELECT * FROM papers WHERE id IN ({','.join('?' * len(chunk))})"
            for pid, cats, versions, update, title, doi, jref in self._db.execute(query, chunk):
                found[pid] = {"categories": cats.split() if cats else [],
                              "versions": {int(k): v for k, v in json.loads(versions).items()},
                              "update_date": update, "title": title, "doi": doi, "journal_ref": jref}
        return found

    def close(self) -> None:
        self._db.close()


def _insert(db: sqlite3.Connection, rows: list[tuple], problems: list[tuple[int, str]]) -> None:
    db.execute("BEGIN")
    # A snapshot lists each paper once; should an id come again, its last line holds.
    db.executemany("INSERT OR REPLACE INTO papers VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO problems VALUES (?, ?)", problems)
    db.execute("COMMIT")


def joined(record: dict | None, version: int | None) -> dict:
    """The fields a harvested record takes from its paper's metadata: categories, the date of its version
    (``created``; of v1 when the file names no version), the last update, title, DOI."""
    if record is None:
        return {"in_metadata": False}
    return {"in_metadata": True, "categories": record["categories"],
            "created": record["versions"].get(version or 1), "update_date": record["update_date"],
            "title": record["title"], "doi": record["doi"]}


@dataclass(frozen=True)
class Filters:
    """Which papers a harvest keeps. ``categories``: a paper with one of them (a name without a dot, such as
    ``cond-mat``, stands for its archive's every category); ``date_from``/``date_to``: the date of the file's
    version, inclusive; ``latest_version``: of the versions of a paper the inputs hold (after the other
    filters), the highest."""

    categories: tuple[str, ...] = ()
    date_from: str | None = None
    date_to: str | None = None
    latest_version: bool = False

    def __post_init__(self) -> None:
        for name in ("date_from", "date_to"):
            value = getattr(self, name)
            if value is not None:
                try:
                    datetime.date.fromisoformat(value)
                except ValueError:
                    raise ValueError(f"--{name.removeprefix('date_')} takes a date as YYYY-MM-DD, got {value!r}") \
                        from None
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError(f"--from {self.date_from} is after --to {self.date_to}")

    @property
    def need_metadata(self) -> bool:
        return bool(self.categories) or self.date_from is not None or self.date_to is not None

    @property
    def active(self) -> bool:
        return self.need_metadata or self.latest_version

    def why_dropped(self, ident: tuple[str, int | None] | None, meta: dict | None) -> str | None:
        """The reason a paper is left out by the metadata filters (None: kept); ``latest`` is applied after."""
        if ident is None:
            return "no arXiv id in the file name"
        if not self.need_metadata:
            return None
        if not meta or not meta.get("in_metadata"):
            return "not in the metadata snapshot"
        if self.categories and not any(_in_category(c, want) for c in meta["categories"] for want in self.categories):
            return "not in --categories"
        created = meta.get("created")
        if created is None:
            return "no date for its version in the metadata snapshot"
        if self.date_from is not None and created < self.date_from:
            return "dated before --from"
        if self.date_to is not None and created > self.date_to:
            return "dated after --to"
        return None


def _in_category(category: str, wanted: str) -> bool:
    return category == wanted or ("." not in wanted and category.startswith(wanted + "."))


def latest_versions(idents: Sequence[tuple[str, int | None] | None]) -> list[int | None]:
    """For each (id, version), the highest version of that id among ``idents`` (None for entries without an id)."""
    best: dict[str, int] = {}
    for ident in idents:
        if ident is not None:
            best[ident[0]] = max(best.get(ident[0], 0), ident[1] or 0)
    return [None if ident is None else best[ident[0]] for ident in idents]
