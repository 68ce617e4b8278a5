"""Files inside archives (tar, compressed tar, zip), listed and read member by member, never unpacked to disk.

The parent lists an archive's members (a tar's headers, a zip's central directory); a worker reads one member's
bytes by its place in the archive. An uncompressed tar (arXiv's bulk PDF format) and a zip are read by a real
seek; a compressed tar can only be read forward, so each worker keeps its archives open and, taking members in
archive order, decompresses each archive about once.

A member is identified without reading its bytes: its name, size and what the archive says of its content (a
tar header's time and checksum, a zip entry's CRC-32). A finished member is thus skipped by a resumed run
without being read or decompressed.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import sqlite3
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmint.run.ledger import content_key

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
# Errors of damaged archives: a short read, a bad header, a bad CRC, a broken compressed stream.
ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError)


def is_archive(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(ARCHIVE_SUFFIXES)


class MemberError(Exception):
    """A member that cannot be read (a truncated or damaged archive)."""


@dataclass(frozen=True)
class Member:
    """One file inside an archive: where it is (``offset``: a tar member's data in the uncompressed stream, a
    zip entry's local header), its ``size``, and ``stamp``, what the archive says of its bytes."""

    archive: str
    name: str
    offset: int
    size: int
    stamp: str

    @property
    def path(self) -> Path:
        """The name rows give the member: the archive's path as given, then the member's name in it."""
        return Path(self.archive) / self.name

    def key(self, settings: dict | None = None) -> str:
        """The unit key of the member with ``settings``, from its identity in the archive (not its bytes)."""
        return content_key(f"archive member\0{self.name}\0{self.size}\0{self.stamp}".encode(), settings)

    def where(self) -> dict:
        return {"archive": self.archive, "member": self.name}


def list_members(archive: str | os.PathLike, suffix: str) -> tuple[list[Member], str | None]:
    """The regular members of ``archive`` whose names end with ``suffix``, in archive order, and the archive's
    damage (None when it read to its end): members listed before the damage are kept."""
    archive = str(archive)
    if archive.lower().endswith(".zip"):
        try:
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
        except ARCHIVE_ERRORS as exc:
            return [], f"cannot read the archive: {type(exc).__name__}: {exc}"
        return [Member(archive, i.filename, i.header_offset, i.file_size, f"crc32 {i.CRC:08x}") for i in infos
                if not i.is_dir() and i.filename.lower().endswith(suffix)], None
    members: list[Member] = []
    try:
        with tarfile.open(archive, "r:*") as tf:
            while (info := tf.next()) is not None:
                if info.isreg() and info.name.lower().endswith(suffix):
                    members.append(Member(archive, info.name, info.offset_data, info.size,
                                          f"mtime {info.mtime} chksum {info.chksum}"))
    except ARCHIVE_ERRORS as exc:
        after = f" past member {members[-1].name}" if members else ""
        return members, f"cannot read the archive{after}: {type(exc).__name__}: {exc}"
    return members, None


class Listings:
    """Archive listings kept beside a run (a SQLite file), so that a rerun lists a compressed tar without
    decompressing it. A listing holds while the archive keeps its size and modification time."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None  # made with the first archive: a run of loose files has none

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, isolation_level=None)
            self._conn.execute("CREATE TABLE IF NOT EXISTS listings (archive TEXT, suffix TEXT, stamp TEXT NOT NULL, "
                               "members TEXT NOT NULL, damage TEXT, PRIMARY KEY (archive, suffix))")
        return self._conn

    def members(self, archive: str | os.PathLike, suffix: str) -> tuple[list[Member], str | None]:
        """``list_members(archive, suffix)``, from the kept listing when the archive has not changed."""
        st = os.stat(archive)
        where, stamp = str(Path(archive).resolve()), f"{st.st_size} {st.st_mtime_ns}"
        row = self._db.execute("SELECT stamp, members, damage FROM listings WHERE archive = ? AND suffix = ?",
                               (where, suffix)).fetchone()
        if row is not None and row[0] == stamp:
            return [Member(str(archive), *fields) for fields in json.loads(row[1])], row[2]
        members, damage = list_members(archive, suffix)
        listed = json.dumps([[m.name, m.offset, m.size, m.stamp] for m in members])
        self._db.execute("INSERT OR REPLACE INTO listings VALUES (?, ?, ?, ?, ?)", (where, suffix, stamp, listed,
                                                                                      damage))
        return members, damage

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


# Per process: archive path -> (process id, open file or ZipFile, {zip header offset: ZipInfo}). The process id
# keeps a forked worker from reading through its parent's file offset.
_OPEN: dict[str, tuple[int, Any, dict]] = {}
_MAX_OPEN = 16


def _opened(archive: str) -> tuple[Any, dict]:
    got = _OPEN.get(archive)
    if got is not None and got[0] == os.getpid():
        return got[1], got[2]
    if len(_OPEN) >= _MAX_OPEN:
        _, handle, _ = _OPEN.pop(next(iter(_OPEN)))
        handle.close()
    if archive.lower().endswith(".zip"):
        zf = zipfile.ZipFile(archive)
        handle, index = zf, {i.header_offset: i for i in zf.infolist()}
    else:
        with open(archive, "rb") as fh:
            magic = fh.read(6)
        opener = (gzip.open if magic[:2] == b"\x1f\x8b" else bz2.open if magic[:3] == b"BZh"
                  else lzma.open if magic == b"\xfd7zXZ\x00" else open)
        handle, index = opener(archive, "rb"), {}
    _OPEN[archive] = (os.getpid(), handle, index)
    return handle, index


def read_member(member: Member) -> bytes:
    """The member's bytes; MemberError naming the archive and member when they cannot be read whole."""
    try:
        handle, index = _opened(member.archive)
        if isinstance(handle, zipfile.ZipFile):
            info = index.get(member.offset)
            if info is None:
                raise MemberError("no such entry (the archive changed since it was listed)")
            data = handle.read(info)  # zipfile checks the CRC-32
        else:
            handle.seek(member.offset)
            data = handle.read(member.size)
    except MemberError as exc:
        raise MemberError(f"cannot read member {member.name} of {member.archive}: {exc}") from None
    except ARCHIVE_ERRORS as exc:
        _OPEN.pop(member.archive, None)  # a broken stream is not read again from where it broke
        raise MemberError(f"cannot read member {member.name} of {member.archive}: {type(exc).__name__}: {exc}") \
            from None
    if len(data) != member.size:
        raise MemberError(f"cannot read member {member.name} of {member.archive}: truncated "
                          f"({len(data)} of {member.size} bytes)")
    return data


def read_source(source: str | os.PathLike | Member) -> bytes:
    """The bytes of a unit's input: a file's, or an archive member's."""
    return read_member(source) if isinstance(source, Member) else Path(source).read_bytes()
