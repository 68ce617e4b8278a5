"""The runner over keyed units: executors interchangeable, failures per unit, skips, order."""

import os

import pytest

from benchmint.io import InputError
from benchmint.run import Ledger, ProcessExecutor, SerialExecutor, ThreadExecutor, Unit, executor_for, run_units


def square_or_fail(i):
    if i % 7 == 3:
        raise ValueError(f"unit {i} is bad")
    return {"i": i, "square": i * i, "pid": os.getpid()}


def die(i):
    os._exit(3)  # a worker killed mid-unit, as by a crash inside a C library


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


def test_a_dead_worker_stops_the_run_keeping_what_finished(tmp_path):
    units = [Unit("fine", (1,), "fine.pdf")]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        run_units(ledger, units, square_or_fail, ProcessExecutor(1))
        with pytest.raises(InputError, match=r"worker process died \(at crash.pdf.*rerun to go on"):
            run_units(ledger, [Unit("crash", (0,), "crash.pdf")], die, ProcessExecutor(1))
        assert ledger.done("fine") and not ledger.done("crash")


def test_executor_for():
    assert isinstance(executor_for("serial", 1), SerialExecutor)
    thread = executor_for("thread", 2)
    assert isinstance(thread, ThreadExecutor)
    thread.close()
    with pytest.raises(ValueError, match="executor must be"):
        executor_for("ray", 1)
    with pytest.raises(ValueError, match="workers must be -1"):
        executor_for("thread", 0)
