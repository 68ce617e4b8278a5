"""A command's start-up as a whole process: when its first result is recorded, its driver's CPU by then, its end.

    python scripts/first_result.py [--json FILE] -- COMMAND ARGS...     # e.g. -- xrd build CIFS --out OUT --workers 2

Runs ``benchmint COMMAND ARGS...`` in this process (the CLI's own ``main``) and prints one JSON line: seconds
since this script started when ``benchmint.cli`` was imported, when the first unit's result was recorded
in the ledger (the fixed start-up: imports, workers' start, hashing, the first unit) and when the command
ended, the driver process's CPU at each of those moments, and the CPU of its reaped children (workers and
helpers). Any flow that records units in a ledger (``harvest``, ``xrd build``, ``eval``, ...) can be timed.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402 - after the clock starts
import json  # noqa: E402
import sys  # noqa: E402

from cpu_time import CHILDREN, cpu  # noqa: E402 - scripts/ is the first on sys.path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the benchmint command and its arguments, after --")
    args = ap.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        ap.error("give the command to time after --")
    marks: dict[str, tuple[float, float]] = {}
    from benchmint.cli import main as cli
    from benchmint.run import ledger

    record = ledger.Ledger.record

    def first_record(self, *a, **k):
        marks.setdefault("first result", (time.perf_counter() - START, cpu()))
        return record(self, *a, **k)

    ledger.Ledger.record = first_record  # type: ignore[method-assign]
    marks["cli imported"] = (time.perf_counter() - START, cpu())
    code = cli(argv)
    marks["end"] = (time.perf_counter() - START, cpu())
    got = {"command": argv, "exit": code, "children_cpu_s": round(cpu(CHILDREN), 3),
           **{f"{name} at_s": round(t, 3) for name, (t, _) in marks.items()},
           **{f"{name} driver_cpu_s": round(c, 3) for name, (_, c) in marks.items()}}
    print(json.dumps(got))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(got, fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    sys.exit(main())
