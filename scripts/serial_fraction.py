"""Time each flow as a whole process with 1 and 2 workers and derive its serial fraction (Amdahl).

    python scripts/serial_fraction.py --pdfs corpus/files/pdf --cifs corpus/files/cif [--repeats 2]
        [--flows harvest,triage,xrd,score,eval] [--json out.json]
    python scripts/serial_fraction.py --pdfs /dev/shm/pdf2k --flows triage --workers 2 --repeats 1   # share alone

Each run writes into a fresh folder (no ledger to resume from). The best of ``--repeats`` runs is kept. With
speed-up S2 = T1 / T2 at two workers, Amdahl's law T(n) = T1 (s + (1 - s) / n) gives the serial fraction
s = 2 / S2 - 1 and the speed-up 1 / (s + (1 - s) / n) at n workers. ``eval`` runs against the scripted chat
server (tests/chat_server.py, each reply after ``--delay`` seconds, standing in for a model's latency) with
``--concurrency`` 1 and 2 in place of workers. Each run also reports the CPU seconds of the driver process
and of its worker processes: on a machine other jobs keep busy, the driver's share of the CPU is a steadier
estimate of the serial fraction than the wall times (the work done in the driver is the part no worker takes).
``--workers 2`` runs the 2-worker runs alone (for inputs too large to run twice): the driver's share is then the
estimate, the wall-time one is left out. Each row also gives the driver's CPU per input file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "benchmint.cli"]
# The command run as ``python -m benchmint.cli`` runs it, then the CPU seconds of the driver process itself and of
# its worker processes (reaped children) written to the file $SERIAL_FRACTION_RUSAGE.
WRAP = """import json, os, resource, sys
from benchmint.cli import main
try:
    code = main(sys.argv[1:])
finally:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["SERIAL_FRACTION_RUSAGE"], "w") as fh:
        json.dump({"driver": me.ru_utime + me.ru_stime, "workers": kids.ru_utime + kids.ru_stime}, fh)
sys.exit(code)
"""


def timed(cmd: list[str], rusage: Path) -> tuple[float, dict]:
    """(wall seconds, {"driver": CPU s, "workers": CPU s}) of one run of ``benchmint`` with ``cmd``'s arguments."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAP, *cmd[len(CLI):]], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env={**os.environ, "SERIAL_FRACTION_RUSAGE": str(rusage)})
    took = time.perf_counter() - t0
    if done.returncode not in (0, 1):  # 1: some records had problems, still a full run
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    return took, json.loads(rusage.read_text())


def score_inputs(root: Path, n: int, n_models: int = 4, behaviour: bool = False) -> tuple[Path, Path]:
    """``n`` raw outputs of ``n_models`` models (at most 4); ``behaviour``: with confidence, difficulty, tokens."""
    from benchmint.io import dumps
    from benchmint.metrics.synthetic import mcq_dataset

    gold, pred = root / "gold.jsonl", root / "pred.jsonl"
    models = ["wise-model", "cautious-model", "bold-model", "gambling-model"][:n_models]
    with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
        for kind, rec in mcq_dataset(n // len(models), models, seed=11, behaviour_fields=behaviour):
            (g if kind == "gold" else p).write(dumps(rec) + "\n")
    return gold, pred


def eval_items(root: Path, n: int) -> Path:
    from PIL import Image

    Image.new("L", (64, 48), 90).save(root / "fig.png")
    options = ["Phase alpha dissolves.", "The inset shows subunits.", "A solid-state transition.",
               "Two phases coexist."]
    path = root / "items.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i:05d}", "question": f"Q{i}: which statements fit the panels?",
                                 "options": options, "answer": "A", "image": "fig.png"}) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdfs", default=str(ROOT / "corpus" / "files" / "pdf"))
    ap.add_argument("--cifs", default=str(ROOT / "corpus" / "files" / "cif"))
    ap.add_argument("--flows", default="harvest,triage,xrd,score,eval")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--score-rows", type=int, default=1_000_000)
    ap.add_argument("--eval-items", type=int, default=200)
    ap.add_argument("--delay", type=float, default=0.05, help="the scripted server's seconds per reply")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--workers", default="1,2", help="1,2 (both, default) or 2 (the driver's share alone)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="serial-fraction-"))
    server = None
    try:
        flows = args.flows.split(",")
        cmds = {}
        if "harvest" in flows:
            cmds["harvest"] = lambda w, out: [*CLI, "harvest", args.pdfs, "--out", out, "--workers", str(w)]
        if "triage" in flows:
            cmds["triage"] = lambda w, out: [*CLI, "harvest", args.pdfs, "--out", out, "--workers", str(w),
                                             "--triage-only"]
        if "xrd" in flows:
            cmds["xrd"] = lambda w, out: [*CLI, "xrd", "build", args.cifs, "--out", out, "--workers", str(w)]
        if "score" in flows:
            gold, pred = score_inputs(tmp, args.score_rows)
            cmds["score"] = lambda w, out: [*CLI, "score", str(pred), "--gold", str(gold), "--task", "mcq",
                                            "--out", out, "--workers", str(w)]
        if "eval" in flows:
            items = eval_items(tmp, args.eval_items)
            server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "chat_server.py"), "--delay",
                                       str(args.delay), "--forget-bodies"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            url = f"http://127.0.0.1:{int(server.stdout.readline().split()[-1])}/v1"
            cmds["eval"] = lambda w, out: [*CLI, "eval", str(items), "--benchmark", "spm", "--model", "m",
                                           "--base-url", url, "--out", out, "--concurrency", str(w)]
        rows = {}
        for name, cmd_of in cmds.items():
            folder = {"harvest": args.pdfs, "triage": args.pdfs, "xrd": args.cifs}.get(name)
            files = 0 if folder is None else sum(1 for p in Path(folder).rglob("*")
                                                  if p.suffix.lower() in (".pdf", ".cif") and p.is_file())
            best, cpu = {}, {}
            counts = [int(w) for w in args.workers.split(",")]
            if 2 not in counts or not set(counts) <= {1, 2}:
                raise SystemExit("--workers must be 1,2 or 2")
            for w in counts:
                runs = []
                for r in range(args.repeats):
                    out = tmp / f"{name}-{w}-{r}"
                    runs.append(timed(cmd_of(w, str(out)), tmp / "rusage.json"))
                    shutil.rmtree(out, ignore_errors=True)
                best[w], cpu[w] = min(runs, key=lambda got: got[0])
            s2 = best[1] / best[2] if 1 in best else None
            serial = None if s2 is None else min(1.0, max(0.0, 2 / s2 - 1))
            # On a busy machine wall times swing; the driver's share of the CPU the run used at 2 workers bounds
            # the serial fraction from CPU time alone (work in the driver process is not spread over workers).
            # (Process flows only: score's threads and eval's waits are inside the driver process.)
            driver_share = cpu[2]["driver"] / max(1e-9, cpu[2]["driver"] + cpu[2]["workers"])
            rows[name] = {"t1_s": round(best[1], 2) if 1 in best else None, "t2_s": round(best[2], 2),
                          "speedup_2": None if s2 is None else round(s2, 3),
                          "serial_fraction": None if serial is None else round(serial, 3),
                          "speedup_16": None if serial is None else round(1 / (serial + (1 - serial) / 16), 2),
                          "cpu_driver_s": round(cpu[2]["driver"], 2), "cpu_workers_s": round(cpu[2]["workers"], 2),
                          "driver_share": round(driver_share, 3),
                          "speedup_16_by_driver_share": round(1 / (driver_share + (1 - driver_share) / 16), 2),
                          **({"driver_ms_a_file": round(1000 * cpu[2]["driver"] / files, 3)} if files else {}),
                          "command": " ".join(cmd_of("W", "OUT"))}
            print(json.dumps({name: rows[name]}), flush=True)
        print(f"load average at the end: {os.getloadavg()}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    finally:
        if server is not None:
            server.stdin.close()
            server.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
