"""Items -> model answers: one benchmark's items through a model, as ``benchmint eval`` runs them.

A unit is an (item, repeat) in the run's setting, keyed by the item's id, the
setting, the repeat and the content key of its model request (the endpoint,
model, messages with images by content hash, sampling settings, seed, schema):
what is recorded follows the item, so every item gets its own prediction or
error row under its own id. The model call follows the request: units whose
requests coincide (a blind setting, a question asked twice) share one call,
sent once (``benchmint.models.shared.SharedCallExecutor``), and a rerun finds
its reply in the engine's reply cache. Units go through the one runner
(``benchmint.run.run_units``); a finished unit's prediction is committed to the
run's ledger before the next one is taken, so a killed run loses only the
requests in flight and a rerun asks nothing that was answered.

Prompts are built twice and held never: once while the items are read, to key
each unit (images read and decoded whole, so an unreadable image is that
item's ``bad_prompt`` row), and again as each call's turn comes (the items
file is read again as the engine takes requests), so memory does not grow with
the number of items or the size of their images.

A unit whose call failed (HTTP status, timeout, budget, ...) is an error row
and is recorded as one to try again: the next run asks again. A budget stop
ends the run cleanly: the calls not started are ``budget`` rows. Ctrl-C stops
it the same way, with the outputs of the finished units written. Outputs,
error rows included, are written from the ledger in item order, so they do
not depend on completion order or interruptions:

    predictions.jsonl   {id, model, output, confidence, difficulty, tokens, cached, attempts, setting, repeat}
    gold.jsonl          the items' gold records (``benchmint score --gold``)
    errors.jsonl        every item, prompt and call that failed, with its cause
    run.json            benchmark, setting, protocol, prompt hashes, model, counts, tokens and cost

One ``--out`` holds one run (benchmark, model, setting): a second, different
one is refused, and so is a second eval writing to it at the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmint import tasks
from benchmint.benchmarks.base import Benchmark, EvalItem, ImagePart, ItemError, Prompt, PromptError
from benchmint.io import atomic_write, dumps
from benchmint.records import Prediction
from benchmint.run import Ledger, SerialExecutor, Unit, content_key, run_units
from benchmint.run.runner import LEDGER_NAME

BASELINE_MODEL = "benchmint-simulator"
CACHE_NAME = "requests.sqlite"
LOCK_NAME = "eval.lock"


@dataclass(frozen=True)
class EvalConfig:
    model: str
    setting: str | None = None
    limit: int | None = None
    repeats: int = 1
    # Sent with every request when given (repeat r is sent seed + r; with several repeats and no seed, 0 + r).
    seed: int | None = None
    system: str | None = None  # a system prompt replacing the benchmark's
    progress: bool = False
    # No image reaches the model (the prompt text is the setting's own): the "blind" baseline of any benchmark,
    # and the way to run a text-only model. Predictions carry the setting as "<setting>-blind".
    blind: bool = False
    # Folders outside the items file's own whose files the items may name (images, context files, CIFs).
    allow_paths_outside: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if self.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {self.repeats}")
        for folder in self.allow_paths_outside:
            if not Path(folder).is_dir():
                raise ValueError(f"--allow-paths-outside: not a folder: {folder}")


@dataclass
class EvalResult:
    out_dir: Path
    items: int = 0
    predictions: int = 0
    skipped: int = 0
    errors: list[dict] = field(default_factory=list)
    run: dict = field(default_factory=dict)
    interrupted: bool = False  # Ctrl-C: the finished units are written, the others wait for a rerun
    not_done: int = 0  # units without a result (an interrupted run)

    @property
    def exit_code(self) -> int:
        return 1 if self.errors or self.not_done else 0


@dataclass(frozen=True, slots=True)
class _Unit:
    id: str
    location: str
    ordinal: int  # the item's place among the usable items: its prompt is built again from it
    repeat: int  # 0-based
    key: str  # what is recorded: the item, setting and repeat (and the request that answers it)
    call: str | None  # what may be shared: the request's content key (None for the baseline)
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


def _seed(cfg: EvalConfig, repeat: int) -> int | None:
    # Repeats differ by seed only, so each is its own cached call; a seed given is sent (and keyed) in any case.
    if cfg.repeats > 1:
        return (cfg.seed or 0) + repeat
    return cfg.seed


def _request(bench: Benchmark, prompt: Prompt, cfg: EvalConfig, repeat: int):
    from benchmint.models import ChatRequest

    proto = bench.protocol
    extra: dict[str, Any] = dict(proto.extra)
    if proto.thinking_budget is not None:
        extra.setdefault("thinking_budget", proto.thinking_budget)
    return ChatRequest(model=cfg.model, messages=_messages(prompt, cfg.system, proto.image_max_side, cfg.blind),
                       temperature=proto.temperature, max_tokens=proto.max_tokens, seed=_seed(cfg, repeat),
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
    pred = Prediction(unit.id, unit.model, output=text, confidence=fields.pop("confidence", None),
                      difficulty=fields.pop("difficulty", None), tokens=tokens, cached=cached, attempts=attempts,
                      extra={**fields, "setting": setting, "repeat": unit.repeat + 1})
    return pred.to_json()


def _items(bench: Benchmark, path: str | os.PathLike, setting: str, cfg: EvalConfig,
           errors: list[dict]) -> Iterator[EvalItem]:
    n = 0
    for _location, item in bench.read_items(Path(path), setting, allowed=cfg.allow_paths_outside):
        if isinstance(item, ItemError):
            row = item.to_json()
            errors.append({"kind": "bad_item", "location": row["location"], "field": row["field"],
                           "message": row["error"]})
            continue
        yield item
        n += 1
        if cfg.limit is not None and n >= cfg.limit:
            return


def _unit_key(item_id: str, label: str, repeat: int, call: str) -> str:
    return content_key(dumps(["eval", item_id, label, repeat, call]).encode("utf-8", "surrogatepass"))


def _plan(bench: Benchmark, items_path, setting: str, label: str, cfg: EvalConfig, model: str, engine,
          errors: list[dict], gold_path: Path) -> tuple[list[_Unit], dict[int, EvalItem]]:
    """One unit per (item, repeat); items and prompts that fail are error rows. Writes gold.jsonl as it reads.

    Returns the units and, for the baseline (no engine), the items it needs by ordinal."""
    units: list[_Unit] = []
    kept: dict[int, EvalItem] = {}
    with atomic_write(gold_path) as gold:
        for ordinal, item in enumerate(_items(bench, items_path, setting, cfg, errors)):
            if engine is None:
                kept[ordinal] = item
                keys = [content_key(json.dumps([BASELINE_MODEL, setting, item.id] + ([r] if r else [])).encode())
                        for r in range(cfg.repeats)]
                calls: list[str | None] = [None] * cfg.repeats
            else:
                try:
                    prompt = bench.prompt(item, setting)
                    calls = [engine.key(_request(bench, prompt, cfg, r)) for r in range(cfg.repeats)]
                except (PromptError, ValueError) as exc:  # an image that does not decode, a template, ...
                    errors.append({"kind": "bad_prompt", "location": item.location, "id": item.id,
                                   "message": str(exc)})
                    continue
                del prompt  # built to be keyed: built again when its turn comes
                keys = [_unit_key(item.id, label, r, c) for r, c in enumerate(calls) if c is not None]
            gold.write(dumps(item.gold()) + "\n")
            for r in range(cfg.repeats):
                units.append(_Unit(item.id, item.location, ordinal, r, keys[r], calls[r],
                                   model if cfg.repeats == 1 else f"{model}@{r + 1}"))
    return units, kept


def _builder(bench: Benchmark, items_path, setting: str, cfg: EvalConfig, engine, units: list[_Unit]):
    """The requests of the units wanted (in unit order), built as the engine takes them: the items file is read
    again alongside, and each prompt built when its item comes; a request that no longer has the key the unit was
    planned with (a file changed meanwhile) is a failure, never a different call under the unit's name."""
    from benchmint.models.call import BAD_REQUEST, Failure

    def build(wanted: Sequence[tuple[int, tuple]]) -> Iterator[tuple[int, Any]]:
        stream = enumerate(_items(bench, items_path, setting, cfg, []))
        at, item, prompt, problem = -1, None, None, None
        for i, (call, k) in wanted:
            u = units[k]
            while at < u.ordinal:
                nxt = next(stream, None)
                if nxt is None:
                    break
                at, item = nxt
                if at == u.ordinal:
                    try:
                        prompt, problem = bench.prompt(item, setting, verify=False), None
                    except (PromptError, ValueError) as exc:
                        prompt, problem = None, str(exc)
            if at != u.ordinal or item is None or item.id != u.id:
                yield i, Failure(call, BAD_REQUEST, f"{u.location}: item {u.id!r} is no longer there: the items "
                                 "file changed during the run", stage="eval", model=cfg.model)
                continue
            if prompt is None:
                yield i, Failure(call, BAD_REQUEST, problem or "no prompt", stage="eval", model=cfg.model)
                continue
            try:
                request = _request(bench, prompt, cfg, u.repeat)
            except ValueError as exc:
                yield i, Failure(call, BAD_REQUEST, f"{u.location}: {exc}", stage="eval", model=cfg.model)
                continue
            if engine.key(request) != call:
                yield i, Failure(call, BAD_REQUEST, f"{u.location}: the prompt of item {u.id!r} changed during the "
                                 "run (a file it reads was modified); rerun to ask it", stage="eval", model=cfg.model)
                continue
            yield i, request

    return build


def _redo(engine) -> Callable[[dict], bool] | None:
    """Which recorded results a rerun does again: all with --refresh; answers that ran out of answer attempts
    when more are allowed now."""
    if engine is None:
        return None
    if engine.refresh:
        return lambda result: True
    from benchmint.models.call import UNPARSEABLE

    n = engine.answer_attempts

    def short_of_attempts(result: dict) -> bool:
        problem = result.get("problem") or {}
        return problem.get("cause") == UNPARSEABLE and (problem.get("answer_attempts") or 0) < n

    return short_of_attempts


class _CtrlC:
    """Ctrl-C while the calls run, turned into a clean stop.

    Python raises KeyboardInterrupt wherever the main thread happens to be; inside one of the engine's tasks that
    leaves a task failed with it, reported as a traceback at exit. So while the event loop runs, Ctrl-C asks it to
    stop at its next turn instead (the engine then cancels its calls as on any early end); elsewhere it raises
    KeyboardInterrupt as usual. A second Ctrl-C is Python's own.
    """

    def __init__(self) -> None:
        self.hit = False
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum, frame) -> None:
        self.hit = True
        signal.signal(signal.SIGINT, self._previous)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise KeyboardInterrupt from None
        loop.stop()  # run_until_complete then raises RuntimeError("Event loop stopped before Future completed.")


@contextlib.contextmanager
def _out_lock(out: Path) -> Iterator[None]:
    """One eval at a time per output folder: a second one would ask every item again and race on the files."""
    import fcntl

    fh = open(out / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise ValueError(f"{out} is in use by another benchmint eval ({holder}); wait for it to end, or give "
                             "another --out") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fh.close()  # releases the lock (so does the process's death)


def _claim(ledger: Ledger, out: Path, record: dict) -> None:
    """Refuse a run whose predictions would replace another run's in ``out``.

    predictions.jsonl, errors.jsonl and run.json describe one run; a second model (or setting) into the same
    folder would replace the first one's rows without a word. Each run gets its own --out, and ``benchmint
    score`` takes the predictions files of several runs to compare them."""
    stored = ledger.note("run")
    if stored is None or json.loads(stored) == record:
        return
    was = json.loads(stored)
    raise ValueError(f"{out} holds the run of {was['benchmark']} with model {was['model']!r} in setting "
                     f"{was['setting']}, not {record['model']!r} in {record['setting']}: give this run its own --out "
                     "(benchmint score PRED1 PRED2 ... compares runs)")


def evaluate(items_path: str | os.PathLike, out_dir: str | os.PathLike, bench: Benchmark, cfg: EvalConfig,
             engine=None) -> EvalResult:
    """Run ``bench``'s items through ``engine`` (a ``benchmint.models.Engine``), or through the benchmark's own
    deterministic baseline when ``engine`` is None; write the outputs into ``out_dir``.

    Ctrl-C (KeyboardInterrupt) while the calls run ends the run with the finished units written
    (``EvalResult.interrupted``)."""
    setting = bench.check_setting(cfg.setting)
    label = setting + BLIND_SUFFIX if cfg.blind else setting  # the setting the predictions carry
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = cfg.model if engine is not None else BASELINE_MODEL
    if engine is None and not bench.has_baseline:
        raise ValueError(f"{bench.name} has no deterministic baseline; give a model and --base-url")
    record = {"benchmark": bench.name, "model": model, "setting": label}
    with _out_lock(out), Ledger(out / LEDGER_NAME, "eval") as ledger:
        _claim(ledger, out, record)
        errors: list[dict] = []
        units, kept = _plan(bench, items_path, setting, label, cfg, model, engine, errors, out / "gold.jsonl")
        result = EvalResult(out)
        result.items = len({u.id for u in units})
        work: Callable[..., dict]
        if engine is None:
            executor: Any = SerialExecutor()
            runs = [Unit(u.key, (k,), u.id) for k, u in enumerate(units)]
            work = lambda k: _baseline(bench, units[k], kept[units[k].ordinal], label)  # noqa: E731
        else:
            from benchmint.models.shared import SharedCallExecutor

            # The executor makes each distinct request's call once; work turns its outcome into each unit's result.
            executor = SharedCallExecutor(engine, _builder(bench, items_path, setting, cfg, engine, units),
                                          stage="eval", parse=_parser(bench))
            runs = [Unit(u.key, (u.call, k), u.id) for k, u in enumerate(units)]
            work = lambda outcome, k: _called(bench, units[k], label, outcome)  # noqa: E731
        ctrl_c = _CtrlC()
        try:
            with ctrl_c:
                _, result.skipped = run_units(ledger, runs, work, executor, desc=f"eval {bench.name}",
                                              progress=cfg.progress, redo=_redo(engine), read_back=False)
        except KeyboardInterrupt:
            result.interrupted = True
        except RuntimeError:
            if not ctrl_c.hit:  # not the loop that Ctrl-C stopped
                raise
            result.interrupted = True
        # Outputs from the ledger in unit order: a resumed run writes what an uninterrupted one would.
        result.predictions, result.not_done = _write_outputs(out, ledger, units, errors)
        if result.predictions:
            ledger.set_note("run", json.dumps(record, sort_keys=True))
    result.errors = errors
    result.run = {
        **bench.run_record(setting),
        "items_file": str(items_path),
        "blind": cfg.blind,
        "model": model,
        "repeats": cfg.repeats,
        "seed": cfg.seed,
        "seeds_sent": [_seed(cfg, r) for r in range(cfg.repeats)] if engine is not None else None,
        "limit": cfg.limit,
        "system_prompt": cfg.system is not None,
        "allow_paths_outside": list(cfg.allow_paths_outside),
        "interrupted": result.interrupted,
        "counts": {"items": result.items, "units": len(units), "predictions": result.predictions,
                   "already_done": result.skipped, "errors": len(errors), "not_done": result.not_done},
        "engine": engine.summary() if engine is not None else None,
    }
    with atomic_write(out / "run.json") as fh:
        json.dump(result.run, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
    return result


def _write_outputs(out: Path, ledger: Ledger, units: list[_Unit], errors: list[dict]) -> tuple[int, int]:
    """predictions.jsonl and errors.jsonl from the ledger, one unit at a time in unit order; ``errors`` (the
    items' and prompts' rows, first in errors.jsonl) gets the units' rows. Returns (predictions, units not done)."""
    predictions = not_done = 0
    with atomic_write(out / "predictions.jsonl") as pf, atomic_write(out / "errors.jsonl") as ef:
        for e in errors:
            ef.write(dumps(e) + "\n")
        for u in units:
            got = ledger.get(u.key)
            if got is None:  # not reached (an interrupted run): the next run does it
                not_done += 1
                continue
            res = got[1]
            if "prediction" in res:
                pf.write(dumps(res["prediction"]) + "\n")
                predictions += 1
            problem = res.get("problem")
            if problem is None and "prediction" not in res:  # the work itself failed, or the ledger is damaged
                problem = {"kind": "unit", "id": u.id, "repeat": u.repeat + 1, "location": u.location,
                           "message": res.get("error", "no result")}
            if problem is not None:
                ef.write(dumps(problem) + "\n")
                errors.append(problem)
    return predictions, not_done


def _baseline(bench: Benchmark, unit: _Unit, item: EvalItem, setting: str) -> dict:
    try:
        reply = bench.baseline_reply(item)
    except (ValueError, OSError) as exc:  # e.g. a CIF the simulator cannot read
        problem = {"kind": "baseline", "id": unit.id, "location": unit.location,
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
    problem = {"kind": "model_call", "id": unit.id, "repeat": unit.repeat + 1, "cause": outcome.cause,
               "message": outcome.detail, "status": outcome.status, "requests": outcome.requests}
    problem = {k: v for k, v in problem.items() if v is not None}
    if outcome.cause == UNPARSEABLE and outcome.text is not None:
        # The papers' rule: an answer that cannot be read is an empty prediction, scored 0 (and listed). The
        # attempts it had are kept: a rerun allowed more asks it again (``_redo``).
        problem["answer_attempts"] = outcome.answer_attempts
        return {"prediction": _prediction(bench, unit, setting, outcome.text, None, False, outcome.answer_attempts),
                "problem": problem}
    # A failed call (HTTP status, timeout, budget...) is not done: the next run asks again.
    return {"error": problem["message"] if "message" in problem else problem["cause"], "problem": problem,
            "retry": True}


__all__ = ["BASELINE_MODEL", "EvalConfig", "EvalResult", "evaluate"]
