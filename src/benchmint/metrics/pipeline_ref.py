"""Plain reference of the streaming stage of ``benchmint.metrics.pipeline``.

Gold loading and prediction streaming in plain Python, line by line: read,
parse (``pipeline.gold_answer`` / ``read_answer`` over the typed records), extract with
the reference rules, score with ``batch_ref.metrics_from_counts``, write one
row. The compiled form (``benchmint._core.pipeline``) writes the same rows,
byte for byte, and reports the same errors in the same order.
"""

from __future__ import annotations

import numpy as np

from benchmint.metrics import batch_ref
from benchmint.metrics.pipeline import (
    MISSING,
    Columns,
    Gold,
    ScoreConfig,
    _error,
    event_error,
    format_row,
    gold_answer,
    read_answer,
)
from benchmint.records import RecordError, read_items, read_predictions
from benchmint.tasks import AnswerKind


def load_gold(path: str, kind: AnswerKind, fields: tuple[str, ...], symmetry: bool) -> Gold:
    """The gold items; with ``symmetry`` answers are folded by each item's data."""
    reader = GoldReader(path, kind, fields, symmetry)
    for line, item in read_items(path, "gold"):
        reader.add(line, item)
    return reader.gold()


class GoldReader:
    """Gold lines taken one at a time in file order (``add``), as ``load_gold`` reads them; the score by id
    shards (``pipeline_shards``) feeds it the lines of one shard. ``lines`` holds each kept item's line."""

    def __init__(self, path: str, kind: AnswerKind, fields: tuple[str, ...], symmetry: bool) -> None:
        self.path, self.kind, self.fields, self.symmetry = path, kind, fields, symmetry
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.answers: list[tuple] = []
        self.values_per_item: list[list[str]] = []
        self.fold_data: list = []
        self.lines: list[int] = []
        self.errors: list[dict] = []

    def add(self, line: int, item) -> None:
        """One non-blank line: an Item or the RecordError its reading gave."""
        path, kind = self.path, self.kind
        rid = item.id
        if rid is not None and rid in self.index:  # a repeated id first, whatever else is wrong with the line
            self.errors.append(event_error("duplicate_gold", path, line, rid, None))
            return
        if isinstance(item, RecordError):
            self.errors.append(item.row())
            return
        answer, strata, problem = gold_answer(item, path, line, kind, self.fields)
        if answer is None:
            self.errors.append(problem)
            return
        if self.symmetry:
            try:
                data = kind.check_fold_data(item.value(kind.fold_field), rid)
            except ValueError as exc:
                self.errors.append(_error("missing_symmetry", str(exc), path, line, id=rid))
                return
            answer = kind.fold(answer, data)
            self.fold_data.append(data)
        if problem:
            self.errors.append(problem)
        self.index[rid] = len(self.ids)
        self.ids.append(rid)
        self.answers.append(answer)
        self.values_per_item.append(strata)
        self.lines.append(line)

    def strata(self) -> dict[str, tuple[np.ndarray, list[str]]]:
        """Per field: each item's code into the field's values in sorted order, and those values."""
        codes = {}
        for f, name in enumerate(self.fields):
            order = sorted({v[f] for v in self.values_per_item})
            code = {v: i for i, v in enumerate(order)}
            codes[name] = (np.array([code[v[f]] for v in self.values_per_item], dtype=np.int64), order)
        return codes

    def gold(self) -> Gold:
        return Gold(self.path, len(self.ids), self.strata(), self.errors, ids=self.ids, index=self.index,
                    answers=self.answers, fold_data=self.fold_data if self.symmetry else None)


class ColumnBuilder:
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


def stream(pred_paths, gold: Gold, cfg: ScoreConfig, out, errors: list[dict],
           progress) -> tuple[Columns, list[set]]:
    """Read, extract, score and write every prediction with plain Python."""
    builder = ColumnBuilder()
    seen: list[set] = []
    for path in pred_paths:
        path = str(path)
        for line, pred in read_predictions(path):
            progress(1)
            if isinstance(pred, RecordError):
                errors.append(pred.row())
                continue
            # Problems of a line that is not kept are not reported twice.
            line_errors: list[dict] = []
            p = read_answer(pred, cfg.kind, path, line, line_errors)
            if p is None:
                errors.extend(line_errors)
                continue
            gi = gold.index.get(p.rid)
            if gi is None:
                errors.append(event_error("unknown_id", path, line, p.rid, p.model))
                continue
            m = builder.model_code(p.model)
            if m == len(seen):
                seen.append(set())
            if gi in seen[m]:
                errors.append(event_error("duplicate_prediction", path, line, p.rid, p.model))
                continue
            errors.extend(line_errors)
            seen[m].add(gi)
            g = gold.answers[gi]
            # The row shows the answer as read; with symmetry, it is compared after folding.
            compared = cfg.kind.fold(p.answer, gold.fold_data[gi]) if gold.fold_data is not None else p.answer
            tp = len(set(compared) & set(g))
            metrics = batch_ref.metrics_from_counts(tp, len(compared), len(g), cfg.sip_lambda, cfg.sip_gamma)
            out.write(format_row(p.rid, p.model, p.answer, cfg.kind, p.status, metrics) + "\n")
            builder.add(model=m, gold_idx=gi, tp=tp, n_pred=len(compared), n_gold=len(g), status=p.status,
                        confidence=p.confidence, difficulty=p.difficulty, tokens=p.tokens)
    return builder.build(), seen


def append_missing(cols: Columns, seen: list[set], gold: Gold, cfg: ScoreConfig, out, errors: list[dict]) -> Columns:
    extra: dict[str, list] = {k: [] for k in ("model", "gold_idx", "n_gold")}
    for m, name in enumerate(cols.models):
        for gi, rid in enumerate(gold.ids):
            if gi in seen[m]:
                continue
            g = gold.answers[gi]
            metrics = batch_ref.metrics_from_counts(0, 0, len(g), cfg.sip_lambda, cfg.sip_gamma)
            out.write(format_row(rid, name, (), cfg.kind, MISSING, metrics) + "\n")
            errors.append(event_error("missing_prediction", gold.path, None, rid, name))
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
