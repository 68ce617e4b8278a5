"""The driver of `score --engine ray` (scoring by id shards): its peak resident memory and wall time by input size.

    python scripts/score_shards_memory.py DIR --items 250000 --models 4 [--repeats 1] [--src A/src --src B/src]

Generates the bench's raw MCQ outputs with confidence, difficulty and tokens (``mcq_dataset``: ``--items`` gold
items, every model answering each; past its four personas, their outputs again under numbered model names) into
DIR, then scores them with ``by=("domain",)`` through ``score_files``' Ray branch with the units on two local
worker processes (``ProcessExecutor(2)`` in place of the Ray executor: the driver's code path is the same, without
a cluster's own memory in the figure). Each ``--src`` is a source tree put
first on the path, so two versions of the code run alternately on the same inputs; the driver's peak is VmHWM of
its process (the workers are processes of their own), the CPU time that of the driver and its workers together
(steadier than the wall on a loaded machine). Prints one line per run and whether the versions wrote the
same summary.json.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

DRIVER = """
import re, sys
import benchmint.run.ray_engine as ray_engine
from benchmint.run.executors import ProcessExecutor
ray_engine.RayExecutor = lambda: ProcessExecutor(2)
from benchmint.metrics.pipeline import ScoreConfig, score_files
score_files(sys.argv[1], sys.argv[2], sys.argv[3], ScoreConfig(task="mcq", by=("domain",), engine="ray"))
print(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def make_inputs(folder: Path, items: int, models: int) -> tuple[Path, Path]:
    from benchmint.io import dumps
    from benchmint.metrics.synthetic import PERSONAS, mcq_dataset

    gold, pred = folder / f"gold_{items}.jsonl", folder / f"pred_{items}x{models}.jsonl"
    if not (gold.exists() and pred.exists()):
        personas = list(PERSONAS)
        # More models than personas: each persona's outputs again under numbered names, as benches/bench_ray.py
        copies = 1 if models <= len(personas) else math.ceil(models / len(personas))
        with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
            for kind, rec in mcq_dataset(items, personas[:models], seed=11):
                if kind == "gold":
                    g.write(dumps(rec) + "\n")
                elif copies == 1:
                    p.write(dumps(rec) + "\n")
                else:
                    k = personas.index(rec["model"])
                    p.write("".join(dumps({**rec, "model": f"{rec['model']}-{c:03d}"}) + "\n"
                                    for c in range(copies) if c * len(personas) + k < models))
    return gold, pred


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--items", type=int, default=250_000)
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--src", action="append", default=[])
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    gold, pred = make_inputs(args.dir, args.items, args.models)
    sources = args.src or [str(Path(__file__).resolve().parents[1] / "src")]
    digests = {}
    for r in range(args.repeats):
        for src in sources:
            out = args.dir / f"out-{sources.index(src)}-{r}"
            env = {**os.environ, "PYTHONPATH": src}
            start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run([sys.executable, "-c", DRIVER, str(pred), str(gold), str(out)], env=env,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the driver and its worker processes, waited for
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            if done.returncode not in (0, 1):
                sys.exit(f"{src}: exit {done.returncode}\n{done.stderr[-2000:]}")
            summary = (out / "summary.json").read_bytes()
            digests.setdefault(src, set()).add(hashlib.sha256(summary).hexdigest())
            rows = args.items * args.models
            peak = int(done.stdout.split()[-1]) / 1024
            print(f"{src}\trows {rows}\trun {r}\twall {wall:.1f} s\tCPU {cpu:.1f} s\tdriver peak {peak:.1f} MiB",
                  flush=True)
    print("same summary.json:", len({d for ds in digests.values() for d in ds}) == 1)


if __name__ == "__main__":
    main()
