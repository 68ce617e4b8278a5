"""Runs killed mid-way: a command started in its own process and SIGKILLed once its ledger holds some units."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path


def recorded_units(ledger_file: Path) -> int:
    """Rows of the run's ledger, read without taking a write lock; 0 before the ledger exists."""
    try:
        with sqlite3.connect(f"file:{ledger_file}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM units").fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


def wait_until_recorded(ledger_file: Path, units: int, seconds: float = 60.0) -> None:
    """Return once ``ledger_file`` holds ``units`` rows, or after ``seconds``."""
    deadline = time.time() + seconds
    while time.time() < deadline and recorded_units(ledger_file) < units:
        time.sleep(0.01)


def kill_once_recorded(cmd: list[str], ledger_file: Path, units: int, seconds: float = 60.0) -> None:
    """Start ``cmd`` and SIGKILL it as soon as ``ledger_file`` holds ``units`` rows (or after ``seconds``)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until_recorded(ledger_file, units, seconds)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
