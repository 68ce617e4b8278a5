"""score --rows-per-file: the rows as parts in scores/ with a manifest, read back through metrics/rowfiles.py.

The parts concatenated in name order must be the scores.jsonl written without the option, byte for byte, for
either path (compiled writer, reference), any worker count and with user metrics; a run that fails or is killed
leaves no partial set; the reports read either form alike.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint.cli import main
from benchmint.metrics.pipeline import ScoreConfig, score_files
from benchmint.metrics.rowfiles import (
    MANIFEST,
    atomic_rows,
    part_name,
    read_score_rows,
    score_row_files,
)
from benchmint.metrics.synthetic import mcq_dataset
from benchmint.metrics.user import metric


@metric
def tp_less_fp(tp, fp, fn, g):
    return tp - 0.5 * fp


def dataset(root: Path, n_items: int, models: list[str]) -> tuple[Path, Path]:
    records = list(mcq_dataset(n_items, models, seed=5))
    gold, pred = root / "gold.jsonl", root / "pred.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for kind, r in records if kind == "gold"), encoding="utf-8")
    # every seventh answer left out: rows for missing answers come after the stream's, in a batch of their own
    pred.write_text("".join(json.dumps(r) + "\n" for k, (kind, r) in enumerate(records)
                            if kind == "pred" and k % 7), encoding="utf-8")
    return gold, pred


def parts_of(out: Path) -> tuple[bytes, dict]:
    manifest = json.loads((out / "scores" / MANIFEST).read_text(encoding="utf-8"))
    return b"".join((out / "scores" / p["file"]).read_bytes() for p in manifest["parts"]), manifest


def check_manifest(manifest: dict, out: Path, total_rows: int, rows_per_file: int) -> None:
    parts = manifest["parts"]
    assert [p["file"] for p in parts] == [part_name(k) for k in range(len(parts))]
    assert sorted(f.name for f in (out / "scores").iterdir()) == sorted([p["file"] for p in parts] + [MANIFEST])
    assert len(parts) == -(-total_rows // rows_per_file)  # ceil: no empty part
    assert all(p["rows"] == rows_per_file for p in parts[:-1]) and 0 < parts[-1]["rows"] <= rows_per_file
    for p in parts:
        data = (out / "scores" / p["file"]).read_bytes()
        assert (p["bytes"], p["rows"]) == (len(data), data.count(b"\n"))
    assert manifest["rows"] == total_rows and manifest["rows_per_file"] == rows_per_file


def score(forced_impl, impl: str, pred: Path, gold: Path, out: Path, workers: int, rows_per_file: int = 0,
          user: bool = False) -> None:
    with forced_impl(impl):
        score_files(pred, gold, out, ScoreConfig(task="mcq", by=("domain",), workers=workers,
                                                 user_metrics=(tp_less_fp,) if user else (),
                                                 rows_per_file=rows_per_file))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    gold, pred = dataset(root, 37, ["wise-model", "bold-model", "cautious-model"])
    return gold, pred, 37 * 3


@settings(max_examples=int(os.environ.get("BENCHMINT_FUZZ_EXAMPLES", "30")), deadline=None)
@given(st.data())
def test_parts_concatenated_are_the_one_file(tmp_path_factory, forced_impl, small, data):
    gold, pred, total = small
    k = data.draw(st.one_of(st.sampled_from([1, 2, total - 1, total, total + 1, total // 2, total // 2 + 1]),
                            st.integers(1, 2 * total)), label="rows_per_file")
    workers = data.draw(st.integers(1, 4), label="workers")
    user = data.draw(st.booleans(), label="user metric")
    impl = data.draw(st.sampled_from(["compiled", "reference"]), label="impl")
    tmp = tmp_path_factory.mktemp("parts")
    score(forced_impl, "compiled", pred, gold, tmp / "one", workers, 0, user)
    score(forced_impl, impl, pred, gold, tmp / "parts", workers, k, user)
    joined, manifest = parts_of(tmp / "parts")
    assert joined == (tmp / "one" / "scores.jsonl").read_bytes()
    check_manifest(manifest, tmp / "parts", total, k)
    assert not (tmp / "parts" / "scores.jsonl").exists()
    for name in ("summary.json", "errors.jsonl"):
        assert (tmp / "parts" / name).read_bytes() == (tmp / "one" / name).read_bytes()


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    # 3 models x 20,000 items, some 10 MB of predictions: several 4 MiB reads, so several batches, each of many
    # pieces (one per parse block) that part boundaries cut through
    root = tmp_path_factory.mktemp("large")
    gold, pred = dataset(root, 20_000, ["wise-model", "bold-model", "cautious-model"])
    assert pred.stat().st_size > (8 << 20)
    return gold, pred, 60_000


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_parts_across_batches(forced_impl, large, tmp_path, workers):
    gold, pred, total = large
    score(forced_impl, "compiled", pred, gold, tmp_path / "one", workers)
    for k in (7_777, 25_000, 59_999):
        score(forced_impl, "compiled", pred, gold, tmp_path / f"k{k}", workers, k)
        joined, manifest = parts_of(tmp_path / f"k{k}")
        assert joined == (tmp_path / "one" / "scores.jsonl").read_bytes(), k
        check_manifest(manifest, tmp_path / f"k{k}", total, k)


@pytest.mark.parametrize("workers", [2, 3])
def test_a_part_has_one_writer_at_a_time(forced_impl, large, tmp_path, monkeypatch, workers):
    # Parts of 7,777 rows straddle the batches (a 4 MiB read's rows, some 25,000 here): a batch's bytes for the
    # part the batch before still writes go to that batch's thread, never beside it. The writer's own report
    # says how many bytes were handed over and no longer counts any written beside another thread.
    gold, pred, total = large
    report = tmp_path / "writer.jsonl"
    monkeypatch.setenv("BENCHMINT_WRITER_TIMES", str(report))
    score(forced_impl, "compiled", pred, gold, tmp_path / "one", workers)
    score(forced_impl, "compiled", pred, gold, tmp_path / "parts", workers, 7_777)
    one, parts = (json.loads(line) for line in report.read_text().splitlines())
    joined, manifest = parts_of(tmp_path / "parts")
    assert joined == (tmp_path / "one" / "scores.jsonl").read_bytes()
    assert parts["bytes"] == one["bytes"] == len(joined) and parts["parts"] == len(manifest["parts"])
    assert parts["threads"] == workers and "shared_bytes" not in parts
    assert 0 <= parts["handed_bytes"] < parts["bytes"]


def test_reference_parts_equal_compiled_parts(forced_impl, large, tmp_path):
    gold, pred, _ = large
    score(forced_impl, "compiled", pred, gold, tmp_path / "c", 2, 25_000, user=True)
    score(forced_impl, "reference", pred, gold, tmp_path / "r", 1, 25_000, user=True)
    names = sorted(f.name for f in (tmp_path / "c" / "scores").iterdir())
    assert names == sorted(f.name for f in (tmp_path / "r" / "scores").iterdir())
    for name in names:
        assert (tmp_path / "c" / "scores" / name).read_bytes() == (tmp_path / "r" / "scores" / name).read_bytes()


def test_a_rerun_gives_the_same_parts_and_one_form_at_a_time(forced_impl, small, tmp_path):
    gold, pred, _ = small
    out = tmp_path / "out"
    score(forced_impl, "compiled", pred, gold, out, 2, 10)
    first = {f.name: f.read_bytes() for f in (out / "scores").iterdir()}
    score(forced_impl, "compiled", pred, gold, out, 3, 10)
    assert {f.name: f.read_bytes() for f in (out / "scores").iterdir()} == first
    score(forced_impl, "compiled", pred, gold, out, 2, 50)  # fewer, larger parts: no part of the last run stays
    assert sorted(f.name for f in (out / "scores").iterdir()) == [MANIFEST, *map(part_name, range(3))]
    score(forced_impl, "compiled", pred, gold, out, 2)  # back to one file: the parts go
    assert (out / "scores.jsonl").is_file() and not (out / "scores").exists()
    score(forced_impl, "compiled", pred, gold, out, 2, 10)  # and the other way
    assert not (out / "scores.jsonl").exists()
    assert [p.name for p, _ in score_row_files(out)] == sorted(set(first) - {MANIFEST})
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_a_failed_run_leaves_the_previous_set(forced_impl, small, tmp_path):
    gold, pred, _ = small
    out = tmp_path / "out"
    score(forced_impl, "compiled", pred, gold, out, 2, 10)
    before = {f.name: f.read_bytes() for f in (out / "scores").iterdir()}
    with pytest.raises(RuntimeError), atomic_rows(out, 7) as target:
        (target.path / part_name(0)).write_text("{}\n")
        raise RuntimeError("stopped")
    assert {f.name: f.read_bytes() for f in (out / "scores").iterdir()} == before
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


KILLED = """
import sys
from benchmint.metrics.pipeline import ScoreConfig, score_files
score_files(sys.argv[1], sys.argv[2], sys.argv[3], ScoreConfig(task="mcq", workers=2, rows_per_file=5000))
"""


def test_a_killed_run_leaves_no_partial_set(large, tmp_path):
    # SIGKILL while the parts are being written: no scores/ at all (the first run), nothing a reader takes.
    gold, pred, _ = large
    out = tmp_path / "out"
    env = {**os.environ, "BENCHMINT_IMPL": "compiled"}
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(pred), str(gold), str(out)], env=env)
    tmp = out / ".scores.tmp"
    deadline = time.monotonic() + 120
    while not (tmp.is_dir() and any(tmp.glob("part-*"))) and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait()
    if child.returncode != -signal.SIGKILL:
        pytest.skip("the run ended before it could be killed while writing")
    assert not (out / "scores").exists() and not (out / "scores.jsonl").exists()
    with pytest.raises(ValueError, match="no scores.jsonl and no scores/manifest.json"):
        score_row_files(out)
    # a rerun clears what the killed one left and writes the whole set
    done = subprocess.run([sys.executable, "-c", KILLED, str(pred), str(gold), str(out)], env=env, timeout=300)
    assert done.returncode == 0
    assert not tmp.exists()
    assert sum(1 for _ in read_score_rows(out)) == 60_000


def test_readers_check_the_set(forced_impl, small, tmp_path):
    gold, pred, total = small
    out = tmp_path / "out"
    score(forced_impl, "compiled", pred, gold, out, 2, 25)
    score(forced_impl, "compiled", pred, gold, tmp_path / "one", 2)
    one = [json.loads(x) for x in (tmp_path / "one" / "scores.jsonl").read_text("utf-8").splitlines()]
    assert list(read_score_rows(out)) == one == list(read_score_rows(tmp_path / "one"))
    last = out / "scores" / part_name(4)
    last.write_bytes(last.read_bytes()[:-1])
    with pytest.raises(ValueError, match="part-00004.jsonl: .* bytes, its manifest says"):
        score_row_files(out)
    last.unlink()
    with pytest.raises(ValueError, match="part-00004.jsonl: a part .* is missing"):
        score_row_files(out)
    shutil.copy(tmp_path / "one" / "scores.jsonl", out / "scores.jsonl")
    with pytest.raises(ValueError, match="holds both scores.jsonl and scores/"):
        score_row_files(out)


def test_bad_option_values(tmp_path, small, capsys):
    gold, pred, _ = small
    for bad in ("0", "-3", "1.5", "many"):
        with pytest.raises(SystemExit) as exc:
            main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o"),
                  "--rows-per-file", bad])
        assert exc.value.code == 2
        assert f"--rows-per-file: must be a whole number of rows >= 1, not '{bad}'" in capsys.readouterr().err
    for bad in (-1, 2.0, True, "3"):
        with pytest.raises(ValueError, match="rows per file must be a whole number"):
            ScoreConfig(task="mcq", rows_per_file=bad)
    assert part_name(99_999) == "part-99999.jsonl"
    with pytest.raises(ValueError, match="more than 100,000 parts"):  # a sixth digit would break the name order
        part_name(100_000)


def _spm_runs(root: Path, rows_per_file: list[str]) -> None:
    gold = [{"id": f"q{i}", "answer": ["A", "B"], "meta": {"domain": f"D{i // 2 + 1}"}} for i in range(6)]
    answers = {"exact": ["A, B"] * 6, "under": ["A"] * 6, "over": ["A, B, C"] * 6,
               "mixed": ["A, B", "A, B", "A", "A", "A, B, C", "A, B, C"]}
    preds = [{"id": f"q{i}", "model": m, "output": f"The answer is {a}", "confidence": 0.5 + 0.08 * i}
             for m, outs in answers.items() for i, a in enumerate(outs)]
    (root / "gold.jsonl").write_text("".join(json.dumps(r) + "\n" for r in gold), encoding="utf-8")
    (root / "pred.jsonl").write_text("".join(json.dumps(r) + "\n" for r in preds), encoding="utf-8")
    assert main(["score", str(root / "pred.jsonl"), "--gold", str(root / "gold.jsonl"), "--task", "mcq",
                 "--out", str(root / "runs" / "spm"), "--by", "domain", "--quiet", "--workers", "2",
                 *rows_per_file]) == 0


def test_reports_read_either_form_alike(tmp_path):
    tables = {}
    for form, extra in (("one", []), ("parts", ["--rows-per-file", "5"])):
        root = tmp_path / form
        root.mkdir()
        _spm_runs(root, extra)
        assert main(["report", str(root / "runs"), "--out", str(root / "report")]) == 0
        tables[form] = {f.name: f.read_bytes() for f in sorted((root / "report" / "tables").iterdir())}
    assert (tmp_path / "parts" / "runs" / "spm" / "scores" / part_name(4)).is_file()
    # the per-item tables come from the rows: the same bytes from either form
    assert {"spm-lambda-gamma-spm", "pairs-spm"} <= {Path(n).stem for n in tables["one"]}
    assert tables["one"] == tables["parts"]
