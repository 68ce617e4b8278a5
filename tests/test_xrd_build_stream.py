"""`xrd build` finishes each CIF's result in input order while the others run: the read-back streamed
(``run_units``' ``in_order``), the same files whatever order the results arrive in, memory that follows the
number of items and not their size."""

import os
import shutil
import tracemalloc

from test_xrd_build import salt_cif

from benchmint.run import Ledger, ProcessExecutor, Unit, run_units
from benchmint.xrd.build import BuildConfig, build

OUTPUTS = ("items.jsonl", "errors.jsonl", "selection.jsonl")


def echo(x):
    return {"x": x}


def test_results_go_out_in_unit_order_as_soon_as_the_units_before_them_are_recorded(tmp_path):
    # Costs 3, 1, 2 on one worker: run as a, c, b. a goes out when recorded; c waits for b; then b and c.
    units = [Unit("a", (0,), "a", 3.0), Unit("b", (1,), "b", 1.0), Unit("c", (2,), "c", 2.0)]
    log: list[tuple] = []
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        got, skipped = run_units(ledger, units, echo, ProcessExecutor(1),
                                 on_recorded=lambda u, r: log.append(("recorded", u.key)),
                                 in_order=lambda i, r: log.append(("out", i, r)))
    assert (got, skipped) == ([], 0)
    assert log == [("recorded", "a"), ("out", 0, {"x": 0}), ("recorded", "c"), ("recorded", "b"),
                   ("out", 1, {"x": 1}), ("out", 2, {"x": 2})]


def test_units_an_earlier_run_recorded_go_out_before_the_first_one_to_do(tmp_path):
    units = [Unit("a", (0,), "a"), Unit("b", (1,), "b"), Unit("c", (2,), "c"), Unit("a", (0,), "a again")]
    log: list[tuple] = []
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        run_units(ledger, units[:2], echo, ProcessExecutor(1))
        _, skipped = run_units(ledger, units, echo, ProcessExecutor(1),
                               on_recorded=lambda u, r: log.append(("recorded", u.key)),
                               in_order=lambda i, r: log.append(("out", i, r)))
    assert skipped == 2
    assert log == [("out", 0, {"x": 0}), ("out", 1, {"x": 1}), ("recorded", "c"), ("out", 2, {"x": 2}),
                   ("out", 3, {"x": 0})]


def padded(text: str, kib: int) -> str:
    """``text`` with ``kib`` KiB of comment lines in its block: the item's cif_text carries them."""
    head, rest = text.split("\n", 1)
    return head + "\n" + ("# " + "x" * 1021 + "\n") * kib + rest


def cif_set(root, big_kib=0, padded_from=9):
    """Ten salts, a copy of one (duplicate content), a broken file; those from ``padded_from`` on padded."""
    root.mkdir()
    for i in range(10):
        text = salt_cif(f"s{i}", a=4.0 + 0.2 * i, metal=("Na", "K", "Li")[i % 3])
        (root / f"s{i:02d}.cif").write_text(padded(text, big_kib) if i >= padded_from else text)
    shutil.copy(root / "s03.cif", root / "s03copy.cif")
    (root / "s05broken.cif").write_text("not a CIF\n")


def outputs(out):
    return {name: (out / name).read_bytes() for name in OUTPUTS}


def test_results_arriving_out_of_input_order_and_a_resumed_run_give_the_files_of_an_in_order_run(tmp_path,
                                                                                                  monkeypatch):
    cif_set(tmp_path / "cif", big_kib=256)  # the last file is the largest: run first, recorded first
    monkeypatch.chdir(tmp_path)  # relative paths, so the outputs compare byte for byte
    cfg = BuildConfig(per_db=3)
    monkeypatch.setenv("BENCHMINT_DISPATCH", "input")
    build(["cif"], "in-order", cfg)
    monkeypatch.setenv("BENCHMINT_DISPATCH", "longest-first")
    for workers in (1, 2):
        got = build(["cif"], f"any-order-{workers}", cfg, workers=workers)
        assert (got.cifs, got.items, len(got.errors)) == (12, 10, 2)
        assert outputs(tmp_path / f"any-order-{workers}") == outputs(tmp_path / "in-order"), workers
    # A run that stopped after the first half of the files, resumed with all of them.
    (tmp_path / "half").mkdir()
    for p in sorted((tmp_path / "cif").iterdir())[:6]:
        shutil.copy(p, tmp_path / "half" / p.name)
    build(["half"], "resumed", cfg)
    assert build(["cif"], "resumed", cfg, workers=2).skipped == 6 - 1  # s03copy shares s03's key
    assert outputs(tmp_path / "resumed") == outputs(tmp_path / "in-order")
    assert sorted(os.listdir(tmp_path / "resumed")) == sorted(os.listdir(tmp_path / "in-order"))


def test_the_drivers_memory_follows_the_items_count_not_their_size(tmp_path, monkeypatch):
    """Ten items of 1 MiB each (their CIF text): the driver holds one at a time, and of each item the fields the
    selection reads. Holding every result until the last CIF, as the read-back after the run did, peaked at
    13.2 MiB; finishing them in order as they arrive, at 4.2 MiB: a few copies of the one result in hand (the
    text from the worker, the ledger's, the decoded item, its line of JSON)."""
    cif_set(tmp_path / "cif", big_kib=1024, padded_from=0)
    monkeypatch.chdir(tmp_path)
    tracemalloc.start()
    try:
        got = build(["cif"], "out", BuildConfig(per_db=3))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.items == 10 and len((tmp_path / "out" / "items.jsonl").read_bytes()) > 10 * 2**20
    assert peak < 6 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_a_killed_run_leaves_no_half_items_file_and_its_rerun_writes_a_clean_runs_files(tmp_path):
    """Rows are written while the CIFs run, to a temporary name: a run killed half way leaves no items.jsonl (a
    reader never sees part of one), and its rerun, resumed from the ledger, writes the files of a clean run."""
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    (tmp_path / "cif").mkdir()
    for i in range(40):
        (tmp_path / "cif" / f"s{i:02d}.cif").write_text(salt_cif(f"s{i}", a=4.0 + 0.05 * i,
                                                                 metal=("Na", "K", "Li")[i % 3]))
    run = [sys.executable, "-m", "benchmint.cli", "xrd", "build", "cif", "--per-db", "3", "--out"]
    env = {**os.environ, "BENCHMINT_DISPATCH": "input"}  # results in input order: rows go out as they come
    proc = subprocess.Popen([*run, "killed"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    partial = tmp_path / "killed" / ".items.jsonl.tmp"
    deadline = time.time() + 120
    while time.time() < deadline:  # kill it once some rows are written, long before the end
        if partial.exists() and partial.stat().st_size > 0:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(tmp_path / "killed" / "ledger.sqlite") as db:
        recorded = db.execute("SELECT COUNT(*) FROM units").fetchone()[0]
        assert 1 <= recorded < 40
        # filed by the workers: the rows point into result files, which the rerun reads back
        assert db.execute("SELECT COUNT(file) FROM units").fetchone()[0] == recorded
    assert not (tmp_path / "killed" / "items.jsonl").exists()
    rerun = subprocess.run([*run, "killed"], cwd=tmp_path, capture_output=True, text=True)
    assert rerun.returncode == 0 and f"({recorded} already done)" in rerun.stdout, rerun.stdout
    assert subprocess.run([*run, "clean"], cwd=tmp_path, capture_output=True).returncode == 0
    assert outputs(tmp_path / "killed") == outputs(tmp_path / "clean")
    assert not partial.exists()
