"""Results filed by the workers: each worker appends its results to a file of its own beside the ledger and the
ledger records where each is (file, start, length, CRC-32). What is read back is what was computed, or the unit
runs again: a torn, damaged or missing result file, a killed worker, a killed driver; ledgers written with
results inline still read, alone or mixed with filed rows."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import warnings
from pathlib import Path

import pytest

from benchmint.run import Ledger, run_files
from benchmint.run.ledger import Filed, encode_result, file_result, results_folder


def described(source, key, out, log):
    """A result of some size, different for every file; each call logged, to count the units that ran."""
    with open(log, "a") as fh:
        fh.write(os.path.basename(source) + "\n")
    name = os.path.basename(source)
    if name.startswith("bad"):
        return {"error": "not a structure", "kind": "parse"}
    return {"name": name, "text": Path(source).read_text(), "pad": [name * 40] * 20, "é": "ünïcode ✓"}


def inputs(root: Path, n: int = 12) -> Path:
    folder = root / "in"
    folder.mkdir(exist_ok=True)
    for i in range(n):
        (folder / f"{'bad' if i == 5 else 'f'}{i:02d}.cif").write_text(f"file {i}\n" * (i + 1))
    return folder


def run(root: Path, out: str, log: Path, workers: int = 2, n: int = 12):
    """(rows as (file name, result), files already done)."""
    _, rows, skipped = run_files([inputs(root, n)], ".cif", root / out, "t", described, lambda p: (str(log),),
                                 lambda p: {}, workers=workers)
    return [(f.path.name, r) for f, _, r in rows], skipped


def ran(log: Path) -> list[str]:
    names = log.read_text().split() if log.exists() else []
    log.unlink(missing_ok=True)
    return sorted(names)


def stored(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "ledger.sqlite") as db:
        return db.execute("SELECT key, ok, result, file, start, length, crc FROM units ORDER BY key").fetchall()


def test_workers_file_their_results_and_the_driver_records_where(tmp_path):
    """Every row holds a place in a result file and no result; the bytes there are the result as the ledger
    would have stored it inline (its encoded text, one JSON line), and the rows read back to the results."""
    log = tmp_path / "log"
    rows, skipped = run(tmp_path, "out", log)
    assert skipped == 0 and len(ran(log)) == 12
    units = stored(tmp_path / "out")
    assert len(units) == 12 and all(result == "" and file for _, _, result, file, *_ in units)
    assert [ok for *_, ok, _, _, _, _, _ in units].count(0) == 1  # bad05: an error, final
    folder = results_folder(tmp_path / "out" / "ledger.sqlite")
    assert folder == tmp_path / "out" / "ledger.results"
    for name, result in rows:
        text = encode_result(result).text.encode("utf-8")
        matches = [u for u in units if (folder / u[3]).read_bytes()[u[4]:u[4] + u[5]] == text]
        assert len(matches) == 1, name  # the result, byte for byte, where its row says
    for shard in folder.iterdir():  # one JSON object a line, nothing else
        assert all(isinstance(json.loads(line), dict) for line in shard.read_text(encoding="utf-8").splitlines())
    assert [r["name"] for n, r in rows if n != "bad05.cif"] == [n for n, _ in rows if n != "bad05.cif"]


def _damage(out: Path, how: str) -> set[str]:
    """Damage the result file of the third unit by key: one byte of its result, the file cut in the middle of
    it, or the whole file gone; the names of the inputs whose results go with it."""
    units = stored(out)
    with Ledger(out / "ledger.sqlite", "t") as ledger:
        name = {u[0]: ledger.get(u[0])[1].get("name", "bad05.cif") for u in units}
    key, _, _, file, start, length, _ = units[2]
    path = results_folder(out / "ledger.sqlite") / file
    data = path.read_bytes()
    cut = start + length // 2
    if how == "byte":
        path.write_bytes(data[:cut] + bytes([data[cut] ^ 0x01]) + data[cut + 1:])
        return {name[key]}
    if how == "torn":  # as by a crash mid-write: the record and everything after it cut
        path.write_bytes(data[:cut])
        return {name[u[0]] for u in units if u[3] == file and u[4] + u[5] > cut}
    assert how == "missing"
    path.unlink()
    return {name[u[0]] for u in units if u[3] == file}


@pytest.mark.parametrize("how", ["byte", "torn", "missing"])
def test_a_damaged_torn_or_missing_result_file_runs_its_units_again_with_a_warning(tmp_path, how):
    """A result whose bytes fail their check counts as not done: the rerun warns, runs exactly those units again
    and returns what a clean run returns; nothing raises."""
    log = tmp_path / "log"
    clean, _ = run(tmp_path, "clean", log)
    run(tmp_path, "out", log)
    ran(log)
    gone = _damage(tmp_path / "out", how)
    assert gone
    with pytest.warns(RuntimeWarning, match="counts as not done and runs again"):
        rows, skipped = run(tmp_path, "out", log)
    assert ran(log) == sorted(gone)
    assert skipped == 12 - len(gone)
    assert rows == clean
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every result reads back now: no warning
        assert run(tmp_path, "out", log) == (clean, 12)
    assert ran(log) == []


def test_a_result_damaged_after_its_check_is_that_units_error_and_the_next_run_does_it_again(tmp_path):
    """Read back after the run checked it (the file changed meanwhile): the unit's result is an error saying
    why, never other bytes, and its row is marked to be done again."""
    folder = results_folder(tmp_path / "ledger.sqlite")
    with Ledger(tmp_path / "ledger.sqlite", "t") as ledger:
        filed = file_result(str(folder), {"x": 1})
        assert isinstance(filed, Filed) and not filed.error
        ledger.record("k", filed)
        assert ledger.done("k") and ledger.get("k") == (True, {"x": 1})
        path = folder / filed.file
        path.write_bytes(path.read_bytes().replace(b'"x": 1', b'"x": 7'))
        with pytest.warns(RuntimeWarning, match="damaged"):
            ok, result = ledger.get("k")
        assert not ok and result["error"].startswith("stored result unreadable: the result file ")
        assert not ledger.done("k")  # marked: no second read, no second warning
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
        assert db.execute("SELECT ok FROM units").fetchone() == (-1,)


def test_a_record_no_row_points_to_is_run_again_as_if_never_done(tmp_path):
    """A driver killed after a worker filed a result and before it committed the row: the rerun does the unit
    again (its result appended anew) and reads what a clean run reads."""
    log = tmp_path / "log"
    clean, _ = run(tmp_path, "clean", log)
    run(tmp_path, "out", log)
    ran(log)
    key = stored(tmp_path / "out")[4][0]
    with sqlite3.connect(tmp_path / "out" / "ledger.sqlite") as db:
        db.execute("DELETE FROM units WHERE key = ?", (key,))
    rows, skipped = run(tmp_path, "out", log)
    assert skipped == 11 and len(ran(log)) == 1 and rows == clean


OLD_SCHEMA = """
CREATE TABLE units (key TEXT PRIMARY KEY, ok INTEGER NOT NULL, result TEXT NOT NULL, recorded REAL NOT NULL);
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('kind', 't');
"""


def test_a_ledger_with_results_inline_reads_and_takes_filed_rows_beside_them(tmp_path):
    """A ledger written before results were filed (its table without their columns, results in their rows):
    its units are skipped and read back, the others are filed beside them, and the rows are a clean run's."""
    log = tmp_path / "log"
    clean, _ = run(tmp_path, "clean", log)
    keys = [k for k, *_ in stored(tmp_path / "clean")]
    with Ledger(tmp_path / "clean" / "ledger.sqlite", "t") as ledger:
        inline = [(k, *ledger.get(k)) for k in keys[::2]]  # half of the units, as the old code stored them
    (tmp_path / "old").mkdir()
    with sqlite3.connect(tmp_path / "old" / "ledger.sqlite") as db:
        db.executescript(OLD_SCHEMA)
        db.executemany("INSERT INTO units VALUES (?, ?, ?, 0)",
                       [(k, int(ok), encode_result(r).text) for k, ok, r in inline])
    ran(log)
    rows, skipped = run(tmp_path, "old", log)
    assert skipped == 6 and len(ran(log)) == 6
    assert rows == clean
    units = stored(tmp_path / "old")
    assert sum(file is None for *_, file, _, _, _ in units) == 6  # still inline
    assert sum(file is not None and result == "" for _, _, result, file, *_ in units) == 6
    assert run(tmp_path, "old", log) == (clean, 12) and ran(log) == []


def killed_mid_write(source, key, out, log):
    """The first attempt at "f03.cif" writes half a record to its worker's result file, then the worker is
    killed (SIGKILL): as a worker killed in the middle of appending its result."""
    from benchmint.run import ledger as ledger_module

    name = os.path.basename(source)
    marker = Path(log).with_suffix(".killed")
    if name == "f03.cif" and not marker.exists():
        marker.write_text("")
        folder = str(results_folder(Path(out) / "ledger.sqlite").resolve())
        file_result(folder, {"warm": 1})  # this process's file exists and holds a record
        os.write(ledger_module._SHARDS[folder].fd, b'{"name": "f03.cif", "text": "half a rec')
        os.kill(os.getpid(), signal.SIGKILL)
    return described(source, key, out, log)


def test_a_worker_killed_while_appending_leaves_a_torn_tail_no_row_points_to(tmp_path):
    """The killed worker's unit is that run's error and the next run's work; the other units' results, filed by
    the worker started in its place in a file of its own, read back; the rerun's rows are a clean run's."""
    log = tmp_path / "log"
    clean, _ = run(tmp_path, "clean", log)
    _, rows, _ = run_files([inputs(tmp_path)], ".cif", tmp_path / "out", "t", killed_mid_write,
                           lambda p: (str(log),), lambda p: {}, workers=2)
    got = {f.path.name: r for f, _, r in rows}
    assert "the worker process died" in got["f03.cif"]["error"]
    assert {n: r for n, r in got.items() if n != "f03.cif"} == {n: r for n, r in clean if n != "f03.cif"}
    shards = list(results_folder(tmp_path / "out" / "ledger.sqlite").iterdir())
    assert any(s.read_bytes().endswith(b"half a rec") for s in shards) and len(shards) >= 2
    ran(log)
    _, rows, skipped = run_files([inputs(tmp_path)], ".cif", tmp_path / "out", "t", killed_mid_write,
                                 lambda p: (str(log),), lambda p: {}, workers=2)
    assert skipped == 11 and ran(log) == ["f03.cif"]
    assert [(f.path.name, r) for f, _, r in rows] == clean


def test_a_result_that_cannot_be_filed_comes_back_inline(tmp_path):
    """A results folder that cannot be made (a file stands in its place): the result returns encoded, as
    before results were filed, and the ledger stores it in its row."""
    blocked = tmp_path / "ledger.results"
    blocked.write_text("not a folder")
    got = file_result(str(blocked), {"x": 1})
    assert got == encode_result({"x": 1})
    with Ledger(tmp_path / "ledger.sqlite", "t") as ledger:
        ledger.record("k", got)
        assert ledger.get("k") == (True, {"x": 1})


def test_a_harvest_whose_result_file_was_damaged_runs_those_ranges_again_and_writes_a_clean_runs_files(tmp_path):
    """harvest's page ranges are filed by its workers too: a result changed in its file is found by its check
    on the rerun, which runs that range again (with a warning) and writes the files of a clean run."""
    from importlib.resources import files

    from benchmint.pdf.harvest import harvest

    sample = (files("benchmint") / "samples" / "sample_paper.pdf").read_bytes()
    (tmp_path / "in").mkdir()
    for i in range(3):
        (tmp_path / "in" / f"paper{i}.pdf").write_bytes(sample + f"%{i}\n".encode())
    harvest([tmp_path / "in"], tmp_path / "clean", workers=2)
    harvest([tmp_path / "in"], tmp_path / "out", workers=2)
    units = stored(tmp_path / "out")
    assert units and all(file for *_, file, _, _, _ in units)
    _, _, _, file, start, length, _ = units[0]
    path = results_folder(tmp_path / "out" / "ledger.sqlite") / file
    data = path.read_bytes()
    path.write_bytes(data[:start + length - 2] + b"x" + data[start + length - 1:])
    with pytest.warns(RuntimeWarning, match="damaged"):
        harvest([tmp_path / "in"], tmp_path / "out", workers=2)
    for name in ("pages.jsonl", "figures.jsonl", "errors.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name


def test_the_command_line_says_a_damaged_result_in_one_warning_line(tmp_path):
    """At the command line the warning is one line saying what was found, not Python's warning with a line of
    benchmint's source under it."""
    import subprocess
    import sys
    from importlib.resources import files

    sample = (files("benchmint") / "samples" / "sample_paper.pdf").read_bytes()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "paper.pdf").write_bytes(sample)
    command = [sys.executable, "-m", "benchmint.cli", "harvest", str(tmp_path / "in"), "--out", str(tmp_path / "out"),
               "--workers", "1", "--triage-only"]
    subprocess.run(command, check=True, capture_output=True)
    _, _, _, file, start, length, _ = stored(tmp_path / "out")[0]
    path = results_folder(tmp_path / "out" / "ledger.sqlite") / file
    data = path.read_bytes()
    path.write_bytes(data[:start + length - 2] + b"x" + data[start + length - 1:])
    err = subprocess.run(command, capture_output=True, text=True).stderr
    lines = [line for line in err.splitlines() if "damaged" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: "), err
    assert "RuntimeWarning" not in err and "warnings.warn" not in err, err

def test_a_result_its_work_encoded_is_stored_as_it_is_and_read_by_the_callers_reader(tmp_path):
    """A result the work encoded in a form of its own (``encode_text``) is filed or recorded byte for byte; a
    caller's ``read`` gets its checked bytes (filed and inline alike) and the other results are decoded; a text
    that is not a JSON object is stored as the unit's error."""
    from benchmint.run.ledger import Encoded, encode_text

    text = '{"head":{"n":2},"items":["x","y"]}'
    enc = encode_text(text)
    assert enc == Encoded(text, False, False) and encode_result(enc) is enc
    bad = encode_text('["a list"]')
    assert bad.error and "not a JSON object" in bad.text
    seen: list[bytes] = []

    def read(stored: bytes):
        seen.append(stored)
        return {"sliced": stored[:8].decode()} if stored.startswith(b'{"head"') else None

    folder = str(results_folder(tmp_path / "ledger.sqlite"))
    with Ledger(tmp_path / "ledger.sqlite", "k") as ledger:
        ledger.record("filed", file_result(folder, enc))
        ledger.record("inline", enc)
        ledger.record("plain", {"v": 1})
        ledger.record("bad", bad, ok=not bad.error)
        assert ledger.get("filed", read) == (True, {"sliced": '{"head":'})
        assert ledger.get("inline", read) == (True, {"sliced": '{"head":'})
        assert ledger.get("plain", read) == (True, {"v": 1})
        assert ledger.get("filed") == (True, {"head": {"n": 2}, "items": ["x", "y"]})
        assert ledger.get("bad")[0] is False
    assert seen[:2] == [text.encode()] * 2


KILLED_DRIVER = '''
import os, signal, sys
from benchmint.run import run_files, runner

sys.path.insert(0, {tests!r})
from test_ledger_files import described

runner.COMMIT_SECONDS = 1000.0  # only the count ends a batch: the kill falls between a batch's records
reported = []


def on_row(f, key, result):
    reported.append(f.path.name)
    if len(reported) == 7:
        with open({reported!r}, "w") as fh:
            fh.write("\\n".join(reported))
        os.kill(os.getpid(), signal.SIGKILL)


run_files([{inputs!r}], ".cif", {out!r}, "t", described, lambda p: ({log!r},), lambda p: {{}}, workers=2,
          on_row=on_row)
'''


def test_a_driver_killed_between_the_records_of_a_batch_resumes_from_the_result_files(tmp_path):
    """The driver commits filed results several at once; SIGKILLed after it reported 7 results in input order
    and before their commit, it leaves fewer committed rows than reported units. The rerun finds the rest in
    the workers' files (each result after a head naming its unit) and runs none of the reported units again;
    its rows are a clean run's."""
    import subprocess
    import sys

    log = tmp_path / "log"
    clean, _ = run(tmp_path, "clean", log)
    ran(log)
    script = tmp_path / "driver.py"
    script.write_text(KILLED_DRIVER.format(tests=str(Path(__file__).parent), reported=str(tmp_path / "reported"),
                                           inputs=str(inputs(tmp_path)), out=str(tmp_path / "out"), log=str(log)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    reported = (tmp_path / "reported").read_text().split()
    assert len(reported) == 7
    assert len(stored(tmp_path / "out")) < len(reported)  # the kill fell before the batch's commit
    ran(log)
    rows, skipped = run(tmp_path, "out", log)
    assert not set(ran(log)) & set(reported)
    assert skipped >= len(reported) and rows == clean


def test_recover_records_framed_results_no_row_points_to_and_passes_over_the_rest(tmp_path):
    """``Ledger.recover`` reads each result file past the last result a row points to: a framed result of a unit
    without a row is recorded (its flags kept), one whose unit has a final row is left alone, one whose row
    asked for a retry is taken; a result filed without a head (the files of the code before), a torn frame and
    a frame whose bytes fail their CRC are passed over."""
    folder = str(results_folder(tmp_path / "ledger.sqlite"))
    with Ledger(tmp_path / "ledger.sqlite", "t") as ledger:
        ledger.record("committed", file_result(folder, {"v": 0}, "committed"))
        old = file_result(folder, {"v": "old"})  # no head: the code before frames
        assert isinstance(old, Filed) and not old.framed
        new = file_result(folder, {"v": 1}, "new")
        assert isinstance(new, Filed) and new.framed
        file_result(folder, {"error": "bad", "retry": True}, "again")
        ledger.record("was-retry", {"error": "timed out"}, ok=False, final=False)
        file_result(folder, {"v": 2}, "was-retry")
        ledger.record("final", {"v": "kept"})
        file_result(folder, {"v": "late"}, "final")
        damaged = file_result(folder, {"v": "damaged"}, "damaged")
        torn = file_result(folder, {"v": "torn"}, "torn")
    path = Path(folder) / new.file
    data = bytearray(path.read_bytes())
    data[damaged.start + 3] ^= 1
    path.write_bytes(bytes(data[:torn.start + 4]))
    with Ledger(tmp_path / "ledger.sqlite", "t") as ledger:
        assert ledger.recover() == 3
        assert ledger.get("new") == (True, {"v": 1})
        assert ledger.get("was-retry") == (True, {"v": 2})
        assert ledger.get("again") == (False, {"error": "bad", "retry": True}) and not ledger.done("again")
        assert ledger.get("final") == (True, {"v": "kept"})
        assert ledger.get("damaged") is None and ledger.get("torn") is None
        assert ledger.recover() == 0  # past the rows' ends now: nothing read twice
    lines = path.read_bytes().split(b"\n")
    assert json.loads(lines[3]) == {"frame": "new", "length": new.length, "crc": new.crc, "error": False,
                                    "retry": False}


def test_held_rows_are_read_at_once_and_committed_together(tmp_path):
    """Rows recorded with ``hold`` are read by the ledger's own connection at once, by another only after
    ``commit`` (or the next row recorded without it), and ``close`` commits what is held."""
    folder = str(results_folder(tmp_path / "ledger.sqlite"))
    other = sqlite3.connect(tmp_path / "ledger.sqlite")
    ledger = Ledger(tmp_path / "ledger.sqlite", "t")
    ledger.record("a", file_result(folder, {"v": "a"}, "a"), hold=True)
    ledger.record("b", file_result(folder, {"v": "b"}, "b"), hold=True)
    assert ledger.held == 2 and ledger.get("b") == (True, {"v": "b"})
    assert other.execute("SELECT COUNT(*) FROM units").fetchone() == (0,)
    ledger.commit()
    assert ledger.held == 0 and other.execute("SELECT COUNT(*) FROM units").fetchone() == (2,)
    ledger.record("c", file_result(folder, {"v": "c"}, "c"), hold=True)
    ledger.record("d", {"v": "d"})  # not held: commits what was held with it
    assert other.execute("SELECT COUNT(*) FROM units").fetchone() == (4,)
    ledger.record("e", file_result(folder, {"v": "e"}, "e"), hold=True)
    ledger.close()
    assert other.execute("SELECT COUNT(*) FROM units").fetchone() == (5,)
    other.close()


def test_rows_held_are_read_before_their_commit_and_a_key_recorded_again_keeps_its_last_row(tmp_path):
    """Rows recorded with ``hold`` wait to be inserted together; every read of the ledger sees them first
    (``get``, its length, any query), a key recorded again keeps the row recorded last whether held or
    not, and closing commits them for the next process."""
    import pickle

    def filed(start):
        return Filed("w.jsonl", start, 5, 0, False, False, True)

    assert pickle.loads(pickle.dumps(filed(7))) == filed(7)
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        ledger.record("a", {"x": 1}, hold=False)
        ledger.record("b", filed(0), hold=True)
        ledger.record("c", filed(6), hold=True)
        assert ledger.held == 2 and len(ledger) == 3
        ledger.record("b", filed(12), hold=True)
        ledger.record("c", {"x": 2})  # not held: after the rows held before it
        ledger.record("d", filed(18), hold=True)
        assert len(ledger) == 4
        assert ledger.get("c") == (True, {"x": 2})
        rows = dict(ledger._db.execute("SELECT key, start FROM units").fetchall())
        assert rows == {"a": None, "b": 12, "c": None, "d": 18}
    with sqlite3.connect(tmp_path / "l.sqlite") as db:
        assert dict(db.execute("SELECT key, start FROM units").fetchall()) == rows
