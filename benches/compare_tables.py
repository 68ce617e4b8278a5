"""score_table against benchmint's own path on the same rows, for every benchmark, in CPU time and wall time.

The rows and the own path are bench_integrations.py's. Each round runs the own path, then the table, so both meet
the same load; the best of the rounds is kept (the machine's other work moves single rounds). CPU time (this
process, all threads) is the steadier figure on a shared machine. Run:
.venv/bin/python benches/compare_tables.py 2000,20000 5
"""

import random
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_integrations as bench  # noqa: E402

from benchmint import benchmarks  # noqa: E402
from benchmint.integrations.tables import score_table  # noqa: E402
from benchmint.io import write_jsonl  # noqa: E402


def compare(name: str, n: int, rounds: int) -> tuple[float, float, float, float]:
    root = Path(tempfile.mkdtemp(prefix=f"compare-{name}-"))
    rng = random.Random(0)
    rows = [bench.ROWS[name](i, rng) for i in range(n)]
    write_jsonl(root / "items.jsonl", ({k: v for k, v in r.items() if k != "prediction"} for r in rows))
    items = [it for _, it in benchmarks.get(name).read_items(root / "items.jsonl", check=False)]
    write_jsonl(root / "pred.jsonl", ({"id": it.id, "model": "model", "output": r["prediction"]}
                                      for it, r in zip(items, rows)))
    table = pd.DataFrame(rows)
    best = {"own": [float("inf")] * 2, "table": [float("inf")] * 2}
    for _ in range(rounds):
        for which, run in (("own", lambda: bench._own(name, root, "own")),
                           ("table", lambda: score_table(table, name, workers=1))):
            cpu, wall = time.process_time(), time.perf_counter()
            run()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            best[which] = [min(best[which][0], cpu), min(best[which][1], wall)]
    return best["own"][0], best["table"][0], best["own"][1], best["table"][1]


def main() -> None:
    sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "2000").split(",")]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    print("| benchmark | rows | own CPU s | table CPU s | CPU ratio | own wall s | table wall s | wall ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        for name in bench.ROWS:
            n = max(20, size // bench.FEWER.get(name, 1))
            own_cpu, tab_cpu, own_wall, tab_wall = compare(name, n, rounds)
            print(f"| {name} | {n:,} | {own_cpu:.3f} | {tab_cpu:.3f} | {tab_cpu / own_cpu:.2f} | {own_wall:.3f} | "
                  f"{tab_wall:.3f} | {tab_wall / own_wall:.2f} |", flush=True)


if __name__ == "__main__":
    main()
