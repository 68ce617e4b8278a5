"""Where `benchmint score` spends its time, phase by phase, as a whole process at 1 and 2 workers.

    python scripts/score_phases.py [--rows 1000000] [--workers 1,2] [--repeats 2] [--by domain,level]
        [--models 4] [--behaviour] [--dir /dev/shm] [--inputs DIR] [--extra '--rows-per-file 32768'] [--json out]

Generates the bench's raw MCQ outputs (``benchmint.metrics.synthetic.mcq_dataset``, four models unless
``--models`` says fewer; ``--behaviour`` adds each output's confidence, difficulty and tokens), then runs
``benchmint score`` in a fresh process for each worker count. Inside that process the pipeline's phases are
timed by wrapping them (wall seconds, the main thread's CPU and the whole process's CPU): the gold index,
the prediction stream, the summary and the files written after it; start-up and exit are the rest of the
process's wall time. The main thread's CPU in the stream is the ordered merge (one thread whatever the worker
count); the rest of the process's CPU there is the parse, extraction and the writer.

``--dir`` is where the inputs and outputs go (a folder in memory takes the disk's write-back out of the
figures); ``--inputs DIR`` keeps the generated inputs in DIR and takes them from there when they are there
already (10 million outputs take minutes to generate). The serial fraction is taken from the wall times at 1
and 2 workers (Amdahl: s = 2 T2 / T1 - 1) and, steadier on a busy machine, from the CPU of the phases
(``serial_split``): everything outside the sharded work counts as serial.
The run kept of the repeats is the one with the least CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from serial_fraction import score_inputs  # the same generated gold and raw outputs as the sweep's

# Runs the CLI with the pipeline's phases wrapped; writes {phase: [wall, main-thread CPU, process CPU]} and the
# process's figures when the command returns to $SCORE_PHASES. The process's whole CPU, its exit included, is
# taken by the parent from the child's resource usage.
WRAP = """import json, os, resource, sys, time
t_start = time.perf_counter()
phases = {}
def timed(name, fn):
    def run(*a, **k):
        w, t, p = time.perf_counter(), time.thread_time(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            got = phases.setdefault(name, [0.0, 0.0, 0.0])
            got[0] += time.perf_counter() - w
            got[1] += time.thread_time() - t
            got[2] += time.process_time() - p
    return run
from benchmint.metrics import pipeline
for name in os.environ["SCORE_PHASE_NAMES"].split(","):
    setattr(pipeline, name, timed(name, getattr(pipeline, name)))
from benchmint import cli
# the command's own entry where the build has one (its exit as the command's), else main and sys.exit
command = getattr(cli, "entry", None) or (lambda argv: sys.exit(cli.main(argv)))
try:
    command(sys.argv[1:])
finally:
    me = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["SCORE_PHASES"], "w") as fh:
        json.dump({"phases": phases, "in_process_wall": time.perf_counter() - t_start,
                   "cpu_at_return": me.ru_utime + me.ru_stime, "max_rss_kib": me.ru_maxrss}, fh)
"""
# The names score_files looks up in benchmint.metrics.pipeline at call time.
# _row_counts and _model_rows run inside summarize: the summary's per-row counting and its per-model rows
# gathered, both split by row ranges over the workers.
PHASES = ("load_gold", "_stream_compiled", "summarize", "_row_counts", "_model_rows", "write_jsonl")
NESTED = ("_row_counts", "_model_rows")


def run_once(pred: Path, gold: Path, out: Path, workers: int, by: str, extra: list[str], tmp: Path) -> dict:
    from benchmint.metrics import pipeline

    names = [n for n in PHASES if hasattr(pipeline, n)]
    report, writer = tmp / "phases.json", tmp / "writer.jsonl"
    writer.unlink(missing_ok=True)
    cmd = [sys.executable, "-c", WRAP, "score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(out),
           "--workers", str(workers), "--quiet", *(["--by", by] if by else []), *extra]
    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, stderr=subprocess.PIPE, env={**os.environ, "SCORE_PHASES": str(report),
                                                            "SCORE_PHASE_NAMES": ",".join(names),
                                                            "BENCHMINT_WRITER_TIMES": str(writer)})
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"score failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    got = json.loads(report.read_text())
    got["wall"] = wall
    # the whole process, its teardown included (what the command returned with is "cpu_at_return")
    got["cpu"] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    got["exit_cpu"] = got["cpu"] - got["cpu_at_return"]
    if writer.exists():  # the stream's writer timed itself: its wall and its threads' CPU
        own = json.loads(writer.read_text())
        got["write_rows_cpu"], got["writer_wall"] = own["cpu"], own["wall"]
        # parts (--rows-per-file): batches in flight on up to --workers threads, each writing its own parts. A part
        # has one writer at a time (a batch's bytes for a part the batch before still writes are handed to that
        # batch's thread: "handed_bytes"), so the writing spreads whole. Builds before that wrote such bytes
        # beside the other thread, waiting on the part's lock ("shared_bytes"): those count as serial.
        if own.get("parts") and own.get("threads", 1) > 1:
            got["writer_spread_cpu"] = own["cpu"] * (1 - own.get("shared_bytes", 0) / max(own["bytes"], 1))
            got["writer_parts"] = own["parts"]
            for key in ("shared_bytes", "handed_bytes"):
                if key in own:
                    got[f"writer_{key}"] = own[key]
    else:  # a build without that timing: writing the file again stands for it
        got["write_rows_cpu"] = write_cost(out / "scores.jsonl")
    return got


def write_cost(rows: Path) -> float:
    """CPU seconds of writing ``rows``' bytes again in 4 MiB pieces, standing for the stream's writer thread where
    the compiled module does not time it (``BENCHMINT_WRITER_TIMES``)."""

    data = rows.read_bytes()
    copy = rows.with_name("copy.jsonl")
    before = resource.getrusage(resource.RUSAGE_SELF)
    with open(copy, "wb") as fh:
        for k in range(0, len(data), 4 << 20):
            fh.write(data[k:k + (4 << 20)])
    after = resource.getrusage(resource.RUSAGE_SELF)
    copy.unlink()
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def serial_split(run: dict) -> dict:
    """CPU seconds that do not spread over the workers against those that do, and Amdahl's speed-up at 16.

    Serial: start-up and exit (the process's CPU outside the phases, its teardown after the command returned
    included), the calling thread's CPU in the gold index
    and in the stream (the ordered merges), the rows' writing, and the summary but for its passes by row ranges
    (its other threads are one per model and stratum field, not per worker). Spread: the rest of the gold index
    and the stream (parse, extraction, rows) and the summary's passes by row ranges (the counting, each model's
    rows gathered); with the rows written as parts on several threads, the writer's CPU (but for the bytes an
    older build wrote beside another batch's thread).
    """
    ph = run["phases"]
    gold, stream, summ = ph.get("load_gold", [0, 0, 0]), ph.get("_stream_compiled", [0, 0, 0]), ph["summarize"]
    ranges = sum(ph.get(name, [0, 0, 0])[2] for name in NESTED)
    outside = run["cpu"] - sum(v[2] for k, v in ph.items() if k not in NESTED)
    writer_spread = run.get("writer_spread_cpu", 0.0)
    serial = outside + gold[1] + stream[1] + summ[2] - ranges + run["write_rows_cpu"] - writer_spread
    spread = (gold[2] - gold[1]) + (stream[2] - stream[1]) - run["write_rows_cpu"] + ranges + writer_spread
    s = serial / (serial + spread)
    return {"serial_cpu": round(serial, 3), "spread_cpu": round(spread, 3), "start_exit_cpu": round(outside, 3),
            "writer_spread_cpu": round(writer_spread, 3),
            "serial_fraction": round(s, 3), "amdahl_16": round(1 / (s + (1 - s) / 16), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--by", default="domain,level")
    ap.add_argument("--models", type=int, default=4, choices=range(1, 5))
    ap.add_argument("--behaviour", action="store_true", help="outputs state confidence, difficulty and tokens")
    ap.add_argument("--extra", default="", help="more options for score, space-separated (e.g. '--engine ray')")
    ap.add_argument("--dir", help="folder for the inputs and outputs (default: the system's temporary folder)")
    ap.add_argument("--inputs", help="keep the generated inputs in this folder and reuse them when there (the same "
                                     "--rows, --models and --behaviour, not checked)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="score-phases-", dir=args.dir))
    try:
        if args.inputs and (Path(args.inputs) / "pred.jsonl").is_file():
            gold, pred = Path(args.inputs) / "gold.jsonl", Path(args.inputs) / "pred.jsonl"
        else:
            if args.inputs:
                Path(args.inputs).mkdir(parents=True, exist_ok=True)
            gold, pred = score_inputs(Path(args.inputs) if args.inputs else tmp, args.rows, args.models,
                                      args.behaviour)
        rows = {}
        for w in map(int, args.workers.split(",")):
            # best of the repeats by CPU: the figures derived are CPU seconds, steadier than walls on a busy machine
            runs = [run_once(pred, gold, tmp / f"out-{w}-{r}", w, args.by, args.extra.split(), tmp)
                    for r in range(args.repeats)]
            for r in range(args.repeats):
                shutil.rmtree(tmp / f"out-{w}-{r}", ignore_errors=True)
            best = min(runs, key=lambda got: got["cpu"])
            phases = {k: [round(x, 3) for x in v] for k, v in best["phases"].items()}
            in_phases = sum(v[0] for k, v in best["phases"].items() if k not in NESTED)
            rows[w] = {"wall": round(best["wall"], 3), "cpu": round(best["cpu"], 3),
                       "start_and_exit": round(best["wall"] - in_phases, 3), "phases": phases,
                       "exit_cpu": round(best["exit_cpu"], 3), "write_rows_cpu": round(best["write_rows_cpu"], 3),
                       **({"writer_wall": round(best["writer_wall"], 3)} if "writer_wall" in best else {}),
                       **{k: best[k] for k in ("writer_parts", "writer_shared_bytes", "writer_handed_bytes")
                          if k in best},
                       "max_rss_mib": round(best["max_rss_kib"] / 1024, 1), **serial_split(best)}
            print(json.dumps({f"workers={w}": rows[w]}), flush=True)
        if 1 in rows and 2 in rows:
            s = min(1.0, max(0.0, 2 * rows[2]["wall"] / rows[1]["wall"] - 1))
            print(json.dumps({"serial_fraction_from_walls": round(s, 3),
                              "amdahl_16": round(1 / (s + (1 - s) / 16), 2)}))
        print(f"rows {args.rows}, load average at the end: {os.getloadavg()}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
