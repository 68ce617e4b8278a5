"""--engine ray: the runner's units as Ray tasks, with the same files as the local engine, resumable, and a killed
Ray worker costing only its unit. One local Ray cluster (2 CPUs, 127.0.0.1) serves the module."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import pytest

from benchmint.run import Ledger, ProcessExecutor, Unit, run_units, stage

SAMPLE = files("benchmint") / "samples" / "sample_paper.pdf"


def _ray_or_skip():
    try:
        import ray
    except ImportError:
        pytest.skip("ray is not installed (pip install 'benchmint[ray]')")
    return ray


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The ray module, connected to a local 2-CPU cluster on 127.0.0.1 under this module's temp folder."""
    ray = _ray_or_skip()
    from benchmint.run.ray_engine import ray_session

    # The unit functions of this file travel by value: the Ray workers cannot import the tests folder.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with ray_session(num_cpus=2, temp_dir=str(tmp_path_factory.mktemp("ray"))) as connected:
        yield connected
    assert not ray.is_initialized()


def _engine(ray_executor: bool, **limits):
    from benchmint.run.ray_engine import RayExecutor

    return RayExecutor(**limits) if ray_executor else ProcessExecutor(1, **limits)


def same_tree(a: Path, b: Path, names: list[str]) -> None:
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


# --- the executor on its own ---------------------------------------------------------------------------------------


def square_or_fail(x):
    stage(f"square {x}")
    if x == 3:
        raise ValueError("three is refused")
    if x == 5:
        time.sleep(60)  # stuck: the stage limit ends it
    return {"x": x, "square": x * x}


@pytest.mark.parametrize("limit", ["stage", "unit"])
def test_results_errors_and_time_limits_are_those_of_the_local_executor(cluster, tmp_path, limit):
    units = [Unit(f"k{x}", (x,), f"unit {x}") for x in range(8)]
    got = {}
    for name in ("local", "ray"):
        with Ledger(tmp_path / f"{name}.sqlite", "t") as ledger:
            got[name] = run_units(ledger, units, square_or_fail, _engine(name == "ray", **{f"{limit}_seconds": 2.0}))[0]
    assert got["ray"] == got["local"]
    assert got["ray"][3] == {"error": "ValueError: three is refused"}
    assert got["ray"][5] == {"error": f"UnitTimeout: 'square 5' ran past the {limit} time limit of 2 s; its worker "
                                      "was stopped", "time_limit": {"limit": limit, "seconds": 2.0, "stage": "square 5"}}
    assert got["ray"][7] == {"x": 7, "square": 49}


def ray_was_imported(_):
    return {"ray": "ray" in sys.modules}


def test_local_workers_started_beside_a_ray_connection_start_clean(cluster, tmp_path):
    # Forked from this process they would hold a copy of Ray's client, whose gRPC threads do not survive a fork
    # (workers died of SIGSEGV); spawned, they have not imported ray at all.
    units = [Unit(f"k{x}", (x,), f"unit {x}") for x in range(3)]
    with Ledger(tmp_path / "local.sqlite", "t") as ledger:
        executor = ProcessExecutor(2, preload=("json",), share_preload=True)
        try:
            results = run_units(ledger, units, ray_was_imported, executor)[0]
        finally:
            executor.close()
    assert results == [{"ray": False}] * 3


def test_the_window_of_tasks_in_flight_is_bounded(cluster):
    from benchmint.run.ray_engine import RayExecutor

    ex = RayExecutor(in_flight=3)
    seen = []
    args = [(x,) for x in range(40) if x not in (3, 5)]
    for i, result in ex.map_unordered(square_or_fail, args):
        seen.append(i)
        assert result == {"x": args[i][0], "square": args[i][0] ** 2}
        assert len(ex._live) <= 3
    ex.close()
    assert sorted(seen) == list(range(len(args)))


def loaded(name: str) -> dict:
    return {"loaded": name in sys.modules, "core": "benchmint._core" in sys.modules}


def test_each_ray_worker_imports_the_preload_and_the_compiled_module_before_its_unit(cluster):
    from benchmint.run.ray_engine import RayExecutor

    ex = RayExecutor(preload=("tabnanny",))  # imported by nothing else here
    ex.start()
    got = [r for _, r in ex.map_unordered(loaded, [("tabnanny",)] * 4)]
    ex.close()
    assert got == [{"loaded": True, "core": True}] * 4


def pymupdf_version() -> str:
    import pymupdf

    return pymupdf.__version__


def test_an_executor_closed_while_its_workers_import_lets_them_finish(cluster):
    """Closed at once, its workers still importing PyMuPDF (harvest's preload: a second or more): the warm-up
    tasks finish, none is cancelled (Ray cancels a running task with a KeyboardInterrupt, which inside
    ``import pymupdf`` left the worker unable to import it: every later unit on it failed), and the next
    executor's units import PyMuPDF on every worker."""
    import pymupdf

    from benchmint.run.ray_engine import RayExecutor

    ex = RayExecutor(preload=("pymupdf",))
    ex.start()
    warming = list(ex._warmers)
    ex.close()
    assert all(isinstance(pid, int) for pid in cluster.get(warming, timeout=120))
    again = RayExecutor()
    got = [version for _, version in again.map_unordered(pymupdf_version, [()] * 6)]
    again.close()
    assert got == [pymupdf.__version__] * 6


def sleep_once(marker: str, seconds: float):
    """The first call records its worker's pid and sleeps (the test kills that worker); a later call returns."""
    path = Path(marker)
    if not path.exists():
        path.write_text(str(os.getpid()))
        time.sleep(seconds)
    return {"pid": os.getpid()}


def _kill_when_written(marker: Path) -> int:
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline, "the unit never started"
        time.sleep(0.05)
    pid = int(marker.read_text())
    os.kill(pid, signal.SIGKILL)
    return pid


def test_a_killed_worker_costs_its_unit_a_retry_and_the_run_completes(cluster, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from benchmint.run.ray_engine import RayExecutor

    marker = tmp_path / "pid"
    units = [Unit("stuck", (str(marker), 120.0), "stuck")] + [
        Unit(f"k{x}", (x,), f"unit {x}") for x in (1, 2, 4)]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger, ThreadPoolExecutor(1) as pool:
        killer = pool.submit(_kill_when_written, marker)
        results, _ = run_units(ledger, units, _either, RayExecutor(retries=1))
        killed = killer.result()
        assert results[0]["pid"] != killed  # run again on another worker, once
        assert [r["square"] for r in results[1:]] == [1, 4, 16]
        assert ledger.done("stuck")


def test_a_worker_killed_past_the_retries_is_an_error_the_next_run_tries_again(cluster, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from benchmint.run.ray_engine import RayExecutor

    marker = tmp_path / "pid"
    units = [Unit("stuck", (str(marker), 120.0), "stuck"), Unit("k2", (2,), "unit 2")]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger, ThreadPoolExecutor(1) as pool:
        killer = pool.submit(_kill_when_written, marker)
        results, _ = run_units(ledger, units, _either, RayExecutor(retries=0))
        killer.result()
        assert results == [{"error": "WorkerDied: the worker process died while running this unit"},
                           {"x": 2, "square": 4}]
        assert not ledger.done("stuck") and ledger.done("k2")  # not final: the next run runs it again
        again, skipped = run_units(ledger, units, _either, RayExecutor(retries=0))
        assert skipped == 1 and "pid" in again[0]


def _either(*args):
    return sleep_once(*args) if len(args) == 2 else square_or_fail(*args)


# --- harvest --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory):
    """The sample article, copies of it, a long document of several page ranges, and files that cannot be read."""
    import pymupdf

    from benchmint.pdf.harvest import CHUNK_PAGES

    root = tmp_path_factory.mktemp("pdfs")
    for i in range(4):
        (root / f"a{i}.pdf").write_bytes(SAMPLE.read_bytes() + f"%{i}\n".encode())
    doc = pymupdf.open()
    for k in range(CHUNK_PAGES + 3):
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(72, 72, 540, 700), f"Page {k + 1}: see Fig. 1 for the film. " * 8)
    doc.insert_pdf(pymupdf.open(SAMPLE))
    doc.save(root / "b_long.pdf")
    (root / "c_corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage")
    return root


HARVEST_FILES = ["pages.jsonl", "figures.jsonl", "errors.jsonl", "documents.jsonl", "dropped.jsonl"]


def _thumbs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "thumbs").iterdir())}


def test_harvest_on_ray_writes_the_local_engines_files_and_resumes(cluster, pdfs, tmp_path):
    from benchmint.pdf.harvest import harvest

    local = harvest([pdfs], tmp_path / "local", workers=2)
    on_ray = harvest([pdfs], tmp_path / "ray", engine="ray")
    same_tree(tmp_path / "local", tmp_path / "ray", HARVEST_FILES)
    assert _thumbs(tmp_path / "ray") == _thumbs(tmp_path / "local")
    assert (on_ray.pdfs, on_ray.figures, len(on_ray.errors)) == (local.pdfs, local.figures, len(local.errors)) \
        == (6, 10, 1)
    # A run that stopped after some files, resumed on Ray: what it finished is not run again.
    part = tmp_path / "part"
    harvest(sorted(pdfs.glob("a[01].pdf")), part, engine="ray")
    with Ledger(part / "ledger.sqlite", "harvest") as ledger:
        before = {k: recorded for k, recorded in ledger._db.execute("SELECT key, recorded FROM units")}
    resumed = harvest([pdfs], part, engine="ray")
    assert resumed.skipped == 2
    with Ledger(part / "ledger.sqlite", "harvest") as ledger:
        after = dict(ledger._db.execute("SELECT key, recorded FROM units"))
    assert {k: after[k] for k in before} == before  # the finished units were not recorded again
    same_tree(part, tmp_path / "local", HARVEST_FILES)


def test_triage_only_in_groups_on_ray_writes_the_local_engines_files(cluster, pdfs, tmp_path, monkeypatch):
    """--triage-only with documents' first ranges in groups (decided by the driver: its test sizes here): the
    Ray tasks run the groups and the files equal the local engine's without groups."""
    from benchmint.pdf import harvest as hv

    cfg = hv.HarvestConfig(triage_only=True)
    monkeypatch.setattr(hv, "GROUP_MIN_DOCS", 10**9)
    hv.harvest([pdfs], tmp_path / "local", cfg, workers=2)
    monkeypatch.setattr(hv, "GROUP_MIN_DOCS", 2)
    monkeypatch.setattr(hv, "GROUP_CUT", 257)  # the groups end at GROUP_DOCS alone
    hv.harvest([pdfs], tmp_path / "ray", cfg, engine="ray")
    same_tree(tmp_path / "local", tmp_path / "ray", HARVEST_FILES)
    with Ledger(tmp_path / "ray" / "ledger.sqlite", "harvest") as ledger:
        assert any("group" in result for _, _, result in ledger.results())


def test_a_page_past_the_page_time_limit_stops_its_ray_task_and_is_skipped_as_on_the_local_engine(cluster, tmp_path):
    """MuPDF stuck rendering one page: its stage report reached the driver, which stopped the task at the page
    limit; the range ran again without the page, as the local engine runs it. Only the page's rendering is slow
    (its text is read from a copy without the slow drawing), so both engines stop it at the same stage."""
    import pymupdf

    from benchmint.pdf.harvest import HarvestConfig, harvest

    from pdf_factory import append_slow_page

    doc = pymupdf.open(SAMPLE)
    append_slow_page(doc, depth=3, invocations=64)  # page 3: its thumbnail takes 40 s, its text 10 ms
    (tmp_path / "in").mkdir()
    doc.save(tmp_path / "in" / "slow.pdf")
    cfg = HarvestConfig(page_seconds=3.0)
    for engine in ("local", "ray"):
        harvest([tmp_path / "in"], tmp_path / engine, cfg, workers=1, engine=engine)
    same_tree(tmp_path / "local", tmp_path / "ray", HARVEST_FILES)
    error = json.loads((tmp_path / "ray" / "errors.jsonl").read_text())
    assert (error["page"], error["error"]) == (3, "skipped: page 3 thumbnail ran past the page time limit (3 s)")


def test_a_killed_ray_driver_resumes_to_the_local_files(cluster, tmp_path):
    """The command on Ray, killed once some documents are recorded, then run again: the rerun skips what was
    recorded and writes what one uninterrupted local run writes. One paper's caption font spans less than an em,
    as LaTeX's Type 1 fonts do: its box is PyMuPDF's default one in the Ray workers too, as in the command's."""
    import pymupdf

    from pdf_factory import short_font_page

    dump = tmp_path / "dump"
    dump.mkdir()
    for i in range(24):
        (dump / f"paper{i:02d}.pdf").write_bytes(SAMPLE.read_bytes() + f"%{i}\n".encode())
    doc = pymupdf.open()
    short_font_page(doc)
    doc.save(dump / "short_font.pdf")
    address = cluster.get_runtime_context().gcs_address
    run = [sys.executable, "-m", "benchmint.cli", "harvest", str(dump), "--out"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen([*run, str(killed), "--engine", "ray", "--ray-address", address],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ledger_file = killed / "ledger.sqlite"
    recorded = 0
    deadline = time.time() + 90
    while time.time() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(f"file:{ledger_file}?mode=ro", uri=True) as db:
                recorded = db.execute("SELECT COUNT(*) FROM units").fetchone()[0]
        except sqlite3.Error:  # not created yet
            pass
        if recorded >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.kill()
    proc.wait()
    proc.stderr.close()
    with Ledger(ledger_file, "harvest") as ledger:
        recorded = len(ledger)
    assert 3 <= recorded < 25
    done = subprocess.run([*run, str(killed), "--engine", "ray", "--ray-address", address], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert f"25 PDFs ({recorded} already done)" in done.stdout
    clean = tmp_path / "clean"
    assert subprocess.run([*run, str(clean), "--workers", "2"], capture_output=True).returncode == 0
    same_tree(killed, clean, HARVEST_FILES)
    assert _thumbs(killed) == _thumbs(clean)


# --- xrd build ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cifs(tmp_path_factory):
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    root = tmp_path_factory.mktemp("cifs")
    for i, entry in enumerate(AFLOW_PROTOTYPE_LIBRARY[:10]):
        db = root / ("dbA", "dbB")[i % 2]
        db.mkdir(exist_ok=True)
        CifWriter(entry["snl"].structure).write_file(db / f"p{i:02d}.cif")
    (root / "dbA" / "garbage.cif").write_text("this is not a CIF at all\n")
    return root


def test_xrd_build_on_ray_writes_the_local_engines_files_and_resumes(cluster, cifs, tmp_path):
    from benchmint.xrd.build import BuildConfig, build

    cfg = BuildConfig(per_db=2, db_from_dirname=True)
    build([cifs], tmp_path / "local", cfg, workers=2)
    on_ray = build([cifs], tmp_path / "ray", cfg, engine="ray")
    names = ["items.jsonl", "selection.jsonl", "errors.jsonl"]
    same_tree(tmp_path / "local", tmp_path / "ray", names)
    images = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.png"))
    assert len(images) == 10
    same_tree(tmp_path / "local", tmp_path / "ray", [str(p) for p in images])
    assert (on_ray.cifs, on_ray.items, len(on_ray.errors)) == (11, 10, 1)
    part = tmp_path / "part"
    build([cifs / "dbB"], part, cfg, engine="ray")  # a run that stopped after one folder
    assert build([cifs], part, cfg, engine="ray").skipped == 5
    same_tree(part, tmp_path / "local", names)


def _filed_rows(out: Path) -> tuple[int, int]:
    """(rows whose result is in a result file, rows with their result inline)."""
    with sqlite3.connect(out / "ledger.sqlite") as db:
        return db.execute("SELECT COUNT(file), COUNT(*) - COUNT(file) FROM units").fetchone()


def test_ray_workers_on_this_machine_file_their_results_and_elsewhere_send_them_back(cluster, cifs, tmp_path,
                                                                                    monkeypatch):
    """On a cluster whose every node is this machine the Ray workers append the results to files of their own
    (named by their processes, not the driver's); told the cluster is not, they send the results back. The
    files are the local engine's either way."""
    from benchmint.run import ray_engine
    from benchmint.xrd.build import BuildConfig, build

    cfg = BuildConfig(per_db=2, db_from_dirname=True)
    build([cifs], tmp_path / "local", cfg, workers=1)
    assert _filed_rows(tmp_path / "local") == (11, 0)
    build([cifs], tmp_path / "filed", cfg, engine="ray")
    assert _filed_rows(tmp_path / "filed") == (11, 0)
    shards = [p.name for p in (tmp_path / "filed" / "ledger.results").iterdir()]
    assert shards and all(f"-{os.getpid()}-" not in name for name in shards)
    monkeypatch.setattr(ray_engine, "cluster_shares_files", lambda ray: False)
    build([cifs], tmp_path / "inline", cfg, engine="ray")
    assert _filed_rows(tmp_path / "inline") == (0, 11) and not (tmp_path / "inline" / "ledger.results").exists()
    names = ["items.jsonl", "selection.jsonl", "errors.jsonl"]
    same_tree(tmp_path / "local", tmp_path / "filed", names)
    same_tree(tmp_path / "local", tmp_path / "inline", names)


def filed_or_killed(source, key, out, marker):
    """The first attempt at "p03.cif" leaves half a record at the end of its Ray worker's result file and kills
    that worker (SIGKILL), as a worker killed while appending its result."""
    from benchmint.run import ledger as ledger_module

    name = os.path.basename(source)
    if name == "p03.cif" and not os.path.exists(marker):
        Path(marker).write_text("")
        folder = str(ledger_module.results_folder(Path(out) / "ledger.sqlite").resolve())
        ledger_module.file_result(folder, {"warm": 1})
        os.write(ledger_module._SHARDS[folder].fd, b'{"name": "p03.cif", "half a rec')
        os.kill(os.getpid(), signal.SIGKILL)
    return {"name": name, "text": Path(source).read_text()}


def test_a_ray_worker_killed_while_appending_costs_its_unit_a_retry_and_the_results_read_back(cluster, cifs,
                                                                                              tmp_path):
    """The unit is run again on another worker within the run; the torn tail stays in the dead worker's file,
    where no row points; every result reads back as the local engine's, and a rerun runs nothing."""
    from benchmint.run import run_files

    def run(out: str, engine: str, marker: str):
        _, rows, skipped = run_files([cifs], ".cif", tmp_path / out, "t", filed_or_killed, lambda p: (marker,),
                                     lambda p: {}, engine=engine)
        return [(f.path.name, r) for f, _, r in rows], skipped

    (tmp_path / "no-kill").write_text("")  # the local run's marker is there: nothing is killed
    local, _ = run("local", "local", str(tmp_path / "no-kill"))
    on_ray, skipped = run("ray", "ray", str(tmp_path / "killed"))
    assert (tmp_path / "killed").exists() and skipped == 0
    assert on_ray == local
    assert _filed_rows(tmp_path / "ray") == (11, 0)
    shards = list((tmp_path / "ray" / "ledger.results").iterdir())
    assert any(s.read_bytes().endswith(b"half a rec") for s in shards)
    assert run("ray", "ray", str(tmp_path / "killed")) == (local, 11)


def test_workers_are_taken_to_share_the_drivers_files_only_on_this_machine_or_when_told(cluster):
    from benchmint.run.ray_engine import cluster_shares_files, ray_session

    assert cluster_shares_files(cluster)  # the module's cluster: one node, this machine's

    class TwoNodes:  # the connected cluster, seen with a second node somewhere else
        def __getattr__(self, name):
            return getattr(cluster, name)

        def nodes(self):
            return [*cluster.nodes(), {"NodeID": "f" * 56, "Alive": True}]

    assert not cluster_shares_files(TwoNodes())
    with ray_session(shared_out=True):  # --ray-shared-out: the user says every node sees the output folder
        assert cluster_shares_files(TwoNodes())
    assert not cluster_shares_files(TwoNodes())


# --- the command line -----------------------------------------------------------------------------------------------


def test_the_engine_ray_without_ray_says_how_to_install_it(tmp_path):
    code = ("import sys; sys.modules['ray'] = None; from benchmint.cli import main; "
            f"sys.exit(main(['xrd', 'build', {str(tmp_path)!r}, '--out', {str(tmp_path / 'o')!r}, '--engine', 'ray']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "benchmint xrd build: error: Ray is not installed: pip install 'benchmint[ray]'\n"
    assert not (tmp_path / "o").exists()



# --- score ----------------------------------------------------------------------------------------------------------

AWKWARD_GOLD = [
    '{"id": "a", "answer": ["A"], "meta": {"domain": "STM"}}',
    '{"id": "b\\u00e9", "answer": ["b", "C"], "meta": {"domain": {"nested": true}}}',
    '{"id": "c", "answer": ["A"], "meta": null}',
    '  ',
    '{"id": "a", "answer": ["B"]}',
    '{"id": "d", "answer": ["A"], "meta": {"domain": 3}}',
    '[1, 2]',
]
AWKWARD_PRED = [
    '{"id": "a", "output": "Answer: A", "confidence": 0.5, "tokens": 12}',
    '{"id": "b\\u00e9", "answer": ["C", "b", "c"], "model": "m\\t1"}',
    '{"id": "c", "answer": ["A"], "confidence": 1.5}',
    '{"id": "c", "answer": ["A"], "confidence": true, "model": "m\\t1"}',
    '{"id": "d", "answer": null}',
    '{"id": "d", "output": 5}',
    '{"id": "zz", "answer": ["A"]}',
    '{"id": "a", "answer": ["A"]}',
    '',
    '{"id": "d", "answer": ["A"], "tokens": 123456789012345678901234567890}',
]


def _score_inputs(tmp_path: Path) -> tuple[list[str], str]:
    """The bundled multi-select sample with every gold item of it, and a file of awkward lines, shuffled in with
    repeated and unknown ids, in two prediction files."""
    import random

    samples = files("benchmint") / "samples"
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes((samples / "mcq_gold.jsonl").read_bytes() + ("\n".join(AWKWARD_GOLD) + "\n").encode())
    lines = (samples / "mcq_pred.jsonl").read_text(encoding="utf-8").splitlines()
    rng = random.Random(7)
    rng.shuffle(lines)
    lines[100:100] = lines[5:25]  # answered twice
    first, second = tmp_path / "p1.jsonl", tmp_path / "p2.jsonl"
    first.write_text("\n".join(lines[:700]) + "\n", encoding="utf-8")
    second.write_bytes(("\n".join(lines[700:] + AWKWARD_PRED) + "\n").encode() + b"\xff\xfe{}\n")
    return [str(first), str(second)], str(gold)


def test_score_on_ray_writes_the_local_engines_files(cluster, tmp_path, monkeypatch):
    from benchmint.cli import main
    from benchmint.metrics import pipeline_shards

    monkeypatch.setattr(pipeline_shards, "SHARD_BYTES", 4096)  # dozens of shards, finishing out of order
    preds, gold = _score_inputs(tmp_path)
    common = [*preds, "--gold", gold, "--task", "mcq", "--by", "domain", "--quiet"]
    assert main(["score", *common, "--out", str(tmp_path / "local")]) == 1  # awkward lines: errors listed
    assert main(["score", *common, "--out", str(tmp_path / "ray"), "--engine", "ray"]) == 1
    same_tree(tmp_path / "local", tmp_path / "ray", ["scores.jsonl", "summary.json", "errors.jsonl"])
    kinds = {json.loads(line)["kind"] for line in (tmp_path / "ray" / "errors.jsonl").read_text().splitlines()}
    assert {"duplicate_id", "unknown_id", "malformed_json", "missing_prediction", "wrong_kind"} <= kinds


def test_score_on_ray_writes_rows_as_parts_like_the_local_engine(cluster, tmp_path, monkeypatch):
    from benchmint.cli import main
    from benchmint.metrics import pipeline_shards

    monkeypatch.setattr(pipeline_shards, "SHARD_BYTES", 4096)
    preds, gold = _score_inputs(tmp_path)
    common = [*preds, "--gold", gold, "--task", "mcq", "--quiet", "--rows-per-file", "7"]
    assert main(["score", *common, "--out", str(tmp_path / "local")]) == 1
    assert main(["score", *common, "--out", str(tmp_path / "ray"), "--engine", "ray"]) == 1
    parts = sorted(p.name for p in (tmp_path / "local" / "scores").iterdir())
    assert len(parts) > 3 and not (tmp_path / "ray" / "scores.jsonl").exists()
    assert not list((tmp_path / "ray").glob(".scores*"))  # no temporary left
    same_tree(tmp_path / "local", tmp_path / "ray", ["summary.json", "errors.jsonl", *(f"scores/{p}" for p in parts)])


def score_shard_then_stall(marker: str, *args):
    """An id shard scored (its files written), then, the first time only, its worker records its pid and stalls
    (the test kills it): the unit's retry writes the same files again."""
    from benchmint.metrics.pipeline_shards import score_id_shard

    result = score_id_shard(*args)
    path = Path(marker)
    if not path.exists():
        path.write_text(str(os.getpid()))
        time.sleep(120)
    return result


def test_score_on_ray_survives_a_killed_worker(cluster, tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor
    from functools import partial

    from benchmint.metrics import pipeline_shards
    from benchmint.metrics.pipeline import ScoreConfig, score_files

    monkeypatch.setattr(pipeline_shards, "SHARD_BYTES", 4096)
    marker = tmp_path / "pid"
    monkeypatch.setattr(pipeline_shards, "score_id_shard", partial(score_shard_then_stall, str(marker)))
    preds, gold = _score_inputs(tmp_path)
    score_files(preds, gold, tmp_path / "local", ScoreConfig(task="mcq", by=("domain",)))
    with ThreadPoolExecutor(1) as pool:
        killer = pool.submit(_kill_when_written, marker)
        score_files(preds, gold, tmp_path / "ray", ScoreConfig(task="mcq", by=("domain",), engine="ray"))
        killed = killer.result()
    assert killed != os.getpid()
    same_tree(tmp_path / "local", tmp_path / "ray", ["scores.jsonl", "summary.json", "errors.jsonl"])


def test_shards_cut_at_line_ends_and_number_their_lines(tmp_path):
    from benchmint.metrics.pipeline_shards import shards_of

    path = tmp_path / "p.jsonl"
    path.write_bytes(b"aaaa\nbb\n\ncccccc\nd")
    # A cut at byte 3 ends the shard with line 1; at 8 (the blank line 3's newline) after line 3; at 12 after 4.
    assert list(shards_of(str(path), 3)) == [(str(path), 0, 5, 1), (str(path), 5, 9, 2), (str(path), 9, 16, 4),
                                             (str(path), 16, 17, 5)]
    assert list(shards_of(str(path), 100)) == [(str(path), 0, 17, 1)]


def test_score_of_miller_indices_on_ray_writes_the_local_engines_files(cluster, tmp_path, monkeypatch):
    from benchmint.metrics import pipeline_shards
    from benchmint.metrics.pipeline import ScoreConfig, score_files

    monkeypatch.setattr(pipeline_shards, "SHARD_BYTES", 8192)
    samples = files("benchmint") / "samples"
    pred, gold = str(samples / "hkl_pred.jsonl"), str(samples / "hkl_gold.jsonl")
    for engine in ("local", "ray"):
        score_files([pred], gold, tmp_path / engine, ScoreConfig(task="hkl", by=("db",), engine=engine))
    same_tree(tmp_path / "local", tmp_path / "ray", ["scores.jsonl", "summary.json", "errors.jsonl"])


def test_a_ray_address_without_the_ray_engine_is_a_usage_error(tmp_path, capsys):
    from benchmint.cli import main

    assert main(["score", str(tmp_path / "p.jsonl"), "--gold", str(tmp_path / "g.jsonl"), "--task", "mcq",
                 "--out", str(tmp_path / "o"), "--ray-address", "auto"]) == 2
    assert capsys.readouterr().err == "benchmint score: error: --ray-address needs --engine ray\n"


# --- dispatch order -------------------------------------------------------------------------------------------------


def test_costliest_first_writes_the_files_of_input_order_locally_and_on_ray(cluster, cifs, pdfs, tmp_path,
                                                                            monkeypatch):
    """Units handed out by cost (a file's bytes) instead of input order: the same files, on either engine."""
    from benchmint.pdf.harvest import harvest
    from benchmint.xrd.build import BuildConfig, build

    for root in (cifs, pdfs):  # the largest file is not first: the two orders differ
        sizes = [p.stat().st_size for p in sorted(root.rglob("*.*"))]
        assert sizes != sorted(sizes, reverse=True)
    cfg = BuildConfig(per_db=2, db_from_dirname=True)
    runs = {}
    for dispatch, engine in (("input", "local"), ("longest-first", "local"), ("longest-first", "ray")):
        monkeypatch.setenv("BENCHMINT_DISPATCH", dispatch)
        out = runs[dispatch, engine] = tmp_path / f"{dispatch}-{engine}"
        build([cifs], out / "xrd", cfg, workers=2, engine=engine)
        harvest([pdfs], out / "pdf", workers=2, engine=engine)
    first = runs["input", "local"]
    images = sorted(str(p.relative_to(first / "xrd")) for p in (first / "xrd").rglob("*.png"))
    assert len(images) == 10
    for out in runs.values():
        same_tree(first / "xrd", out / "xrd", ["items.jsonl", "selection.jsonl", "errors.jsonl", *images])
        same_tree(first / "pdf", out / "pdf", HARVEST_FILES)
        assert _thumbs(out / "pdf") == _thumbs(first / "pdf")
