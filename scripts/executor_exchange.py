"""The driver's CPU for handing units to the local workers and taking their results back, and nothing else.

    python scripts/executor_exchange.py [--units N] [--ms MS] [--workers N] [--repeats R] [--poll S]

Runs N units that each sleep MS milliseconds and return a small dict through ``ProcessExecutor.map_unordered``
(the workers started and warmed first), and reports the calling process's CPU for the call: the exchange with
the workers a unit, with no ledger, hashing or output around it. Sleeping units keep the workers' CPU out of the
way, so the figure moves little with the machine's load. Run it with ``PYTHONPATH=OTHER/src`` to measure other
code the same way. ``--poll``: how often the driver looks at the workers' shared memory
(``ProcessExecutor.POLL_SECONDS``).
"""

from __future__ import annotations

import argparse
import time

from cpu_time import cpu  # scripts/ is the first on sys.path

from benchmint.run import ProcessExecutor


def work(i: int, ms: float) -> dict:
    time.sleep(ms / 1000)
    return {"i": i, "pages": [i] * 8}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=3000)
    ap.add_argument("--ms", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--poll", type=float, default=None)
    args = ap.parse_args()
    if args.poll is not None:
        ProcessExecutor.POLL_SECONDS = args.poll
    ex = ProcessExecutor(args.workers)
    try:
        ex.start()
        assert sorted(ex.map_unordered(work, [(i, 0.0) for i in range(8)])) == [(i, work(i, 0)) for i in range(8)]
        for _ in range(args.repeats):
            n = args.units
            c, t = cpu(), time.perf_counter()
            got = sum(1 for _ in ex.map_unordered(work, [(i, args.ms) for i in range(n)], costs=[1.0] * n))
            c, t = cpu() - c, time.perf_counter() - t
            assert got == n
            print(f"{n} units of {args.ms:g} ms on {args.workers} workers: driver CPU {c:.3f} s "
                  f"({1000 * c / n:.4f} ms a unit), wall {t:.2f} s (the work's own bound "
                  f"{n * args.ms / 1000 / args.workers:.2f} s)")
    finally:
        ex.close()


if __name__ == "__main__":
    main()
