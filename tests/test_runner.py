"""The runner over keyed units: executors interchangeable, failures per unit, skips, order."""

import os
import signal
import subprocess
import sys
import time

import pytest

from benchmint.run import Ledger, ProcessExecutor, SerialExecutor, ThreadExecutor, Unit, executor_for, run_units, stage
from benchmint.run.executors import UnitTimeout, WorkerDied
from benchmint.run.runner import LONG_UNIT_SHARE, dispatch_order


def square_or_fail(i):
    if i % 7 == 3:
        raise ValueError(f"unit {i} is bad")
    return {"i": i, "square": i * i, "pid": os.getpid()}


def die_on_two(i):
    if i == 2:
        os._exit(3)  # a worker killed mid-unit, as by a crash inside a C library
    return {"i": i}


UNITS = [Unit(f"k{i:03d}", (i,), f"unit {i}") for i in range(40)]


def expected(i):
    return {"error": f"ValueError: unit {i} is bad"} if i % 7 == 3 else {"i": i, "square": i * i}


@pytest.mark.parametrize("make", [SerialExecutor, lambda: ThreadExecutor(3), lambda: ProcessExecutor(2)])
def test_executors_give_the_same_results_in_unit_order(make, tmp_path):
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, skipped = run_units(ledger, UNITS[::-1], square_or_fail, make())
    assert skipped == 0
    assert [{k: v for k, v in r.items() if k != "pid"} for r in results] == [expected(i) for i in range(39, -1, -1)]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        assert sum(1 for _, ok, _ in ledger.results() if not ok) == len([i for i in range(40) if i % 7 == 3])


def test_process_executor_uses_other_processes(tmp_path):
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, UNITS[:6], square_or_fail, ProcessExecutor(2))
    assert all(r["pid"] != os.getpid() for r in results if "pid" in r)


def test_done_units_are_skipped_and_shared_keys_run_once(tmp_path):
    calls = []

    def work(i):
        calls.append(i)
        return {"i": i}

    units = [Unit("a", (1,), "a"), Unit("b", (2,), "b"), Unit("a", (1,), "a again")]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, skipped = run_units(ledger, units, work, SerialExecutor())
        assert (results, skipped, calls) == ([{"i": 1}, {"i": 2}, {"i": 1}], 0, [1, 2])
        results, skipped = run_units(ledger, units + [Unit("c", (3,), "c")], work, SerialExecutor())
    assert (skipped, calls) == (2, [1, 2, 3]) and results[-1] == {"i": 3}


def halves(n):
    return {"n": n}


def _halves_then(unit, result):
    """A unit n is followed by the units n // 2 (twice over: the runner runs a key once) down to 1."""
    n = result.get("n", 0)
    return [Unit(f"h{n // 2}", (n // 2,), f"half of {n}")] * 2 if n > 1 else []


@pytest.mark.parametrize("make", [SerialExecutor, lambda: ThreadExecutor(3), lambda: ProcessExecutor(2)])
def test_units_that_follow_from_results_join_the_run(make, tmp_path):
    units = [Unit("h40", (40,), "40"), Unit("h12", (12,), "12")]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, halves, make(), then=_halves_then)
        assert results == [{"n": 40}, {"n": 12}]  # the given units' results; the others are in the ledger
        assert sorted(key for key, _, _ in ledger.results()) == sorted(f"h{n}" for n in (40, 20, 10, 5, 2, 1, 12, 6, 3))


def test_a_resumed_run_finds_the_follow_ups_of_units_it_already_has(tmp_path):
    calls = []

    def work(n):
        calls.append(n)
        return {"n": n}

    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        run_units(ledger, [Unit("h8", (8,), "8")], work, SerialExecutor())  # an earlier run without follow-ups
        run_units(ledger, [Unit("h8", (8,), "8")], work, SerialExecutor(), then=_halves_then)
        assert calls == [8, 4, 2, 1]  # 8 is not run again, its follow-ups are
        run_units(ledger, [Unit("h8", (8,), "8")], work, SerialExecutor(), then=_halves_then)
    assert calls == [8, 4, 2, 1]  # a finished run runs nothing


def test_a_dead_worker_costs_its_unit_only_and_the_next_run_tries_it_again(tmp_path):
    units = [Unit(f"u{i}", (i,), f"unit {i}") for i in range(5)]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, die_on_two, ProcessExecutor(2))
        assert [r.get("i") for r in results] == [0, 1, None, 3, 4]
        assert results[2] == {"error": "WorkerDied: the worker process died while running this unit (exit code 3)"}
        assert [ledger.done(u.key) for u in units] == [True, True, False, True, True]
        results, skipped = run_units(ledger, units, square_or_fail, ProcessExecutor(1))
    assert skipped == 4 and results[2]["i"] == 2


def sleepy(i, seconds):
    stage(f"unit {i} started")
    time.sleep(seconds)
    return {"i": i}


def staged(i, stages, seconds):
    for k in range(stages):
        stage(f"unit {i} step {k}")
        time.sleep(seconds)
    return {"i": i}


def test_a_unit_past_its_time_limit_is_stopped_and_the_run_goes_on(tmp_path):
    units = [Unit("slow", (0, 60), "slow"), *[Unit(f"f{i}", (i, 0.01), f"fast {i}") for i in range(1, 6)]]
    start = time.monotonic()
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, sleepy, ProcessExecutor(2, unit_seconds=1.0))
        assert not ledger.done("slow") and ledger.done("f1")
    assert time.monotonic() - start < 20
    assert results[0] == {"error": "UnitTimeout: 'unit 0 started' ran past the unit time limit of 1 s; its worker was "
                                   "stopped", "time_limit": {"limit": "unit", "seconds": 1.0, "stage": "unit 0 started"}}
    assert [r["i"] for r in results[1:]] == [1, 2, 3, 4, 5]


def test_the_stage_limit_restarts_at_every_stage(tmp_path):
    # 8 stages of 0.3 s: 2.4 s in all, each stage well inside a 1.5 s stage limit; the second unit's
    # one 5 s stage is not.
    units = [Unit("steps", (0, 8, 0.3), "steps"), Unit("stuck", (1, 2, 5.0), "stuck")]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, staged, ProcessExecutor(2, stage_seconds=1.5))
    assert results[0] == {"i": 0}
    assert results[1]["time_limit"] == {"limit": "stage", "seconds": 1.5, "stage": "unit 1 step 0"}


def many_stages(i, stages):
    for k in range(stages):
        stage(f"unit {i} page {k}")
    return i


def quiet_sleep(i, seconds):
    time.sleep(seconds)
    return i


def test_stage_reports_cost_the_driver_no_message(monkeypatch):
    """A worker writes its stage reports where the driver reads them when it checks the limits: 6 units of 300
    stages each reach the driver as their 6 results and the workers' word that they are ready, not 1,800 more
    messages (each a wake-up and a read of the driver's)."""
    from benchmint.run import executors

    received = []
    receive = executors._Worker.receive
    monkeypatch.setattr(executors._Worker, "receive", lambda w: received.append(1) or receive(w))
    ex = ProcessExecutor(2, stage_seconds=5.0)
    try:
        assert sorted(ex.map_unordered(many_stages, [(i, 300) for i in range(6)])) == [(i, i) for i in range(6)]
    finally:
        ex.close()
    assert len(received) <= 6 + 2


def test_a_stage_reported_before_is_not_the_next_units():
    """The stage a worker reported for an earlier unit (of an earlier call, whose index the next unit reuses,
    or of the unit before in its chunk) is not taken for the running unit's: a unit that reports none is
    stopped with no stage named."""
    ex = ProcessExecutor(1, stage_seconds=1.0)
    try:
        assert list(ex.map_unordered(many_stages, [(0, 3)])) == [(0, 0)]
        (index, timeout), = ex.map_unordered(quiet_sleep, [(0, 10.0)])
        assert index == 0 and timeout.as_dict() == {"limit": "stage", "seconds": 1.0, "stage": None}
        got = dict(ex.map_unordered(first_reports_second_sleeps, [(0,), (1,)]))
        assert got[0] == 0 and got[1].as_dict() == {"limit": "stage", "seconds": 1.0, "stage": None}
    finally:
        ex.close()


def late_own_limit(i):
    time.sleep(0.5)  # the driver is waiting by now, with no limit known
    stage("a stuck page", 0.5)
    time.sleep(10.0)
    return i


def test_a_stage_limit_reported_while_the_driver_waits_is_kept():
    """No executor limits, and a stage bringing its own once the driver waits: the unit is stopped about 0.5 s
    into that stage, not when it ends 10 s later."""
    ex = ProcessExecutor(1)
    try:
        start = time.monotonic()
        (index, timeout), = ex.map_unordered(late_own_limit, [(0,)])
        assert time.monotonic() - start < 6.0
        assert index == 0 and timeout.as_dict() == {"limit": "stage", "seconds": 0.5, "stage": "a stuck page"}
    finally:
        ex.close()


def first_reports_second_sleeps(i):
    if i == 0:
        stage("unit 0 page 1")
        return 0
    time.sleep(10.0)
    return 1


def sleep_then_square(i):
    time.sleep(0.2 if i == 0 else 0)
    return i * i


def test_a_process_executor_serves_call_after_call_and_after_an_abandoned_call():
    ex = ProcessExecutor(2)
    try:
        for _ in range(3):  # the workers of the first call are reused, not waited for
            assert sorted(ex.map_unordered(sleep_then_square, [(i,) for i in range(5)])) == [(i, i * i) for i in range(5)]
        first = ex.map_unordered(sleep_then_square, [(i,) for i in range(5)])
        next(first)  # the caller stops reading while unit 0 still runs
        first.close()
        assert sorted(ex.map_unordered(sleep_then_square, [(i,) for i in range(3, 6)])) == [(0, 9), (1, 16), (2, 25)]
    finally:
        ex.close()


def pid_and_modules(names):
    return os.getpid(), [name in sys.modules for name in names]


def test_started_workers_import_their_preload_before_any_unit(tmp_path):
    # A module of this test alone: on import it leaves a file named after the importing process.
    (tmp_path / "preload_probe_mod.py").write_text(
        "import os, pathlib\npathlib.Path(__file__).with_name(f'imported-{os.getpid()}').touch()\n")
    sys.path.insert(0, str(tmp_path))
    ex = ProcessExecutor(2, preload=("preload_probe_mod", "no_such_module_anywhere"))
    try:
        ex.start()
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("imported-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        importers = {int(p.name.split("-")[1]) for p in tmp_path.glob("imported-*")}
        assert len(importers) == 2 and os.getpid() not in importers  # both workers, before any unit was given
        got = dict(ex.map_unordered(pid_and_modules, [(["preload_probe_mod"],)] * 4))
        assert {pid for pid, _ in got.values()} <= importers  # a missing preload module stops no worker
        assert all(loaded == [True] for _, loaded in got.values())
    finally:
        ex.close()
        sys.path.remove(str(tmp_path))
    assert "preload_probe_mod" not in sys.modules


def square_now(x):
    stage(f"square {x}")
    return x * x


@pytest.mark.parametrize("started", [True, False])
def test_a_workers_preload_is_no_part_of_its_units_time_limits(tmp_path, started):
    """A preload that takes 1.5 s to import, under a 0.5 s stage and a 1 s unit limit: the units, given while
    their workers still import (started early or forked for the first unit), finish; the limits start when
    the worker is ready, as a Ray task's do."""
    (tmp_path / "slow_preload_mod.py").write_text("import time\ntime.sleep(1.5)\n")
    sys.path.insert(0, str(tmp_path))
    ex = ProcessExecutor(2, unit_seconds=1.0, stage_seconds=0.5, preload=("slow_preload_mod",))
    try:
        if started:
            ex.start()
        assert sorted(ex.map_unordered(square_now, [(i,) for i in range(4)])) == [(i, i * i) for i in range(4)]
    finally:
        ex.close()
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize("workers, where", [(2, "parent"), (1, "worker")])
def test_a_shared_preload_is_imported_before_the_fork_when_there_are_several_workers(tmp_path, workers, where):
    (tmp_path / "shared_probe_mod.py").write_text(
        "import os, pathlib\npathlib.Path(__file__).with_name(f'imported-{os.getpid()}').touch()\n")
    sys.path.insert(0, str(tmp_path))
    ex = ProcessExecutor(workers, preload=("shared_probe_mod",), share_preload=True)
    try:
        ex.start()
        got = dict(ex.map_unordered(pid_and_modules, [(["shared_probe_mod"],)] * 3))
        importers = {int(p.name.split("-")[1]) for p in tmp_path.glob("imported-*")}
        assert importers == ({os.getpid()} if where == "parent" else {pid for pid, _ in got.values()})
        assert all(loaded == [True] for _, loaded in got.values())
    finally:
        ex.close()
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shared_probe_mod", None)


def mark_started(folder, i):
    (folder / f"started-{i}").touch()
    return i


def test_a_worker_takes_its_next_unit_before_the_caller_has_read_the_result(tmp_path):
    # One worker: unit 1 can only start while the caller still holds unit 0's result if it was given out first.
    ex = ProcessExecutor(1)
    try:
        calls = ex.map_unordered(mark_started, [(tmp_path, 0), (tmp_path, 1)])
        assert next(calls) == (0, 0)
        deadline = time.monotonic() + 30
        while not (tmp_path / "started-1").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (tmp_path / "started-1").exists()
        assert list(calls) == [(1, 1)]
    finally:
        ex.close()


def test_time_limits_must_be_positive():
    with pytest.raises(ValueError, match="unit_seconds must be a positive"):
        ProcessExecutor(1, unit_seconds=0)
    with pytest.raises(ValueError, match="stage_seconds must be a positive"):
        ProcessExecutor(1, stage_seconds=-1.0)


_STUCK_DRIVER = """
import ctypes, sys
from benchmint.run import Ledger, ProcessExecutor, Unit, run_units

def stuck(path):
    import os
    open(path, "w").write(str(os.getpid()))
    ctypes.PyDLL(None).sleep(120)  # C code that keeps the GIL: no Python thread of the worker can run
    return {}

if __name__ == "__main__":
    with Ledger(sys.argv[1] + "/l.sqlite", "t") as ledger:
        run_units(ledger, [Unit("k", (sys.argv[1] + "/pid",), "k")], stuck, ProcessExecutor(1))
"""


def test_a_worker_stuck_in_c_code_dies_with_a_killed_run(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(_STUCK_DRIVER)
    driver = subprocess.Popen([sys.executable, str(script), str(tmp_path)])
    pid_file = tmp_path / "pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    time.sleep(0.3)  # inside sleep(120) by now
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker), "the worker outlived the killed run"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_executor_for():
    assert isinstance(executor_for("serial", 1), SerialExecutor)
    thread = executor_for("thread", 2)
    assert isinstance(thread, ThreadExecutor)
    thread.close()
    with pytest.raises(ValueError, match="executor must be"):
        executor_for("ray", 1)
    with pytest.raises(ValueError, match="workers must be -1"):
        executor_for("thread", 0)


# --- dispatch order: costliest first ------------------------------------------------------------------------------


def log_start(i, log, seconds=0.0):
    """Appends "i pid start" to ``log`` as the unit starts in its worker, then works ``seconds``."""
    with open(log, "a") as fh:
        fh.write(f"{i} {os.getpid()} {time.time()}\n")
    time.sleep(seconds)
    return {"i": i}


def _started(log):
    rows = [line.split() for line in open(log).read().splitlines()]
    return [(int(i), int(pid), float(t)) for i, pid, t in rows]


@pytest.mark.parametrize("dispatch, order", [(None, [1, 3, 4, 0, 2, 5]), ("input", [0, 1, 2, 3, 4, 5])])
def test_units_are_handed_out_costliest_first_and_ties_in_input_order(dispatch, order, tmp_path, monkeypatch):
    if dispatch is not None:
        monkeypatch.setenv("BENCHMINT_DISPATCH", dispatch)
    log = tmp_path / "started.log"
    costs = [1, 5, 0, 5, 3, 0]
    units = [Unit(f"c{i}", (i, str(log)), f"unit {i}", cost) for i, cost in enumerate(costs)]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, log_start, ProcessExecutor(1))  # one worker: starts in dispatch order
    assert [i for i, _, _ in _started(log)] == order
    assert results == [{"i": i} for i in range(6)]  # read back in unit order all the same


def test_a_long_unit_given_last_runs_beside_the_short_ones_not_after_them(tmp_path, monkeypatch):
    # Input order would start the long unit once the short ones were handed out, on a worker that ran some of
    # them; costliest first gives it a worker of its own from the start while the other runs every short unit.
    log = tmp_path / "started.log"
    units = [Unit(f"s{i}", (i, str(log), 0.05), f"short {i}", 1) for i in range(6)]
    units.append(Unit("long", (6, str(log), 1.5), "long", 30))
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, log_start, ProcessExecutor(2))
    started = _started(log)
    long_pid = next(pid for i, pid, _ in started if i == 6)
    assert [i for i, pid, _ in started if pid == long_pid] == [6]
    assert [i for i, pid, _ in started if pid != long_pid] == [0, 1, 2, 3, 4, 5]
    assert results == [{"i": i} for i in range(7)]
    monkeypatch.setenv("BENCHMINT_DISPATCH", "input")  # the other order, for contrast: both workers take short
    log.unlink()  # units first, so the long one follows short ones on its worker
    with Ledger(tmp_path / "l2.sqlite", "t") as ledger:
        run_units(ledger, units, log_start, ProcessExecutor(2))
    started = _started(log)
    long_pid = next(pid for i, pid, _ in started if i == 6)
    assert [i for i, pid, _ in started if pid == long_pid][-1] == 6 and len({pid for _, pid, _ in started}) == 2
    assert len([i for i, pid, _ in started if pid == long_pid]) > 1


def test_only_long_units_go_first_and_the_short_ones_keep_input_order(monkeypatch):
    # 1,998 units of cost 1 to 3 and two of 40 and 60 (total 3,996 + 100): the bar is 1/512 of the total, 8,
    # so only the two long ones are moved, costliest first; the others stay in input order, which lets results
    # finish in that order (sorting every unit by cost would interleave them by size).
    monkeypatch.delenv("BENCHMINT_DISPATCH", raising=False)
    costs = [1 + (i * 7) % 3 for i in range(2000)]
    costs[1500], costs[10] = 40, 60
    units = [Unit(f"u{i}", (i,), f"unit {i}", c) for i, c in enumerate(costs)]
    order = [u.args[0] for u in dispatch_order(units)]
    assert order[:2] == [10, 1500]
    assert order[2:] == [i for i in range(2000) if i not in (10, 1500)]
    assert sum(costs) * LONG_UNIT_SHARE == 8.0


def test_an_unknown_dispatch_order_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHMINT_DISPATCH", "random")
    with Ledger(tmp_path / "l.sqlite", "t") as ledger, pytest.raises(ValueError, match="BENCHMINT_DISPATCH"):
        run_units(ledger, UNITS[:2], square_or_fail, SerialExecutor())


# --- chunks: several units a message ------------------------------------------------------------------------------


def test_chunks_shrink_as_units_run_short_keep_a_long_unit_alone_and_send_handed_back_units_alone():
    from benchmint.run.executors import _Chunks

    args = [(i,) for i in range(40)]
    # 2 workers, at most 8 a chunk, 4 chunks' worth left for each: 40 // 8 = 5, 35 // 8 = 4, 31 // 8 = 3, ...,
    # 16 // 8 = 2, then the last 14 one at a time.
    chunks = _Chunks(args, None, 2, 8, 4, 64)
    sizes = []
    while chunks.left():
        sizes.append(len(chunks.take()))
    assert sizes == [5, 4, 3, 3, 3, 2, 2, 2, 2] + [1] * 14
    assert sum(sizes) == 40
    # By cost: a chunk holds at most 1 / (64 * 2) of the total (here 10 of 1,280): the unit of cost 200 goes
    # alone, a chunk ends before its cost would pass 10 (1 + 1 + 5, then 6 + 1 + 1 + 1 + 1), the units of cost 1
    # go by 8.
    costs = [200.0, 1.0, 1.0, 5.0, 6.0] + [1.0] * 1062 + [5.0]
    args = [(i,) for i in range(len(costs))]
    chunks = _Chunks(args, costs, 2, 8, 4, 64)
    assert sum(costs) == 1280.0
    assert [chunks.take() for _ in range(4)] == [[0], [1, 2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14, 15, 16]]
    chunks.hand_back([15, 16])  # their worker died before it reached them
    assert [chunks.take(), chunks.take(), chunks.take()] == [[15], [16], list(range(17, 25))]
    args.append((len(args),))  # a follow-up unit: its cost joins the total
    costs.append(1280.0)
    while chunks.next < len(args) - 1:
        chunks.take()
    assert chunks.take() == [len(args) - 1] and chunks.total == 2560.0 and not chunks.left()


def log_or_die(i, log, die_on):
    with open(log, "a") as fh:
        fh.write(f"{i} {os.getpid()}\n")
    if i == die_on:
        os._exit(3)
    return {"i": i, "pid": os.getpid()}


def test_a_worker_killed_mid_chunk_loses_its_unit_alone_and_the_rest_of_its_chunk_runs_once(tmp_path):
    """One worker, 40 units: the first chunk is units 0-4 (40 // 8); unit 2 kills its worker. Unit 2 is that
    run's WorkerDied (tried again by the next run), units 3 and 4 run on a new worker, every other unit once."""
    log = tmp_path / "log"
    units = [Unit(f"u{i:02d}", (i, str(log), 2), f"unit {i}") for i in range(40)]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, log_or_die, ProcessExecutor(1))
        assert results[2] == {"error": "WorkerDied: the worker process died while running this unit (exit code 3)"}
        assert [r["i"] for k, r in enumerate(results) if k != 2] == [k for k in range(40) if k != 2]
        assert not ledger.done("u02") and all(ledger.done(u.key) for u in units if u.key != "u02")
    started = [line.split() for line in log.read_text().splitlines()]
    assert sorted(int(i) for i, _ in started) == list(range(40))  # each unit started once
    first_pid = started[0][1]
    assert [int(i) for i, pid in started if pid == first_pid] == [0, 1, 2]  # one chunk: 0-4, cut at 2
    assert [int(i) for i, _ in started[3:5]] == [3, 4]  # handed back, and first on the new worker


def test_a_unit_past_its_time_limit_in_a_chunk_is_named_and_the_rest_of_the_chunk_runs(tmp_path):
    """One worker, 40 units in chunks: the limit restarts with each unit of a chunk (none of the short ones is
    stopped for the time the ones before it took), and the stuck one is that unit's UnitTimeout alone."""
    units = [Unit(f"f{i:02d}", (i, 0.05), f"fast {i}") for i in range(40)]
    units[3] = Unit("slow", (3, 60), "slow")
    start = time.monotonic()
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, sleepy, ProcessExecutor(1, unit_seconds=1.0))
        assert not ledger.done("slow") and ledger.done("f04")
    assert time.monotonic() - start < 30
    assert results[3]["time_limit"] == {"limit": "unit", "seconds": 1.0, "stage": "unit 3 started"}
    assert [r["i"] for k, r in enumerate(results) if k != 3] == [k for k in range(40) if k != 3]


def test_chunks_keep_the_makespan_of_uneven_units(tmp_path):
    """Uneven units (a long one among many short ones, given longest first as the runner does) on 2 workers:
    handed out in chunks, the run ends no later than one unit a message (within the timer's noise), and
    about where the work allows (the long unit beside the rest)."""
    units = [Unit("long", (0, 1.2), "long", 60.0)]
    units += [Unit(f"s{i:03d}", (i, 0.02), f"short {i}", 1.0) for i in range(1, 101)]
    walls = {}
    for chunk_units in (1, 8, 1, 8):
        with Ledger(tmp_path / f"l{chunk_units}-{len(walls)}.sqlite", "t") as ledger:
            ex = ProcessExecutor(2, chunk_units=chunk_units)
            ex.start()
            start = time.monotonic()
            results, _ = run_units(ledger, units, sleepy, ex)
            walls.setdefault(chunk_units, []).append(time.monotonic() - start)
        assert [r["i"] for r in results] == list(range(101))
    assert min(walls[8]) <= min(walls[1]) * 1.1 + 0.1, walls
    assert min(walls[8]) < 1.2 + 2.0 / 2 + 0.6, walls  # the long unit's 1.2 s beside 2 s of short ones


# --- results back a chunk at a time -------------------------------------------------------------------------------


def log_call(folder, i, seconds=0.0):
    """Leaves a file for each call of unit ``i`` (``call-i-pid``), then works ``seconds``."""
    (folder / f"call-{i}-{os.getpid()}-{time.monotonic_ns()}").touch()
    time.sleep(seconds)
    return i * i


def _calls(folder):
    counts = {}
    for p in folder.glob("call-*"):
        i = int(p.name.split("-")[1])
        counts[i] = counts.get(i, 0) + 1
    return counts


def test_the_results_of_a_chunk_reach_the_driver_in_one_message(monkeypatch):
    """200 quick units on 2 workers come back as a message a chunk (each worker's word that its chunk ended),
    not one a unit: the driver's reads from the pipes are counted."""
    from multiprocessing.connection import Connection

    reads = []
    read = Connection._recv_bytes
    monkeypatch.setattr(Connection, "_recv_bytes", lambda c, *a: reads.append(1) or read(c, *a))
    ex = ProcessExecutor(2)
    try:
        assert sorted(ex.map_unordered(square_now, [(i,) for i in range(200)])) == [(i, i * i) for i in range(200)]
    finally:
        ex.close()
    # 200 units: 18 chunks of 8, then smaller as fewer are left (7, 6, 5, 4, 4, 3, 3, 3, 2, 2, 2), the last 15
    # one at a time: 44 chunks, a read each (202 reads before: a result each and each worker's word it was ready)
    assert len(reads) == 44


def kill_self_at(folder, i, at):
    if i == at:
        (folder / f"call-{i}-{os.getpid()}-0").touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return log_call(folder, i)


def test_a_worker_killed_mid_chunk_loses_only_its_running_unit(tmp_path):
    """One worker, a first chunk of 8 units; the sixth kills its worker with SIGKILL. The five finished before it
    come back from the dead worker's shared memory, none run again; the sixth is the one that died; the two it
    had not reached run on a fresh worker; each unit was called once."""
    ex = ProcessExecutor(1)
    try:
        got = dict(ex.map_unordered(kill_self_at, [(tmp_path, i, 5) for i in range(40)]))
    finally:
        ex.close()
    assert isinstance(got.pop(5), WorkerDied)
    assert got == {i: i * i for i in range(40) if i != 5}
    assert _calls(tmp_path) == {i: 1 for i in range(40)}


def test_the_unit_time_limit_counts_from_the_units_own_start_within_a_chunk():
    """A chunk of two units under a 1 s unit limit: the first works 0.7 s and finishes; the second sleeps. The
    limit stops the second 1 s after it started (not 1 s after the chunk did), and names it."""
    ex = ProcessExecutor(1, unit_seconds=1.0, chunk_units=2)
    try:
        start = time.monotonic()
        got = []
        for i, result in ex.map_unordered(quiet_sleep, [(0, 0.7), (1, 10.0), (2, 0.0), (3, 0.0), (4, 0.0),
                                                        (5, 0.0), (6, 0.0), (7, 0.0)]):
            got.append((i, result, time.monotonic() - start))
    finally:
        ex.close()
    first, stopped = got[0], next(g for g in got if g[0] == 1)
    assert first[:2] == (0, 0)
    assert isinstance(stopped[1], UnitTimeout) and stopped[1].as_dict()["limit"] == "unit"
    assert stopped[2] >= 1.65  # 0.7 s of the first unit, then the second's whole second
    assert sorted(g[0] for g in got) == list(range(8)) and all(g[1] == g[0] for g in got if g[0] != 1)


def test_a_finished_result_reaches_the_caller_while_the_next_unit_of_its_chunk_runs():
    """The caller records and reports a result soon after it is made, not when the chunk ends: unit 0 is back
    well before unit 1, which works 5 s in the same chunk, ends."""
    ex = ProcessExecutor(1, chunk_units=2)
    try:
        start = time.monotonic()
        calls = ex.map_unordered(quiet_sleep, [(0, 0.0), (1, 5.0)] + [(i, 0.0) for i in range(2, 8)])
        assert next(calls) == (0, 0)
        assert time.monotonic() - start < 3.0
        assert sorted(calls) == [(i, i) for i in range(1, 8)]
    finally:
        ex.close()


def first_then_wait(tag, i):
    time.sleep(0 if i == 0 else 0.1)
    return tag, i


def test_results_of_an_abandoned_call_never_reach_the_next_call():
    ex = ProcessExecutor(1, chunk_units=8)
    try:
        first = ex.map_unordered(first_then_wait, [("first", i) for i in range(32)])
        next(first)  # its chunk's other results are still being made, some already in shared memory
        first.close()
        got = dict(ex.map_unordered(first_then_wait, [("second", i) for i in range(3)]))
        assert got == {i: ("second", i) for i in range(3)}
    finally:
        ex.close()


class TwoArgError(Exception):
    def __init__(self, what, where):  # pickles, but does not unpickle: its args are (message,)
        super().__init__(f"{what} at {where}")


def big_or_unreadable(i):
    if i == 1:
        raise TwoArgError("bad", "page 3")
    return "x" * (3 << 20) if i == 2 else i


def test_results_too_big_for_shared_memory_or_unreadable_are_still_results():
    """A 3 MB result goes by the pipe; an exception that cannot be unpickled in the driver is that unit's
    failure, named, not the end of the run."""
    ex = ProcessExecutor(1)
    try:
        got = dict(ex.map_unordered(big_or_unreadable, [(i,) for i in range(4)]))
    finally:
        ex.close()
    assert got[0] == 0 and got[3] == 3 and got[2] == "x" * (3 << 20)
    assert isinstance(got[1], RuntimeError) and "cannot be read back" in str(got[1])


def test_the_result_ring_wraps_and_refuses_what_does_not_fit(monkeypatch):
    """A ring of two and a half records: a record never splits across its end (the rest is skipped), and one
    that does not fit in what the driver has taken is refused, leaving the ring as it was."""
    import multiprocessing
    import pickle

    from benchmint.run import executors

    data = pickle.dumps("result", pickle.HIGHEST_PROTOCOL)
    r = executors._RECORD.size + len(data)
    monkeypatch.setattr(executors._ResultRing, "SIZE", 2 * r + r // 2)
    ring = executors._ResultRing(multiprocessing.get_context())
    assert ring.put(1, data) and ring.put(2, data)
    assert not ring.put(3, data)  # r // 2 left at the end, nothing at the start until the driver drains
    assert ring.drain() == [(1, "result"), (2, "result")] and ring.drain() == []
    assert ring.put(3, data)  # after the skipped end, at the start
    assert ring.put(4, data) and not ring.put(5, data)
    assert ring.drain() == [(3, "result"), (4, "result")]
    assert ring.ends.head == ring.ends.tail == 4 * r + r // 2  # four records, one skip (a refused put writes none)


class CostsSeen(SerialExecutor):
    """A serial executor that keeps the costs it is given, as any executor may use them."""

    def __init__(self):
        self.seen = None

    def map_unordered(self, fn, args, costs=None):
        self.seen = costs
        return super().map_unordered(fn, args, costs)


def test_run_units_gives_the_units_costs_to_any_executor(tmp_path):
    ex = CostsSeen()
    units = [Unit(f"c{i}", (i,), f"unit {i}", cost) for i, cost in enumerate([1, 5, 2])]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, square_or_fail, ex)
    assert [r["i"] for r in results] == [0, 1, 2]
    assert ex.seen == [5, 2, 1]  # in dispatch order (costliest first), as the units were handed to it
