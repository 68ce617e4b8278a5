"""``benchmint report``: the papers' tables and figures from benchmint's own outputs, and one offline HTML page.

``build(run_dirs, out, command)`` finds the runs (``report.discover``), hands each to the module of its paper,
which draws through one style (``report.style``), and writes ``index.html`` (``report.html``). A run or input that
cannot be read is a listed problem (exit 1) and the rest of the report goes on; a figure the runs hold too little
for is a note on the page.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from benchmint.report.discover import Run, discover
from benchmint.report.style import Output, Sink


@dataclass
class ReportResult:
    page: Path
    outputs: list[Output]
    runs: list[Run]
    problems: list[str]
    notes: list[str]


def _settings(run: Run) -> dict:
    s = run.summary
    if run.kind == "score":
        return {"task": s.get("task"), "params": s.get("params"), "gold": s.get("gold"),
                "predictions": s.get("predictions"), "models": sorted(s.get("models", {}))}
    if run.kind == "grade":
        return {"benchmark": s.get("benchmark"), "inputs": s.get("inputs"), "counts": s.get("counts")}
    if run.kind == "eval":
        return {k: s.get(k) for k in ("benchmark", "model", "setting", "items_file", "blind", "repeats", "seed",
                                      "counts")}
    if run.kind == "generate":
        return {k: s.get(k) for k in ("benchmark", "counts", "settings")}
    if run.kind == "review":
        return {k: s.get(k) for k in ("items", "reviewed", "rejected", "kept", "reviewers")}
    return {"items": str(run.file("items.jsonl"))}


def _drawers(run: Run):
    from benchmint.report import crystalxrd, csmbench, generation, matvqa, paired, seephys, spm

    if run.kind == "score":
        return [crystalxrd.draw_scores] if run.summary.get("task") == "hkl" else [spm.draw]
    if run.kind == "grade":
        bench = run.summary.get("benchmark")
        table = {"seephys": [seephys.draw], "matvqa": [matvqa.draw], "csmbench-open": [csmbench.draw],
                 "csmbench-mcq": [csmbench.draw]}
        return table.get(str(bench), []) + [paired.draw_grade]
    if run.kind == "xrd-build":
        return [crystalxrd.draw_items]
    if run.kind == "generate":
        return [generation.draw_codes]
    if run.kind == "review":
        return [generation.draw_review]
    return []


def build(run_dirs: list[Path], out: Path, command: str) -> ReportResult:
    """Draw everything the runs under ``run_dirs`` hold into ``out``; the style holds for every figure drawn."""
    from benchmint.report.style import styled

    with styled():
        return _build(run_dirs, out, command)


def _build(run_dirs: list[Path], out: Path, command: str) -> ReportResult:
    out.mkdir(parents=True, exist_ok=True)
    runs, problems = discover(run_dirs, skip=out)
    sink = Sink(out, command)
    sink.problems.extend(problems)
    from benchmint.report import fromeval

    runs = runs + fromeval.score_eval_runs(runs, out, sink)
    for run in runs:
        for draw in _drawers(run):
            try:
                draw(run, sink)
            except (KeyError, ValueError, TypeError, OSError, IndexError) as exc:
                # One run the report cannot read never stops the others; the cause is on the page.
                where = traceback.extract_tb(exc.__traceback__)[-1]
                sink.problem(f"{run.path} ({run.kind}): {type(exc).__name__}: {exc} "
                             f"[{Path(where.filename).name}:{where.lineno}]")
    from benchmint.report import paired

    paired.draw_pairs(runs, sink)
    paired.draw_score_gaps(runs, sink)
    from benchmint.report import html

    page = html.write(out, sink.outputs, command, [{"kind": r.kind, "path": str(r.path), "settings": _settings(r)}
                                                   for r in runs], sink.problems, sink.notes)
    return ReportResult(page, sink.outputs, runs, sink.problems, sink.notes)
