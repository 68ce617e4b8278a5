"""JSONL in and out: line-numbered reading, canonical rows, atomic files."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


class InputError(Exception):
    """A whole input is unusable (missing file, unreadable): the run stops."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """JSON text with every lone surrogate escaped (JSON can carry ``"\\ud800"``, UTF-8 cannot).

    Outside its strings JSON text is ASCII, so every surrogate is inside one and
    the escaped text reads back to the same value.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps(obj: Any) -> str:
    """The project's one JSON form: sorted keys, compact, UTF-8 text kept as is (lone surrogates escaped)."""
    return escape_surrogates(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                        allow_nan=False))


def dumps_text(text: str) -> str:
    """``dumps(text)`` for one string, through json's compiled string encoder without making an encoder each call
    (a JSONL line of a few strings, written per row, is then formatted by hand)."""
    return escape_surrogates(json.encoder.encode_basestring(text))


# A field of a row that the process writing it knows and the one making it does not is written by the maker as the
# string "\0name\0", which ``dumps`` spells "\u0000name\u0000" (a raw NUL is never in it): the writer cuts the row
# there (``FIELD_MARKS.split``: text, name, text, ...) and joins its fields' JSON between the pieces, the keys'
# sorted order being the same with the marks as with the values.
FIELD_MARKS = re.compile(r'"\\u0000([a-z_0-9]+)\\u0000"')


def field_mark(name: str) -> str:
    """How a row's JSON spells the mark of the field ``name`` (what ``FIELD_MARKS`` cuts out)."""
    return f'"\\u0000{name}\\u0000"'


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


# The deepest nesting of arrays and objects a line may have. Python's own limit
# depends on how deep the caller's stack already is, so one line could decode in
# one place and fail in another; a fixed limit well below it decides every line
# the same way wherever it is read.
MAX_DEPTH = 512

# A JSON string (possibly cut off by the end of the line) or one bracket.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?|[\[\]{}]', re.DOTALL)


def nesting_error(text: str) -> str | None:
    """Why ``text`` cannot be read as JSON because of its nesting, or None when it nests at most MAX_DEPTH deep."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None  # too few brackets to nest that deep
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        c = text[m.start()]
        if c == '"':
            continue
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels at column {m.start() + 1}"
        else:
            depth -= 1
    return None


def decode_line(raw: bytes) -> tuple[Any, str | None]:
    """One JSONL line -> (object, None) or (None, error message); never raises for any bytes.

    The bytes must be UTF-8 (one leading byte-order mark is skipped, as JSON
    readers do). A raw NUL byte is malformed JSON, inside a string as anywhere
    else; an escaped one (``\\u0000``) is text like any other character.
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    problem = nesting_error(text)
    if problem:
        return None, f"malformed JSON ({problem})"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"malformed JSON ({exc.msg} at column {exc.colno})"
    except ValueError as exc:  # an integer literal longer than Python converts (sys.get_int_max_str_digits)
        return None, f"malformed JSON ({str(exc).split(':')[0]})"
    except RecursionError:  # only when the caller's own stack is nearly exhausted
        return None, "malformed JSON (nested too deep for the reader)"


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
    text = "b" not in mode
    with atomic_path(path) as tmp, open(tmp, mode, encoding="utf-8" if text else None,
                                        newline="\n" if text else None) as fh:
        yield fh


def write_jsonl(path: str | os.PathLike, rows) -> None:
    """``rows`` as JSONL in the project's form, written atomically."""
    with atomic_write(path) as fh:
        for row in rows:
            fh.write(dumps(row) + "\n")
