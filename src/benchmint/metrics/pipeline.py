"""Score prediction files against a gold file: PRED.jsonl + GOLD.jsonl -> scores.jsonl, summary.json, errors.jsonl.

Stages: load gold -> stream predictions (read, extract, score, write one row
each) -> add rows for gold items a model never answered -> aggregate by
model and strata -> write the summary. The streaming stage has a compiled
form and a reference form; both produce the same rows, byte for byte, and
the same columns.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmint.io import InputError, atomic_write, dumps, iter_jsonl
from benchmint.metrics import reference
from benchmint.metrics.aggregate import bootstrap_ci, group_counts, triple_keys, unpack_triples
from benchmint.metrics.batch import DEFAULT_SIP_GAMMA, DEFAULT_SIP_LAMBDA, check_params, score_counts
from benchmint.metrics.behaviour import PersonalityRules, calibration, personality
from benchmint.metrics.encode import AnswerError, check_task, normalize
from benchmint.metrics.extract import extract

MEAN_METRICS = ("em", "spc", "sip_f1", "jaccard", "precision", "recall", "f1", "j_pen", "f1_pen")
PRIMARY_METRIC = {"mcq": "sip_f1", "hkl": "jaccard"}
DEFAULT_MODEL = "default"
MISSING_STRATUM = "(missing)"
OK, UNPARSED, MISSING = 0, 1, 2
STATUS_NAMES = ("ok", "unparsed", "missing")


@dataclass
class ScoreConfig:
    task: str
    sip_lambda: float = DEFAULT_SIP_LAMBDA
    sip_gamma: float = DEFAULT_SIP_GAMMA
    by: tuple[str, ...] = ()
    workers: int = 1
    n_boot: int = 1000
    seed: int = 0
    progress: bool = False
    personality_rules: PersonalityRules = field(default_factory=PersonalityRules)

    def __post_init__(self) -> None:
        check_task(self.task)
        self.sip_lambda, self.sip_gamma = check_params(self.sip_lambda, self.sip_gamma)
        if self.n_boot < 1000:
            raise ValueError(f"n_boot must be >= 1000 for stable 95% intervals, got {self.n_boot}")
        if self.workers == 0 or self.workers < -1:
            raise ValueError("workers must be -1 (all cores) or >= 1")
        self.by = tuple(dict.fromkeys(self.by))


@dataclass
class Gold:
    path: str
    ids: list[str]
    index: dict[str, int]
    answers: list[tuple]
    strata: dict[str, tuple[np.ndarray, list[str]]]  # field -> (code per item, values)
    errors: list[dict]


@dataclass
class Columns:
    """One entry per scored row, in the order of scores.jsonl."""

    models: list[str]
    model: np.ndarray
    gold_idx: np.ndarray
    tp: np.ndarray
    n_pred: np.ndarray
    n_gold: np.ndarray
    status: np.ndarray
    confidence: np.ndarray
    difficulty: np.ndarray
    tokens: np.ndarray


def _error(kind: str, message: str, file: str, line: int | None = None, **extra) -> dict:
    row = {"kind": kind, "message": message, "file": file}
    if line is not None:
        row["line"] = line
    row.update({k: v for k, v in extra.items() if v is not None})
    return row


def _stratum_value(value) -> str:
    return value if isinstance(value, str) else dumps(value)


def load_gold(path: str | os.PathLike, task: str, by: tuple[str, ...] = ()) -> Gold:
    path = str(path)
    ids: list[str] = []
    index: dict[str, int] = {}
    answers: list[tuple] = []
    metas: list[dict] = []
    errors: list[dict] = []
    for line, obj, err in iter_jsonl(path, "gold"):
        if err:
            errors.append(_error("malformed_json", err, path, line))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            errors.append(_error("missing_id", 'a gold record needs a string "id"', path, line))
            continue
        rid = obj["id"]
        if rid in index:
            errors.append(_error("duplicate_id", f"id {rid!r} already seen on an earlier line; first kept", path, line, id=rid))
            continue
        if "answer" not in obj:
            errors.append(_error("missing_answer", f'gold record {rid!r} has no "answer"', path, line, id=rid))
            continue
        try:
            answer = normalize(obj["answer"], task)
        except AnswerError as exc:
            errors.append(_error("wrong_kind", f"gold answer of {rid!r} is not a {task} answer: {exc}", path, line, id=rid))
            continue
        meta = obj.get("meta", {})
        if not isinstance(meta, dict):
            errors.append(_error("bad_field", f'"meta" of {rid!r} must be an object; ignored', path, line, id=rid))
            meta = {}
        index[rid] = len(ids)
        ids.append(rid)
        answers.append(answer)
        metas.append(meta)
    strata = {}
    for name in by:
        if name == "model":
            continue  # every model gets its own block anyway
        values: dict[str, int] = {}
        codes = np.array([values.setdefault(_stratum_value(m[name]) if name in m else MISSING_STRATUM, len(values))
                          for m in metas], dtype=np.int64)
        # Recode so value codes follow sorted value order (deterministic output order).
        order = sorted(values, key=str)
        remap = np.array([order.index(v) for v in values], dtype=np.int64)
        strata[name] = (remap[codes] if len(codes) else codes, order)
    return Gold(path, ids, index, answers, strata, errors)


def answer_json(answer: tuple, task: str) -> list:
    return list(answer) if task == "mcq" else [list(h) for h in answer]


def format_row(rid: str, model: str, answer: tuple, task: str, status: int, metrics: dict) -> str:
    row = dict(metrics)
    row.update(id=rid, model=model, answer=answer_json(answer, task), status=STATUS_NAMES[status],
               parse_ok=status == OK)
    return dumps(row)


def _optional_number(obj: dict, key: str, lo: float, hi: float) -> tuple[float, str | None]:
    if key not in obj or obj[key] is None:
        return math.nan, None
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi):
        return math.nan, f'"{key}" must be a number in [{lo}, {hi}], got {v!r}; ignored'
    return float(v), None


class _ColumnBuilder:
    def __init__(self) -> None:
        self.models: dict[str, int] = {}
        self.cols: dict[str, list] = {k: [] for k in ("model", "gold_idx", "tp", "n_pred", "n_gold", "status",
                                                      "confidence", "difficulty", "tokens")}

    def model_code(self, name: str) -> int:
        return self.models.setdefault(name, len(self.models))

    def add(self, **values) -> None:
        for k, v in values.items():
            self.cols[k].append(v)

    def build(self) -> Columns:
        dt = {"confidence": np.float64, "difficulty": np.float64, "tokens": np.float64, "status": np.uint8}
        arrays = {k: np.array(v, dtype=dt.get(k, np.int32)) for k, v in self.cols.items()}
        return Columns(models=list(self.models), **arrays)


@dataclass
class ParsedPrediction:
    rid: str
    model: str
    answer: tuple
    status: int
    confidence: float
    difficulty: float
    tokens: float


def parse_prediction(obj, task: str, path: str, line: int, errors: list[dict]) -> ParsedPrediction | None:
    """One decoded prediction line -> its answer, or None with the problem appended to ``errors``.

    Shared by the reference stream and, for the lines it does not decide
    itself, the compiled stream.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        errors.append(_error("missing_id", 'a prediction needs a string "id"', path, line))
        return None
    rid = obj["id"]
    model = obj.get("model", DEFAULT_MODEL)
    if not isinstance(model, str):
        errors.append(_error("bad_field", '"model" must be a string', path, line, id=rid))
        return None
    if "answer" in obj:
        try:
            answer, status = normalize(obj["answer"], task), OK
        except AnswerError as exc:
            errors.append(_error("wrong_kind", f"answer is not a {task} answer: {exc}", path, line, id=rid, model=model))
            return None
    elif isinstance(obj.get("output"), str):
        parsed = extract(obj["output"], task)
        try:
            answer, status = (normalize(parsed, task), OK) if parsed is not None else ((), UNPARSED)
        except AnswerError:  # e.g. an index beyond the packable range: the output is unusable
            answer, status = (), UNPARSED
    else:
        errors.append(_error("missing_answer", 'a prediction needs "output" (text) or "answer" (list)', path, line,
                             id=rid, model=model))
        return None
    optional = {}
    for key, hi in (("confidence", 1.0), ("difficulty", 1.0), ("tokens", math.inf)):
        optional[key], problem = _optional_number(obj, key, 0.0, hi)
        if problem:
            errors.append(_error("bad_field", problem, path, line, id=rid, model=model))
    return ParsedPrediction(rid, model, answer, status, **optional)


def _stream_reference(pred_paths, gold: Gold, cfg: ScoreConfig, out, errors: list[dict], progress) -> tuple[Columns, list[set]]:
    """Read, extract, score and write every prediction with plain Python."""
    builder = _ColumnBuilder()
    seen: list[set] = []
    for path in pred_paths:
        path = str(path)
        for line, obj, err in iter_jsonl(path, "predictions"):
            progress(1)
            if err:
                errors.append(_error("malformed_json", err, path, line))
                continue
            # Problems of a line that is not kept are not reported twice.
            line_errors: list[dict] = []
            p = parse_prediction(obj, cfg.task, path, line, line_errors)
            if p is None:
                errors.extend(line_errors)
                continue
            gi = gold.index.get(p.rid)
            if gi is None:
                errors.append(_error("unknown_id", f"id {p.rid!r} is not in the gold file", path, line, id=p.rid, model=p.model))
                continue
            m = builder.model_code(p.model)
            if m == len(seen):
                seen.append(set())
            if gi in seen[m]:
                errors.append(_error("duplicate_id", f"second prediction for id {p.rid!r} of model {p.model!r}; first kept",
                                     path, line, id=p.rid, model=p.model))
                continue
            errors.extend(line_errors)
            seen[m].add(gi)
            g = gold.answers[gi]
            tp = len(set(p.answer) & set(g))
            metrics = reference.metrics_from_counts(tp, len(p.answer), len(g), cfg.sip_lambda, cfg.sip_gamma)
            out.write(format_row(p.rid, p.model, p.answer, cfg.task, p.status, metrics) + "\n")
            builder.add(model=m, gold_idx=gi, tp=tp, n_pred=len(p.answer), n_gold=len(g), status=p.status,
                        confidence=p.confidence, difficulty=p.difficulty, tokens=p.tokens)
    return builder.build(), seen


def _append_missing(cols: Columns, seen: list[set], gold: Gold, cfg: ScoreConfig, out, errors: list[dict]) -> Columns:
    extra: dict[str, list] = {k: [] for k in ("model", "gold_idx", "n_gold")}
    for m, name in enumerate(cols.models):
        for gi, rid in enumerate(gold.ids):
            if gi in seen[m]:
                continue
            g = gold.answers[gi]
            metrics = reference.metrics_from_counts(0, 0, len(g), cfg.sip_lambda, cfg.sip_gamma)
            out.write(format_row(rid, name, (), cfg.task, MISSING, metrics) + "\n")
            errors.append(_error("missing_prediction", f"model {name!r} has no prediction for id {rid!r}; scored as empty",
                                 gold.path, id=rid, model=name))
            extra["model"].append(m)
            extra["gold_idx"].append(gi)
            extra["n_gold"].append(len(g))
    k = len(extra["model"])
    if not k:
        return cols
    cat = lambda a, b, dt: np.concatenate([a, np.asarray(b, dtype=dt)])  # noqa: E731
    nan = np.full(k, np.nan)
    return Columns(
        models=cols.models,
        model=cat(cols.model, extra["model"], np.int32),
        gold_idx=cat(cols.gold_idx, extra["gold_idx"], np.int32),
        tp=cat(cols.tp, np.zeros(k), np.int32),
        n_pred=cat(cols.n_pred, np.zeros(k), np.int32),
        n_gold=cat(cols.n_gold, extra["n_gold"], np.int32),
        status=cat(cols.status, np.full(k, MISSING), np.uint8),
        confidence=np.concatenate([cols.confidence, nan]),
        difficulty=np.concatenate([cols.difficulty, nan]),
        tokens=np.concatenate([cols.tokens, nan]),
    )


def _block_rng(seed: int, path: str) -> np.random.Generator:
    # Each block's resamples depend only on the seed and the block's name, so adding
    # a --by field never changes another block's interval.
    return np.random.default_rng([seed, zlib.crc32(path.encode("utf-8"))])


def _blocks(group: np.ndarray, n_groups: int, cols: Columns, keys: np.ndarray, base: int, cfg: ScoreConfig,
            names: list[str]) -> list[dict | None]:
    """Summary block for each group (None for empty groups)."""
    g_ids, g_keys, g_counts = group_counts(group, keys, n_groups, base ** 3)
    n_items = np.bincount(group, minlength=n_groups)
    n_ok = np.bincount(group, weights=(cols.status == OK), minlength=n_groups)
    n_missing = np.bincount(group, weights=(cols.status == MISSING), minlength=n_groups)
    uniq_keys, inverse = np.unique(g_keys, return_inverse=True)
    tp, n_pred, n_gold = unpack_triples(uniq_keys, base)
    per_triple = score_counts(tp, n_pred, n_gold, sip_lambda=cfg.sip_lambda, sip_gamma=cfg.sip_gamma)
    values = np.column_stack([per_triple[m] for m in MEAN_METRICS]
                             + [n_pred.astype(np.float64), per_triple["over_predicted"].astype(np.float64)])
    starts = np.searchsorted(g_ids, np.arange(n_groups + 1))
    out: list[dict | None] = []
    for gid in range(n_groups):
        if n_items[gid] == 0:
            out.append(None)
            continue
        sl = slice(starts[gid], starts[gid + 1])
        counts, vals = g_counts[sl], values[inverse[sl]]
        mean, low, high = bootstrap_ci(counts, vals[:, : len(MEAN_METRICS)], cfg.n_boot, _block_rng(cfg.seed, names[gid]))
        n = int(n_items[gid])
        out.append({
            "n": n,
            "metrics": {m: {"mean": float(mean[i]), "ci95": [float(low[i]), float(high[i])]} for i, m in enumerate(MEAN_METRICS)},
            "parse_success_rate": float(n_ok[gid] / n),
            "n_missing": int(n_missing[gid]),
            "mean_pred_size": float(counts @ vals[:, -2] / n),
            "over_prediction_rate": float(counts @ vals[:, -1] / n),
        })
    return out


def summarize(cols: Columns, gold: Gold, cfg: ScoreConfig) -> dict:
    models = cols.models
    keys, base = triple_keys(cols.tp, cols.n_pred, cols.n_gold)
    model = cols.model.astype(np.int64)
    overall = _blocks(model, len(models), cols, keys, base, cfg, [f"model={m}" for m in models])
    by_blocks = {}
    for name, (codes, values) in gold.strata.items():
        group = model * len(values) + codes[cols.gold_idx]
        labels = [f"model={m}/{name}={v}" for m in models for v in values]
        by_blocks[name] = (_blocks(group, len(models) * len(values), cols, keys, base, cfg, labels), values)
    result = {}
    for m, name in enumerate(models):
        block = dict(overall[m])
        sel = cols.model == m
        block["by"] = {
            fname: {v: b for v, b in zip(values, blocks[m * len(values):(m + 1) * len(values)]) if b is not None}
            for fname, (blocks, values) in by_blocks.items()
        }
        metrics = block["metrics"]
        block["personality"] = personality(
            cols.tp[sel], cols.n_pred[sel], cols.n_gold[sel], metrics["spc"]["mean"], metrics["sip_f1"]["mean"],
            metrics["precision"]["mean"], metrics["recall"]["mean"], cfg.personality_rules)
        score = score_counts(cols.tp[sel], cols.n_pred[sel], cols.n_gold[sel], sip_lambda=cfg.sip_lambda,
                             sip_gamma=cfg.sip_gamma)[PRIMARY_METRIC[cfg.task]]
        calib = calibration(score, cols.confidence[sel], cols.difficulty[sel], cols.tokens[sel])
        if calib is not None:
            calib["score_metric"] = PRIMARY_METRIC[cfg.task]
            block["calibration"] = calib
        block["unparsed_ids"] = [gold.ids[i] for i in cols.gold_idx[sel & (cols.status == UNPARSED)].tolist()]
        result[name] = block
    return result


@dataclass
class ScoreResult:
    summary: dict
    errors: list[dict]
    out_dir: Path

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


class _Progress:
    def __init__(self, enabled: bool, paths) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(desc="scoring", unit=" preds", unit_scale=True, mininterval=0.25, leave=False)

    def __call__(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def score_files(pred_paths, gold_path, out_dir, cfg: ScoreConfig) -> ScoreResult:
    """Score one or more prediction files; writes scores.jsonl, summary.json and errors.jsonl into ``out_dir``."""
    if isinstance(pred_paths, (str, os.PathLike)):
        pred_paths = [pred_paths]
    for p in pred_paths:
        if not Path(p).is_file():
            raise InputError(f"predictions file not found: {p}")
    gold = load_gold(gold_path, cfg.task, cfg.by)
    if not gold.ids:
        raise InputError(f"gold file {gold_path} has no usable records ({len(gold.errors)} errors)")
    out_dir = Path(out_dir)
    errors = list(gold.errors)
    stream = _stream_reference
    progress = _Progress(cfg.progress, pred_paths)
    try:
        with atomic_write(out_dir / "scores.jsonl") as out:
            cols, seen = stream(pred_paths, gold, cfg, out, errors, progress)
            cols = _append_missing(cols, seen, gold, cfg, out, errors)
    finally:
        progress.close()
    if not cols.models:
        raise InputError(f"no usable predictions in {', '.join(map(str, pred_paths))} ({len(errors)} errors)")
    models = summarize(cols, gold, cfg)
    counts: dict[str, int] = {}
    for e in errors:
        counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    summary = {
        "task": cfg.task,
        "params": {"sip_lambda": cfg.sip_lambda, "sip_gamma": cfg.sip_gamma, "bootstrap_resamples": cfg.n_boot,
                   "seed": cfg.seed, "by": list(cfg.by)},
        "gold": {"file": str(gold_path), "n_items": len(gold.ids)},
        "predictions": [str(p) for p in pred_paths],
        "errors": {"count": len(errors), "by_kind": counts, "file": "errors.jsonl"},
        "models": models,
    }
    with atomic_write(out_dir / "errors.jsonl") as fh:
        for e in errors:
            fh.write(dumps(e) + "\n")
    with atomic_write(out_dir / "summary.json") as fh:
        json.dump(summary, fh, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    return ScoreResult(summary, errors, out_dir)
