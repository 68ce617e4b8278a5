"""When each phase of one `benchmint xrd build` run happens in its driver process, and the driver's CPU for it.

    python scripts/xrd_build_phases.py CIFS OUT [--workers N] [--json FILE]

Runs the command in this process (the CLI's own ``main``) with timers around the runner's and the build's steps:
the imports, listing the files, starting the workers (with several, the imports they share happen here), hashing,
the first and the last result, recording results in the ledger, reading them back and finishing them in input
order (while the units run), the KMeans selection (its answer awaited from the helper process) and putting the
files in place. Times are seconds since the interpreter started;
CPU is the driver process's own, its threads included (its workers' and helper's CPU is reported apart, once
they are reaped). OUT must not hold an earlier run (its ledger would skip every CIF).

Then each phase as a run of 16 workers on a machine of ``--cores`` cores would pay it (the driver's
serial-equivalent CPU): the hashing by its critical path on the threads such a run hashes with
(``harvest_phases.hashing_report``: each hashing task's CPU laid on ``hash_threads(16)`` threads); the workers'
shared imports as the driver's only when such a run imports them there (``xrd.build.share_imports``), else as
each worker's own; the forks of the workers once a worker, so 16 times the CPU of one fork here. The report
gives the driver's share raw (all its CPU against its workers' and helper's) and so counted, with the speed-up
at 16 it gives by Amdahl.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cpu_time import CHILDREN, cpu  # scripts/ is the first on sys.path
from harvest_phases import amdahl, hashing_report, time_hashing

START = time.perf_counter()



class Timeline:
    def __init__(self) -> None:
        self.marks: list[tuple[str, float, float]] = []
        self.totals: dict[str, list[float]] = {}  # step -> [wall s, cpu s, calls]

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter() - START, cpu()))

    def around(self, owner, attr: str, name: str, each: bool = False) -> None:
        """Time every call of ``owner.attr``; ``each``: only totals (a step called per unit)."""
        inner = getattr(owner, attr)

        def timed(*args, **kwargs):
            if not each:
                self.mark(f"{name}: start")
            t, c = time.perf_counter(), cpu()
            try:
                return inner(*args, **kwargs)
            finally:
                total = self.totals.setdefault(name, [0.0, 0.0, 0])
                total[0] += time.perf_counter() - t
                total[1] += cpu() - c
                total[2] += 1
                if not each:
                    self.mark(f"{name}: end")

        setattr(owner, attr, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cifs")
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cores", type=int, default=16, help="the cores of the 16-worker run counted (default 16)")
    ap.add_argument("--json", help="also write the phases here")
    args = ap.parse_args()
    if Path(args.out).exists():
        raise SystemExit(f"{args.out} exists: give a fresh folder")
    line = Timeline()
    import benchmint.xrd.build as build
    from benchmint.cli import main as cli
    from benchmint.run import executors, ledger, runner

    line.mark("imports of the command and xrd.build")
    imports = line.marks[-1][2]
    hash_tasks = time_hashing(runner)
    listed: list[int] = []
    inner_find = runner.find_files_into

    def find_files_into(*a, **k):
        got = inner_find(*a, **k)
        listed.append(len(got))
        return got

    runner.find_files_into = find_files_into
    line.around(executors, "_import_all", "the workers' imports, here")
    line.around(runner, "find_files_into", "list the files")
    line.around(executors.ProcessExecutor, "start", "start the workers")
    line.around(runner, "hash_files", "hash the files")
    line.around(runner, "run_units", "run the units")
    line.around(ledger.Ledger, "record", "record results", each=True)
    line.around(ledger.Ledger, "get", "read results back", each=True)
    if hasattr(ledger.Ledger, "read_filed"):  # a filed result read from where it was recorded, without a query
        line.around(ledger.Ledger, "read_filed", "read results back", each=True)
    line.around(build.Selector, "select", "KMeans selection")
    if hasattr(build, "_Finish"):  # absent from the code before the results were finished as they came
        line.around(build._Finish, "add", "finish and write a result in input order", each=True)
        line.around(build._Finish, "close", "the selection and the files into place")
    line.around(build, "write_jsonl", "write a JSONL file")
    first = ledger.Ledger.record
    last: list[tuple[float, float]] = []

    def record(self, *a, **k):
        if not any(name == "first result" for name, _, _ in line.marks):
            line.mark("first result")
        try:
            return first(self, *a, **k)
        finally:
            last[:] = [(time.perf_counter() - START, cpu())]

    ledger.Ledger.record = record  # type: ignore[method-assign]
    code = cli(["xrd", "build", args.cifs, "--out", args.out, "--workers", str(args.workers)])
    line.mark("end")
    if last:  # the moment the last result was recorded: what follows it is the run's serial tail
        line.marks.append(("last result recorded", *last[0]))
        line.marks.sort(key=lambda m: m[1])
        tail = line.marks[-1][1] - last[0][0], line.marks[-1][2] - last[0][1]
        line.totals["last result to the end"] = [tail[0], tail[1], 1]
    rows = [{"phase": n, "at_s": round(t, 3), "driver_cpu_s": round(c, 3)} for n, t, c in line.marks]
    totals = {n: {"wall_s": round(w, 3), "cpu_s": round(c, 3), "calls": k} for n, (w, c, k) in line.totals.items()}
    for r in rows:
        print(f"{r['at_s']:8.3f} s  driver CPU {r['driver_cpu_s']:7.3f} s  {r['phase']}", file=sys.stderr)
    for n, t in totals.items():
        print(f"  {n}: {t['wall_s']:.3f} s wall, {t['cpu_s']:.3f} s CPU, {t['calls']} calls", file=sys.stderr)
    others = round(cpu(CHILDREN), 3)
    print(f"  workers and helper: {others} s CPU; exit status {code}", file=sys.stderr)
    at16 = at_16(line, hash_tasks, imports, args.workers, args.cores, others, listed[0] if listed else 0)
    if args.json:
        Path(args.json).write_text(json.dumps({"workers": args.workers, "phases": rows, "totals": totals,
                                               "children_cpu_s": others, "at_16": at16}, indent=1) + "\n")


def at_16(line: Timeline, hash_tasks, imports: float, workers: int, cores: int, others: float, files: int) -> dict:
    """The driver's CPU phase by phase as a 16-worker run on ``cores`` cores pays it, and its shares."""
    from benchmint.run import runner
    from benchmint.xrd.build import share_imports

    driver = line.marks[-1][2]
    total = {n: t[1] for n, t in line.totals.items()}
    hashing = hashing_report(hash_tasks, runner.hash_threads(16))
    here = total.get("the workers' imports, here", 0.0)
    try:
        shared = share_imports(16, cores)
    except TypeError:  # the code before ``cores``: its rule, the workers and the helper against the cores
        shared = 16 + 1 > cores
    forks = total.get("start the workers", 0.0) - here  # the workers' start without the imports
    serial = (driver - hashing["cpu_s"] + hashing["critical_path_16_s"] - (0.0 if shared else here)
              + forks * (16 / max(1, workers) - 1))
    raw = driver / (driver + others)
    share = serial / (serial + others)
    per = 1000 / max(1, files)
    print(f"  at 16 workers on {cores} cores ({files} files):", file=sys.stderr)
    how = ("not made here (this run's workers made them: give it 2 workers or more, and the machine's cores or more, to count them)"
           if not here else "counted as the driver's" if shared else "counted as each worker's, not the driver's")
    print(f"    imports of the command {imports:.3f} s; the workers' imports here {here:.3f} s, {how}; "
          f"the forks {forks:.3f} s for {workers}, {forks * 16 / max(1, workers):.3f} s for 16", file=sys.stderr)
    print(f"    hashing: {len(hash_tasks)} tasks, {hashing['cpu_s']:.3f} s CPU on {len(hashing['threads_cpu_s'])} "
          f"threads, critical path {hashing['critical_path_s']:.3f} s here, {hashing['critical_path_16_s']:.3f} s "
          f"on {runner.hash_threads(16)} threads", file=sys.stderr)
    print(f"    driver CPU raw {driver:.3f} s ({per * driver:.3f} ms a CIF), share {raw:.4f} "
          f"({amdahl(raw, 16):.1f}x at 16); serial-equivalent {serial:.3f} s ({per * serial:.3f} ms a CIF), "
          f"share {share:.4f} ({amdahl(share, 16):.1f}x at 16)", file=sys.stderr)
    return {"cores": cores, "files": files, "imports_s": imports, "workers_imports_here_s": here,
            "imports_shared_at_16": shared, "forks_s": forks, "hashing": hashing, "driver_cpu_s": driver,
            "share_raw": raw, "serial_equivalent_cpu_s": serial, "share_serial_equivalent": share}


if __name__ == "__main__":
    main()
