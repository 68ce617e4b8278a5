"""The CPU and wall time of `xrd build`'s KMeans selection (``xrd.build.select``) at database size, on rows shaped
like the corpus's (``benches/bench_xrd_select.synthetic_items``, a fifth of them repeats of an earlier item).

    python scripts/select_cpu.py 10000 50000 100000 [--workers N] [--parts] [--ray CPUS]

For each size: the whole ``select`` in this process, its CPU (every thread) and wall, after a small call that
loads scikit-learn and the silhouette's kernel. ``--parts``: KMeans and the silhouette apart, each on one thread
(thread CPU), and the count of distinct (cluster, row) pairs the silhouette's kernel takes. ``--ray CPUS``: the
same selection on a local Ray instance of that many CPUs (127.0.0.1, its own temp folder), twice (its workers
cold, then warm), the driver's CPU and wall, and whether the result is the local one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cpu_time import cpu  # scripts/ is the first on sys.path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))



def timed(fn, *args, **kwargs):
    c, w = cpu(), time.perf_counter()
    got = fn(*args, **kwargs)
    return got, round(cpu() - c, 2), round(time.perf_counter() - w, 2)


def parts(n: int) -> dict:
    import numpy as np
    from bench_xrd_select import K, scaled_rows
    from threadpoolctl import threadpool_limits

    from benchmint.xrd import cluster

    x = scaled_rows(n)
    with threadpool_limits(limits=1):
        t = time.thread_time()
        labels, _ = cluster.kmeans(x, K, 0, 1)
        kmeans_cpu = time.thread_time() - t
        distinct = len(cluster.distinct_rows(x, np.unique(labels, return_inverse=True)[1].ravel())[2])
        t = time.thread_time()
        cluster.silhouette(x, labels, 1)
        silhouette_cpu = time.thread_time() - t
    return {"kmeans_cpu": round(kmeans_cpu, 2), "distinct_pairs": distinct, "silhouette_cpu": round(silhouette_cpu, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=int, nargs="+")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--ray", type=int, default=0, metavar="CPUS")
    args = ap.parse_args()
    from bench_xrd_select import synthetic_items

    from benchmint.xrd import build, cluster

    build.select(synthetic_items(500), 25, 0, args.workers)  # scikit-learn loaded before the clock
    cluster.warm_up()
    for n in args.rows:
        items = synthetic_items(n)
        local, c, w = timed(build.select, items, 25, 0, args.workers)
        row = {"rows": n, "workers": args.workers, "cpu": c, "wall": w, "silhouette": local[1]}
        if args.parts:
            row.update(parts(n))
        print(json.dumps(row), flush=True)
        if args.ray:
            from benchmint.run.ray_engine import RayMap, ray_session

            with ray_session(num_cpus=args.ray):  # its own temp folder, removed at the end
                for run in ("cold", "warm"):
                    spread = RayMap()
                    got, c, w = timed(build.select, items, 25, 0, spread=spread)
                    print(json.dumps({"rows": n, "ray_cpus": args.ray, "workers": run, "driver_cpu": c, "wall": w,
                                      "tasks": spread.tasks, "same_as_local": got == local}), flush=True)


if __name__ == "__main__":
    main()
