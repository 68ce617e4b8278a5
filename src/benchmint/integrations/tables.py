"""Score a result table in one call: the rows another evaluator wrote, with their predictions, scored by benchmint.

VLMEvalKit writes each model's answers to a dataset as a table (``<model>_<dataset>.xlsx`` or ``.tsv``): the
dataset's columns as its release names them (``index``, ``question``, ``answer``, ``language``, ``sig_figs``,
strata...) without the images, plus a ``prediction`` column. ``score_table(table, benchmark=...)`` takes such a
table as a pandas DataFrame or a pyarrow Table and returns one score per row and the summary, the one call a
dataset's ``evaluate`` needs.

The rows are not scored by a second implementation: each is read by the benchmark's reader of release rows, and
``benchmint grade``'s flow (SeePhys, MatVQA, CSMBench) takes those items with the predictions, or
``benchmint score``'s (SPM-Bench, CrystalXRD-Bench) reads them written as its gold file, so a table scores
exactly as the command does on the same rows. Only what grading reads is required (the id, the gold answer,
SeePhys's ``sig_figs`` and ``question`` where present); image columns are never read. Errors name the table's row
(``row`` counts data rows from 1, in the table's order) instead of the files written on the way.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmint import benchmarks
from benchmint.benchmarks.base import FieldError, ItemError
from benchmint.benchmarks.layouts import Origin
from benchmint.io import InputError, atomic_write, dumps_text, write_jsonl

PREDICTION = "prediction"  # VLMEvalKit's column of raw model replies
#: image columns of the release layouts: scoring never reads them, and in a result table their files are elsewhere
IMAGE_COLUMNS = frozenset({"image", "images", "image_path", "file_name", "composite_image"})
#: per-row columns a set-scored benchmark adds (scores.jsonl's)
SET_COLUMNS = ("status", "em", "spc", "sip_f1", "jaccard", "precision", "recall", "f1", "j_pen", "f1_pen")
#: per-row columns a graded benchmark adds (grades.jsonl's)
GRADE_COLUMNS = ("score", "verdict", "stage")


@dataclass
class TableScores:
    """What ``score_table`` returns.

    ``rows``: one dict per table row, in the table's order: ``row`` (1-based), ``id``, ``model``, the extracted
    ``answer`` and the benchmark's score columns (``score``, ``verdict``, ``stage`` for graded benchmarks; the set
    metrics and ``status`` for SPM-Bench and CrystalXRD-Bench); a row that could not be scored has None there and
    its cause in ``errors``. ``summary``: the summary.json of ``benchmint grade``/``score`` on the rows.
    ``errors``: its errors.jsonl rows, with ``row`` naming the table row. ``table``: the input with the score
    columns appended (same type: pandas or pyarrow).
    """

    benchmark: str
    rows: list[dict]
    summary: dict
    errors: list[dict]
    columns: tuple[str, ...]
    source: Any = field(repr=False, default=None)

    @property
    def table(self) -> Any:
        taken = set(_column_names(self.source))
        extra = {"answer": [None if r.get("answer") is None else json.dumps(r["answer"], ensure_ascii=False)
                            for r in self.rows]}  # the answer read from the reply, as JSON text
        extra.update({c: [r.get(c) for r in self.rows] for c in self.columns})
        extra = {f"bm_{c}" if c in taken else c: v for c, v in extra.items()}  # the gold "answer" keeps its name
        if _is_arrow(self.source):
            import pyarrow as pa

            out = self.source
            for name, values in extra.items():
                out = out.append_column(name, pa.array(values))
            return out
        return self.source.assign(**extra)


def _is_arrow(table: Any) -> bool:
    return type(table).__module__.split(".")[0] == "pyarrow"


def _column_names(table: Any) -> list[str]:
    return list(table.column_names) if _is_arrow(table) else [str(c) for c in table.columns]


_SIMPLE = (str, int, bool, type(None))


def _plain(value: Any) -> Any:
    """A cell as JSON holds it: NaN (pandas' empty cell) as None, numpy scalars as Python's."""
    if isinstance(value, _SIMPLE):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if hasattr(value, "item") and not isinstance(value, (list, dict, bytes)):
        try:
            return _plain(value.item())
        except (ValueError, TypeError):
            return value
    return value


def _named_columns(table: Any) -> tuple[list[str], list[list]]:
    """A pandas DataFrame's or pyarrow Table's column names and columns as lists (values not yet plain)."""
    if _is_arrow(table):
        names, columns = list(table.column_names), [c.to_pylist() for c in table.columns]
    elif hasattr(table, "columns") and hasattr(table, "to_dict"):  # pandas: column by column is the fast way
        names, columns = [str(c) for c in table.columns], [table[c].tolist() for c in table.columns]
    else:
        raise TypeError(f"score_table takes a pandas DataFrame or a pyarrow Table, got {type(table).__name__}")
    if len(set(names)) != len(names):
        raise InputError(f"the table has repeated column names: {sorted(n for n in set(names) if names.count(n) > 1)}")
    return names, columns


def _plain_column(column: list) -> list:
    return [_plain(v) for v in column] if any(not isinstance(v, _SIMPLE) for v in column) else column


def _is_row_list(table: Any) -> bool:
    return isinstance(table, Sequence) and not isinstance(table, str) and all(isinstance(r, Mapping) for r in table)


def table_rows(table: Any) -> list[dict]:
    """The rows of a pandas DataFrame or a pyarrow Table as dicts of plain values (a list of dicts passes)."""
    if _is_row_list(table):
        return [{str(k): _plain(v) for k, v in r.items()} for r in table]
    names, columns = _named_columns(table)
    columns = [_plain_column(col) for col in columns]
    return [dict(zip(names, values)) for values in zip(*columns)] if columns else []


def _split_rows(table: Any, prediction: str, name: str) -> tuple[list[dict], list, list]:
    """Per row: the fields the benchmark's reader gets (neither images nor the reply nor the model), the reply and
    the model cell. Built column by column: only the columns kept are converted, and no row dict is made twice."""
    skip = IMAGE_COLUMNS | {prediction, "model"}
    if _is_row_list(table):
        rows = table_rows(table)
        if rows and prediction not in rows[0]:
            raise InputError(f"{name}: no column {prediction!r} (the model replies); columns: {sorted(rows[0])}")
        return ([{c: v for c, v in r.items() if c not in skip} for r in rows], [r.get(prediction) for r in rows],
                [r.get("model") for r in rows])
    names, columns = _named_columns(table)
    n = len(columns[0]) if columns else 0
    if n and prediction not in names:
        raise InputError(f"{name}: no column {prediction!r} (the model replies); columns: {sorted(names)}")
    kept = [k for k, c in enumerate(names) if c not in skip]
    kept_names = [names[k] for k in kept]
    values = [_plain_column(columns[k]) for k in kept]
    fields = [dict(zip(kept_names, row)) for row in zip(*values)] if values else [{} for _ in range(n)]
    replies = _plain_column(columns[names.index(prediction)]) if prediction in names else [None] * n
    models = _plain_column(columns[names.index("model")]) if "model" in names else [None] * n
    return fields, replies, models


def read_table(path: str | Path) -> Any:
    """A result table from a file, every cell as its text (an answer "0101" stays "0101"; empty cells are empty):
    ``.tsv``, ``.csv``, ``.xlsx`` (needs openpyxl), ``.parquet``, ``.jsonl``."""
    try:
        import pandas as pd
    except ImportError:
        raise InputError("reading a table file needs pandas: pip install 'benchmint[tables]'") from None

    path = Path(path)
    if not path.is_file():
        raise InputError(f"table not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix in (".tsv", ".csv"):
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False,
                               encoding="utf-8")
        if suffix == ".xlsx":
            try:
                import openpyxl  # noqa: F401 - pandas' reader of .xlsx
            except ImportError:
                raise InputError(f"{path}: reading .xlsx needs openpyxl: pip install 'benchmint[tables]'") from None
            return pd.read_excel(path, dtype=str, keep_default_na=False)
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path)
        if suffix == ".jsonl":
            return pd.read_json(path, lines=True, dtype=False)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable table ({exc})") from None
    raise InputError(f"{path}: unknown table format; expected .tsv, .csv, .xlsx, .parquet or .jsonl")


def score_table(table: Any, benchmark: str, *, model: str | None = None, prediction: str = PREDICTION,
                name: str = "table", out: str | Path | None = None, judge=None, **options) -> TableScores:
    """Score every row of a result table as ``benchmint grade``/``score`` would; see the module's docstring.

    ``model``: the model's name when the table has no ``model`` column (default "model"); ``prediction``: the
    column of raw replies; ``name``: how errors name the table; ``out``: a folder for the flow's files
    (grades.jsonl or scores.jsonl, summary.json, errors.jsonl; a temporary one by default); ``judge``: a
    ``benchmint.grade.judge.Judge`` for what SeePhys's rules and screen leave open and CSMBench's open answers;
    ``options``: GradeConfig's (graded) or ScoreConfig's (set-scored) settings, e.g. ``workers=1``, ``by=(...)``.
    """
    bench = benchmarks.get(benchmark)
    collecting = gc.isenabled()
    with _collector(False):
        rows = _split_rows(table, prediction, name)
        if out is not None:
            return _score(bench, rows, table, model, name, Path(out), judge, options, collecting)
        with tempfile.TemporaryDirectory(prefix="benchmint-table-") as tmp:
            return _score(bench, rows, table, model, name, Path(tmp), judge, options, collecting)


@contextlib.contextmanager
def _collector(on: bool) -> Iterator[None]:
    """Python's cyclic garbage collector on or off for the block, then as it was.

    score_table turns it off: a table's rows, items, files and score rows hold no reference cycles (reference
    counting frees them), but while they are alive every full collection walks all of them; with it on, 20,000
    SPM-Bench rows scored 35-40% slower than the same rows read from an items file, which streams them (10% faster
    with it off in both). The grade flow (judge calls, retries) runs with the collector as the caller had it."""
    enabled = gc.isenabled()
    if on:
        gc.enable()
    else:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        else:
            gc.disable()


def _score(bench, rows: tuple[list[dict], list, list], source: Any, model: str | None, name: str, out: Path, judge,
           options: dict, collecting: bool) -> TableScores:
    graded = bench.graded
    origin = Origin(out, "jsonl")
    gold_row: list[int] = []  # line of the gold file -> table row
    pred_row: list[int] = []  # line of the predictions file -> table row
    ids: list[str | None] = []  # per table row: the item's id, None when the row was rejected
    errors: list[dict] = []
    items: dict[str, Any] = {}  # the gold items by id, in the table's order
    fields_of, replies, models = rows
    item_from_row = bench.item_from_row
    for k, fields in enumerate(fields_of, 1):
        try:
            item = item_from_row(fields, origin, f"{name}:row {k}")
        except FieldError as exc:
            errors.append(_row_error(ItemError(f"{name}:row {k}", str(exc), exc.field), k))
            ids.append(None)
            continue
        ids.append(item.id)
        if item.id not in items:  # a gold item once; each (id, model) row is an answer, duplicates listed by the flow
            items[item.id] = item
            gold_row.append(k)
        pred_row.append(k)
    default_model = model or "model"
    whos = [w if isinstance(w, str) and w else default_model for w in models]
    keys = [None if rid is None else (rid, who) for rid, who in zip(ids, whos)]
    if not items:
        first_error = f"; the first: {errors[0]['message']}" if errors else ""
        raise InputError(f"{name}: no usable rows ({len(errors)} unusable{first_error})")
    out.mkdir(parents=True, exist_ok=True)
    # a graded benchmark's flow takes the items as read here; a set-scored one reads the gold items' file
    gold_path, pred_path = (Path(name) if graded else out / "table_gold.jsonl"), out / "table_predictions.jsonl"
    if not graded:
        write_jsonl(gold_path, (item.gold() for item in items.values()))
    with atomic_write(pred_path) as fh:
        fh.write(_prediction_lines([ids[k - 1] for k in pred_row], [whos[k - 1] for k in pred_row],
                                   ["" if (r := replies[k - 1]) is None else str(r) for k in pred_row]))
    if graded:
        from benchmint.grade.flow import GradeConfig, grade_files

        with _collector(collecting):  # grading (judge calls, retries) runs as benchmint grade does
            result = grade_files([pred_path], gold_path, out, GradeConfig(benchmark=bench.name, **options), judge,
                                 items=items)
        summary, flow_errors = result.summary, result.errors
        found = _by_key(keys, {(g.id, g.model): (g.answer, g.score, g.verdict, g.stage) for g in result.grades},
                        1 + len(GRADE_COLUMNS))
        columns = GRADE_COLUMNS
    else:
        from benchmint.metrics.pipeline import ScoreConfig, score_files

        scored = score_files([pred_path], gold_path, out, ScoreConfig(task=bench.answer_kind, **options))
        summary, flow_errors = scored.summary, scored.errors
        found = _read_scores(out / "scores.jsonl", keys)
        columns = SET_COLUMNS
    lines = {str(pred_path): pred_row} if graded else {str(gold_path): gold_row, str(pred_path): pred_row}
    for e in flow_errors:
        errors.append(_located(e, lines, name))
    _rename_inputs(summary, name)
    head = ("row", "id", "model", "answer", *columns)
    scored_rows = [dict(zip(head, (k, *(key or (None, None)), *values)))
                   for k, (key, values) in enumerate(zip(keys, found), 1)]
    return TableScores(bench.name, scored_rows, summary, errors, columns, source)


def _prediction_lines(ids: list, models: list[str], outputs: list[str]) -> str:
    """The predictions file as ``write_jsonl`` writes {"id", "model", "output"} rows (keys sorted), formatted by
    hand: 7 ms instead of 46 at 20,000 rows (the model names are quoted once each)."""
    quoted = {m: dumps_text(m) for m in set(models)}
    return "".join(f'{{"id":{dumps_text(i)},"model":{quoted[m]},"output":{dumps_text(o)}}}\n'
                   for i, m, o in zip(ids, models, outputs))


def _by_key(keys: list, scored: dict[tuple[str, str], tuple], width: int) -> list[tuple]:
    """Per table row, the values the flow gave its (id, model), all None for a rejected row and for a later row of
    the same (id, model): a duplicate the flow did not score."""
    unscored = (None,) * width
    return [unscored if key is None else scored.pop(key, unscored) for key in keys]


def _read_scores(path: Path, keys: list) -> list[tuple]:
    """Per table row (``keys``: its (id, model) or None), scores.jsonl's answer and SET_COLUMNS.

    Read column-wise by pyarrow, 55 ms at 20,000 rows where a json.loads per line takes 100 (pyarrow would refuse
    a lone surrogate's escape, but the flow refuses ids and model names holding one). The flow writes the
    predictions' rows first, in the file's order, then the missing items': when every table row was kept, the
    first rows are the table's and no lookup is needed."""
    import pyarrow.json as pa_json

    scores = pa_json.read_json(path)
    ids, models, *values = (scores.column(c).to_pylist() for c in ("id", "model", "answer", *SET_COLUMNS))
    rows = list(zip(*values))
    n = len(keys)
    if len(ids) >= n and list(zip(ids[:n], models[:n])) == keys:
        return rows[:n]
    return _by_key(keys, dict(zip(zip(ids, models), rows)), len(values))


def _row_error(err: ItemError, row: int) -> dict:
    return {"kind": "bad_item", "message": err.message, "location": err.location, "field": err.field, "row": row}


def _located(error: dict, lines: dict[str, list[int]], name: str) -> dict:
    """An error of the flow with the table row in place of the file written on the way."""
    e = dict(error)
    for path, rows in lines.items():
        for key in ("file", "location"):
            value = e.get(key)
            if not isinstance(value, str) or not value.startswith(path):
                continue
            line = e.get("line")
            if line is None and value.startswith(path + ":"):
                tail = value[len(path) + 1:]
                line = int(tail) if tail.isdigit() else None
            if line is not None and 1 <= line <= len(rows):
                e["row"] = rows[line - 1]
                e.pop("line", None)
                e[key] = f"{name}:row {e['row']}"
            else:
                e[key] = name
        if isinstance(e.get("message"), str):
            e["message"] = e["message"].replace(path, name)
    return e


def _rename_inputs(summary: dict, name: str) -> None:
    """The summary names the table, not the files written on the way (so it is the same whatever folder)."""
    if "inputs" in summary:  # grade
        summary["inputs"] = {"table": name}
    if "gold" in summary:  # score
        summary["gold"]["file"] = name
        summary["predictions"] = [name]
