"""The SQLite ledger: skip done work, survive a killed process, no duplicates."""

import json
import os
import signal
import subprocess
import sys

import pytest

from benchmint.run import Ledger, content_key

# A run as users get it: the runner, its executor, the ledger with its shipped settings.
# A unit is printed only once the runner reports it finished.
WORKER = """
import sys, time
from benchmint.run import Ledger, ThreadExecutor, Unit, run_units

def work(i):
    time.sleep(0.01)
    return {"i": i, "square": i * i}

units = [Unit(f"unit-{i:03d}", (i,), str(i)) for i in range(int(sys.argv[2]))]
with Ledger(sys.argv[1], "demo") as ledger:
    run_units(ledger, units, work, ThreadExecutor(2), on_recorded=lambda u, r: print(u.key, flush=True))
"""


def test_record_skip_and_read_back(tmp_path):
    with Ledger(tmp_path / "run.sqlite", "demo") as ledger:
        assert not ledger.done("a")
        ledger.record("a", {"x": 1})
        ledger.record("b", {"error": "unreadable"}, ok=False)
        assert ledger.done("a") and ledger.get("b") == (False, {"error": "unreadable"})
    with Ledger(tmp_path / "run.sqlite", "demo") as again:  # reopened: committed at close
        assert [k for k, _, _ in again.results()] == ["a", "b"] and len(again) == 2
    with pytest.raises(ValueError, match="ledger of a 'demo' run"):
        Ledger(tmp_path / "run.sqlite", "other")


def test_content_key_covers_settings():
    assert content_key(b"cif") == content_key(b"cif", None)
    assert content_key(b"cif", {"fwhm": 0.15}) != content_key(b"cif", {"fwhm": 0.2})
    assert content_key(b"cif", {"a": 1, "b": 2}) == content_key(b"cif", {"b": 2, "a": 1})


def test_killed_run_resumes_without_duplicates(tmp_path):
    db = tmp_path / "run.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(db), "200"], stdout=subprocess.PIPE, text=True)
    seen = [proc.stdout.readline().strip() for _ in range(30)]  # let it finish some units, then kill it hard
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert all(s.startswith("unit-") for s in seen)
    with Ledger(db, "demo") as ledger:
        survived = len(ledger)
        assert all(ledger.done(key) for key in seen)  # every unit reported finished was durable
    assert 30 <= survived < 200
    rerun = subprocess.run([sys.executable, "-c", WORKER, str(db), "200"], capture_output=True, text=True, check=True)
    assert len(rerun.stdout.split()) == 200 - survived  # only the missing units ran
    uninterrupted = tmp_path / "clean.sqlite"
    subprocess.run([sys.executable, "-c", WORKER, str(uninterrupted), "200"], capture_output=True, check=True)
    with Ledger(db, "demo") as a, Ledger(uninterrupted, "demo") as b:
        rows_a = [(k, ok, r) for k, ok, r in a.results()]
        rows_b = [(k, ok, r) for k, ok, r in b.results()]
    assert rows_a == rows_b and len(rows_a) == 200
    assert json.dumps(rows_a[7][2]) == '{"i": 7, "square": 49}'
