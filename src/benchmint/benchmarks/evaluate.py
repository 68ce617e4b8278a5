"""Items -> model answers: one benchmark's items through a model, as ``benchmint eval`` runs them.

Each (item, repeat) is a unit whose key is the hash of its model request
(the endpoint, model, messages with images by content hash, sampling settings,
seed, schema). Units go through the one runner (``benchmint.run.run_units``)
with the model engine as its executor (``benchmint.models.CallExecutor``); a
finished unit's prediction is committed to the run's ledger before the next
one is taken, and its reply sits in the engine's reply cache, so a killed run
loses only the requests in flight and a rerun asks nothing that was answered.
A unit whose call failed (HTTP status, timeout, budget, ...) is an error row
and is recorded as one to try again: the next run asks again. Outputs,
error rows included, are written from the ledger in item order, so they do
not depend on completion order or interruptions:

    predictions.jsonl   {id, model, output, confidence, difficulty, tokens, cached, attempts, setting, repeat}
    gold.jsonl          the items' gold records (``benchmint score --gold``)
    errors.jsonl        every item, prompt and call that failed, with its cause
    run.json            benchmark, setting, protocol, prompt hashes, model, counts, tokens and cost
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmint import tasks
from benchmint.benchmarks.base import Benchmark, EvalItem, ImagePart, ItemError, Prompt, PromptError
from benchmint.io import atomic_write, write_jsonl
from benchmint.records import Prediction
from benchmint.run import Ledger, SerialExecutor, Unit, content_key, run_units
from benchmint.run.runner import LEDGER_NAME

BASELINE_MODEL = "benchmint-simulator"
CACHE_NAME = "requests.sqlite"


@dataclass(frozen=True)
class EvalConfig:
    model: str
    setting: str | None = None
    limit: int | None = None
    repeats: int = 1
    seed: int = 0
    system: str | None = None  # a system prompt replacing the benchmark's
    progress: bool = False
    # No image reaches the model (the prompt text is the setting's own): the "blind" baseline of any benchmark,
    # and the way to run a text-only model. Predictions carry the setting as "<setting>-blind".
    blind: bool = False

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if self.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {self.repeats}")


@dataclass
class EvalResult:
    out_dir: Path
    items: int = 0
    predictions: int = 0
    skipped: int = 0
    errors: list[dict] = field(default_factory=list)
    run: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


@dataclass(frozen=True)
class _Unit:
    item: EvalItem
    repeat: int  # 0-based
    key: str
    model: str  # the name its prediction carries: repeats are separate "models" to the scorer


BLIND_SUFFIX = "-blind"


def _messages(prompt: Prompt, system: str | None, max_side: int | None, blind: bool = False):
    from benchmint.models import ImagePart as SentImage
    from benchmint.models import Message

    parts = tuple(p.text if not isinstance(p, ImagePart) else SentImage(p.data, max_side) for p in prompt.parts
                  if not (blind and isinstance(p, ImagePart)))
    text_only = all(isinstance(p, str) for p in parts)
    user = Message("user", "".join(parts) if text_only else parts)  # type: ignore[arg-type]
    system = system if system is not None else prompt.system
    return (Message.system(system), user) if system is not None else (user,)


def _request(bench: Benchmark, prompt: Prompt, cfg: EvalConfig, repeat: int):
    from benchmint.models import ChatRequest

    proto = bench.protocol
    extra: dict[str, Any] = dict(proto.extra)
    if proto.thinking_budget is not None:
        extra.setdefault("thinking_budget", proto.thinking_budget)
    return ChatRequest(model=cfg.model, messages=_messages(prompt, cfg.system, proto.image_max_side, cfg.blind),
                       temperature=proto.temperature, max_tokens=proto.max_tokens,
                       # repeats differ by seed only, so each is its own cached call
                       seed=cfg.seed + repeat if cfg.repeats > 1 else None,
                       schema=proto.response_schema, reasoning_effort=proto.reasoning_effort,
                       extra_body=extra or None)


def _parser(bench: Benchmark):
    """The answer check of an answer attempt: an option set or HKL set must be readable; open answers always are."""
    kind = tasks.get(bench.answer_kind)
    if kind.scoring == "graded":
        return lambda text: text

    def parse(text: str) -> str:
        if kind.extract(text) is None:
            raise ValueError(f"no {kind.name} answer could be read")
        return text

    return parse


def _prediction(bench: Benchmark, unit: _Unit, setting: str, text: str, tokens: int | None, cached: bool,
                attempts: int) -> dict:
    fields = bench.reply_fields(text)  # e.g. SPM-Bench's self-reported confidence and difficulty
    pred = Prediction(unit.item.id, unit.model, output=text, confidence=fields.pop("confidence", None),
                      difficulty=fields.pop("difficulty", None), tokens=tokens, cached=cached, attempts=attempts,
                      extra={**fields, "setting": setting, "repeat": unit.repeat + 1})
    return pred.to_json()


def _items(bench: Benchmark, path: str | os.PathLike, setting: str, limit: int | None,
           errors: list[dict]) -> Iterator[EvalItem]:
    n = 0
    for _location, item in bench.read_items(Path(path), setting):
        if isinstance(item, ItemError):
            row = item.to_json()
            errors.append({"kind": "bad_item", "location": row["location"], "field": row["field"],
                           "message": row["error"]})
            continue
        yield item
        n += 1
        if limit is not None and n >= limit:
            return


def _units(bench: Benchmark, items_path, setting: str, cfg: EvalConfig, model: str, engine,
           errors: list[dict]) -> tuple[list[_Unit], dict[str, Any]]:
    """One unit per (item, repeat), keyed by its request; items and prompts that fail are error rows."""
    units: list[_Unit] = []
    requests: dict[str, Any] = {}
    for item in _items(bench, items_path, setting, cfg.limit, errors):
        try:
            prompt = bench.prompt(item, setting)
        except PromptError as exc:
            errors.append({"kind": "bad_prompt", "location": item.location, "id": item.id, "message": str(exc)})
            continue
        for r in range(cfg.repeats):
            if engine is None:
                key = content_key(json.dumps([BASELINE_MODEL, setting, item.id]).encode("utf-8"))
            else:
                request = _request(bench, prompt, cfg, r)
                key = content_key(engine.key(request).encode("ascii"), {"setting": setting, "repeat": r})
                requests[key] = request
            units.append(_Unit(item, r, key, model if cfg.repeats == 1 else f"{model}@{r + 1}"))
    return units, requests


def evaluate(items_path: str | os.PathLike, out_dir: str | os.PathLike, bench: Benchmark, cfg: EvalConfig,
             engine=None) -> EvalResult:
    """Run ``bench``'s items through ``engine`` (a ``benchmint.models.Engine``), or through the benchmark's own
    deterministic baseline when ``engine`` is None; write the outputs into ``out_dir``."""
    setting = bench.check_setting(cfg.setting)
    label = setting + BLIND_SUFFIX if cfg.blind else setting  # the setting the predictions carry
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = cfg.model if engine is not None else BASELINE_MODEL
    if engine is None and not bench.has_baseline:
        raise ValueError(f"{bench.name} has no deterministic baseline; give a model and --base-url")
    errors: list[dict] = []
    units, requests = _units(bench, items_path, setting, cfg, model, engine, errors)
    result = EvalResult(out)
    result.items = len({u.item.id for u in units})
    work: Callable[..., dict]
    if engine is None:
        executor: Any = SerialExecutor()
        runs = [Unit(u.key, (i,), u.item.id) for i, u in enumerate(units)]
        work = lambda i: _baseline(bench, units[i], label)  # noqa: E731
    else:
        from benchmint.models import CallExecutor

        # The executor makes each unit's model call; work turns the call's outcome into the unit's result.
        executor = CallExecutor(engine, stage="eval", parse=_parser(bench))
        runs = [Unit(u.key, (requests[u.key], i), u.item.id) for i, u in enumerate(units)]
        work = lambda outcome, i: _called(bench, units[i], label, outcome)  # noqa: E731

    with Ledger(out / LEDGER_NAME, "eval") as ledger:
        done, result.skipped = run_units(ledger, runs, work, executor, desc=f"eval {bench.name}",
                                         progress=cfg.progress)
    # Outputs from the ledger in unit order: a resumed run writes what an uninterrupted one would.
    rows = [r["prediction"] for r in done if "prediction" in r]
    errors += [r["problem"] for r in done if "problem" in r]
    write_jsonl(out / "predictions.jsonl", rows)
    write_jsonl(out / "gold.jsonl", _gold_rows(units))
    write_jsonl(out / "errors.jsonl", errors)
    result.predictions, result.errors = len(rows), errors
    result.run = {
        **bench.run_record(setting),
        "items_file": str(items_path),
        "blind": cfg.blind,
        "model": model,
        "repeats": cfg.repeats,
        "seed": cfg.seed,
        "limit": cfg.limit,
        "system_prompt": cfg.system is not None,
        "counts": {"items": result.items, "units": len(units), "predictions": len(rows),
                   "already_done": result.skipped, "errors": len(errors)},
        "engine": engine.summary() if engine is not None else None,
    }
    with atomic_write(out / "run.json") as fh:
        json.dump(result.run, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
    return result


def _baseline(bench: Benchmark, unit: _Unit, setting: str) -> dict:
    try:
        reply = bench.baseline_reply(unit.item)
    except (ValueError, OSError) as exc:  # e.g. a CIF the simulator cannot read
        problem = {"kind": "baseline", "id": unit.item.id, "location": unit.item.location,
                   "message": f"{type(exc).__name__}: {exc}"}
        return {"error": problem["message"], "problem": problem}
    return {"prediction": _prediction(bench, unit, setting, reply, None, False, 1)}


def _called(bench: Benchmark, unit: _Unit, setting: str, outcome) -> dict:
    """A model call's outcome as the unit's result: its prediction, its error row, or both."""
    from benchmint.models import ChatReply
    from benchmint.models.call import UNPARSEABLE

    if isinstance(outcome, ChatReply):
        return {"prediction": _prediction(bench, unit, setting, outcome.text, outcome.completion_tokens,
                                          outcome.cached, outcome.answer_attempt)}
    problem = {"kind": "model_call", "id": unit.item.id, "repeat": unit.repeat + 1, "cause": outcome.cause,
               "message": outcome.detail, "status": outcome.status, "requests": outcome.requests}
    problem = {k: v for k, v in problem.items() if v is not None}
    if outcome.cause == UNPARSEABLE and outcome.text is not None:
        # The papers' rule: an answer that cannot be read is an empty prediction, scored 0 (and listed).
        return {"prediction": _prediction(bench, unit, setting, outcome.text, None, False, outcome.answer_attempts),
                "problem": problem}
    # A failed call (HTTP status, timeout, budget...) is not done: the next run asks again.
    return {"error": problem["message"] if "message" in problem else problem["cause"], "problem": problem,
            "retry": True}


def _gold_rows(units: list[_Unit]) -> Iterator[dict]:
    seen = set()
    for u in units:
        if u.item.id not in seen:
            seen.add(u.item.id)
            yield u.item.gold()


__all__ = ["BASELINE_MODEL", "EvalConfig", "EvalResult", "evaluate"]
