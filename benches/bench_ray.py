"""--engine ray against the local engine on one machine: Ray's start-up, its cost per unit, and harvest and xrd
build on the corpus's files (scripts/fetch_corpus.py), each flow's two engines in one group.

The Ray benches run on one local cluster of 2 CPUs (the machine's cores), started once for the module; its start
is a bench of its own. Each flow's Ray run is checked to write the local run's files. One round each: whole
flows on a shared machine. Skipped without Ray or without the corpus.

Run: .venv/bin/python -m pytest benches/bench_ray.py --benchmark-only --benchmark-group-by=group -p no:cacheprovider
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from benchmint.run import ProcessExecutor

pytest.importorskip("ray")

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "files"
N_PDFS = 40
N_UNITS = 400
CPUS = 2

pytestmark = [pytest.mark.real,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: python scripts/fetch_corpus.py")]

_outputs: dict[str, Path] = {}


def noop(i: int) -> dict:
    return {"i": i}


def _drain(executor, n: int) -> int:
    got = sum(1 for _ in executor.map_unordered(noop, [(i,) for i in range(n)]))
    executor.close()
    assert got == n
    return got


def test_ray_start_up(benchmark):
    """A local instance started (in its own temporary folder, as the command does), one unit run on it, and shut
    down: what --engine ray adds to any run."""
    from benchmint.run.ray_engine import RayExecutor, ray_session

    def start_run_stop():
        with ray_session(num_cpus=CPUS):
            _drain(RayExecutor(), 1)

    benchmark.group = "ray-start-up"
    benchmark.pedantic(start_run_stop, rounds=1, iterations=1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from benchmint.run.ray_engine import ray_session

    with ray_session(num_cpus=CPUS, temp_dir=str(tmp_path_factory.mktemp("ray"))) as ray:
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        yield ray


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_units_per_second(benchmark, cluster, engine):
    """Units that do nothing: the engine's own cost per unit (local: 2 worker processes, started beforehand)."""
    from benchmint.run.ray_engine import RayExecutor

    def make():
        if engine == "local":
            ex = ProcessExecutor(CPUS)
            ex.start()
            return (ex,), {}
        return (RayExecutor(),), {}

    benchmark.group = "ray-units-per-second"
    benchmark.pedantic(lambda ex: _drain(ex, N_UNITS), setup=make, rounds=1, iterations=1)
    if benchmark.stats is not None:  # None when timing is off (the test command's --benchmark-disable)
        benchmark.extra_info["units_per_second"] = N_UNITS / benchmark.stats.stats.min


def _flow(benchmark, tmp_path, name: str, engine: str, run, outputs: list[str]) -> None:
    out = tmp_path / f"{name}-{engine}"

    def fresh():
        shutil.rmtree(out, ignore_errors=True)
        return (), {}

    benchmark.group = f"ray-{name}"
    benchmark.pedantic(lambda: run(out), setup=fresh, rounds=1, iterations=1)
    other = _outputs.get(f"{name}-{'local' if engine == 'ray' else 'ray'}")
    if other is not None:
        for file in outputs:
            assert (out / file).read_bytes() == (other / file).read_bytes(), file
    _outputs[f"{name}-{engine}"] = out
    benchmark.extra_info["load_average"] = os.getloadavg()[0]  # the machine is shared: say how busy it was


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_harvest(benchmark, cluster, tmp_path_factory, engine):
    from benchmint.pdf.harvest import harvest

    pdfs = sorted((CORPUS / "pdf").rglob("*.pdf"))[:N_PDFS]
    _flow(benchmark, tmp_path_factory.getbasetemp(), "harvest", engine,
          lambda out: harvest(pdfs, out, workers=CPUS, engine=engine),
          ["pages.jsonl", "figures.jsonl", "errors.jsonl", "documents.jsonl"])
    benchmark.extra_info["pdfs"] = len(pdfs)


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_xrd_build(benchmark, cluster, tmp_path_factory, engine):
    from benchmint.xrd.build import build

    cifs = CORPUS / "cif"
    _flow(benchmark, tmp_path_factory.getbasetemp(), "xrd-build", engine,
          lambda out: build([cifs], out, workers=CPUS, engine=engine),
          ["items.jsonl", "selection.jsonl", "errors.jsonl"])
    benchmark.extra_info["cifs"] = sum(1 for _ in cifs.rglob("*.cif"))


N_MODELS = 400


@pytest.fixture(scope="module")
def score_inputs(tmp_path_factory):
    """The bundled multi-select sample's 300 gold items answered by 400 models (its 4 models' lines renamed)."""
    import json
    from importlib.resources import files

    samples = files("benchmint") / "samples"
    root = tmp_path_factory.mktemp("score")
    lines = [json.loads(line) for line in (samples / "mcq_pred.jsonl").read_text(encoding="utf-8").splitlines()]
    with open(root / "pred.jsonl", "w", encoding="utf-8") as fh:
        for copy in range(N_MODELS // 4):
            for rec in lines:
                fh.write(json.dumps({**rec, "model": f"{rec['model']}-{copy:03d}"}) + "\n")
    return str(root / "pred.jsonl"), str(samples / "mcq_gold.jsonl")


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_score(benchmark, cluster, tmp_path_factory, score_inputs, engine):
    from benchmint.metrics.pipeline import ScoreConfig, score_files

    pred, gold = score_inputs
    cfg = ScoreConfig(task="mcq", by=("domain",), workers=CPUS, engine=engine)
    _flow(benchmark, tmp_path_factory.getbasetemp(), "score", engine,
          lambda out: score_files([pred], gold, out, cfg), ["scores.jsonl", "summary.json", "errors.jsonl"])
    benchmark.extra_info["rows"] = 300 * N_MODELS
