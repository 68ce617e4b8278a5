"""benchmint eval's throughput with the local engine and with --engine ray, against the scripted chat server.

    python benches/ray_eval_throughput.py [--items 200] [--delay 0.05] [--concurrency 8] [--repeats 2]

Each engine runs the whole command (a fresh process, a fresh output folder) on N and on 2N SPM items; the server
(tests/chat_server.py in a process of its own) answers each request after ``--delay`` seconds. From the best
times T(N) and T(2N): requests per second past start-up = N / (T(2N) - T(N)), start-up = 2 T(N) - T(2N) (the
fixed cost: interpreter, imports, Ray's start or connection, the actors). ``ray`` starts a Ray instance of its
own for each run, as ``--engine ray`` without an address does; ``ray (running cluster)`` connects to one
started beforehand (``--ray-address``), which is what a cluster's users pay. Both are loopback instances with
this machine's CPUs, shut down at the end. On a machine other jobs keep busy the wall times swing; the driver's
own CPU seconds per request (from N to 2N) do not, and they bound what one driver can send.
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


def run(argv: list[str], rusage: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the driver process) of ``benchmint`` with ``argv``."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAP, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env={**os.environ, "SERIAL_FRACTION_RUSAGE": str(rusage)})
    took = time.perf_counter() - t0
    if done.returncode not in (0, 1):  # 1: replies the benchmark cannot read (the server echoes the prompt)
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    return took, json.loads(rusage.read_text())["driver"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ray-eval-"))
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "chat_server.py"), "--delay", str(args.delay),
                               "--forget-bodies"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cluster = None
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
        paths = {n: items(tmp, n) for n in (args.items, 2 * args.items)}
        # The running cluster: a loopback Ray instance held by this process (its commands inherit its credentials).
        from benchmint.run.ray_engine import ray_session

        cluster = ray_session(None)
        address = cluster.__enter__().get_runtime_context().gcs_address
        engines = {"local": [], "ray": ["--engine", "ray"]}
        if address:
            engines["ray (running cluster)"] = ["--engine", "ray", "--ray-address", address]
        for name, extra in engines.items():
            best, cpu = {}, {}
            for n, path in paths.items():
                runs = []
                for r in range(args.repeats):
                    out = tmp / f"out-{r}"
                    runs.append(run(["eval", str(path), "--benchmark", "spm", "--model", "m", "--base-url", url,
                                     "--out", str(out), "--concurrency", str(args.concurrency), *extra],
                                    tmp / "rusage.json"))
                    shutil.rmtree(out, ignore_errors=True)
                best[n], cpu[n] = min(t for t, _ in runs), min(c for _, c in runs)
            n = args.items
            print(json.dumps({"engine": name, "items": n, "t_n_s": round(best[n], 2), "t_2n_s": round(best[2 * n], 2),
                              "requests_per_s": round(n / max(1e-9, best[2 * n] - best[n]), 1),
                              "start_up_s": round(2 * best[n] - best[2 * n], 2),
                              # the driver's own CPU per request, past its fixed costs: steady on a busy machine
                              "driver_cpu_ms_per_request": round((cpu[2 * n] - cpu[n]) / n * 1e3, 2),
                              "driver_cpu_fixed_s": round(2 * cpu[n] - cpu[2 * n], 2),
                              "ideal_requests_per_s": round(args.concurrency / args.delay, 1) if args.delay else None,
                              "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)
        server.stdin.close()
        server.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
