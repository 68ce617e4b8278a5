"""Where one `benchmint harvest` run's driver spends its CPU, phase by phase.

    python scripts/harvest_phases.py PDFS OUT [--workers N] [--triage-only] [--engine local|ray] [--json FILE]

Runs the command in this process (the CLI's own ``main``) with timers around the steps of the driver: the
imports, listing the files, starting the workers, hashing, the page ranges and the text pass (``run_units``,
inside which recording results in the ledger and reading them back are timed apart), and writing the output
files. CPU is the driver process's own, its threads included (its workers' is reported apart, once they are
reaped); per-file and per-unit figures divide by the files found and the units recorded. OUT must not hold an
earlier run (its ledger would skip every PDF). Works with the code of any checkout on ``PYTHONPATH``.

Hashing the inputs runs on ``hash_threads(workers)`` threads before the first unit goes out, so on a machine with
a core for each of them it costs the run its wall, not its CPU. Each hashing task's CPU is timed on its own
thread (``time.thread_time``); the report gives the CPU of each thread, and the phase's critical path on the
threads a 16-worker run hashes with: the tasks' CPU laid on ``hash_threads(16)`` threads in the pool's order (each
task to the thread that frees first). The driver's serial-equivalent CPU counts that critical path in place of
the hashing's CPU; the share at 16 workers is taken from it.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import threading
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
    ap.add_argument("--engine", default="local", choices=("local", "ray"),
                    help="ray: a local Ray instance started for the run (the workers' CPU then includes Ray's own "
                         "processes, and the share is not the driver's)")
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
    from benchmint.run import executors, ledger, runner

    imports = time.perf_counter() - START, cpu()
    hash_tasks = time_hashing(runner)
    around(harvest, "find_files_into", "list the files")
    around(executors.ProcessExecutor, "start", "start the workers")
    around(harvest, "hash_files", "hash the files")
    around(harvest, "run_units", "run the units (page ranges, then text)")
    around(ledger.Ledger, "record", "  of it: record a result")
    around(ledger.Ledger, "get", "  read a result back (in the units and after)")
    around(harvest, "_write", "write the output files")
    cmd = ["harvest", args.pdfs, "--out", args.out, "--workers", str(args.workers)]
    code = cli([*cmd, *(["--triage-only"] if args.triage_only else []), "--engine", args.engine])
    wall, driver = time.perf_counter() - START, cpu()
    main_thread = time.thread_time()  # with the hashing when it ran here (below HASH_POOL_MIN_FILES files)
    off_main = sum(c for ident, c, _ in hash_tasks if ident != threading.get_ident())
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
    hashing = hashing_report(hash_tasks, runner.hash_threads(16))
    serial = driver - hashing["cpu_s"] + hashing["critical_path_16_s"]
    print(f"  hashing: {len(hash_tasks)} tasks, {hashing['cpu_s']:.3f} s CPU on {len(hashing['threads_cpu_s'])} "
          f"threads ({', '.join(f'{c:.3f}' for c in hashing['threads_cpu_s'])} s), critical path "
          f"{hashing['critical_path_s']:.3f} s here, {hashing['critical_path_16_s']:.3f} s on "
          f"{runner.hash_threads(16)} threads; driver's main thread {main_thread:.3f} s, other threads "
          f"{driver - main_thread - off_main:.3f} s", file=sys.stderr)
    print(f"  serial-equivalent driver CPU (hashing as its critical path at 16 workers): {serial:.3f} s "
          f"({1000 * serial / files:.3f} ms a file); share {serial / (serial + workers):.4f}, "
          f"{amdahl(serial / (serial + workers), 16):.1f}x at 16 by Amdahl", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "workers": args.workers, "engine": args.engine, "files": files, "units": units, "wall_s": wall, "driver_cpu_s": driver,
            "workers_cpu_s": workers, "imports": imports, "main_thread_cpu_s": main_thread,
            "hashing": hashing, "serial_equivalent_cpu_s": serial,
            "totals": {n: {"wall_s": w, "cpu_s": c, "calls": k} for n, (w, c, k) in totals.items()}}, indent=1))


def time_hashing(runner) -> list[tuple[int, float, float]]:
    """Time each hashing task of ``runner.hash_files`` on its own thread from now on: the list it fills with
    (thread id, CPU s, start) a task, in the order they end."""
    tasks: list[tuple[int, float, float]] = []
    inner = runner._hash_chunk

    def timed(jobs):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return inner(jobs)
        finally:
            tasks.append((threading.get_ident(), time.thread_time() - c0, t0))

    runner._hash_chunk = timed
    return tasks


def hashing_report(tasks: list[tuple[int, float, float]], threads_16: int) -> dict:
    """The hashing tasks' CPU: in all, by thread, its critical path here (the busiest thread) and on
    ``threads_16`` threads (the tasks in the order they started, each to the thread that frees first: the pool's
    own order, with every thread on a core of its own)."""
    by_thread: dict[int, float] = {}
    for ident, c, _ in tasks:
        by_thread[ident] = by_thread.get(ident, 0.0) + c
    free = [0.0] * threads_16
    for _, c, _ in sorted(tasks, key=lambda t: t[2]):
        heapq.heapreplace(free, free[0] + c)
    return {"cpu_s": sum(by_thread.values()), "threads_cpu_s": sorted(by_thread.values(), reverse=True),
            "critical_path_s": max(by_thread.values(), default=0.0), "critical_path_16_s": max(free)}


def amdahl(share: float, n: int) -> float:
    return 1 / (share + (1 - share) / n)


if __name__ == "__main__":
    main()
