"""Progress on stderr: lines that log well when it is not a terminal, in every command through one helper."""

from __future__ import annotations

import io
import re
import time

from test_eval import spm_items  # noqa: F401 - fixture
from test_local_model_limits import reply_for

from benchmint.cli import main
from benchmint.progress import Progress

from chat_server import ChatServer, Reply

LINE = re.compile(r"^(?P<desc>[^:]+): (?P<done>\d+)(?:/(?P<total>\d+))? (?P<unit>\w+)(?: \(\d+%\))?, "
                  r"(?P<rate>[\d.]+) (?P=unit)/s, (?:\d+ s elapsed(?:, about \d+ s left)?|done in \d+ s)$")


def test_lines_every_interval_with_done_total_and_rate():
    out = io.StringIO()
    with Progress("eval spm", total=4, unit="units", stream=out, interval=0.05) as p:
        time.sleep(0.12)  # a first unit longer than the interval: lines come all the same
        for _ in range(4):
            p.update()
            time.sleep(0.06)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(LINE.match(line) for line in lines), lines
    assert lines[0].startswith("eval spm: 0/4 units (0%), 0.00 units/s, ")
    done = [int(LINE.match(line)["done"]) for line in lines]
    assert done == sorted(done) and "s left" in next(line for line in lines if " 1/4 " in line)
    assert lines[-1].startswith("eval spm: 4/4 units (100%), ") and "done in" in lines[-1]
    assert sum("done in" in line for line in lines) == 1 and "\r" not in out.getvalue()
    rate = float(LINE.match(lines[-1])["rate"])
    assert 4 / 2.0 < rate < 4 / 0.36  # 4 units in 0.36 s or more (on a loaded machine, well under 2 s)


def test_a_short_step_prints_nothing_and_quiet_nothing_at_all():
    out = io.StringIO()
    with Progress("scoring", stream=out, interval=5) as p:
        p.update(1000)
    with Progress("scoring", stream=out, interval=0.01, enabled=False) as p:
        p.update(1000)
        time.sleep(0.05)
    assert out.getvalue() == ""


def test_unknown_total_and_a_total_that_grows():
    out = io.StringIO()
    with Progress("scoring", unit="predictions", stream=out, interval=0.02) as p:
        p.update(7)
        time.sleep(0.05)
    assert out.getvalue().splitlines()[0].startswith("scoring: 7 predictions, ")
    out = io.StringIO()
    with Progress("harvest", total=1, unit="units", stream=out, interval=0.02) as p:
        p.add_total(2)
        p.update()
        time.sleep(0.05)
    assert out.getvalue().startswith("harvest: 1/3 units (33%), ")


def test_eval_reports_progress_when_stderr_is_not_a_terminal(spm_items, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setenv("BENCHMINT_PROGRESS_SECONDS", "0.1")
    with ChatServer() as server:
        server.default = Reply(text=reply_for, delay=0.2)
        main(["eval", str(spm_items), "--benchmark", "spm", "--model", "tiny", "--base-url", server.url,
              "--out", str(tmp_path / "run"), "--concurrency", "1"])
    err = capsys.readouterr().err.splitlines()
    progress = [line for line in err if line.startswith("eval spm: ")]
    assert progress and all(LINE.match(line) for line in progress), err
    assert progress[-1].startswith("eval spm: 4/4 units (100%), ") and "done in" in progress[-1]


def test_grade_reports_the_judge_calls_progress(tmp_path, capsys, monkeypatch):
    from test_grade import ITEMS, PREDS, _judge, _write, seephys_argv  # the SeePhys sample and its scripted judge

    monkeypatch.setenv("BENCHMINT_PROGRESS_SECONDS", "0.05")
    _write(tmp_path / "items.jsonl", ITEMS)
    _write(tmp_path / "preds.jsonl", PREDS)
    with ChatServer() as server:
        server.default = Reply(text=lambda body: (time.sleep(0.06), _judge(body))[1])
        argv = [a for a in seephys_argv(tmp_path, server) if a != "--quiet"]
        main(argv)
    progress = [line for line in capsys.readouterr().err.splitlines() if line.startswith("judge ")]
    assert progress and all(LINE.match(line) for line in progress), progress
    assert any("done in" in line for line in progress)
