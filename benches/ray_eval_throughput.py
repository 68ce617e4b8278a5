"""benchmint eval's throughput with the local engine and with --engine ray, against the scripted chat server.

    python benches/ray_eval_throughput.py [--items 200] [--delay 0.05] [--concurrency 8] [--repeats 2]

Each engine runs the whole command (a fresh process, a fresh output folder) on N and on 2N SPM items against
the scripted server (tests/chat_server.py, on a thread of this process), which answers each request after
``--delay`` seconds and notes when each arrives. Start-up is the time from the command's start to its first
request (interpreter, imports, Ray's start or connection, the actors); the pace is requests a second from the
first request to the last, best of ``--repeats``. ``ray`` starts a Ray instance of its own for each run, as
``--engine ray`` without an address does; ``ray (running cluster)`` connects to one started beforehand
(``--ray-address``), which is what a cluster's users pay. Both are loopback instances with this machine's CPUs,
shut down at the end. On a machine other jobs keep busy the wall times swing; the driver's own CPU seconds per
request (from N to 2N items) do not, and they bound what one driver can send.
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
sys.path.insert(0, str(ROOT / "scripts"))
from serial_fraction import WRAP  # noqa: E402 - the command run with the driver's CPU seconds written out

OPTIONS = ["Phase alpha dissolves.", "The inset shows subunits.", "A solid-state transition.", "Two phases coexist."]


def items(folder: Path, n: int) -> Path:
    from PIL import Image

    Image.new("L", (64, 48), 90).save(folder / "fig.png")
    path = folder / f"items-{n}.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i:05d}", "question": f"Q{i}: which statements fit the panels?",
                                 "options": OPTIONS, "answer": "A", "image": "fig.png"}) + "\n")
    return path


def run(argv: list[str], rusage: Path, server) -> dict:
    """One ``benchmint`` command: its wall time, the driver's CPU, and from the server's arrival times its
    start-up (command start to first request) and its pace (requests a second from first to last request)."""
    server.reset()
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", WRAP, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env={**os.environ, "SERIAL_FRACTION_RUSAGE": str(rusage)})
    wall = time.monotonic() - t0
    if done.returncode not in (0, 1):  # 1: replies the benchmark cannot read (the server echoes the prompt)
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    times = server.times()
    return {"wall": wall, "cpu": json.loads(rusage.read_text())["driver"], "start_up": times[0] - t0,
            "pace": (len(times) - 1) / max(1e-9, times[-1] - times[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from chat_server import ChatServer

    tmp = Path(tempfile.mkdtemp(prefix="ray-eval-"))
    server = ChatServer(delay=args.delay, keep_bodies=False).start()  # a thread of this otherwise idle process
    cluster = None
    try:
        paths = {n: items(tmp, n) for n in (args.items, 2 * args.items)}
        # The running cluster: a loopback Ray instance held by this process (its commands inherit its credentials).
        from benchmint.run.ray_engine import ray_session

        cluster = ray_session(None)
        address = cluster.__enter__().get_runtime_context().gcs_address
        engines = {"local": [], "ray": ["--engine", "ray"],
                   "ray (running cluster)": ["--engine", "ray", "--ray-address", address]}
        for name, extra in engines.items():
            got: dict[int, list[dict]] = {}
            for n, path in paths.items():
                got[n] = []
                for r in range(args.repeats):
                    out = tmp / f"out-{r}"
                    got[n].append(run(["eval", str(path), "--benchmark", "spm", "--model", "m", "--base-url",
                                       server.url, "--out", str(out), "--concurrency", str(args.concurrency), *extra],
                                      tmp / "rusage.json", server))
                    shutil.rmtree(out, ignore_errors=True)
            n = args.items
            cpu = {k: min(r["cpu"] for r in v) for k, v in got.items()}
            print(json.dumps({"engine": name, "items": [n, 2 * n],
                              "wall_s": [round(min(r["wall"] for r in got[k]), 2) for k in (n, 2 * n)],
                              "start_up_s": round(min(r["start_up"] for v in got.values() for r in v), 2),
                              "requests_per_s": round(max(r["pace"] for r in got[2 * n]), 1),
                              "ideal_requests_per_s": round(args.concurrency / args.delay, 1) if args.delay else None,
                              # the driver's own CPU per request, past its fixed costs: steady on a busy machine
                              "driver_cpu_ms_per_request": round((cpu[2 * n] - cpu[n]) / n * 1e3, 2),
                              "driver_cpu_fixed_s": round(2 * cpu[n] - cpu[2 * n], 2),
                              "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
