"""What a run folder holds: the outputs of ``score``, ``grade``, ``eval`` and ``xrd build``, found by their files.

A folder is searched with its subfolders (a demo's output holds many runs). Each run is recognised by the files its
command writes, never by its folder's name:

- score:      summary.json with ``task`` and a ``models`` mapping, beside scores.jsonl or its parts (scores/)
- grade:      summary.json with ``benchmark`` and a ``models`` list, beside grades.jsonl
- eval:       run.json with ``benchmark`` beside predictions.jsonl
- xrd build:  items.jsonl beside selection.jsonl
- generate:   run.json with ``benchmark`` beside items.jsonl, rejected.jsonl and trace.jsonl (no predictions)
- review:     review_summary.json beside items.jsonl (``benchmint generate review import``)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmint.metrics.rowfiles import has_score_rows

KINDS = ("score", "grade", "eval", "xrd-build", "generate", "review")


@dataclass
class Run:
    kind: str
    path: Path
    summary: dict[str, Any] = field(default_factory=dict)  # summary.json (score, grade) or run.json (eval)
    label: str = ""  # names the run's figures: its folder below the RUN_DIR given ("xrd-scores"), or that folder's

    def __post_init__(self) -> None:
        self.label = self.label or self.path.name or "run"

    def file(self, name: str) -> Path:
        return self.path / name

    def input_path(self, recorded: str | None) -> Path | None:
        """A file a run names (gold, predictions), as recorded: relative to where the command ran, so it is looked
        for there, then beside the run, then beside the run's parent. None when it is nowhere."""
        if not recorded:
            return None
        p = Path(recorded)
        for cand in (p, self.path / p, self.path.parent / p, self.path / p.name):
            if cand.exists():
                return cand
        return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _classify(folder: Path, names: set[str], label: str) -> list[Run]:
    runs: list[Run] = []
    if "summary.json" in names:
        summary = _read_json(folder / "summary.json")
        if isinstance(summary, dict) and isinstance(summary.get("models"), dict) and "task" in summary \
                and has_score_rows(folder):
            runs.append(Run("score", folder, summary, label))
        elif isinstance(summary, dict) and isinstance(summary.get("models"), list) and "benchmark" in summary \
                and "grades.jsonl" in names:
            runs.append(Run("grade", folder, summary, label))
    if "run.json" in names and "predictions.jsonl" in names:
        run = _read_json(folder / "run.json")
        if isinstance(run, dict) and "benchmark" in run:
            runs.append(Run("eval", folder, run, label))
    elif "run.json" in names and {"items.jsonl", "rejected.jsonl", "trace.jsonl"} <= names:
        run = _read_json(folder / "run.json")
        if isinstance(run, dict) and "benchmark" in run:
            runs.append(Run("generate", folder, run, label))
    if "review_summary.json" in names and "items.jsonl" in names:
        summary = _read_json(folder / "review_summary.json")
        if isinstance(summary, dict) and "agreement" in summary:
            runs.append(Run("review", folder, summary, label))
    if "items.jsonl" in names and "selection.jsonl" in names:
        runs.append(Run("xrd-build", folder, {}, label))
    return runs


def discover(roots: list[Path], skip: Path | None = None) -> tuple[list[Run], list[str]]:
    """Every run under the given folders, in path order; and the problems met (a root that is no folder or holds
    no run), each naming its folder. ``skip``: a folder not searched (the report's own, which may lie under a root
    and holds the runs it scored from eval outputs)."""
    runs: list[Run] = []
    problems: list[str] = []
    seen: set[Path] = {skip.resolve()} if skip is not None else set()
    for root in roots:
        if not root.is_dir():
            problems.append(f"{root}: not a folder")
            continue
        found = 0
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs.sort()
            here = Path(folder)
            real = here.resolve()
            if real in seen:
                dirs.clear()  # nor anything below it
                continue
            seen.add(real)
            rel = here.relative_to(root).parts
            got = _classify(here, set(files), "-".join(rel) if rel else (root.resolve().name or "run"))
            found += len(got)
            runs.extend(got)
        if not found:
            problems.append(f"{root}: no score, grade, eval, xrd build, generate or review output found in it")
    return runs, problems


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSONL file the commands wrote (their own outputs: a bad line is an error naming file and line)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc})") from exc
    return rows


def score_ci(metric: dict | None) -> tuple[float | None, float | None, float | None]:
    """A metric of score's summary.json ({mean, ci95: [low, high]}) as (mean, low, high)."""
    if not metric:
        return (None, None, None)
    low, high = (metric.get("ci95") or (None, None))[:2]
    return (metric.get("mean"), low, high)


def grade_ci(cell: dict | None) -> tuple[float | None, float | None, float | None]:
    """An accuracy of grade's summary.json ({mean, low, high, n}) as (mean, low, high)."""
    if not cell:
        return (None, None, None)
    return (cell.get("mean"), cell.get("low"), cell.get("high"))


def stratum_order(values) -> list[str]:
    """Stratum names in a reader's order: numbers by value, then the rest alphabetically, "(missing)" last."""
    def key(v: str):
        try:
            return (0, float(v), "")
        except ValueError:
            return (2 if v == "(missing)" else 1, 0.0, v)
    return sorted(values, key=key)
