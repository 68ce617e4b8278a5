"""The compiled stream's row writer: batches of many pieces, outputs that are not files, and failed writes.

The writer takes each merged chunk's rows as a list of pieces (a parse block's rows, or rows copied one by one)
and writes them in order on a thread of its own. What it writes is checked against the reference path's
scores.jsonl, which is written line by line in Python.
"""

import json
import os
import subprocess
import sys

import pytest

from benchmint.metrics.pipeline import ScoreConfig, _stream_compiled, load_gold, score_files
from benchmint.metrics.rowfiles import RowTarget
from benchmint.metrics.synthetic import mcq_dataset


def sparse_dataset(tmp_path, n_items=12_000, blanks=255):
    """Gold and predictions whose parse blocks (256 lines) hold one answer and ``blanks`` blank lines each.

    A block whose lines are all kept goes to the writer as one piece, so a 4 MiB read of such lines gives a
    batch of some 14,000 pieces of one row each (more than a writev() call takes: IOV_MAX is 1,024 here).
    """
    records = list(mcq_dataset(n_items, ["wise-model", "bold-model"], seed=4))
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for kind, r in records if kind == "gold"), encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    with open(pred, "w", encoding="utf-8") as fh:
        for kind, r in records:
            if kind == "pred":
                fh.write(json.dumps(r) + "\n" + "\n" * blanks)
    return gold, pred


def scores(forced_impl, impl, pred, gold, out, workers):
    with forced_impl(impl):
        score_files(pred, gold, out, ScoreConfig(task="mcq", by=("domain",), workers=workers))
    return (out / "scores.jsonl").read_bytes()


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    return sparse_dataset(tmp_path_factory.mktemp("sparse"))


def test_batches_of_thousands_of_pieces(forced_impl, sparse, tmp_path):
    gold, pred = sparse
    assert pred.stat().st_size > (8 << 20)  # three 4 MiB reads or more: several batches
    reference = scores(forced_impl, "reference", pred, gold, tmp_path / "ref", 1)
    assert reference.count(b"\n") == 24_000  # two models, every item answered
    for workers in (2, 3, 4):
        assert scores(forced_impl, "compiled", pred, gold, tmp_path / f"w{workers}", workers) == reference, workers


def test_rows_to_a_pipe(forced_impl, sparse, tmp_path):
    # A FIFO that another process copies to a file: the writer's output need not be a regular file.
    gold, pred = sparse
    reference = scores(forced_impl, "reference", pred, gold, tmp_path / "ref", 1)
    fifo, copy = tmp_path / "rows.fifo", tmp_path / "copy.jsonl"
    os.mkfifo(fifo)
    with open(copy, "wb") as out:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=out)
    try:
        with forced_impl("compiled"):
            cfg = ScoreConfig(task="mcq", by=("domain",), workers=2)
            g = load_gold(gold, cfg.kind, cfg.by, cfg.workers)
            assert g.native is not None  # the compiled gold index, so the compiled stream
            _stream_compiled([pred], g, cfg, RowTarget(fifo, 0), [], lambda n: None)
    finally:
        if reader.poll() is None and not copy.stat().st_size:
            reader.kill()
        reader.wait(timeout=60)
    assert copy.read_bytes() == reference


CHILD = """
import resource, sys
from benchmint.metrics.pipeline import ScoreConfig, score_files
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: the write fails with EFBIG
score_files(sys.argv[1], sys.argv[2], sys.argv[4], ScoreConfig(task="mcq", workers=2,
                                                            rows_per_file=int(sys.argv[5])))
"""


@pytest.mark.parametrize("rows_per_file", [0, 6000])
@pytest.mark.parametrize("limit", [0, 1 << 20])
def test_a_failed_write_is_an_error_and_leaves_no_scores(sparse, tmp_path, limit, rows_per_file):
    # RLIMIT_FSIZE in a child process stands for a full disk: the first write past it fails. 0: the first
    # batch fails; 1 MiB: a later one, after earlier batches were written. The limit is a file's size, so parts
    # of 6,000 rows (some 1.5 MB each) fail the same way, from a writer thread's pwrite().
    gold, pred = sparse
    out = tmp_path / "out"
    env = {**os.environ, "BENCHMINT_IMPL": "compiled"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(pred), str(gold), str(limit), str(out),
                           str(rows_per_file)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "writing the scores failed (disk full?)" in done.stderr.splitlines()[-1]
    assert not (out / "scores.jsonl").exists()  # nothing a rerun would take for a finished file
    assert not (out / "scores").exists()
    assert not list(out.glob(".scores*"))


SAME_PROCESS_READER = """
import sys, threading
from pathlib import Path
from benchmint.metrics.pipeline import ScoreConfig, _stream_compiled, load_gold
from benchmint.metrics.rowfiles import RowTarget
gold, pred, fifo, copy = sys.argv[1:5]
def read():
    with open(fifo, "rb") as src, open(copy, "wb") as dst:
        dst.write(src.read())
reader = threading.Thread(target=read)
reader.start()
cfg = ScoreConfig(task="mcq", by=("domain",), workers=2)
g = load_gold(gold, cfg.kind, cfg.by, cfg.workers)
assert g.native is not None
_stream_compiled([pred], g, cfg, RowTarget(Path(fifo), 0), [], lambda n: None)
reader.join()
"""


def test_rows_to_a_pipe_read_by_a_thread_of_the_same_process(forced_impl, tmp_path):
    # The reader needs the GIL between its reads: whatever waits on the pipe (opening it, the writer's batch on a
    # full pipe at the next batch, at the missing answers' rows, at the end) must wait without it, or both stop.
    records = list(mcq_dataset(12_000, ["wise-model", "bold-model"], seed=4))
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for kind, r in records if kind == "gold"), encoding="utf-8")
    answers = [r for kind, r in records if kind == "pred"]
    # A third of the answers: the rows of the rest are written as missing answers, megabytes past the pipe's 64 kB.
    pred.write_text("".join(json.dumps(r) + "\n" for r in answers[: len(answers) // 3]), encoding="utf-8")
    reference = scores(forced_impl, "reference", pred, gold, tmp_path / "ref", 1)
    fifo, copy = tmp_path / "rows.fifo", tmp_path / "copy.jsonl"
    for attempt in range(5):  # the old code stopped in about half the runs: several chances to show it
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
        env = {**os.environ, "BENCHMINT_IMPL": "compiled"}
        child = subprocess.Popen([sys.executable, "-c", SAME_PROCESS_READER, str(gold), str(pred), str(fifo),
                                  str(copy)], env=env, stderr=subprocess.PIPE, text=True)
        try:
            _, err = child.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            pytest.fail(f"attempt {attempt}: the writer and the reading thread waited on each other")
        assert child.returncode == 0, err
        assert copy.read_bytes() == reference, attempt
