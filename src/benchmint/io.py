"""JSONL in and out: line-numbered reading, canonical rows, atomic files."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


class InputError(Exception):
    """A whole input is unusable (missing file, unreadable): the run stops."""


def dumps(obj: Any) -> str:
    """The project's one JSON form: sorted keys, compact, UTF-8 text kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def open_input(path: str | os.PathLike, what: str) -> IO[bytes]:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} file not found: {p}")
    if p.is_dir():
        raise InputError(f"{what} path is a directory, expected a JSONL file: {p}")
    try:
        return p.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {what} file {p}: {exc.strerror}") from exc


def decode_line(raw: bytes) -> tuple[Any, str | None]:
    """One JSONL line -> (object, None) or (None, error message)."""
    try:
        return json.loads(raw), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        return None, f"malformed JSON ({exc.msg} at column {exc.colno})"


def iter_jsonl(path: str | os.PathLike, what: str) -> Iterator[tuple[int, Any, str | None]]:
    """Yield (line number, object, None) or (line number, None, error message); blank lines skipped."""
    with open_input(path, what) as fh:
        for line_no, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            obj, err = decode_line(raw)
            yield line_no, obj, err


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed into place when the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it into place on success."""
    kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh


def write_jsonl(path: str | os.PathLike, rows) -> None:
    """``rows`` as JSONL in the project's form, written atomically."""
    with atomic_write(path) as fh:
        for row in rows:
            fh.write(dumps(row) + "\n")
