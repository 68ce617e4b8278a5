"""The functions behind benchmint's lmms-eval task directories (``benchmint/integrations/lmms_eval/<task>/``).

Each task directory holds a YAML file in lmms-eval's task schema and a ``utils.py`` of a few lines that takes
its functions from ``tasks(benchmark, setting)`` here, so that the prompt, the images and the scoring are
benchmint's own:

* ``doc_to_text`` / ``doc_to_visual``: the benchmark's prompt for the setting, built from the dataset row by the
  reader ``benchmint eval`` uses (its text; its images as PIL images, in order);
* ``process_results``: keeps the row's gold columns and the reply, nothing scored yet;
* the aggregations (``accuracy``, ``sip_f1``, ``jaccard``...): score all the kept rows at once with
  ``score_table``, i.e. ``benchmint grade``/``score`` on them (one symbolic screen, the judge's calls batched
  and cached), and return the metric.

Fixed against the public SeePhys task: generation is not cut at a blank line nor at ``</answer>`` (the YAML
sets no stop strings), nothing needs an API key to import (the judge is named by the environment variables
``BENCHMINT_JUDGE_MODEL``, ``BENCHMINT_JUDGE_BASE_URL`` and, for its key, ``BENCHMINT_JUDGE_API_KEY_ENV``, read
when the aggregation runs; without them what the rules and screen cannot decide is left out of the accuracy and
counted), and the final answer is read by benchmint's rules, not an integer-only pattern.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmint import benchmarks
from benchmint.benchmarks.layouts import Origin

#: each aggregation's metric and where it is read in score_table's summary
GRADED_METRICS = ("accuracy", "accuracy_undecided_as_wrong")
OPEN_METRICS = ("sts", "judge_score")
SET_METRICS = ("em", "spc", "sip_f1", "jaccard", "precision", "recall", "f1", "j_pen")
_scored: dict[str, Any] = {}  # one scoring of the kept rows for all the aggregations of a task


def _plain(value: Any) -> Any:
    """A dataset cell as benchmint's readers take it: a PIL image as its PNG bytes (a list of them likewise)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "save") and hasattr(value, "mode"):  # PIL.Image.Image, as `datasets` decodes images
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        return buf.getvalue()
    return value


def _row(doc: Mapping) -> dict:
    return {str(k): _plain(v) for k, v in doc.items()}


class _Task:
    def __init__(self, benchmark: str, setting: str | None, root: str | None) -> None:
        self.bench = benchmarks.get(benchmark)
        self.setting = self.bench.check_setting(setting)
        self.origin = Origin(Path(root or os.environ.get("BENCHMINT_ITEMS_ROOT", ".")), "jsonl")

    def prompt(self, doc: Mapping):
        row = _row(doc)
        item = self.bench.item_from_row(row, self.origin, f"doc {row.get('index', row.get('id', '?'))}")
        return self.bench.prompt(item, self.setting)

    def doc_to_text(self, doc: Mapping, lmms_eval_specific_kwargs: Mapping | None = None) -> str:
        return self.prompt(doc).text()

    def doc_to_visual(self, doc: Mapping) -> list:
        from PIL import Image

        return [Image.open(io.BytesIO(p.data)).convert("RGB") for p in self.prompt(doc).images()]

    def doc_to_target(self, doc: Mapping) -> str:
        item = self.bench.item_from_row(_row(doc), self.origin, "doc")
        return item.answer if isinstance(item.answer, str) else json.dumps(item.answer)

    def process_results(self, doc: Mapping, results: list) -> dict:
        reply = next((r for r in results if isinstance(r, str) and r.strip()), results[0] if results else "")
        # the gold columns; images are left out (scoring never reads them)
        kept = {k: v for k, v in _row(doc).items()
                if not isinstance(v, bytes) and not (isinstance(v, list) and any(isinstance(x, bytes) for x in v))}
        kept["prediction"] = reply or ""
        return {name: kept for name in self.metrics()}

    def metrics(self) -> tuple[str, ...]:
        if self.bench.name == "csmbench-open":
            return OPEN_METRICS
        return GRADED_METRICS if self.bench.graded else SET_METRICS

    def score(self, rows: list[dict]):
        from benchmint.integrations.tables import score_table

        judged_by = [os.environ.get(v) for v in ("BENCHMINT_JUDGE_MODEL", "BENCHMINT_JUDGE_BASE_URL")]
        key = hashlib.sha256(json.dumps([self.bench.name, judged_by, rows], sort_keys=True,
                                        default=str).encode()).hexdigest()
        if key not in _scored:
            if len(_scored) >= 4:  # a task's aggregations share one scoring; older tasks' results go
                _scored.clear()
            options: dict[str, Any] = {}
            judge = None
            if self.bench.graded:
                judge = _judge_from_environment()
                options["workers"] = int(os.environ.get("BENCHMINT_WORKERS", "1"))
            try:
                _scored[key] = score_table(rows, self.bench.name, name=f"lmms-eval {self.bench.name}", judge=judge,
                                           **options)
            finally:
                if judge is not None:
                    judge.engine.close()
        return _scored[key]

    def aggregation(self, metric: str):
        def aggregate(rows: list[dict]) -> float:
            result = self.score(rows)
            models = result.summary["models"]
            if not self.bench.graded:  # benchmint score's summary: models by name, macro means
                (block,) = models.values()
                return float(block["metrics"][metric]["mean"])
            (block,) = models
            value = block[metric]
            value = value["mean"] if isinstance(value, dict) else value
            return float("nan") if value is None else float(value)

        aggregate.__name__ = metric
        return aggregate


def _judge_from_environment():
    model, url = os.environ.get("BENCHMINT_JUDGE_MODEL"), os.environ.get("BENCHMINT_JUDGE_BASE_URL")
    if not model or not url:
        return None
    from benchmint.grade.judge import Judge
    from benchmint.integrations import judge_cache_path
    from benchmint.models.engine import Endpoint, Engine

    endpoint = Endpoint(url, api_key_env=os.environ.get("BENCHMINT_JUDGE_API_KEY_ENV"))
    return Judge(Engine(endpoint, cache=judge_cache_path()), model)


def tasks(benchmark: str, setting: str | None = None, root: str | None = None) -> dict:
    """The functions a task directory's utils.py exports: ``doc_to_text``, ``doc_to_visual``, ``doc_to_target``,
    ``process_results`` and one aggregation per metric (named as the metric). ``root``: the folder relative image
    paths of the rows are read from (CrystalXRD-Bench's ``file_name``; default ``$BENCHMINT_ITEMS_ROOT`` or .)."""
    t = _Task(benchmark, setting, root)
    out: dict[str, Any] = {"doc_to_text": t.doc_to_text, "doc_to_visual": t.doc_to_visual,
                           "doc_to_target": t.doc_to_target, "process_results": t.process_results}
    out.update({m: t.aggregation(m) for m in t.metrics()})
    return out


def export(namespace: dict, benchmark: str, settings: tuple[str | None, ...] = (None,)) -> None:
    """Put a task directory's functions into its utils.py (``namespace``: the module's globals()): per setting
    ``<setting>_doc_to_text`` and the like when there are several settings (else ``doc_to_text``...), and the
    aggregations."""
    for setting in settings:
        prefix = f"{setting.lower()}_" if len(settings) > 1 and setting is not None else ""
        for name, fn in tasks(benchmark, setting).items():
            namespace[name if name not in ("doc_to_text", "doc_to_visual", "process_results") else prefix + name] = fn


def task_dirs() -> Path:
    """The folder of the task directories, for lmms-eval's ``--include_path``."""
    return Path(__file__).parent / "lmms_eval"
