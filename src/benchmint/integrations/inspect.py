"""Inspect AI tasks for the five benchmarks: benchmint's items, prompts and scoring inside ``inspect eval``.

One task per benchmark, its setting a task argument::

    inspect eval benchmint/seephys -T items=SeePhys_total.tsv -T setting=TO \\
        -T judge_model=NAME -T judge_base_url=http://127.0.0.1:8001/v1 --model openai-api/local/NAME

(``benchmint/<task>`` once benchmint is installed; ``path/to/benchmint/integrations/inspect.py@seephys``
otherwise). The dataset is read by the readers ``benchmint eval`` uses (benchmint's JSONL or a release as it
ships: SeePhys parquet or VLMEvalKit TSV, CSMBench ImageFolder, CrystalXRD-Bench rows), each sample's messages
are the benchmark's prompt from the package files (images as data URLs) and the generation settings are the
benchmark's protocol (temperature, max_tokens). An item that cannot be read or prompted is left out of the
dataset, and each such item is listed in the task's metadata (``item_errors``) and logged.

Scorers call benchmint, never a second implementation:

* SPM-Bench and CrystalXRD-Bench: the answer read as ``benchmint score`` reads it
  (``metrics.pipeline.read_answer``) and the set metrics of ``metrics.batch_ref`` (EM, SPC, SIP-F1, Jaccard,
  precision, recall, F1, J_pen, F1_pen), each an Inspect metric (the macro mean over samples, as summary.json's);
* SeePhys, MatVQA, CSMBench: each answer decided by the grade flow's own stages (rules, the symbolic screen,
  the judge; the option rules; STS and the judge's score), one sample at a time with one symbolic screen kept
  for the whole run. ``accuracy`` leaves out what no stage could decide (no judge, or the judge failed), as
  ``benchmint grade`` does; ``accuracy_undecided_as_wrong`` is the lower bound.

``by_stratum`` reports the primary metric per value of each of the benchmark's strata that the items carry.
Not carried over from ``benchmint eval``: answer retries for unreadable replies (Inspect asks once) and
benchmint's request cache for the model under test (Inspect has its own, ``--cache-prompt``/``cache``).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import math
import threading
from pathlib import Path
from typing import Any

try:
    from inspect_ai import Task, task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ContentImage, ContentText, GenerateConfig
    from inspect_ai.scorer import Metric, SampleScore, Score, Target, metric, scorer
    from inspect_ai.solver import TaskState, generate
except ImportError as exc:  # an extra: say how to get it
    raise ImportError(f"benchmint's Inspect tasks need Inspect AI: pip install 'benchmint[inspect]' ({exc})") from exc

from benchmint import benchmarks, tasks
from benchmint.benchmarks.base import ImagePart, PromptError

log = logging.getLogger(__name__)

SET_METRICS = ("em", "spc", "sip_f1", "jaccard", "precision", "recall", "f1", "j_pen", "f1_pen")
PRIMARY = {"spm": "sip_f1", "crystalxrd": "jaccard", "csmbench-open": "sts"}  # else accuracy


# ---------------------------------------------------------------------------------------------- metrics

def _values(scores: list[SampleScore], key: str, undecided_as: float | None = None) -> list[float]:
    out = []
    for s in scores:
        value = s.score.value
        got = value.get(key) if isinstance(value, dict) else None
        if got is None:
            if undecided_as is None:
                continue
            got = undecided_as
        out.append(float(got))
    return out


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _mean_metric(key: str, undecided_as: float | None = None, name: str | None = None):
    @metric(name=f"benchmint/{name or key}")
    def make() -> Metric:
        def compute(scores: list[SampleScore]) -> float:
            return _mean(_values(scores, key, undecided_as))

        return compute

    return make


@metric(name="benchmint/by_stratum")
def by_stratum(key: str, fields: list[str]) -> Metric:
    """The mean of ``key`` per value of each stratum field (``field=value``), over the samples that carry it."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        groups: dict[str, list[SampleScore]] = {}
        for s in scores:
            meta = s.sample_metadata or {}
            for f in fields:
                if f in meta and meta[f] is not None:
                    groups.setdefault(f"{f}={meta[f]}", []).append(s)
        return {name: _mean(_values(group, key)) for name, group in sorted(groups.items())}

    return compute


# ---------------------------------------------------------------------------------------------- dataset

def _message_content(parts) -> list:
    import base64

    content: list[Any] = []
    for p in parts:
        if isinstance(p, ImagePart):
            content.append(ContentImage(image=f"data:{p.mime};base64,{base64.b64encode(p.data).decode('ascii')}"))
        else:
            content.append(ContentText(text=p.text))
    return content


def load(benchmark: str, items: str | Path, setting: str | None = None, limit: int | None = None,
         prompts: str | None = None, protocol: str | None = None):
    """(benchmark, setting, samples, items by id, item errors): the dataset as ``benchmint eval`` reads it."""
    bench = benchmarks.get(benchmark, prompts=prompts, protocol=protocol)
    setting = bench.check_setting(setting)
    samples, by_id, errors = [], {}, []
    for location, got in bench.read_items(items, setting):
        if limit is not None and len(samples) >= limit:
            break
        if isinstance(got, benchmarks.ItemError):
            errors.append(got.to_json())
            continue
        try:
            prompt = bench.prompt(got, setting)
        except PromptError as exc:
            errors.append({"location": location, "field": None, "error": str(exc)})
            continue
        messages: list[Any] = [ChatMessageSystem(content=prompt.system)] if prompt.system is not None else []
        # a prompt without images is sent as plain text, as benchmint eval sends it (some servers' chat
        # templates, llama.cpp's among them, take no list of parts)
        messages.append(ChatMessageUser(content=_message_content(prompt.parts) if prompt.images() else prompt.text()))
        target = got.answer if isinstance(got.answer, str) else json.dumps(got.answer)
        samples.append(Sample(input=messages, target=target, id=got.id,
                              metadata={**got.meta, "setting": setting, "location": location}))
        by_id[got.id] = got
    for e in errors:
        log.warning("benchmint %s: item left out: %s: %s", benchmark, e["location"], e["error"])
    return bench, setting, samples, by_id, errors


def _config(bench) -> GenerateConfig:
    p = bench.protocol
    return GenerateConfig(temperature=p.temperature, max_tokens=p.max_tokens, seed=None)


# ---------------------------------------------------------------------------------------------- scorers

def _set_scorer(bench, by_id: dict, strata: list[str]):
    from benchmint.metrics import batch_ref
    from benchmint.metrics.batch import DEFAULT_SIP_GAMMA, DEFAULT_SIP_LAMBDA
    from benchmint.metrics.pipeline import STATUS_NAMES, read_answer
    from benchmint.records import Prediction

    kind = tasks.get(bench.answer_kind)
    primary = PRIMARY[bench.name]
    metrics = [_mean_metric(k)() for k in SET_METRICS] + [by_stratum(primary, strata)]

    @scorer(metrics=metrics, name=f"benchmint/{bench.name}")
    def set_scorer():
        async def score(state: TaskState, target: Target) -> Score:
            item = by_id[str(state.sample_id)]
            errors: list[dict] = []
            parsed = read_answer(Prediction(item.id, str(state.model), output=state.output.completion), kind,
                                 "inspect", 0, errors)
            assert parsed is not None  # an output is always there to read
            gold = kind.normalize(item.answer)
            tp = len(set(parsed.answer) & set(gold))
            values = batch_ref.metrics_from_counts(tp, len(parsed.answer), len(gold), DEFAULT_SIP_LAMBDA,
                                                   DEFAULT_SIP_GAMMA)
            return Score(value={k: float(values[k]) for k in SET_METRICS}, answer=json.dumps(kind.to_json(
                parsed.answer)), explanation=STATUS_NAMES[parsed.status],
                metadata={"status": STATUS_NAMES[parsed.status], "problems": [e["message"] for e in errors]})

        return score

    return set_scorer()


class _Grader:
    """The grade flow's stages for one answer at a time: one symbolic screen (and its worker processes) for the
    run, and a lock, since the flow's stages are not written for concurrent calls."""

    def __init__(self, bench, by_id: dict, cfg, judge) -> None:
        self.bench, self.items, self.cfg, self.judge = bench, by_id, cfg, judge
        self.kind = tasks.get(bench.answer_kind)
        self._lock = threading.Lock()
        self._screen = None

    def grade(self, item_id: str, model: str, setting: str, output: str):
        from benchmint.grade import flow
        from benchmint.grade.summary import FIRST_REPEAT
        from benchmint.records import Prediction

        unit = flow.Unit(model, setting, FIRST_REPEAT, Prediction(item_id, model, output=output), "inspect", None)
        errors: list[dict] = []
        with self._lock:
            if self.kind.name == "quantity":
                if self._screen is None:
                    from benchmint.grade.screen import Screen

                    self._screen = Screen(rtol=self.cfg.rtol, timeout_s=self.cfg.symbolic_timeout_s,
                                          workers=self.cfg.workers)
                    atexit.register(self._screen.close)
                grades = flow._quantity_grades([unit], self.items, self.cfg, self.judge, errors, {},
                                               screen=self._screen)
            elif self.kind.name == "free_text":
                grades = flow._open_grades([unit], self.items, self.cfg, self.judge, errors)
            else:
                grades = flow._choice_grades(self.bench, [unit], self.items, errors)
        return (grades[0] if grades else None), errors


def _graded_scorer(bench, by_id: dict, strata: list[str], cfg, judge):
    grader = _Grader(bench, by_id, cfg, judge)
    if bench.name == "csmbench-open":
        metrics = [_mean_metric("sts")(), _mean_metric("judge_score")(), _mean_metric("score")(),
                   by_stratum("sts", strata)]
    else:
        metrics = [_mean_metric("accuracy")(),
                   _mean_metric("accuracy", undecided_as=0.0, name="accuracy_undecided_as_wrong")(),
                   by_stratum("accuracy", strata)]

    @scorer(metrics=metrics, name=f"benchmint/{bench.name}")
    def graded_scorer():
        async def score(state: TaskState, target: Target) -> Score:
            item_id = str(state.sample_id)
            setting = (state.metadata or {}).get("setting", "")
            g, errors = await asyncio.to_thread(grader.grade, item_id, str(state.model), setting,
                                                state.output.completion)
            problems = [e["message"] for e in errors]
            if g is None:  # undecided: no grade, counted apart
                cause = next((e.get("cause") for e in errors if e.get("kind") == "undecided"), "undecided")
                return Score(value={"undecided": 1.0}, explanation=f"undecided ({cause})",
                             reason="grader_failed", metadata={"undecided": cause, "problems": problems})
            value: dict[str, float | None] = {"score": g.score}
            if bench.name == "csmbench-open":
                value["sts"] = g.extra.get("sts")
                value["judge_score"] = g.extra.get("judge_score")
            else:
                value["accuracy"] = g.score
            return Score(value=value, answer=None if g.answer is None else json.dumps(g.answer, ensure_ascii=False),
                         explanation=f"{g.stage}: {g.verdict}",
                         metadata={"stage": g.stage, "verdict": g.verdict, "judge_reply": g.judge_reply,
                                   **g.extra, "problems": problems})

        return score

    return graded_scorer()


def _judge(judge_model: str | None, judge_base_url: str | None, judge_api_key_env: str | None,
           judge_cache: str | None):
    if not judge_model:
        return None
    if not judge_base_url:
        raise ValueError("judge_model needs judge_base_url (the judge server's OpenAI-compatible base URL)")
    from benchmint.grade.judge import Judge
    from benchmint.integrations import judge_cache_path
    from benchmint.models.engine import Endpoint, Engine

    cache = Path(judge_cache) if judge_cache else judge_cache_path()
    return Judge(Engine(Endpoint(judge_base_url, api_key_env=judge_api_key_env), cache=cache), judge_model)


def benchmint_task(benchmark: str, items: str, setting: str | None = None, limit: int | None = None,
                   judge_model: str | None = None, judge_base_url: str | None = None,
                   judge_api_key_env: str | None = None, judge_cache: str | None = None, workers: int = 1,
                   prompts: str | None = None, protocol: str | None = None, **grade_options) -> Task:
    """The Inspect task of ``benchmark`` in ``setting`` over ``items`` (any layout ``benchmint eval`` reads).

    ``judge_*``: the judge of graded benchmarks (SeePhys's stage 3 and extraction, CSMBench's open answers);
    ``workers``: symbolic-screen processes; ``grade_options``: other GradeConfig settings (``rtol``,
    ``judge_scale``, ``sts``...).
    """
    bench, setting, samples, by_id, errors = load(benchmark, items, setting, limit, prompts, protocol)
    strata = [f for f in bench.strata if any(f in it.meta for it in by_id.values())]
    if bench.graded:
        from benchmint.grade.flow import GradeConfig

        cfg = GradeConfig(benchmark=bench.name, workers=workers, **grade_options)
        judge = _judge(judge_model, judge_base_url, judge_api_key_env, judge_cache)
        chosen = _graded_scorer(bench, by_id, strata, cfg, judge)
    else:
        if judge_model or grade_options:
            raise ValueError(f"{bench.name} is scored as option or HKL sets: no judge, no grade options")
        chosen = _set_scorer(bench, by_id, strata)
    return Task(dataset=MemoryDataset(samples, name=f"{bench.name}-{setting}"), solver=generate(), scorer=chosen,
                config=_config(bench), name=f"benchmint/{bench.name}",
                metadata={"benchmark": bench.name, "setting": setting, "items": str(items), "item_errors": errors,
                          "run": bench.run_record(setting)})


@task
def spm(items: str, setting: str | None = None, limit: int | None = None, protocol: str | None = None) -> Task:
    """SPM-Bench: multi-select options; EM, SPC, SIP-F1 (λ 0.6, Γ 6) and the set metrics."""
    return benchmint_task("spm", items, setting, limit, protocol=protocol)


@task
def crystalxrd(items: str, setting: str = "full", limit: int | None = None, protocol: str | None = None) -> Task:
    """CrystalXRD-Bench: the strongest peak's HKL set; Jaccard (primary), precision, recall, F1, EM, J_pen."""
    return benchmint_task("crystalxrd", items, setting, limit, protocol=protocol)


@task
def seephys(items: str, setting: str = "TV", limit: int | None = None, judge_model: str | None = None,
            judge_base_url: str | None = None, judge_api_key_env: str | None = None, judge_cache: str | None = None,
            workers: int = 1, rtol: float = 1e-3, protocol: str | None = None) -> Task:
    """SeePhys in TV, TC, TO or VO: rules, symbolic screen, judge; accuracy."""
    return benchmint_task("seephys", items, setting, limit, judge_model, judge_base_url, judge_api_key_env,
                          judge_cache, workers, protocol=protocol, rtol=rtol)


@task
def matvqa(items: str, setting: str | None = None, limit: int | None = None, protocol: str | None = None) -> Task:
    """MatVQA: one option number; accuracy."""
    return benchmint_task("matvqa", items, setting, limit, protocol=protocol)


@task
def csmbench_mcq(items: str, limit: int | None = None, protocol: str | None = None) -> Task:
    """CSMBench caption matching: one letter A-D; accuracy by scale."""
    return benchmint_task("csmbench-mcq", items, None, limit, protocol=protocol)


@task
def csmbench_open(items: str, limit: int | None = None, judge_model: str | None = None,
                  judge_base_url: str | None = None, judge_api_key_env: str | None = None,
                  judge_cache: str | None = None, judge_scale: str = "0-10", sts: bool = True,
                  protocol: str | None = None) -> Task:
    """CSMBench open descriptions: STS and the judge's score (0-10 or 1-10)."""
    return benchmint_task("csmbench-open", items, None, limit, judge_model, judge_base_url, judge_api_key_env,
                          judge_cache, protocol=protocol, judge_scale=judge_scale, sts=sts)
