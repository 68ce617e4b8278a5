"""The driver's ledger under load: record N units as the runner does and report units/s and commit times.

    python scripts/ledger_load.py --units 200000 --bytes 6000 [--rate 0] [--shards 1] [--batch 1] [--cache]
        [--record dict|encoded|filed] [--read-back] [--dir DIR]

Each unit is one ``Ledger.record`` call (one transaction, WAL, synchronous=NORMAL), with a result of about
``--bytes`` bytes of JSON shaped like a harvest range's or an XRD item's (nested rows of numbers and short
strings, so the JSON encoding costs what it costs in a run). ``--rate`` paces the records (units per second, 0:
as fast as they go) to check that a given rate holds, with its p99. ``--shards K`` spreads the units over K
ledger files by their key's first hex digits, as a driver with sharded ledgers would. ``--batch K`` commits K
results per transaction, the remedy measured against one commit per result (not with ``--shards``: a
transaction stays in one file). ``--cache`` also puts a reply of ``--bytes`` into a request cache
(``ReplyCache.put_many``, one transaction per reply) per unit, as a model stage's driver does. Prints one JSON
line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from benchmint.run.ledger import Ledger, encode_result, file_result, results_folder


def result_of(i: int, size: int) -> dict:
    """A result of about ``size`` bytes of JSON: rows of floats, ints and short strings, like a page range's."""
    rows, n = [], 0
    while n < size:
        row = {"page": i % 997, "bbox": [12.5 + i % 7, 40.25, 300.125, 512.0 + i % 11], "kind": "figure",
               "caption": f"Fig. {i % 13}. Dark-field image of sample {i}", "score": (i % 1000) / 1000}
        rows.append(row)
        n += len(json.dumps(row)) + 2
    return {"rows": rows, "page_count": 12 + i % 20, "sha256": hashlib.sha256(str(i).encode()).hexdigest()}


def prepared(results: list[dict], record: str, ledgers: list[Ledger]) -> list[list]:
    """Each ledger's results as its driver receives them (``--record``): encoded or filed as the workers do."""
    if record == "filed":  # every ledger's results folder holds the results its rows point to
        return [[file_result(str(results_folder(lg.path).resolve()), r) for r in results] for lg in ledgers]
    same = [encode_result(r) for r in results] if record == "encoded" else results
    return [same] * len(ledgers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=100_000)
    ap.add_argument("--bytes", type=int, default=6000, help="bytes of JSON per result")
    ap.add_argument("--rate", type=float, default=0.0, help="units per second to hold (0: as fast as possible)")
    ap.add_argument("--shards", type=int, default=1, help="ledger files, by the key's first hex digits")
    ap.add_argument("--batch", type=int, default=1,
                    help="results per transaction (1: one each, as the runner commits them)")
    ap.add_argument("--cache", action="store_true", help="also store a reply per unit in a request cache")
    ap.add_argument("--record", choices=("dict", "encoded", "filed"), default="dict",
                    help="what the driver records: the result, the result encoded by its worker, or where its "
                         "worker filed it")
    ap.add_argument("--read-back", action="store_true", help="read each result back after recording it")
    ap.add_argument("--dir", help="folder for the files (default: a temporary one, removed after)")
    args = ap.parse_args()
    if args.batch > 1 and args.shards > 1:
        raise SystemExit("--batch and --shards are measured apart (a transaction stays in one file)")
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ledger-load-"))
    root.mkdir(parents=True, exist_ok=True)
    ledgers = [Ledger(root / f"ledger-{s:02x}.sqlite", "load") for s in range(args.shards)]
    cache = None
    if args.cache:
        from benchmint.models.cache import CachedReply, ReplyCache

        cache = ReplyCache(root / "requests.sqlite")
        reply = CachedReply("x" * args.bytes, "stop", 100, 50, "m", None)
    # results made before the clock starts: the driver receives them from workers, it does not make them
    made = [result_of(i, args.bytes) for i in range(min(args.units, 1000))]
    results = prepared(made, args.record, ledgers)
    keys = [hashlib.sha256(f"unit {i}".encode()).hexdigest() for i in range(args.units)]
    commits: list[float] = []
    t0 = time.perf_counter()
    for i, key in enumerate(keys):
        if args.rate > 0:
            due = t0 + i / args.rate
            while (now := time.perf_counter()) < due:
                time.sleep(min(due - now, 0.001))
        c0 = time.perf_counter()
        shard = int(key[:4], 16) * args.shards >> 16
        ledger = ledgers[shard]
        result = results[shard][i % len(made)]
        if args.batch > 1:  # several results in one transaction (BEGIN ... COMMIT around the records)
            if i % args.batch == 0:
                ledger._db.execute("BEGIN")
            ledger.record(key, result)
            if i % args.batch == args.batch - 1 or i == len(keys) - 1:
                ledger._db.execute("COMMIT")
        else:
            ledger.record(key, result)
        if args.read_back:
            ledger.get(key)
        if cache is not None:
            cache.put_many([(key, reply, 0.5)])
        commits.append(time.perf_counter() - c0)
    took = time.perf_counter() - t0
    for ledger in ledgers:
        ledger.close()
    if cache is not None:
        cache.close()
    commits.sort()
    size = sum(f.stat().st_size for f in root.glob("*.sqlite*"))
    print(json.dumps({
        "units": args.units, "bytes": args.bytes, "rate_asked": args.rate, "shards": args.shards,
        "batch": args.batch, "record": args.record, "read_back": args.read_back,
        "cache": args.cache, "units_per_s": round(args.units / took, 1),
        "commit_ms_p50": round(commits[len(commits) // 2] * 1e3, 3),
        "commit_ms_p99": round(commits[int(len(commits) * 0.99)] * 1e3, 3),
        "commit_ms_max": round(commits[-1] * 1e3, 3), "files_mb": round(size / 1e6, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }))
    if not args.dir:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
