"""Score prediction files against a gold file: PRED.jsonl + GOLD.jsonl -> scores.jsonl, summary.json, errors.jsonl.

Stages: load gold -> stream predictions (read, extract, score, write one row
each) -> add rows for gold items a model never answered -> aggregate by
model and strata -> write the summary. The streaming stage has a compiled
form (``benchmint._core.pipeline``) and a reference form (``pipeline_ref``);
both produce the same rows, byte for byte, and the same columns. The compiled
reader hands each line it does not decide to the reference's reading of that
line (counted as a fallback).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmint import _dispatch, tasks
from benchmint.io import InputError, atomic_path, atomic_write, decode_line, dumps, open_input, write_jsonl
from benchmint.metrics.aggregate import (
    DENSE_LIMIT,
    bootstrap_ci,
    group_counts,
    pack_triples,
    triple_base,
    triple_keys,
    unpack_triples,
)
from benchmint.metrics.batch import DEFAULT_SIP_GAMMA, DEFAULT_SIP_LAMBDA, METRIC_NAMES, check_params, score_counts
from benchmint.metrics.behaviour import PersonalityRules, calibration, personality, selection_from_counts
from benchmint.metrics.rowfiles import RowTarget, atomic_rows, check_rows_per_file
from benchmint.parallel import resolve_workers, thread_map
from benchmint.records import ABSENT, Item, Prediction, RecordError, ScoreRow, error_row, lone_surrogate
from benchmint.tasks import AnswerError, AnswerKind

if TYPE_CHECKING:
    from benchmint._core import _GoldIndex

MEAN_METRICS = ("em", "spc", "sip_f1", "jaccard", "precision", "recall", "f1", "j_pen", "f1_pen")
MISSING_STRATUM = "(missing)"
OK, UNPARSED, MISSING = 0, 1, 2
STATUS_NAMES = ("ok", "unparsed", "missing")
ROW_KEYS = tuple(sorted(METRIC_NAMES + ("id", "model", "answer", "status", "parse_ok")))


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
    symmetry: bool = False  # kinds that fold (hkl): compare answers after folding by each item's data
    personality_rules: PersonalityRules = field(default_factory=PersonalityRules)
    # benchmint.metrics.user.UserMetric objects: extra columns in scores.jsonl and extra means in the summary
    user_metrics: tuple = ()
    # "ray": the gold and predictions are read and scored in shards by item id on the connected Ray cluster
    # (pipeline_shards), for inputs larger than one machine's memory
    engine: str = "local"
    # 0: the rows in one scores.jsonl; K > 0: in parts of K rows, scores/part-00000.jsonl, ... (metrics/rowfiles.py)
    rows_per_file: int = 0

    def __post_init__(self) -> None:
        check_rows_per_file(self.rows_per_file)
        if self.engine not in ("local", "ray"):
            raise ValueError(f"engine must be 'local' or 'ray', not {self.engine!r}")
        kind = tasks.get(self.task)
        if kind.scoring != "set":
            raise ValueError(f"answers of kind {kind.name!r} are graded, not scored as sets; "
                             f"set-scored kinds: {', '.join(tasks.names('set'))}")
        self.sip_lambda, self.sip_gamma = check_params(self.sip_lambda, self.sip_gamma)
        if self.n_boot < 1000:
            raise ValueError(f"n_boot must be >= 1000 for stable 95% intervals, got {self.n_boot}")
        resolve_workers(self.workers)
        self.by = tuple(dict.fromkeys(self.by))
        if self.symmetry and kind.fold_field is None:
            foldable = [n for n in tasks.names() if tasks.get(n).fold_field is not None]
            raise ValueError(f"symmetry folding applies to --task {' / '.join(foldable)} only")
        self.user_metrics = tuple(self.user_metrics)
        names = [m.name for m in self.user_metrics]
        taken = sorted(set(names) & set(ROW_KEYS))
        if taken or len(set(names)) != len(names):
            raise ValueError(f"user metric names must be unique and differ from the columns of scores.jsonl: "
                             f"{taken or names}")

    @property
    def kind(self) -> AnswerKind:
        return tasks.get(self.task)


@dataclass
class Gold:
    """The gold items; ``native`` is the compiled index when the compiled path loaded it."""

    path: str
    n_items: int
    strata: dict[str, tuple[np.ndarray, list[str]]]  # field -> (code per item, values in sorted order)
    errors: list[dict]
    ids: list[str] | None = None  # reference form only
    index: dict[str, int] | None = None
    answers: list[tuple] | None = None
    fold_data: list | None = None  # per item, with symmetry folding (e.g. Laue rotations)
    native: _GoldIndex | None = None

    def ids_of(self, indices) -> list[str]:
        indices = np.asarray(indices, dtype=np.int64).tolist()  # one conversion, not an int() an index
        if self.native is not None:
            return self.native.ids_of(indices)
        assert self.ids is not None  # the reference form always has ids
        return [self.ids[i] for i in indices]


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


_error = error_row


def _reads_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def stratum_name(value) -> tuple[str, str | None]:
    """A meta value as a stratum name, or (MISSING_STRATUM, why) when no file could hold it.

    Values that are equal as JSON values share a name and others never do: a string is itself, unless it would
    read as another value (``"1"``, ``"true"``, ``"[1]"``, ``'"a"'``) or is the missing marker, then it is written
    as a JSON string; anything else is its JSON text, an integral number as an integer (1 and 1.0 are one value,
    "1" another, and an item without the key is apart from a literal "(missing)" value).
    """
    if isinstance(value, str):
        where = lone_surrogate(value)
        if where:
            return MISSING_STRATUM, f"holds {where}"
        return (dumps(value) if value == MISSING_STRATUM or _reads_as_json(value) else value), None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    try:
        return dumps(value), None
    except ValueError:  # NaN or an infinity (1e400 reads as one)
        return MISSING_STRATUM, "holds a number that is not finite"


def event_error(kind: str, path: str, line: int | None, rid: str, model: str | None) -> dict:
    """Problems found by the order-dependent pass (shared by the reference and compiled streams)."""
    if kind == "duplicate_gold":
        return _error("duplicate_id", f"id {rid!r} already seen on an earlier line; first kept", path, line, id=rid)
    if kind == "unknown_id":
        return _error("unknown_id", f"id {rid!r} is not in the gold file", path, line, id=rid, model=model)
    if kind == "duplicate_prediction":
        return _error("duplicate_id", f"second prediction for id {rid!r} of model {model!r}; first kept",
                      path, line, id=rid, model=model)
    if kind == "missing_prediction":
        return _error("missing_prediction", f"model {model!r} has no prediction for id {rid!r}; scored as empty",
                      path, line, id=rid, model=model)
    raise ValueError(f"unknown event {kind!r}")


def parse_gold_record(obj, path: str, line: int, kind: AnswerKind, fields: tuple[str, ...]):
    """One decoded gold line -> (id, answer, strata values, problem).

    ``answer`` None means the record is unusable and ``problem`` says why;
    otherwise ``problem`` is a warning (or None) and the record is kept.
    """
    try:
        item = Item.from_json(obj, path, line)
    except RecordError as exc:
        return exc.id, None, None, exc.row()
    return (item.id, *gold_answer(item, path, line, kind, fields))


def gold_answer(item: Item, path: str, line: int, kind: AnswerKind, fields: tuple[str, ...]):
    """An item's answer read as ``kind`` and its strata values -> (answer, strata, problem), as parse_gold_record."""
    rid = item.id
    try:
        answer = kind.normalize(item.answer)
    except AnswerError as exc:
        return None, None, _error("wrong_kind", f"gold answer of {rid!r} is not a {kind.name} answer: {exc}", path,
                                  line, id=rid)
    if not answer:  # every prediction would score 0 against it (or 1 when empty): nothing to measure
        left = " once (000) is left out" if isinstance(item.answer, list) and item.answer else ""
        return None, None, _error("empty_gold", f"gold answer of {rid!r} is empty{left}: {item.answer!r} cannot be "
                                  "scored", path, line, id=rid)
    warning = item.problems[0].row() if item.problems else None  # only "meta" can be left out
    strata, unusable = [], []
    for f in fields:
        value, why = stratum_name(item.meta[f]) if f in item.meta else (MISSING_STRATUM, None)
        strata.append(value)
        if why:
            unusable.append(f"{f!r} {why}")
    if unusable:
        warning = _error("bad_field", f'"meta" of {rid!r}: {"; ".join(unusable)}; counted as {MISSING_STRATUM!r}',
                         path, line, id=rid)
    return answer, strata, warning


def _gold_line(raw: bytes, line: int, path: str, kind: AnswerKind, fields: tuple[str, ...]):
    """The reference's reading of one gold line the compiled loader did not decide."""
    _dispatch.fallback("pipeline")
    obj, err = decode_line(raw)
    if err:
        return None, None, None, _error("malformed_json", err, path, line)
    return parse_gold_record(obj, path, line, kind, fields)


def _strata_fields(by: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for f in by if f != "model")  # every model gets its own block anyway


def load_gold(path: str | os.PathLike, task: str | AnswerKind, by: tuple[str, ...] = (), workers: int = 1,
              symmetry: bool = False) -> Gold:
    """The gold items. With ``symmetry`` (always the reference path) answers are folded by each item's data."""
    kind = tasks.get(task)
    path, fields = str(path), _strata_fields(by)
    if not _dispatch.use_reference("pipeline", available=kind.compiled is not None and not symmetry):
        with open_input(path, "gold"):
            pass  # the same missing-file error as the reference
        native = _dispatch.core().pipeline.load_gold(path, kind.compiled, list(fields), workers,
                                                     partial(_gold_line, path=path, kind=kind, fields=fields),
                                                     event_error)
        return Gold(path, native.n_items, native.strata(), list(native.errors), native=native)
    from benchmint.metrics import pipeline_ref  # the reference path alone

    return pipeline_ref.load_gold(path, kind, fields, symmetry)


def format_row(rid: str, model: str, answer: tuple, kind: AnswerKind, status: int, metrics: dict) -> str:
    row = ScoreRow(id=rid, model=model, answer=kind.to_json(answer), status=STATUS_NAMES[status],
                   parse_ok=status == OK, **metrics)
    return dumps(row.to_json())


@dataclass
class ParsedPrediction:
    rid: str
    model: str
    answer: tuple
    status: int
    confidence: float
    difficulty: float
    tokens: float


def parse_prediction(obj, kind: AnswerKind, path: str, line: int, errors: list[dict]) -> ParsedPrediction | None:
    """One decoded prediction line -> its answer, or None with the problem appended to ``errors``.

    Shared by the reference stream and, for the lines it does not decide
    itself, the compiled stream.
    """
    try:
        pred = Prediction.from_json(obj, path, line)
    except RecordError as exc:
        errors.append(exc.row())
        return None
    return read_answer(pred, kind, path, line, errors)


# The fields of a prediction the scorer reads besides its answer: problems with others are not its concern.
SCORED_FIELDS = ("confidence", "difficulty", "tokens")


def read_answer(pred: Prediction, kind: AnswerKind, path: str, line: int,
                errors: list[dict]) -> ParsedPrediction | None:
    """A prediction's answer read as ``kind`` (given, or extracted from its output), as parse_prediction.

    A given answer that is not of the kind is an error row, and the output is read instead when there is one (a
    null answer beside an output is just no answer); without an output the item is scored as unparsed. An output
    whose answer is not of the kind (an index out of range, a 4-index label that is no Miller-Bravais label) is
    unparsed, with an error row giving the reason.
    """
    answer: tuple | None = None
    if pred.answer is not ABSENT and not (pred.answer is None and pred.output is not None):
        try:
            answer, status = kind.normalize(pred.answer), OK
        except AnswerError as exc:
            errors.append(_error("wrong_kind", f"answer is not a {kind.name} answer: {exc}"
                                 + ("; the output is read instead" if pred.output is not None else "; unparsed"),
                                 path, line, id=pred.id, model=pred.model))
            answer, status = (), UNPARSED
    if answer is None or (status == UNPARSED and pred.output is not None):
        # from_json requires an "output" string when there is no answer; extractors read no answer in None
        parsed = kind.extract(pred.output) if pred.output is not None else None
        try:
            answer, status = (kind.normalize(parsed), OK) if parsed is not None else ((), UNPARSED)
        except AnswerError as exc:
            errors.append(_error("unparsed_answer", f"the answer read from the output is not a {kind.name} answer: "
                                 f"{exc}; unparsed", path, line, id=pred.id, model=pred.model))
            answer, status = (), UNPARSED
    errors.extend(p.row() for p in pred.problems if p.field in SCORED_FIELDS)
    confidence, difficulty, tokens = (math.nan if v is None else float(v)
                                      for v in (pred.confidence, pred.difficulty, pred.tokens))
    return ParsedPrediction(pred.id, pred.model, answer, status, confidence, difficulty, tokens)


def _pred_line(raw: bytes, path: str, line: int, kind: AnswerKind):
    """The reference's reading of one line the compiled stream did not decide: (problems, parsed or None)."""
    _dispatch.fallback("pipeline")
    obj, err = decode_line(raw)
    if err:
        return [_error("malformed_json", err, path, line)], None
    problems: list[dict] = []
    p = parse_prediction(obj, kind, path, line, problems)
    if p is None:
        return problems, None
    return problems, (p.rid, p.model, p.answer, p.status, p.confidence, p.difficulty, p.tokens)


def _stream_compiled(pred_paths, gold: Gold, cfg: ScoreConfig, out: RowTarget, errors: list[dict],
                     progress) -> Columns:
    res = _dispatch.core().pipeline.score_stream(
        [str(p) for p in pred_paths], gold.native, cfg.sip_lambda, cfg.sip_gamma, cfg.workers, str(out.path),
        partial(_pred_line, kind=cfg.kind), event_error, progress, errors, out.rows_per_file)
    out.parts_rows = [rows for rows, _ in res.pop("parts")]
    return Columns(**res)


def _block_rng(seed: int, path: str) -> np.random.Generator:
    # Each block's resamples depend only on the seed and the block's name, so adding
    # a --by field never changes another block's interval.
    return np.random.default_rng([seed, zlib.crc32(path.encode("utf-8"))])


def _user_values(metrics, tp: np.ndarray, n_pred: np.ndarray, n_gold: np.ndarray) -> np.ndarray:
    """(len(tp), len(metrics)) values of the user metrics; ValueError at the first non-finite one."""
    if not metrics:
        return np.empty((len(tp), 0))
    from benchmint.metrics.user import evaluate

    columns = [evaluate(m, tp, n_pred - tp, n_gold - tp, n_gold) for m in metrics]
    for m, col in zip(metrics, columns):
        bad = np.flatnonzero(~np.isfinite(col))
        if bad.size:
            i = bad[0]
            raise ValueError(f"user metric {m.name!r} gives {col[i]} at tp={tp[i]}, fp={n_pred[i] - tp[i]}, "
                             f"fn={n_gold[i] - tp[i]}, g={n_gold[i]}; scores.jsonl and summary.json need finite values")
    return np.column_stack(columns)


def _add_user_columns(out: RowTarget, cols: Columns, metrics) -> None:
    """Insert each row's user-metric values into the rows at their sorted-key places; other bytes stay."""
    keys, base = triple_keys(cols.tp, cols.n_pred, cols.n_gold)
    uniq, inverse = np.unique(keys, return_inverse=True)
    triples = unpack_triples(uniq, base)
    counts = out.parts_rows if out.parted else [len(inverse)]
    if sum(counts) != len(inverse):
        raise RuntimeError(f"the rows written are {sum(counts)}, the scored columns {len(inverse)}")
    start = 0
    for path, n in zip(out.files(), counts):
        insert_user_columns(path, metrics, triples, [inverse[start:start + n]], n)
        start += n


def insert_user_columns(path: Path, metrics, triples: tuple, row_classes, n_rows: int) -> None:
    """``_add_user_columns`` given the distinct (tp, |P|, |G|) triples in sorted order and each row's index into
    them, in blocks (``row_classes``) of the rows in file order."""
    values = _user_values(metrics, *triples).tolist()
    # Group the names by the first fixed key after them. A quote inside a JSON string is escaped and
    # the only nested values are lists, so ',"key":' occurs only where that top-level key starts.
    anchors: dict[str | None, list[int]] = {}
    for j in sorted(range(len(metrics)), key=lambda j: metrics[j].name):
        after = next((k for k in ROW_KEYS if k > metrics[j].name), None)
        anchors.setdefault(after, []).append(j)
    # The inserted text depends only on the row's triple: formatted once per distinct triple.
    inserts = [(None if after is None else f',"{after}":'.encode(), after == ROW_KEYS[0],
                [",".join(f"{dumps(metrics[j].name)}:{dumps(v[j])}" for j in js).encode() for v in values])
               for after, js in anchors.items()]
    tmp = path.with_name(path.name + ".user")
    try:
        n = 0
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            for line, k in zip(src, (k for block in row_classes for k in block.tolist())):
                for anchor, first, texts in inserts:
                    if anchor is None:
                        cut = line.rindex(b"}")
                        line = line[:cut] + b"," + texts[k] + line[cut:]
                    elif first:
                        line = b"{" + texts[k] + b"," + line[1:]
                    else:
                        cut = line.index(anchor)
                        line = line[:cut] + b"," + texts[k] + line[cut:]
                dst.write(line)
                n += 1
        if n != n_rows:
            raise RuntimeError(f"scores.jsonl has {n} rows, the scored columns {n_rows}")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# Rows per range of the summary's counting pass. The ranges run on the score's worker threads and their integer
# tables are added, so the counts do not depend on how the rows were split.
ROW_RANGE = 1 << 16


def _row_counts(cols: Columns, keys: np.ndarray, base: int, jobs: list, workers: int) -> list[tuple]:
    """The summary's per-row work, split by row ranges over ``workers`` threads: fills ``keys`` with each row's
    triple key and counts, for each job (stratum codes per gold item or None for the models, number of values),
    the rows per (group, triple key) and per (group, status) in dense tables. Returns per job
    (groups, keys, counts) as ``group_counts`` gives them and the (group, status) table."""
    n, n_keys, n_models = len(keys), base ** 3, len(cols.models)
    sizes = [n_models * n_values for _, n_values in jobs]
    # Each range holds its own tables: no more ranges than keep them within the dense table's limit.
    n_ranges = max(1, min(resolve_workers(workers), -(-n // ROW_RANGE), DENSE_LIMIT // (sum(sizes) * n_keys)))
    cuts = [n * r // n_ranges for r in range(n_ranges + 1)]

    # Each range is counted a block at a time, its tables added up: small temporaries (a block of ROW_RANGE rows,
    # or as many as the tables have cells, so that adding them costs no more than counting the block).
    block = max(ROW_RANGE, sum(sizes) * n_keys)

    def count(r: int) -> list[tuple[np.ndarray, np.ndarray]]:
        out = [(np.zeros(n_groups * n_keys, dtype=np.intp), np.zeros(n_groups * len(STATUS_NAMES), dtype=np.intp))
               for n_groups in sizes]
        for lo in range(cuts[r], cuts[r + 1], block):
            rows = slice(lo, min(lo + block, cuts[r + 1]))
            k = keys[rows]
            k[:] = pack_triples(cols.tp[rows], cols.n_pred[rows], cols.n_gold[rows], base)
            model = cols.model[rows].astype(np.int64)
            status = cols.status[rows]
            for j, ((codes, n_values), n_groups) in enumerate(zip(jobs, sizes)):
                group = model if codes is None else model * n_values + codes[cols.gold_idx[rows]]
                cells, by_status = out[j]
                cells += np.bincount(group * n_keys + k, minlength=n_groups * n_keys)
                by_status += np.bincount(group * len(STATUS_NAMES) + status, minlength=n_groups * len(STATUS_NAMES))
        return out

    parts = thread_map(count, range(n_ranges), workers)
    tables = []
    for j, n_groups in enumerate(sizes):
        cells, by_status = parts[0][j]
        for part in parts[1:]:
            cells = cells + part[j][0]
            by_status = by_status + part[j][1]
        idx = np.flatnonzero(cells)
        tables.append(((idx // n_keys, idx % n_keys, cells[idx].astype(np.int64)),
                       by_status.reshape(n_groups, len(STATUS_NAMES))))
    return tables


@dataclass
class ModelRows:
    """What the summary's per-model work reads of one model's rows, in the order of scores.jsonl: tp / |P| of the
    rows with |P| > 0, the gold items of its unparsed rows and, when the model states a confidence, difficulty or
    tokens anywhere, each row's triple class and those three columns (None otherwise: nothing to calibrate)."""

    precision: np.ndarray
    unparsed: np.ndarray
    cls: np.ndarray | None = None
    confidence: np.ndarray | None = None
    difficulty: np.ndarray | None = None
    tokens: np.ndarray | None = None


def _model_major(model: np.ndarray, start: np.ndarray, one: bool) -> tuple[np.ndarray | None, np.ndarray | slice]:
    """Where a range's rows go in columns holding every model's rows together, model after model, each in row
    order: (the rows' order, their places), ``start[m]`` being the place of the range's first row of model m.
    With one model the order is the rows' own (None) and the places one slice."""
    if one:
        return None, slice(int(start[0]), int(start[0]) + len(model))
    order = np.argsort(model, kind="stable")  # a radix sort on 16-bit codes
    ms = model[order]
    counts = np.bincount(ms, minlength=len(start))
    return order, start[ms] + (np.arange(len(ms)) - (np.cumsum(counts) - counts)[ms])


def _model_rows(cols: Columns, keys: np.ndarray, classes: Callable[[np.ndarray], np.ndarray],
                workers: int) -> list[ModelRows]:
    """Each model's ``ModelRows``, gathered by row ranges over ``workers`` threads (the summary's per-row work
    that is per model): a pass counts each range's rows of each model, which places every range's rows in
    columns grouped by model, then a pass writes them there. Each value is copied, never summed, so the columns
    are the ones masks by model would give, and so are the sums taken over them afterwards."""
    n, n_models = len(keys), len(cols.models)
    one = n_models == 1
    # Ranges of ROW_RANGE rows, many per thread, keep the temporaries small: at 10M rows of 4 models on 2 threads
    # 0.48 s of CPU, against 0.97-1.11 s for one range of 5M rows a thread (its temporaries' fresh pages).
    n_ranges = max(1, -(-n // ROW_RANGE))
    cuts = [min(n, r * ROW_RANGE) for r in range(n_ranges + 1)]
    code = np.int16 if n_models <= np.iinfo(np.int16).max else np.int32  # 16 bits: the stable sort is a radix sort

    def picked(r: int) -> tuple[slice, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        rows = slice(cuts[r], cuts[r + 1])
        n_pred = cols.n_pred[rows]
        answered = n_pred > 0
        stated = ~np.isnan(cols.confidence[rows])
        stated |= ~np.isnan(cols.difficulty[rows])
        stated |= ~np.isnan(cols.tokens[rows])
        return rows, cols.model[rows].astype(code), answered, cols.status[rows] == UNPARSED, stated

    def count(r: int) -> np.ndarray:  # (rows, answered, unparsed, stating any figure) per model
        _, model, answered, unparsed, stated = picked(r)
        return np.stack([np.bincount(model[sel], minlength=n_models) if sel is not None else
                         np.bincount(model, minlength=n_models) for sel in (None, answered, unparsed, stated)])

    per_range = np.stack(thread_map(count, range(n_ranges), workers))  # (range, what, model)
    totals = per_range.sum(axis=0)
    # where each range's first row of each model goes: its model's start, then the earlier ranges' rows of it
    model_start = np.cumsum(totals, axis=1) - totals
    start = model_start[None] + np.cumsum(per_range, axis=0) - per_range
    stating = totals[3] > 0
    precision = np.empty(int(totals[1].sum()))
    unparsed = np.empty(int(totals[2].sum()), dtype=cols.gold_idx.dtype)
    figures = ("confidence", "difficulty", "tokens")
    # the classes and the stated figures, model-major, when some model states one (one model: taken in place)
    cls = np.empty(n, dtype=np.int64) if stating.any() else None
    moved = {f: np.empty(n) for f in figures} if stating.any() and not one else {}

    def fill(r: int) -> None:
        rows, model, answered, unparsed_here, _ = picked(r)
        order, at = _model_major(model[answered], start[r, 1], one)
        values = cols.tp[rows][answered] / cols.n_pred[rows][answered]
        precision[at] = values if order is None else values[order]
        order, at = _model_major(model[unparsed_here], start[r, 2], one)
        idx = cols.gold_idx[rows][unparsed_here]
        unparsed[at] = idx if order is None else idx[order]
        if cls is not None:
            order, at = _model_major(model, start[r, 0], one)
            got = classes(keys[rows])
            cls[at] = got if order is None else got[order]
            for f, into in moved.items():
                into[at] = getattr(cols, f)[rows][order]

    thread_map(fill, range(n_ranges), workers)
    out = []
    for m in range(n_models):
        lo, hi = (int(k) for k in (model_start[0, m], model_start[0, m] + totals[0, m]))
        rows = ModelRows(precision[model_start[1, m]:model_start[1, m] + totals[1, m]],
                         unparsed[model_start[2, m]:model_start[2, m] + totals[2, m]])
        if stating[m]:
            assert cls is not None
            rows.cls = cls[lo:hi]
            for f in figures:
                setattr(rows, f, getattr(cols, f) if one else moved[f][lo:hi])
        out.append(rows)
    return out


def _model_rows_by_masks(cols: Columns, keys: np.ndarray, classes: Callable[[np.ndarray], np.ndarray],
                         m: int) -> ModelRows:
    """One model's ``ModelRows`` picked out by masks over every row (the reference's way)."""
    sel = cols.model == m
    answered = sel & (cols.n_pred > 0)
    rows = ModelRows(cols.tp[answered] / cols.n_pred[answered], cols.gold_idx[sel & (cols.status == UNPARSED)])
    figures = {f: getattr(cols, f)[sel] for f in ("confidence", "difficulty", "tokens")}
    if any((~np.isnan(v)).any() for v in figures.values()):
        rows.cls = classes(keys[sel])
        for f, v in figures.items():
            setattr(rows, f, v)
    return rows


def _group_tables(group: np.ndarray, n_groups: int, cols: Columns, keys: np.ndarray, base: int) -> tuple:
    """``_row_counts``'s tables for one grouping, by ``group_counts`` (which sorts when the table is large)."""
    counted = group_counts(group, keys, n_groups, base ** 3)
    by_status = np.bincount(group * len(STATUS_NAMES) + cols.status, minlength=n_groups * len(STATUS_NAMES))
    return counted, by_status.reshape(n_groups, len(STATUS_NAMES))


def _blocks(counted: tuple, by_status: np.ndarray, n_groups: int, base: int, cfg: ScoreConfig,
            names: list[str]) -> list[dict | None]:
    """Summary block for each group (None for empty groups) from its rows per triple and per status."""
    g_ids, g_keys, g_counts = counted
    # ok, unparsed and missing add up to the group's rows.
    n_items, n_ok, n_missing = by_status.sum(axis=1), by_status[:, OK], by_status[:, MISSING]
    uniq_keys, inverse = np.unique(g_keys, return_inverse=True)
    tp, n_pred, n_gold = unpack_triples(uniq_keys, base)
    per_triple = score_counts(tp, n_pred, n_gold, sip_lambda=cfg.sip_lambda, sip_gamma=cfg.sip_gamma)
    values = np.column_stack([per_triple[m] for m in MEAN_METRICS]
                             + [n_pred.astype(np.float64), per_triple["over_predicted"].astype(np.float64)])
    user_values = _user_values(cfg.user_metrics, tp, n_pred, n_gold)
    starts = np.searchsorted(g_ids, np.arange(n_groups + 1))
    out: list[dict | None] = []
    for gid in range(n_groups):
        if n_items[gid] == 0:
            out.append(None)
            continue
        sl = slice(starts[gid], starts[gid + 1])
        counts, vals = g_counts[sl], values[inverse[sl]]
        mean, low, high = bootstrap_ci(counts, vals[:, : len(MEAN_METRICS)], cfg.n_boot, _block_rng(cfg.seed, names[gid]))
        metrics = {m: {"mean": float(mean[i]), "ci95": [float(low[i]), float(high[i])]} for i, m in enumerate(MEAN_METRICS)}
        if cfg.user_metrics:
            # A fresh generator with the block's seed draws the same resamples as above.
            mean, low, high = bootstrap_ci(counts, user_values[inverse[sl]], cfg.n_boot, _block_rng(cfg.seed, names[gid]))
            metrics.update({m.name: {"mean": float(mean[i]), "ci95": [float(low[i]), float(high[i])]}
                            for i, m in enumerate(cfg.user_metrics)})
        n = int(n_items[gid])
        out.append({
            "n": n,
            "metrics": metrics,
            "parse_success_rate": float(n_ok[gid] / n),
            "n_missing": int(n_missing[gid]),
            "mean_pred_size": float(np.sum(counts * vals[:, -2]) / n),
            "over_prediction_rate": float(np.sum(counts * vals[:, -1]) / n),
        })
    return out


def grouped_blocks(tables: list[tuple], strata_values: list[list[str]], models: list[str], base: int, cfg: ScoreConfig,
                   fields: list[str]) -> tuple[list[dict | None], dict]:
    """The summary blocks of each grouping (the models, then each stratum field by model and value) from its
    count tables: the models' blocks, and per field (blocks, values)."""
    names = [[f"model={m}" for m in models]]
    names += [[f"model={m}/{name}={v}" for m in models for v in values] for name, values in zip(fields, strata_values)]
    n_values = [1] + [len(values) for values in strata_values]

    # Each grouping's blocks (bootstrap per group) are independent: one thread each.
    def blocks(r: int) -> list[dict | None]:
        counted, by_status = tables[r]
        return _blocks(counted, by_status, len(models) * n_values[r], base, cfg, names[r])

    done = thread_map(blocks, range(len(tables)), -1)
    return done[0], {name: (blocks, values) for name, values, blocks in zip(fields, strata_values, done[1:])}


def model_block_base(overall: list[dict | None], by_blocks: dict, m: int) -> dict:
    """Model ``m``'s summary block before its calibration and personality: its figures and its strata's."""
    m_block = overall[m]
    assert m_block is not None  # every listed model has rows
    block = dict(m_block)
    block["by"] = {
        fname: {v: b for v, b in zip(values, blocks[m * len(values):(m + 1) * len(values)]) if b is not None}
        for fname, (blocks, values) in by_blocks.items()
    }
    return block


def summarize(cols: Columns, gold: Gold, cfg: ScoreConfig) -> dict:
    models = cols.models
    base = triple_base(cols.n_pred, cols.n_gold)
    n_keys = base ** 3
    # The overall blocks (per model) and each stratum's (per model and value).
    jobs: list[tuple[np.ndarray | None, int, list[str]]] = [(None, 1, [f"model={m}" for m in models])]
    for name, (codes, values) in gold.strata.items():
        jobs.append((codes, len(values), [f"model={m}/{name}={v}" for m in models for v in values]))
    if len(models) * sum(n_values for _, n_values, _ in jobs) * n_keys <= DENSE_LIMIT \
            and not _dispatch.use_reference("aggregate"):
        # Dense tables (the usual case): the per-row counting split by row ranges.
        keys = np.empty(len(cols.tp), dtype=np.int64)
        tables = _row_counts(cols, keys, base, [job[:2] for job in jobs], cfg.workers)
    else:  # group_counts per grouping (it sorts large tables; the reference counts in plain Python)
        keys = pack_triples(cols.tp, cols.n_pred, cols.n_gold, base)
        model = cols.model.astype(np.int64)

        def grouped(job) -> tuple:  # a stratum's group of each row is made in its job's thread
            codes, n_values, _ = job
            group = model if codes is None else model * n_values + codes[cols.gold_idx]
            return _group_tables(group, len(models) * n_values, cols, keys, base)

        tables = thread_map(grouped, jobs, -1)

    overall, by_blocks = grouped_blocks(tables, [values for _, (_, values) in gold.strata.items()], models, base, cfg,
                                        list(gold.strata))
    # The distinct triples (few) and the primary score of each: per-item scores are lookups.
    uniq_keys = np.unique(tables[0][0][1])
    class_score = score_counts(*unpack_triples(uniq_keys, base), sip_lambda=cfg.sip_lambda,
                               sip_gamma=cfg.sip_gamma)[cfg.kind.primary_metric]
    class_of = None
    if n_keys <= DENSE_LIMIT:  # each row's class by a table lookup rather than a binary search
        class_of = np.zeros(n_keys, dtype=np.int64)
        class_of[uniq_keys] = np.arange(len(uniq_keys))

    def classes(row_keys: np.ndarray) -> np.ndarray:
        return np.searchsorted(uniq_keys, row_keys) if class_of is None else class_of[row_keys]

    # Each model's selection counts from its rows per triple class.
    m_ids, m_keys, m_counts = tables[0][0]
    tp, n_pred, n_gold = unpack_triples(m_keys, base)
    selected = [np.bincount(m_ids, weights=m_counts * w, minlength=len(models)).astype(np.int64)
                for w in (np.ones(len(m_keys), dtype=bool), n_pred > 0, n_pred > n_gold,
                          (tp == n_pred) & (n_pred > 0) & (n_pred < n_gold))]
    # The per-row work per model: by row ranges over the workers, or by a mask per model (the reference).
    model_rows: Callable[[int], ModelRows]
    if _dispatch.use_reference("aggregate"):
        model_rows = partial(_model_rows_by_masks, cols, keys, classes)  # on each model's thread
    else:
        model_rows = _model_rows(cols, keys, classes, cfg.workers).__getitem__

    def model_block(m: int) -> dict:
        block = model_block_base(overall, by_blocks, m)
        rows = model_rows(m)
        metrics = block["metrics"]
        n, answered, over, under = (int(c[m]) for c in selected)
        selection = selection_from_counts(n, answered, over, under, lambda: float(np.mean(rows.precision)))
        calib = score = None
        if rows.cls is not None:  # it states a confidence, difficulty or tokens: calibration
            assert rows.confidence is not None and rows.difficulty is not None and rows.tokens is not None
            # Per-item scores through the item's triple class: one metric evaluation per class.
            score = class_score[rows.cls]
            calib = calibration(score, rows.confidence, rows.difficulty, rows.tokens,
                                score_classes=(rows.cls, class_score), workers=cfg.workers)
        block["personality"] = personality(
            None, None, None, metrics["spc"]["mean"], metrics["sip_f1"]["mean"], metrics["precision"]["mean"],
            metrics["recall"]["mean"], cfg.personality_rules, calib, score, rows.difficulty, rows.tokens, selection)
        if calib is not None:
            calib["score_metric"] = cfg.kind.primary_metric
            block["calibration"] = calib
        block["unparsed_ids"] = gold.ids_of(rows.unparsed)
        return block

    # Models are independent and their sorts release the GIL: one thread each.
    return dict(zip(models, thread_map(model_block, range(len(models)), -1)))


@dataclass
class ScoreResult:
    summary: dict
    errors: list[dict] | ErrorFile
    out_dir: Path

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


class _Progress:
    """The scoring streams' progress callback (predictions read), shown by ``benchmint.progress``."""

    def __init__(self, enabled: bool, paths) -> None:
        from benchmint.progress import Progress

        self.bar = Progress("scoring", unit="predictions", enabled=enabled)

    def __call__(self, n: int) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def rejected_gold(gold_errors: list[dict]) -> dict[str, dict]:
    """The first error of each id the gold file holds on a rejected line (a repeated id is no rejection)."""
    rejected: dict[str, dict] = {}
    for e in gold_errors:
        if e.get("id") is not None and e["kind"] != "duplicate_id":
            rejected.setdefault(e["id"], e)
    return rejected


def name_rejected_gold(e: dict, rejected: dict[str, dict]) -> None:
    """An unknown id that the gold file holds on a rejected line: its row says so, and which line and why."""
    gold = rejected.get(e["id"]) if e["kind"] == "unknown_id" else None
    if gold is not None:
        where = f"line {gold['line']}" if gold.get("line") is not None else "its line"
        e["message"] = (f"id {e['id']!r} is in the gold file, but {where} was rejected ({gold['kind']}: "
                        f"{gold['message']}); not scored")
        e["gold_line"] = gold.get("line")


def _no_usable_gold(gold_path, out_dir: Path, errors: list[dict] | None, n_errors: int | None = None) -> None:
    """Stops a run whose gold has no usable item, its errors written (or already in errors.jsonl: ``n_errors``)."""
    if errors is not None:
        write_jsonl(out_dir / "errors.jsonl", errors)
        n_errors = len(errors)
    raise InputError(f"gold file {gold_path} has no usable records: {n_errors} problems, "
                     f"listed in {out_dir / 'errors.jsonl'}")


def score_files(pred_paths, gold_path, out_dir, cfg: ScoreConfig, keep: list | None = None) -> ScoreResult:
    """Score one or more prediction files; writes scores.jsonl, summary.json and errors.jsonl into ``out_dir``.

    ``keep``: a list the run's columns and gold index are appended to once everything is written, for a caller
    that frees them later or never (the command leaves them to the OS at exit); without it they go on return.
    """
    if isinstance(pred_paths, (str, os.PathLike)):
        pred_paths = [pred_paths]
    for p in pred_paths:
        if not Path(p).is_file():
            raise InputError(f"predictions file not found: {p}")
    out_dir = Path(out_dir)
    if cfg.engine != "local":
        return _score_by_id_shards(pred_paths, gold_path, out_dir, cfg)
    errors: list[dict] = []
    gold = load_gold(gold_path, cfg.kind, cfg.by, cfg.workers, symmetry=cfg.symmetry)
    errors.extend(gold.errors)
    if not gold.n_items:
        _no_usable_gold(gold_path, out_dir, errors)
    progress = _Progress(cfg.progress, pred_paths)
    try:
        with atomic_rows(out_dir, cfg.rows_per_file) as target:
            if gold.native is None:
                from benchmint.metrics import pipeline_ref

                with target.text() as out:
                    cols, seen = pipeline_ref.stream(pred_paths, gold, cfg, out, errors, progress)
                    cols = pipeline_ref.append_missing(cols, seen, gold, cfg, out, errors)
            else:
                cols = _stream_compiled(pred_paths, gold, cfg, target, errors, progress)
            if cfg.user_metrics:
                _add_user_columns(target, cols, cfg.user_metrics)
    finally:
        progress.close()
    rejected = rejected_gold(gold.errors)
    for e in errors:
        name_rejected_gold(e, rejected)
    write_jsonl(out_dir / "errors.jsonl", errors)
    if not cols.models:
        _no_usable_predictions(pred_paths, len(errors), out_dir)
    models = summarize(cols, gold, cfg)
    summary = _summary_head(pred_paths, gold_path, gold, cfg, Counter(e["kind"] for e in errors), models)
    write_summary(out_dir / "summary.json", summary)
    if keep is not None:
        keep.extend((cols, gold))
    return ScoreResult(summary, errors, out_dir)


def _score_by_id_shards(pred_paths, gold_path, out_dir: Path, cfg: ScoreConfig) -> ScoreResult:
    """``score_files`` on the Ray engine (``pipeline_shards``): the error rows and the unparsed ids are written
    to their files as they come, never held, and the result reads the error rows back from errors.jsonl."""
    from benchmint.metrics import pipeline_shards
    from benchmint.run.ray_engine import RayExecutor

    work = out_dir / ".score-shards"
    try:
        progress = _Progress(cfg.progress, pred_paths)
        try:
            with atomic_path(out_dir / "errors.jsonl") as errors_tmp, \
                    atomic_rows(out_dir, cfg.rows_per_file) as target:
                # the shards' rows come as one file, cut into parts afterwards if asked
                single = out_dir / ".scores-shards.jsonl.tmp" if target.parted else target.path
                try:
                    models, gold, kinds = pipeline_shards.stream(pred_paths, gold_path, cfg, single, errors_tmp,
                                                                 progress, RayExecutor(), work)
                    if not gold.n_items:
                        os.replace(errors_tmp, out_dir / "errors.jsonl")
                        _no_usable_gold(gold_path, out_dir, None, sum(kinds.values()))
                    if target.parted:
                        target.cut_into_parts(single)
                finally:
                    if target.parted:
                        single.unlink(missing_ok=True)
        finally:
            progress.close()
        if not models:
            _no_usable_predictions(pred_paths, sum(kinds.values()), out_dir)
        summary = _summary_head(pred_paths, gold_path, gold, cfg, kinds, models)
        write_summary(out_dir / "summary.json", summary)  # reads the unparsed ids from the work folder
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ScoreResult(summary, ErrorFile(out_dir / "errors.jsonl", kinds), out_dir)


def _no_usable_predictions(pred_paths, n_errors: int, out_dir: Path) -> None:
    raise InputError(f"no usable predictions in {', '.join(map(str, pred_paths))}: "
                     f"{n_errors} problems, listed in {out_dir / 'errors.jsonl'}")


def _summary_head(pred_paths, gold_path, gold: Gold, cfg: ScoreConfig, kinds: Counter, models: dict) -> dict:
    """summary.json's content: the run's settings, inputs and error counts around the models' blocks."""
    counts = {k: kinds[k] for k in kinds}
    summary_params = {"sip_lambda": cfg.sip_lambda, "sip_gamma": cfg.sip_gamma, "bootstrap_resamples": cfg.n_boot,
                      "seed": cfg.seed, "by": list(cfg.by), "symmetry": cfg.symmetry}
    if cfg.user_metrics:
        summary_params["user_metrics"] = {m.name: m.source for m in cfg.user_metrics}
    return {
        "task": cfg.task,
        "params": summary_params,
        "gold": {"file": str(gold_path), "n_items": gold.n_items},
        "predictions": [str(p) for p in pred_paths],
        "errors": {"count": sum(counts.values()), "by_kind": counts, "file": "errors.jsonl"},
        "models": models,
    }


def write_summary(path: Path, summary: dict) -> None:
    """summary.json, written as json.dump writes it: chunk by chunk, never whole in memory. A model whose
    "unparsed_ids" is a function (the id shards' run, which does not hold them) has the ids it yields written in
    the list's place, as json.dump writes that list; the summary then keeps their count and first few
    (``UnparsedIds``). A list of them is written whole by ``_string_list_text`` (json.dump's indented encoder
    takes a Python step an id: at 10M rows, 500,000 unparsed ids took 0.15 s of the run's serial CPU)."""
    streamed = {}
    token = secrets.token_hex(8)  # marks a list's place in the encoder's output: no model's block holds it
    for k, block in enumerate(summary["models"].values()):
        if callable(block["unparsed_ids"]) or isinstance(block["unparsed_ids"], list) and block["unparsed_ids"]:
            mark = f"\x00{token}:{k}"
            streamed[json.dumps(mark)] = (block, block["unparsed_ids"])  # the encoder's chunk for that string
            block["unparsed_ids"] = mark
    encoder = json.JSONEncoder(indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    try:
        with atomic_write(path) as fh:
            indent = 0
            for chunk in encoder.iterencode(summary):  # a string value is a chunk of its own
                if chunk in streamed:
                    block, ids = streamed.pop(chunk)
                    if callable(ids):
                        block["unparsed_ids"] = _write_list(fh, ids(), " " * indent)
                    else:
                        fh.write(_string_list_text(ids, " " * indent))
                        block["unparsed_ids"] = ids
                    continue
                if "\n" in chunk:  # a new line and its indent
                    indent = len(chunk) - chunk.rindex("\n") - 1
                fh.write(chunk)
            fh.write("\n")
    finally:
        for block, ids in streamed.values():  # not reached (an error on the way): the block as it came
            block["unparsed_ids"] = ids


def _string_list_text(ids: list[str], indent: str) -> str:
    """A non-empty list of strings as json.dump writes it at ``indent`` with indent=2, by json's compiled encoder:
    without an indent it runs in C, and its item separator carries each new line and indent."""
    inner = indent + "  "
    return "[\n" + inner + json.dumps(ids, ensure_ascii=False, separators=(",\n" + inner, ":"))[1:-1] + "\n" + indent + "]"


def _write_list(fh, ids: Iterator[str], indent: str) -> UnparsedIds:
    """A list of strings as json.dump writes it at ``indent`` with indent=2, from an iterator."""
    n, head = 0, []
    for rid in ids:
        fh.write(("[" if not n else ",") + "\n" + indent + "  " + json.dumps(rid, ensure_ascii=False))
        if n < UnparsedIds.HEAD:
            head.append(rid)
        n += 1
    fh.write("\n" + indent + "]" if n else "[]")
    return UnparsedIds(n, head)


class UnparsedIds:
    """A model's unparsed ids in a summary whose run did not hold them: their count and the first few (the
    report shows five); summary.json lists them all."""

    HEAD = 5

    def __init__(self, n: int, head: list[str]) -> None:
        self.n, self.head = n, head

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, at: slice) -> list[str]:
        if not isinstance(at, slice) or len(range(*at.indices(self.n))) and max(range(*at.indices(self.n))) >= len(
                self.head):
            raise IndexError(f"only the first {len(self.head)} of {self.n} unparsed ids are held; summary.json "
                             "lists them all")
        return self.head[at]

    def __iter__(self):
        raise TypeError("the unparsed ids of a run by id shards are listed in summary.json, not held")


class ErrorFile:
    """The error rows of a run that wrote them to errors.jsonl as they came (by id shards): their count, and the
    rows read back from the file when iterated."""

    def __init__(self, path: Path, by_kind: Counter) -> None:
        self.path, self.by_kind = Path(path), by_kind

    def __len__(self) -> int:
        return sum(self.by_kind.values())

    def __iter__(self) -> Iterator[dict]:
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)
