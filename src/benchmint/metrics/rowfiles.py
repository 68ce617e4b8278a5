"""Where ``score`` puts its rows: one ``scores.jsonl`` (the default) or parts in ``scores/`` (``--rows-per-file``).

The parts form is ``scores/part-00000.jsonl``, ``scores/part-00001.jsonl``, ... with ``scores/manifest.json``
naming them in order with each part's rows and bytes; every part but the last holds exactly ``rows_per_file``
rows, and the parts concatenated in name order are, byte for byte, the ``scores.jsonl`` the default writes. Each
part is a file of its own, so the compiled writer writes several at once without sharing a file's lock.

Both forms are written atomically: into a temporary name beside the target, renamed into place when whole, the
manifest written before that rename, so a killed run leaves either the previous rows or none, never a partial
set. A run folder holds one form: writing either removes the other. Everything that reads a run's rows goes
through ``score_row_files`` / ``read_score_rows`` here, which read either form and check a parts set against
its manifest.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

SCORES_FILE = "scores.jsonl"
PARTS_DIR = "scores"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "benchmint-score-parts/1"


MAX_PARTS = 100_000  # five digits keep the name order the row order (the compiled writer's limit too)


def part_name(k: int) -> str:
    """The k-th part's file name (as the compiled writer names it too)."""
    if not 0 <= k < MAX_PARTS:
        raise ValueError(f"more than {MAX_PARTS:,} parts: a larger rows per file is needed")
    return f"part-{k:05d}.jsonl"


def check_rows_per_file(value) -> int:
    """``--rows-per-file``: 0 for the one file, else a whole number of rows per part, at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"rows per file must be a whole number >= 1 (0: one scores.jsonl), not {value!r}")
    return value


@dataclass
class RowTarget:
    """What the scoring stream writes into: ``path`` is the temporary file (one file) or folder (parts)."""

    path: Path
    rows_per_file: int
    parts_rows: list[int] = field(default_factory=list)  # rows per part, in order, once written

    @property
    def parted(self) -> bool:
        return self.rows_per_file > 0

    def files(self) -> list[Path]:
        """The written files in row order."""
        if not self.parted:
            return [self.path]
        return [self.path / part_name(k) for k in range(len(self.parts_rows))]

    @contextlib.contextmanager
    def text(self) -> Iterator[IO[str]]:
        """A text stream for rows written line by line (the reference path), cut into the parts as they come."""
        if not self.parted:
            with open(self.path, "w", encoding="utf-8", newline="\n") as fh:
                yield fh
            return
        writer = _PartsWriter(self)
        try:
            yield writer  # type: ignore[misc]
        finally:
            writer.close()

    def cut_into_parts(self, single: Path) -> None:
        """The rows of one file written elsewhere (the id shards' concatenation) written as this target's parts."""
        with self.text() as out, open(single, encoding="utf-8", newline="\n") as src:
            for line in src:
                out.write(line)


class _PartsWriter:
    """A write()-only text stream that starts a new part every ``rows_per_file`` lines."""

    def __init__(self, target: RowTarget) -> None:
        self.target = target
        self.fh: IO[str] | None = None

    def write(self, text: str) -> int:
        t = self.target
        if text and not text.endswith("\n"):
            raise ValueError("rows are written as whole lines")
        start = 0
        while start < len(text):  # lines end at "\n" only: a row may hold U+2028, which splitlines() cuts at
            end = text.find("\n", start) + 1 or len(text)
            line = text[start:end]
            start = end
            if self.fh is None or t.parts_rows[-1] == t.rows_per_file:
                self.close()
                self.fh = open(t.path / part_name(len(t.parts_rows)), "w", encoding="utf-8", newline="\n")
                t.parts_rows.append(0)
            self.fh.write(line)
            t.parts_rows[-1] += 1
        return len(text)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def atomic_rows(out_dir: Path, rows_per_file: int = 0) -> Iterator[RowTarget]:
    """A RowTarget at a temporary name in ``out_dir``, put in place as scores.jsonl or scores/ when the block
    succeeds (the parts with their manifest), removed when it fails."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows_per_file = check_rows_per_file(rows_per_file)
    name = PARTS_DIR if rows_per_file else SCORES_FILE
    tmp = out_dir / f".{name}.tmp"
    _remove(tmp)  # left by a killed run
    if rows_per_file:
        tmp.mkdir()
    target = RowTarget(tmp, rows_per_file)
    try:
        yield target
        if rows_per_file:
            _write_manifest(target)
        # The other form goes first: a kill from here on leaves no rows rather than rows of two runs.
        _remove(out_dir / (SCORES_FILE if rows_per_file else PARTS_DIR))
        final = out_dir / name
        if rows_per_file:
            old = out_dir / f".{PARTS_DIR}.old"
            _remove(old)
            if final.exists():
                os.replace(final, old)
            os.replace(tmp, final)
            _remove(old)
        else:
            os.replace(tmp, final)
    finally:
        _remove(tmp)


def _write_manifest(target: RowTarget) -> None:
    parts = [{"file": f.name, "rows": n, "bytes": f.stat().st_size} for f, n in zip(target.files(), target.parts_rows)]
    manifest = {"format": MANIFEST_FORMAT, "rows_per_file": target.rows_per_file,
                "rows": sum(target.parts_rows), "bytes": sum(p["bytes"] for p in parts), "parts": parts}
    with open(target.path / MANIFEST, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")


def has_score_rows(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run's rows in either form."""
    run_dir = Path(run_dir)
    return (run_dir / SCORES_FILE).is_file() or (run_dir / PARTS_DIR / MANIFEST).is_file()


def score_rows_source(run_dir: Path) -> Path:
    """The file that stands for a run's rows in a report's sources: scores.jsonl, or the parts' manifest."""
    run_dir = Path(run_dir)
    manifest = run_dir / PARTS_DIR / MANIFEST
    return manifest if manifest.is_file() and not (run_dir / SCORES_FILE).is_file() else run_dir / SCORES_FILE


def score_row_files(run_dir: Path) -> list[tuple[Path, int | None]]:
    """A run's rows as (file, rows or None when unknown) in row order: scores.jsonl alone, or the parts its
    manifest names, each checked to be there with the manifest's size. ValueError names what is wrong."""
    run_dir = Path(run_dir)
    single, manifest_path = run_dir / SCORES_FILE, run_dir / PARTS_DIR / MANIFEST
    if single.is_file():
        if manifest_path.exists():
            raise ValueError(f"{run_dir} holds both {SCORES_FILE} and {PARTS_DIR}/: the rows of two runs; "
                             f"remove the older")
        return [(single, None)]
    if not manifest_path.is_file():
        raise ValueError(f"{run_dir}: no {SCORES_FILE} and no {PARTS_DIR}/{MANIFEST}")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format {manifest.get('format')!r}, expected {MANIFEST_FORMAT!r}")
        parts = [(str(p["file"]), int(p["rows"]), int(p["bytes"])) for p in manifest["parts"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{manifest_path}: not a parts manifest ({exc})") from exc
    out: list[tuple[Path, int | None]] = []
    for k, (name, rows, size) in enumerate(parts):
        path = manifest_path.parent / name
        if name != part_name(k):
            raise ValueError(f"{manifest_path}: part {k} is named {name!r}, expected {part_name(k)!r}")
        try:
            got = path.stat().st_size
        except OSError as exc:
            raise ValueError(f"{path}: a part {manifest_path} names is missing ({exc.strerror})") from exc
        if got != size:
            raise ValueError(f"{path}: {got} bytes, its manifest says {size}; the set is not whole")
        out.append((path, rows))
    return out


def read_score_rows(run_dir: Path) -> Iterator[dict]:
    """A run's rows in order, decoded, from either form; a bad line or a part whose row count differs from its
    manifest raises ValueError naming the file and line."""
    for path, rows in score_row_files(run_dir):
        n = 0
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):  # noqa: B007 (n is the count after the loop)
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc})") from exc
        if rows is not None and n != rows:
            raise ValueError(f"{path}: {n} rows, its manifest says {rows}")
