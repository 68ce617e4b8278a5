"""Runs only ``benchmint eval`` made (predictions without a score or grade step): scored here, or the step named.

A user who ran ``eval`` without ``--score``/``--grade`` and asks for a report expects the figures its scores give.
Where scoring needs no model it is done here with the package's own flows, into ``<report>/from-eval/<run>/``, and
drawn as any score or grade run: option and HKL sets (SPM-Bench, CrystalXRD-Bench) by ``benchmint score`` on the
eval's predictions.jsonl and gold.jsonl, with the benchmark's strata, as ``eval --score`` runs it; single options
(MatVQA, CSMBench captions) by ``benchmint grade`` on the items file run.json names, where the rules decide every
answer. Open answers (SeePhys, CSMBench descriptions) need the symbolic screen and a judge model, which a report
does not call: the page names the command that grades them. An eval run whose predictions a score or grade run
of the report already read is left to that run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmint import benchmarks, tasks
from benchmint.io import InputError
from benchmint.report.discover import Run
from benchmint.report.style import Sink

FOLDER = "from-eval"


def _read_predictions(runs: list[Run]) -> set[Path]:
    """The prediction files the report's score and grade runs read, resolved."""
    taken: set[Path] = set()
    for run in runs:
        recorded = run.summary.get("predictions") if run.kind == "score" else \
            (run.summary.get("inputs") or {}).get("predictions") if run.kind == "grade" else None
        for p in recorded or ():
            found = run.input_path(p)
            if found is not None:
                taken.add(found.resolve())
    return taken


def score_eval_runs(runs: list[Run], out: Path, sink: Sink) -> list[Run]:
    """Score or grade each eval run no other run read; the new score/grade runs, to be drawn as the others."""
    shutil.rmtree(out / FOLDER, ignore_errors=True)  # the report's own folder: nothing of an earlier report stays
    taken = _read_predictions(runs)
    made: list[Run] = []
    for run in runs:
        if run.kind != "eval" or run.file("predictions.jsonl").resolve() in taken:
            continue
        name = str(run.summary.get("benchmark"))
        try:
            bench = benchmarks.get(name)
        except (KeyError, ValueError):
            sink.problem(f"{run.path}: eval run of an unknown benchmark {name!r}: not scored")
            continue
        pred, folder = run.file("predictions.jsonl"), out / FOLDER / run.label
        try:
            if not bench.graded:
                from benchmint.metrics.pipeline import ScoreConfig, score_files

                result = score_files([pred], run.file("gold.jsonl"), folder,
                                     ScoreConfig(task=bench.answer_kind, by=tuple(bench.strata), workers=1))
                made.append(Run("score", folder, result.summary, run.label))
                step = f"benchmint score {pred} --gold {run.file('gold.jsonl')} --task {bench.answer_kind}"
            elif tasks.get(bench.answer_kind).scoring == "set":
                from benchmint.grade.flow import GradeConfig, grade_files

                items = run.input_path(run.summary.get("items_file"))
                if items is None:
                    sink.note(f"{run.path}: eval predictions of {name} not graded: the items file "
                              f"{run.summary.get('items_file')} is not found")
                    continue
                graded = grade_files([pred], items, folder, GradeConfig(benchmark=name, workers=1))
                made.append(Run("grade", folder, graded.summary, run.label))
                step = f"benchmint grade {pred} --gold {items} --benchmark {name}"
            else:
                sink.note(f"{run.path}: eval predictions of {name} are not graded, so they have no figures: open "
                          f"answers need the symbolic screen and a judge model. Grade them with `benchmint grade "
                          f"{pred} --gold {run.summary.get('items_file')} --benchmark {name} --judge-model NAME "
                          f"--judge-base-url URL --out DIR` (or `benchmint eval ... --grade`) and pass DIR to "
                          "benchmint report.")
                continue
        except (InputError, ValueError, OSError) as exc:
            sink.problem(f"{run.path}: eval predictions could not be scored here: {exc}")
            continue
        sink.note(f"{run.path}: eval predictions without a score or grade step, scored here as `{step}` does "
                  f"(outputs in {folder}).")
    return made
