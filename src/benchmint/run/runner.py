"""The one runner: keyed units, the ledger deciding what is left, results read back in unit order."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmint.io import InputError
from benchmint.parallel import resolve_workers
from benchmint.run.executors import Executor, ProcessExecutor, UnitTimeout, WorkerDied
from benchmint.run.ledger import Ledger, content_key

LEDGER_NAME = "ledger.sqlite"


@dataclass(frozen=True, slots=True)
class Unit:
    """One piece of work: its content ``key``, the arguments of the work function, and a label for messages."""

    key: str
    args: tuple
    label: str


def run_units(ledger: Ledger, units: Sequence[Unit], work: Callable[..., dict], executor: Executor,
              desc: str = "units", progress: bool = False,
              on_recorded: Callable[[Unit, dict], None] | None = None,
              then: Callable[[Unit, dict], Sequence[Unit]] | None = None,
              redo: Callable[[dict], bool] | None = None, read_back: bool = True) -> tuple[list[dict], int]:
    """Run ``work(*unit.args)`` for every unit whose key the ledger lacks; return (results in unit order, skipped).

    A result is a JSON-able dict, with "error" when the unit failed; an exception
    raised by ``work`` becomes that unit's ``{"error": "Type: message"}``; a unit
    that ran past a time limit (``ProcessExecutor``) also carries ``"time_limit"``
    ({limit, seconds, stage}); such units, those whose worker died, and those
    whose result says ``"retry": true`` (a model call that failed: it may not
    fail again) are tried again by the next run. Each
    result is committed to the ledger as it arrives, before the next one is
    reported (``on_recorded``, the progress bar), so a killed run keeps every
    unit it reported finished. Units sharing a key run once.

    ``then(unit, result)`` names units that follow from a unit's result (the
    rest of a document once its first pages told its length): they join the
    run as results arrive, and for units the ledger held already, before it
    starts. Their results are read from the ledger by their keys; the returned
    list covers ``units`` only.

    ``redo(result)``: True for a recorded result to be done again all the same (a reply asked again on the user's
    word, an answer that ran out of attempts when more are given now). ``read_back=False``: the results are
    left in the ledger for the caller to read one at a time (the list returned is empty).
    """
    todo = list({u.key: u for u in units if not _kept(ledger, u.key, redo)}.values())
    args = [u.args for u in todo]
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=desc, unit=" unit")
    follow = _FollowUps(ledger, then, units, todo, args, bar)
    try:
        # ``args`` grows while the executor reads it: every executor takes the next unit by index.
        for i, result in executor.map_unordered(work, args):
            final = not isinstance(result, (UnitTimeout, WorkerDied)) and not (
                isinstance(result, dict) and result.get("retry") is True)
            if isinstance(result, UnitTimeout):
                result = {"error": f"UnitTimeout: {result}", "time_limit": result.as_dict()}
            elif isinstance(result, BaseException):
                result = {"error": f"{type(result).__name__}: {result}"}
            ledger.record(todo[i].key, result, ok="error" not in result, final=final)
            if on_recorded is not None:
                on_recorded(todo[i], result)
            if final:
                follow.after(todo[i], result)
            if bar is not None:
                bar.update(1)
    finally:
        executor.close()
        if bar is not None:
            bar.close()
    skipped = len({u.key for u in units}) - len(todo)
    results: list[dict] = []
    for u in units if read_back else ():
        got = ledger.get(u.key)
        if got is None:  # every unit was recorded above or by an earlier run
            raise RuntimeError(f"unit {u.label} has no result in {ledger.path}")
        results.append(got[1])
    return results, skipped


def _kept(ledger: Ledger, key: str, redo: Callable[[dict], bool] | None) -> bool:
    if not ledger.done(key):
        return False
    if redo is None:
        return True
    got = ledger.get(key)
    return got is None or not redo(got[1])


class _FollowUps:
    """The units ``then`` names after each result: run when the ledger lacks them, followed further when not."""

    def __init__(self, ledger: Ledger, then: Callable[[Unit, dict], Sequence[Unit]] | None, units: Sequence[Unit],
                 todo: list[Unit], args: list[tuple], bar) -> None:
        self.ledger, self.then, self.todo, self.args, self.bar = ledger, then, todo, args, bar
        self.seen = {u.key for u in units} if then is not None else set()
        if then is not None:  # units done by an earlier run name their follow-ups now
            waiting = {t.key for t in todo}
            for u in units:
                got = None if u.key in waiting else ledger.get(u.key)
                if got is not None:
                    self.after(u, got[1])

    def after(self, unit: Unit, result: dict) -> None:
        for nxt in self.then(unit, result) if self.then is not None else ():
            if nxt.key in self.seen:
                continue
            self.seen.add(nxt.key)
            got = self.ledger.get(nxt.key) if self.ledger.done(nxt.key) else None
            if got is not None:
                self.after(nxt, got[1])
            else:  # the executor reads ``args`` by index as it goes: appended units are run too
                self.todo.append(nxt)
                self.args.append(nxt.args)
                if self.bar is not None:
                    self.bar.total += 1


def find_files(inputs: Sequence[str | os.PathLike], suffix: str) -> list[Path]:
    """Files named, or found recursively with ``suffix`` in the folders named; stable order, no repeats.

    InputError when a name does not exist or nothing is found.
    """
    found: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found.extend(sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() == suffix))
        elif p.is_file():
            found.append(p)
        else:
            raise InputError(f"no such file or directory: {p}")
    if not found:
        raise InputError(f"no {suffix} files found in " + ", ".join(map(str, inputs)))
    return list(dict.fromkeys(found))


def run_files(inputs: Sequence[str | os.PathLike], suffix: str, out_dir: str | os.PathLike, kind: str,
              work: Callable[..., dict], args_of: Callable[[Path], tuple], settings_of: Callable[[Path], dict],
              workers: int = 1, progress: bool = False, unit_seconds: float | None = None,
              stage_seconds: float | None = None, preload: Sequence[str] = (),
              share_preload: bool = False) -> tuple[Path, list[tuple[Path, dict]], int]:
    """A resumable run over the files in ``inputs``: ``work(path, key, out_dir, *args_of(path))`` per file.

    A file's key hashes its bytes with ``settings_of(path)``; files run in worker
    processes (a crash in a C library takes down a worker, not the run's
    ledger). Results come back in input order from ``out_dir/ledger.sqlite``.
    ``unit_seconds`` and ``stage_seconds`` are the ``ProcessExecutor`` time limits; the workers start
    before the files are hashed and import the ``preload`` modules meanwhile (``share_preload``: as
    ``ProcessExecutor`` has it).
    Returns (output folder, [(path, result)], files already done).
    """
    files = find_files(inputs, suffix)
    resolve_workers(workers)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    executor = ProcessExecutor(workers, unit_seconds=unit_seconds, stage_seconds=stage_seconds, preload=preload,
                               share_preload=share_preload)
    executor.start()
    try:
        units = []
        for p in files:
            key = content_key(p.read_bytes(), settings_of(p))
            units.append(Unit(key, (str(p), key, str(out), *args_of(p)), str(p)))
        with Ledger(out / LEDGER_NAME, kind) as ledger:
            results, skipped = run_units(ledger, units, work, executor, kind, progress)
    finally:
        executor.close()  # workers of a run that failed before its units ran
    return out, list(zip(files, results)), skipped

