"""What durability costs: one transaction per recorded unit vs every unit in one transaction.

The ledger commits each unit before the runner reports it (a killed run keeps
every unit it reported); the reference is the cheapest possible store of the
same rows, one transaction for all, which keeps nothing of a killed run.
"""

import json
import sqlite3

import pytest

from benchmint.run import Ledger
from benchmint.run.ledger import SCHEMA

N = 2000
RESULT = {"pdf": "paper.pdf", "pages": 12, "figures": [{"label": "1", "panels": 4}], "error": None}


def _ledger_per_unit(path):
    with Ledger(path, "bench") as ledger:
        for i in range(N):
            ledger.record(f"unit-{i:05d}", RESULT)
    return path


def _one_transaction(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    db.execute("BEGIN")
    for i in range(N):
        db.execute("INSERT OR REPLACE INTO units VALUES (?, ?, ?, ?)",
                   (f"unit-{i:05d}", 1, json.dumps(RESULT, sort_keys=True, ensure_ascii=False), 0.0))
    db.execute("COMMIT")
    db.close()
    return path


def _rows(path):
    db = sqlite3.connect(path)
    rows = db.execute("SELECT key, ok, result FROM units ORDER BY key").fetchall()
    db.close()
    return rows


@pytest.mark.parametrize("store", [_ledger_per_unit, _one_transaction], ids=["per_unit_commit", "one_transaction"])
def test_ledger_record(benchmark, store, tmp_path):
    benchmark.group = f"ledger: record {N} units"
    counter = iter(range(10**6))
    path = benchmark.pedantic(lambda: store(tmp_path / f"l{next(counter)}.sqlite"), rounds=5, iterations=1)
    rows = _rows(path)
    assert len(rows) == N and rows[7] == ("unit-00007", 1, json.dumps(RESULT, sort_keys=True))
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        benchmark.extra_info["microseconds_per_unit"] = stats.stats.median / N * 1e6
