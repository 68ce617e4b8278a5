"""Where one `benchmint harvest` run's driver spends its CPU, phase by phase.

    python scripts/harvest_phases.py PDFS OUT [--workers N] [--triage-only] [--json FILE]

Runs the command in this process (the CLI's own ``main``) with timers around the steps of the driver: the
imports, listing the files, starting the workers, hashing, the page ranges and the text pass (``run_units``,
inside which recording results in the ledger and reading them back are timed apart), and writing the output
files. CPU is the driver process's own, its threads included (its workers' is reported apart, once they are
reaped); per-file and per-unit figures divide by the files found and the units recorded. OUT must not hold an
earlier run (its ledger would skip every PDF). Works with the code of any checkout on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cpu_time import CHILDREN, cpu  # scripts/ is the first on sys.path

START = time.perf_counter()



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pdfs")
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--triage-only", action="store_true")
    ap.add_argument("--json", help="also write the phases here")
    args = ap.parse_args()
    if Path(args.out).exists():
        raise SystemExit(f"{args.out} exists: give a fresh folder")
    totals: dict[str, list[float]] = {}  # step -> [wall s, cpu s, calls]

    def around(owner, attr: str, name: str) -> None:
        inner = getattr(owner, attr)

        def timed(*a, **k):
            t, c = time.perf_counter(), cpu()
            try:
                return inner(*a, **k)
            finally:
                total = totals.setdefault(name, [0.0, 0.0, 0])
                total[0] += time.perf_counter() - t
                total[1] += cpu() - c
                total[2] += 1

        setattr(owner, attr, timed)

    import benchmint.pdf.harvest as harvest
    from benchmint.cli import main as cli
    from benchmint.run import executors, ledger

    imports = time.perf_counter() - START, cpu()
    around(harvest, "find_files_into", "list the files")
    around(executors.ProcessExecutor, "start", "start the workers")
    around(harvest, "hash_files", "hash the files")
    around(harvest, "run_units", "run the units (page ranges, then text)")
    around(ledger.Ledger, "record", "  of it: record a result")
    around(ledger.Ledger, "get", "  read a result back (in the units and after)")
    around(harvest, "_write", "write the output files")
    cmd = ["harvest", args.pdfs, "--out", args.out, "--workers", str(args.workers)]
    code = cli([*cmd, *(["--triage-only"] if args.triage_only else [])])
    wall, driver = time.perf_counter() - START, cpu()
    with open(Path(args.out) / "documents.jsonl", encoding="utf-8") as fh:
        files = sum(1 for _ in fh)
    units = int(totals.get("  of it: record a result", [0, 0, 0])[2])
    workers = cpu(CHILDREN)
    print(f"{files} files, {units} units; wall {wall:.2f} s; driver CPU {driver:.3f} s "
          f"({1000 * driver / files:.3f} ms a file), workers {workers:.2f} s; share "
          f"{driver / (driver + workers):.4f}; exit status {code}", file=sys.stderr)
    print(f"  imports: {imports[0]:.3f} s wall, {imports[1]:.3f} s CPU", file=sys.stderr)
    for n, (w, c, k) in totals.items():
        print(f"  {n}: {w:.3f} s wall, {c:.3f} s CPU, {int(k)} calls, {1000 * c / max(1, units):.4f} ms CPU a unit",
              file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "workers": args.workers, "files": files, "units": units, "wall_s": wall, "driver_cpu_s": driver,
            "workers_cpu_s": workers, "imports": imports,
            "totals": {n: {"wall_s": w, "cpu_s": c, "calls": k} for n, (w, c, k) in totals.items()}}, indent=1))


if __name__ == "__main__":
    main()
