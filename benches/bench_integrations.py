"""The integrations against benchmint's own score / grade on the same rows (each bench checks its result).

Groups:

* ``table-spm-N``: an SPM-Bench result table (pandas, VLMEvalKit's columns) through ``score_table``, beside
  benchmint's own path from the same rows as an items file (read the items -> gold.jsonl -> ``score_files``)
  and ``score_files`` alone on gold and predictions already written;
* ``table-seephys-N``: a SeePhys result table through ``score_table`` beside ``grade_files`` on the same rows
  (decided by rules and the symbolic screen, one worker, no judge);
* ``inspect-seephys-N``: the Inspect scorer's grading, one sample at a time with one screen for the run, beside
  ``grade_files`` on the same replies (needs inspect_ai).

BENCHMINT_INTEGRATION_ROWS sets N (default 2,000 table rows; SeePhys uses a tenth). Run:
.venv/bin/python -m pytest benches/bench_integrations.py --benchmark-only --benchmark-group-by=group \
    --benchmark-columns=min,median,rounds
"""

import json
import os
import random

import pandas as pd
import pytest

from benchmint import benchmarks
from benchmint.grade.flow import GradeConfig, grade_files
from benchmint.integrations.tables import score_table
from benchmint.io import write_jsonl
from benchmint.metrics.pipeline import MEAN_METRICS, ScoreConfig, score_files

N = int(os.environ.get("BENCHMINT_INTEGRATION_ROWS", "2000"))
N_GRADED = max(20, N // 10)
SIX = ["a", "b", "c", "d", "e", "f"]
# SeePhys answers the rules and the screen decide: (gold, reply) pairs, right and wrong
PHYSICS = [("1 kW", "<answer>1000 W</answer>"), ("2.0 s", "<answer>2 s</answer>"), ("Ray E", "The answer is ray e."),
           ("3 m/s", "<answer>3 kg</answer>"), ("$\\sqrt{2gh}$", "so v = \\boxed{(2gh)^{1/2}}"),
           ("0.50 A", "<answer>0.5 A</answer>")]


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    root = tmp_path_factory.mktemp("spm")
    rng = random.Random(0)
    rows = []
    for i in range(N):
        gold = sorted(rng.sample("ABCDEF", rng.randint(1, 3)))
        pred = sorted(rng.sample("ABCDEF", rng.randint(1, 3)))
        rows.append({"id": f"q{i}", "question": "Which artefacts?", "options": json.dumps(SIX),
                     "answer": ", ".join(gold), "domain": rng.choice(["STM", "AFM"]),
                     "prediction": "Answer: " + ", ".join(pred)})
    write_jsonl(root / "items.jsonl", ({k: v for k, v in r.items() if k != "prediction"} for r in rows))
    write_jsonl(root / "pred.jsonl", ({"id": r["id"], "model": "model", "output": r["prediction"]} for r in rows))
    bench = benchmarks.get("spm")
    write_jsonl(root / "gold.jsonl", (it.gold() for _, it in bench.read_items(root / "items.jsonl", check=False)))
    return root, pd.DataFrame(rows)


def _check_set(result, summary):
    assert len(result.rows) == N
    for k in MEAN_METRICS:
        mean = sum(r[k] for r in result.rows) / N
        assert summary["models"]["model"]["metrics"][k]["mean"] == pytest.approx(mean, rel=1e-12)
    assert result.summary["models"] == summary["models"]


@pytest.mark.benchmark(group=f"table-spm-{N}")
def test_score_table_spm(benchmark, spm):
    root, table = spm
    result = benchmark.pedantic(score_table, args=(table, "spm"), kwargs={"workers": 1}, rounds=3, iterations=1)
    own = score_files([root / "pred.jsonl"], root / "gold.jsonl", root / "check", ScoreConfig(task="mcq", workers=1))
    _check_set(result, own.summary)


@pytest.mark.benchmark(group=f"table-spm-{N}")
def test_own_items_to_gold_to_score(benchmark, spm):
    root, _ = spm
    bench = benchmarks.get("spm")

    def own():
        write_jsonl(root / "gold2.jsonl", (it.gold() for _, it in bench.read_items(root / "items.jsonl", check=False)))
        return score_files([root / "pred.jsonl"], root / "gold2.jsonl", root / "o2", ScoreConfig(task="mcq", workers=1))

    result = benchmark.pedantic(own, rounds=3, iterations=1)
    assert sum(b["n"] for b in result.summary["models"].values()) == N


@pytest.mark.benchmark(group=f"table-spm-{N}")
def test_own_score_files_alone(benchmark, spm):
    root, _ = spm
    result = benchmark.pedantic(score_files, args=([root / "pred.jsonl"], root / "gold.jsonl", root / "o1",
                                                   ScoreConfig(task="mcq", workers=1)), rounds=3, iterations=1)
    assert sum(b["n"] for b in result.summary["models"].values()) == N


@pytest.fixture(scope="module")
def seephys(tmp_path_factory):
    root = tmp_path_factory.mktemp("seephys")
    rows = [{"index": i, "question": f"Problem {i}?", "answer": PHYSICS[i % len(PHYSICS)][0], "sig_figs": "",
             "prediction": PHYSICS[i % len(PHYSICS)][1]} for i in range(N_GRADED)]
    write_jsonl(root / "items.jsonl", ({k: v for k, v in r.items() if k != "prediction"} for r in rows))
    write_jsonl(root / "pred.jsonl", ({"id": str(r["index"]), "model": "model", "output": r["prediction"]}
                                      for r in rows))
    return root, pd.DataFrame(rows)


def _grade(root, name):
    return grade_files([root / "pred.jsonl"], root / "items.jsonl", root / name,
                       GradeConfig(benchmark="seephys", workers=1))


def _by_hand(scores):
    # 1 kW, 2.0 s, Ray E, sqrt(2gh) and 0.50 A are right; 3 kg for 3 m/s is not (a sure difference, undecided
    # without a judge: left out)
    assert scores == [None if i % len(PHYSICS) == 3 else 1.0 for i in range(N_GRADED)]


@pytest.mark.benchmark(group=f"table-seephys-{N_GRADED}")
def test_score_table_seephys(benchmark, seephys):
    root, table = seephys
    result = benchmark.pedantic(score_table, args=(table, "seephys"), kwargs={"workers": 1}, rounds=2, iterations=1)
    _by_hand([r["score"] for r in result.rows])
    assert result.summary["models"] == _grade(root, "check").summary["models"]


@pytest.mark.benchmark(group=f"table-seephys-{N_GRADED}")
def test_own_grade_files(benchmark, seephys):
    root, _ = seephys
    result = benchmark.pedantic(_grade, args=(root, "own"), rounds=2, iterations=1)
    by_id = {g.id: g.score for g in result.grades}
    _by_hand([by_id.get(str(i)) for i in range(N_GRADED)])


@pytest.mark.benchmark(group=f"inspect-seephys-{N_GRADED}")
def test_inspect_grader_one_sample_at_a_time(benchmark, seephys):
    pytest.importorskip("inspect_ai")
    from benchmint.integrations.inspect import _Grader

    root, table = seephys
    bench = benchmarks.get("seephys")
    items = {it.id: it for _, it in bench.read_items(root / "items.jsonl", check=False)}

    def run():
        grader = _Grader(bench, items, GradeConfig(benchmark="seephys", workers=1), None)
        try:
            return [grader.grade(str(r["index"]), "model", "", r["prediction"])[0] for r in table.to_dict("records")]
        finally:
            grader._screen.close()

    grades = benchmark.pedantic(run, rounds=2, iterations=1)
    _by_hand([None if g is None else g.score for g in grades])


@pytest.mark.benchmark(group=f"inspect-seephys-{N_GRADED}")
def test_own_grade_files_beside_inspect(benchmark, seephys):
    root, _ = seephys
    result = benchmark.pedantic(_grade, args=(root, "own2"), rounds=2, iterations=1)
    assert len(result.grades) == N_GRADED - N_GRADED // len(PHYSICS) - (1 if N_GRADED % len(PHYSICS) > 3 else 0)
