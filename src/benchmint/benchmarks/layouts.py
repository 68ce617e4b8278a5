"""The containers benchmark items come in, read row by row with each row's location.

* ``.jsonl``: one JSON object a line (benchmint's own items, CSMBench's
  ``metadata.jsonl``, CrystalXRD-Bench rows); location ``file:line``.
* ``.json``: a JSON array of objects (location ``file:row N``), or JSON lines
  under a ``.json`` name (the Hugging Face "json" format), read as ``.jsonl``.
* ``.parquet``: one row per item (SeePhys on Hugging Face); ``file:row N``.
* ``.tsv``: a header line, then one row per item, quoted as pandas writes
  (SeePhys for VLMEvalKit); ``file:line`` of the row's first line.
* a directory: a Hugging Face ImageFolder, ``metadata.jsonl`` beside the
  images, at the top or under ``train/`` or ``<config>/train/`` (CSMBench).

Relative file names in a row are relative to the folder of the file it came
from (``Origin.base``), and must resolve inside it or inside a folder the user
allowed (``Origin.roots``; ``benchmarks.base.item_file`` holds the rule).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmint.io import InputError, decode_line, iter_jsonl

PARQUET_BATCH = 64  # rows decoded at a time: SeePhys rows carry their images


@dataclass(frozen=True)
class Origin:
    base: Path  # the folder relative file names are resolved against
    container: str  # "jsonl", "json", "parquet", "tsv"
    allowed: tuple[Path, ...] = ()  # folders outside ``base`` whose files rows may name (--allow-paths-outside)

    def roots(self) -> tuple[Path, ...]:
        """The folders a row's files must resolve into (symlinks resolved): its own and the allowed ones."""
        return (self.base.resolve(), *(p.resolve() for p in self.allowed))


@dataclass(frozen=True)
class RowError:
    message: str
    field: str | None = None


Row = tuple[str, Origin, "dict[str, Any] | RowError"]


def rows(path: Path, config: str | None = None, allowed: tuple[Path, ...] = ()) -> Iterator[Row]:
    """(location, origin, row or RowError) for every row of ``path``; InputError when the file is unusable.

    ``allowed``: folders besides the items file's own whose files the rows may name."""
    if not path.exists():
        raise InputError(f"items file not found: {path}")
    if path.is_dir():
        meta = imagefolder_metadata(path, config)
        yield from _jsonl(meta, Origin(meta.parent, "jsonl", allowed))
        return
    suffix = path.suffix.lower()
    origin = Origin(path.parent, suffix.lstrip("."), allowed)
    if suffix == ".jsonl":
        yield from _jsonl(path, origin)
    elif suffix == ".json":
        yield from _json(path, origin)
    elif suffix == ".parquet":
        yield from _parquet(path, origin)
    elif suffix == ".tsv":
        yield from _tsv(path, origin)
    else:
        raise InputError(f"{path}: unknown items layout; expected a .jsonl, .json, .parquet or .tsv file "
                         f"or an ImageFolder directory with metadata.jsonl")


def imagefolder_metadata(folder: Path, config: str | None) -> Path:
    candidates = [folder / "metadata.jsonl", folder / "train" / "metadata.jsonl"]
    if config is not None:
        candidates += [folder / config / "train" / "metadata.jsonl", folder / config / "metadata.jsonl"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise InputError(f"{folder}: no ImageFolder metadata; looked for " + ", ".join(str(c) for c in candidates))


def _jsonl(path: Path, origin: Origin) -> Iterator[Row]:
    for line_no, obj, err in iter_jsonl(path, "items"):
        yield from _one(f"{path}:{line_no}", origin, obj, err)


def _one(location: str, origin: Origin, obj: Any, err: str | None) -> Iterator[Row]:
    if err is not None:
        yield location, origin, RowError(err)
    elif not isinstance(obj, dict):
        yield location, origin, RowError(f"a row must be a JSON object, got {type(obj).__name__}")
    else:
        yield location, origin, obj


def _json(path: Path, origin: Origin) -> Iterator[Row]:
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"["):
        yield from _jsonl(path, Origin(origin.base, "jsonl", origin.allowed))
        return
    obj, err = decode_line(path.read_bytes())
    if err is not None:
        raise InputError(f"{path}: {err}")
    for k, row in enumerate(obj, 1):
        yield from _one(f"{path}:row {k}", origin, row, None)


def _parquet(path: Path, origin: Origin) -> Iterator[Row]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{path}: not a readable parquet file ({exc})") from None
    k = 0
    for batch in reader.iter_batches(batch_size=PARQUET_BATCH):
        for row in batch.to_pylist():
            k += 1
            yield f"{path}:row {k}", origin, row


def _tsv(path: Path, origin: Origin) -> Iterator[Row]:
    csv.field_size_limit(sys.maxsize)  # a cell holds whole base64 images
    try:
        fh = open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError(f"cannot read items file {path}: {exc.strerror}") from None
    with fh:
        reader = csv.reader(fh, delimiter="\t")
        try:
            header = next(reader, None)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: unreadable header line ({exc})") from None
        if not header:
            raise InputError(f"{path}: empty TSV file (no header line)")
        start = reader.line_num + 1
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}: not UTF-8 text after line {start - 1} ({exc.reason})") from None
            except csv.Error as exc:
                yield f"{path}:{start}", origin, RowError(f"malformed TSV row ({exc})")
                start = reader.line_num + 1
                continue
            location, start = f"{path}:{start}", reader.line_num + 1
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                yield location, origin, RowError(f"{len(cells)} cells, the header has {len(header)}")
                continue
            yield location, origin, dict(zip(header, cells))
