"""Running file-by-file work in a process pool with the ledger deciding what is left to do."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from benchmint.io import InputError
from benchmint.parallel import process_pool, resolve_workers
from benchmint.store.ledger import Ledger, content_key

LEDGER_NAME = "ledger.sqlite"


def find_files(inputs: Sequence[str | os.PathLike], suffix: str) -> list[Path]:
    """Files named, or found recursively with ``suffix`` in the folders named; stable order, no repeats."""
    found: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found.extend(sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() == suffix))
        elif p.is_file():
            found.append(p)
        else:
            raise InputError(f"no such file or directory: {p}")
    return list(dict.fromkeys(found))


def run_pending(ledger: Ledger, units: Sequence[tuple], work: Callable[..., dict], workers: int, desc: str,
                progress: bool = False) -> int:
    """Run ``work(*unit)`` in worker processes for every unit whose key (``unit[1]``) the ledger lacks.

    A unit's result is a dict, with "error" when the file failed. Each result is
    recorded as it arrives, so a killed run keeps what finished. Returns how many
    units were already done.
    """
    todo = [u for u in units if not ledger.done(u[1])]
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=desc, unit=" file")
    try:
        with process_pool(workers) as pool:
            futures = [(u, pool.submit(work, *u)) for u in todo]
            for unit, fut in futures:
                try:
                    result = fut.result()
                except BrokenProcessPool as exc:  # a worker died (e.g. a crash inside a C library)
                    raise InputError(f"a worker process died (at {unit[0]} or a file beside it); finished files are "
                                     f"kept in {ledger.path}: rerun to go on") from exc
                except Exception as exc:  # an unexpected failure on one file is that file's error
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                ledger.record(unit[1], result, ok="error" not in result)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        ledger.flush()
    return len(units) - len(todo)


def run_files(inputs: Sequence[str | os.PathLike], suffix: str, out_dir: str | os.PathLike, kind: str,
              work: Callable[..., dict], args_of: Callable[[Path], tuple], settings_of: Callable[[Path], dict],
              workers: int = 1, progress: bool = False) -> tuple[Path, list[tuple[Path, dict]], int]:
    """A resumable run over the files in ``inputs``: ``work(path, key, out_dir, *args_of(path))`` per file.

    A file's key hashes its bytes with ``settings_of(path)``; results come back in
    input order from the ledger ``out_dir/ledger.sqlite``. Returns (output folder,
    [(path, result)], files already done).
    """
    files = find_files(inputs, suffix)
    if not files:
        raise InputError(f"no {suffix} files found in " + ", ".join(map(str, inputs)))
    resolve_workers(workers)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    keys = [content_key(p.read_bytes(), settings_of(p)) for p in files]
    with Ledger(out / LEDGER_NAME, kind) as ledger:
        units = [(str(p), k, str(out), *args_of(p)) for p, k in zip(files, keys)]
        skipped = run_pending(ledger, units, work, workers, kind, progress)
        results = [(p, ledger.get(k)[1]) for p, k in zip(files, keys)]
    return out, results, skipped
