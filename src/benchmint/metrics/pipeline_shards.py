"""The streaming stage of ``benchmint.metrics.pipeline`` sharded by item id (``score --engine ray``), for inputs
larger than one machine's memory; the rows, errors and summary of the local engine, byte for byte.

1. Split (a unit per byte range of each file, cut at line ends): every non-blank line of the gold and prediction
   files goes to the id shard of its "id" (a CRC-32 of it; a line without a string id to shard 0), written to
   that shard's part file with its file and line number.
2. Score (a unit per id shard): the shard's gold lines are read as the local reader reads them
   (``pipeline_ref.GoldReader``), then its prediction lines in file order; everything that depends on earlier
   lines (a repeated gold id, an unknown id, a model's second answer to an item) involves lines of one id and so
   of one shard (so does an unknown id's rejected gold line, which its error row names). Its gold errors go to
   a file in line order, its rows and problems (as lines of errors.jsonl) to the shard's result file in (file,
   line) order, and for each model it met, its missing rows in gold order, its unparsed ids, its counts and
   summary files (``shard_summary``).
3. Missing rows for the models a shard never met (known once every shard is scored), a unit per such shard.
4. The driver merges the shards' gold errors by line, their files by (file, line), then each model's missing
   rows by gold line, into scores.jsonl and errors.jsonl, assigning model codes in order of first appearance as
   the local stream does.
5. The summary: the counts added, each model's ranks merged over shards and given to the rows (a unit per
   shard), each model's rows streamed in the order of scores.jsonl (``shard_summary``), its unparsed ids merged
   from the shards' files as summary.json is written (``pipeline.write_summary``).

The driver holds neither the predictions, the gold answers, a column per row nor an error row: the count tables
and error counts by kind, and a block of rows (or ids) a step of its merges. Each unit holds one shard's gold
and the lines it reads. The intermediate files live in the output folder (a folder every worker reaches, as
they reach the inputs) and are removed at the end.
"""

from __future__ import annotations

import heapq
import io
import math
import os
import pickle
import shutil
import struct
import zlib
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np

from benchmint import tasks
from benchmint.io import InputError, decode_line, dumps, open_input
from benchmint.metrics import batch_ref, shard_summary
from benchmint.metrics.aggregate import pack_triples, unpack_triples
from benchmint.metrics.pipeline import (
    MISSING,
    STATUS_NAMES,
    UNPARSED,
    Gold,
    ScoreConfig,
    event_error,
    format_row,
    grouped_blocks,
    insert_user_columns,
    model_block_base,
    name_rejected_gold,
    read_answer,
    rejected_gold,
)
from benchmint.records import Item, Prediction, RecordError

# Bytes of input per split unit: large enough that the parts (one per range and shard) stay few.
SHARD_BYTES = 8 << 20
# Input bytes (gold and predictions) per id shard; there are at least MIN_ID_SHARDS.
ID_SHARD_BYTES = 64 << 20
MIN_ID_SHARDS = 4
_FRAME = struct.Struct("<IQI")  # file number, line number, length of the line's bytes
_PICKLED = 4096  # (order key, id) pairs per pickle of a shard's unparsed ids: the driver reads them that many a step


def shards_of(path: str, shard_bytes: int = SHARD_BYTES, what: str = "predictions") -> Iterator[
        tuple[str, int, int, int]]:
    """(path, first byte, end byte, number of its first line) of each byte range of ``path``, cut after a newline."""
    with open_input(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        start, line = 0, 1
        while start < size:
            fh.seek(min(start + shard_bytes, size))
            fh.readline()  # to the end of the line the cut fell in
            end = min(fh.tell(), size) if start + shard_bytes < size else size
            fh.seek(start)
            lines = fh.read(end - start).count(b"\n")
            yield path, start, end, line
            start, line = end, line + lines


def id_shard(obj, n_shards: int) -> int:
    """The id shard of a decoded line: by its string "id", shard 0 for anything else (such a line is an error
    whatever the other lines hold)."""
    rid = obj.get("id") if isinstance(obj, dict) else None
    if not isinstance(rid, str):
        return 0
    return zlib.crc32(rid.encode("utf-8", "surrogatepass")) % n_shards


def split_range(path: str, file_no: int, start: int, end: int, first_line: int, n_shards: int,
                part_prefix: str) -> int:
    """In a worker: the non-blank lines of one byte range into ``part_prefix.<shard>``, framed with their file and
    line numbers; returns the number of lines."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    parts: dict[int, list[bytes]] = {}
    n = 0
    for offset, raw in enumerate(io.BytesIO(data)):  # lines as the local reader iterates them (cut at \n only)
        if not raw.strip():
            continue
        obj, err = decode_line(raw)
        shard = 0 if err else id_shard(obj, n_shards)
        parts.setdefault(shard, []).append(_FRAME.pack(file_no, first_line + offset, len(raw)) + raw)
        n += 1
    for shard, frames in parts.items():
        with open(f"{part_prefix}.{shard}", "wb") as fh:
            fh.write(b"".join(frames))
    return n


def _frames(paths: list[str]) -> Iterator[tuple[int, int, bytes]]:
    """(file number, line, raw bytes) of the part files, in their order."""
    for p in paths:
        if not os.path.exists(p):  # the range had no line of this shard
            continue
        with open(p, "rb") as fh:
            data = fh.read()
        pos = 0
        while pos < len(data):
            file_no, line, size = _FRAME.unpack_from(data, pos)
            pos += _FRAME.size
            yield file_no, line, data[pos:pos + size]
            pos += size


def _read_gold(gold_path: str, parts: list[str], kind, fields: tuple[str, ...], symmetry: bool):
    from benchmint.metrics.pipeline_ref import GoldReader

    reader = GoldReader(gold_path, kind, fields, symmetry)
    for _, line, raw in _frames(parts):
        obj, err = decode_line(raw)
        if err:
            reader.add(line, RecordError(gold_path, line, err, kind="malformed_json"))
            continue
        try:
            reader.add(line, Item.from_json(obj, gold_path, line))
        except RecordError as exc:
            reader.add(line, exc)
    return reader


def _missing_rows(reader, model: str, seen: set, cfg_args: tuple, path: str, rows: shard_summary.ModelRows) -> None:
    """One model's rows for the shard's gold items it did not answer, in gold order: (gold line, id, row, |G|) to
    ``path``, their columns to ``rows``."""
    kind, sip_lambda, sip_gamma = cfg_args
    if len(seen) == len(reader.ids):
        return  # no file: nothing missing (the usual case, one per model and shard)
    with open(path, "wb") as fh:
        for gi, rid in enumerate(reader.ids):
            if gi in seen:
                continue
            n_gold = len(reader.answers[gi])
            metrics = batch_ref.metrics_from_counts(0, 0, n_gold, sip_lambda, sip_gamma)
            pickle.dump((reader.lines[gi], rid, format_row(rid, model, (), kind, MISSING, metrics), n_gold), fh)
            rows.add(shard_summary.MISSING_KEY + reader.lines[gi], gi, 0, 0, n_gold, MISSING, math.nan, math.nan,
                     math.nan)


def score_id_shard(shard: int, gold_path: str, pred_paths: list[str], gold_parts: list[str], pred_parts: list[str],
                   task: str, fields: tuple[str, ...], symmetry: bool, sip_lambda: float, sip_gamma: float,
                   out_prefix: str) -> dict:
    """In a worker: one id shard scored. Writes ``out_prefix.rows`` (per prediction line in file order: file number,
    line, problems as lines of errors.jsonl, row text or None, its model and count triple), ``out_prefix.gold_errors``
    (line, error line) in line order, ``out_prefix.missing.<k>`` per model met (its missing rows),
    ``out_prefix.unparsed.<k>`` (its unparsed ids with their order keys, in blocks) and the summary's files of each
    model met (``out_prefix.m.*``, ``shard_summary.write_models``); returns the gold side (item count, strata
    values), the models met, their counts and places in those files, and the error rows by kind (gold's and
    predictions')."""
    kind = _CompiledExtract(tasks.get(task))
    reader = _read_gold(gold_path, gold_parts, kind, fields, symmetry)
    # Lines of one id meet in one shard: an unknown id's rejected gold line is this shard's if anyone's.
    rejected = rejected_gold(reader.errors)
    with open(out_prefix + ".gold_errors", "wb") as fh:
        for line, e in sorted(zip(_error_lines(reader.errors), reader.errors), key=lambda le: le[0]):
            pickle.dump((line, dumps(e) + "\n"), fh)
    models: dict[str, set] = {}
    rows: dict[str, shard_summary.ModelRows] = {}
    unparsed: dict[str, list[tuple[int, str]]] = {}
    kinds: Counter = Counter()

    def event(out, file_no: int, line: int, problems: list[dict], text: str | None, cols: tuple | None) -> None:
        """A prediction line's result: its problems as lines of errors.jsonl, its row, (model, count triple)."""
        kinds.update(e["kind"] for e in problems)
        pickle.dump((file_no, line, "".join(dumps(e) + "\n" for e in problems), text, cols), out)

    with open(out_prefix + ".rows", "wb") as out:
        for file_no, line, raw in _frames(pred_parts):
            path = pred_paths[file_no]
            obj, err = decode_line(raw)
            if err:
                event(out, file_no, line, [RecordError(path, line, err, kind="malformed_json").row()], None, None)
                continue
            try:
                pred = Prediction.from_json(obj, path, line)
            except RecordError as exc:
                event(out, file_no, line, [exc.row()], None, None)
                continue
            problems: list[dict] = []
            p = read_answer(pred, kind, path, line, problems)
            if p is None:
                event(out, file_no, line, problems, None, None)
                continue
            gi = reader.index.get(p.rid)
            if gi is None:
                e = event_error("unknown_id", path, line, p.rid, p.model)
                name_rejected_gold(e, rejected)
                event(out, file_no, line, [e], None, None)
                continue
            seen = models.setdefault(p.model, set())
            if gi in seen:
                event(out, file_no, line, [event_error("duplicate_prediction", path, line, p.rid, p.model)], None,
                      None)
                continue
            seen.add(gi)
            g = reader.answers[gi]
            # The row shows the answer as read; with symmetry, it is compared after folding.
            compared = kind.fold(p.answer, reader.fold_data[gi]) if symmetry else p.answer
            tp = len(set(compared) & set(g))
            metrics = batch_ref.metrics_from_counts(tp, len(compared), len(g), sip_lambda, sip_gamma)
            text = format_row(p.rid, p.model, p.answer, kind, p.status, metrics)
            key = (file_no << 40) + line
            rows.setdefault(p.model, shard_summary.ModelRows()).add(
                key, gi, tp, len(compared), len(g), p.status, p.confidence, p.difficulty, p.tokens)
            if p.status == UNPARSED:
                unparsed.setdefault(p.model, []).append((key, p.rid))
            event(out, file_no, line, problems, text, (p.model, tp, len(compared), len(g)))
    strata = reader.strata()
    for k, (model, seen) in enumerate(models.items()):
        _missing_rows(reader, model, seen, (kind, sip_lambda, sip_gamma), f"{out_prefix}.missing.{k}", rows[model])
    counts, places = shard_summary.write_models(list(rows.values()), strata, f"{out_prefix}.m")
    for k, model in enumerate(models):
        if model in unparsed:
            with open(f"{out_prefix}.unparsed.{k}", "wb") as fh:
                ids = unparsed.pop(model)
                for at in range(0, len(ids), _PICKLED):
                    pickle.dump(ids[at:at + _PICKLED], fh)
    return {"models": list(models), "n_items": len(reader.ids), "strata": {f: values for f, (_, values) in strata.items()},
            "counts": dict(zip(models, counts)), "places": dict(zip(models, places)), "error_kinds": kinds,
            "gold_error_kinds": Counter(e["kind"] for e in reader.errors)}


def _error_lines(errors: list[dict]) -> list[int]:
    return [e.get("line") or 0 for e in errors]  # a gold error always names its line


def missing_for(shard: int, gold_path: str, gold_parts: list[str], task: str, fields: tuple[str, ...],
                symmetry: bool, sip_lambda: float, sip_gamma: float, models: list[tuple[int, str]],
                out_prefix: str) -> dict:
    """In a worker: the missing rows of the shard's gold items for models that answered none of them, to
    ``out_prefix.absent.<model code>``, and their summary's files (``out_prefix.a.*``); returns each such
    model's counts and place in those files by code."""
    kind = tasks.get(task)
    reader = _read_gold(gold_path, gold_parts, kind, fields, symmetry)
    rows = []
    for code, model in models:
        rows.append(shard_summary.ModelRows())
        _missing_rows(reader, model, set(), (kind, sip_lambda, sip_gamma), f"{out_prefix}.absent.{code}", rows[-1])
    counts, places = shard_summary.write_models(rows, reader.strata(), f"{out_prefix}.a")
    return {code: got for (code, _), got in zip(models, zip(counts, places))}


class _CompiledExtract:
    """An answer kind whose outputs are read by the compiled extractor where it decides (``tasks.extract``): the
    answers of the local compiled stream, at its pace rather than the reference's."""

    def __init__(self, kind: tasks.AnswerKind) -> None:
        from benchmint.tasks.extract import extractor

        self._kind = kind
        self.extract = extractor(kind)

    def __getattr__(self, name: str):
        return getattr(self._kind, name)


class ShardedGold(Gold):
    """The gold as the driver of an id-sharded run knows it: item count, each stratum field's values (no codes per
    item) and errors."""


def _pickles(path: str) -> Iterator:
    if not os.path.exists(path):
        return
    with open(path, "rb") as fh:
        while True:
            try:
                yield pickle.load(fh)
            except EOFError:
                return


def _run(executor, fn, args: list[tuple], what) -> list:
    """Every unit's result in unit order; a unit's failure stops the run with what it was."""
    from benchmint.run.executors import UnitTimeout, WorkerDied

    results: list = [None] * len(args)
    for i, result in executor.map_unordered(fn, args):
        if isinstance(result, (UnitTimeout, WorkerDied, BaseException)):
            if isinstance(result, OSError):
                raise InputError(f"cannot read {what(i)}: {result}")
            raise RuntimeError(f"{what(i)} failed: {type(result).__name__}: {result}")
        results[i] = result
    return results


def n_id_shards(paths: list[str]) -> int:
    total = sum(os.path.getsize(p) for p in paths)
    return max(MIN_ID_SHARDS, math.ceil(total / ID_SHARD_BYTES))


def stream(pred_paths, gold_path, cfg: ScoreConfig, out_path: Path, errors_path: Path, progress, executor,
           work_dir: Path, n_shards: int | None = None) -> tuple[dict, ShardedGold, Counter]:
    """Score ``pred_paths`` against ``gold_path`` by id shards on ``executor``: rows to ``out_path`` (with the user
    metrics' columns) and problems to ``errors_path`` (the gold's first), as ``pipeline_ref.load_gold`` + ``stream``
    + ``append_missing`` would, and the summary's models as ``summarize`` gives them, each model's unparsed ids as
    a function that reads them (``unparsed_ids``). Returns them, the gold and the error rows by kind.
    ``work_dir`` (created here; the caller removes it once the summary is written) holds the intermediate files.
    The error rows are written as they come, never held: gold.errors is empty."""
    from benchmint.metrics.pipeline import _strata_fields

    pred_paths, gold_path = [str(p) for p in pred_paths], str(gold_path)
    fields = _strata_fields(cfg.by)
    n = n_shards or n_id_shards([gold_path, *pred_paths])
    work = Path(work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    kinds: Counter = Counter()
    try:
        # 1. split every file into id shards
        ranges = [(-1, r) for r in shards_of(gold_path, SHARD_BYTES, "gold")]
        ranges += [(f, r) for f, p in enumerate(pred_paths) for r in shards_of(p, SHARD_BYTES)]
        prefixes = [str(work / (f"g{k}" if f < 0 else f"p{f}-{k}")) for k, (f, _) in enumerate(ranges)]
        split_args = [(r[0], max(f, 0), r[1], r[2], r[3], n, prefix) for (f, r), prefix in zip(ranges, prefixes)]
        _run(executor, split_range, split_args, lambda i: f"{ranges[i][1][0]} from line {ranges[i][1][3]}")
        gold_prefixes = [p for (f, _), p in zip(ranges, prefixes) if f < 0]
        pred_prefixes = [p for (f, _), p in zip(ranges, prefixes) if f >= 0]
        # 2. score each id shard
        common = (cfg.kind.name, fields, cfg.symmetry, cfg.sip_lambda, cfg.sip_gamma)
        shard_args = [(s, gold_path, pred_paths, [f"{p}.{s}" for p in gold_prefixes],
                       [f"{p}.{s}" for p in pred_prefixes], *common, str(work / f"s{s}")) for s in range(n)]
        shards = _run(executor, score_id_shard, shard_args, lambda i: f"id shard {i} of {n}")
        gold = _gold(gold_path, shards, fields)
        errors = open(errors_path, "w", encoding="utf-8", newline="\n")
        with errors:
            for _, text in heapq.merge(*(_pickles(str(work / f"s{s}.gold_errors")) for s in range(n)),
                                       key=lambda le: le[0]):
                errors.write(text)
            for s in shards:
                kinds.update(s["gold_error_kinds"])
            if not gold.n_items:
                return {}, gold, kinds
            # 4a. the prediction lines, merged in file order
            models: dict[str, int] = {}
            triples = open(work / "triples", "wb") if cfg.user_metrics else None
            with open(out_path, "w", encoding="utf-8", newline="\n") as out:
                events = heapq.merge(*(_pickles(str(work / f"s{s}.rows")) for s in range(n)),
                                     key=lambda e: (e[0], e[1]))
                for _, _, problems, text, row in events:
                    progress(1)
                    errors.write(problems)
                    if text is None:
                        continue
                    out.write(text + "\n")
                    models.setdefault(row[0], len(models))
                    if triples:
                        triples.write(_TRIPLE.pack(*row[1:]))
                for s in shards:
                    kinds.update(s["error_kinds"])
                # 3. missing rows of models a shard never met
                absent = [(s, [(c, m) for m, c in models.items() if m not in shards[s]["models"]]) for s in range(n)]
                absent = [(s, ms) for s, ms in absent if ms]
                absent_counts = _run(executor, missing_for,
                                     [(s, gold_path, [f"{p}.{s}" for p in gold_prefixes], *common, ms,
                                       str(work / f"s{s}")) for s, ms in absent],
                                     lambda i: f"missing rows of id shard {absent[i][0]}")
                # 4b. each model's missing rows, merged in gold order
                for model, code in models.items():
                    sources = []
                    for s in range(n):
                        met = shards[s]["models"]
                        name = f"s{s}.missing.{met.index(model)}" if model in met else f"s{s}.absent.{code}"
                        sources.append(_pickles(str(work / name)))
                    for _, rid, text, n_gold in heapq.merge(*sources, key=lambda r: r[0]):
                        out.write(text + "\n")
                        errors.write(dumps(event_error("missing_prediction", gold_path, None, rid, model)) + "\n")
                        kinds["missing_prediction"] += 1
                        if triples:
                            triples.write(_TRIPLE.pack(0, 0, n_gold))
            if triples:
                triples.close()
        # 5. the summary, from each model's counts and its rows streamed in order
        counts, where = _model_counts(list(models), shards, absent, absent_counts, work)
        summary = _summary(list(models), counts, where, gold, cfg, executor, work, shards)
        uniq, base = summary.pop(None)
        if cfg.user_metrics:
            insert_user_columns(out_path, cfg.user_metrics, unpack_triples(uniq, base),
                                _triple_classes(work / "triples", uniq, base), sum(c["n"]["rows"] for c in counts.values()))
        return summary, gold, kinds
    finally:
        executor.close()


def unparsed_ids(work: Path, shards: list[dict], model: str) -> Iterator[str]:
    """A model's unparsed ids in the order of scores.jsonl, merged from the shards' files a block at a time."""
    sources = []
    for s, shard in enumerate(shards):
        if model in shard["models"]:
            path = str(work / f"s{s}.unparsed.{shard['models'].index(model)}")
            sources.append(pair for block in _pickles(path) for pair in block)
    for _, rid in heapq.merge(*sources, key=lambda kr: kr[0]):
        yield rid


_TRIPLE = struct.Struct("<iii")


def _model_counts(models: list[str], shards: list[dict], absent: list[tuple], absent_counts: list[dict],
                  work: Path) -> tuple[dict[str, dict], dict[str, list[tuple[str, dict]]]]:
    """Each model's counts added over the shards, and its parts of the summary's files, one per shard: the files'
    prefix and the model's place in them."""
    counts: dict[str, dict] = {m: {} for m in models}
    where: dict[str, list[tuple[str, dict]]] = {m: [] for m in models}
    for s, shard in enumerate(shards):
        for model in shard["models"]:
            shard_summary.add_counts(counts[model], shard["counts"][model])
            where[model].append((str(work / f"s{s}.m"), shard["places"][model]))
    for (s, ms), got in zip(absent, absent_counts):
        for code, model in ms:
            shard_summary.add_counts(counts[model], got[code][0])
            where[model].append((str(work / f"s{s}.a"), got[code][1]))
    return counts, where


def _triple_classes(path: Path, uniq: np.ndarray, base: int) -> Iterator[np.ndarray]:
    """Each row's index into the distinct triples, read from the triples file a block at a time."""
    with open(path, "rb") as fh:
        while True:
            t = np.fromfile(fh, dtype=np.int32, count=3 * shard_summary.BLOCK).reshape(-1, 3)
            if not len(t):
                return
            yield np.searchsorted(uniq, pack_triples(t[:, 0], t[:, 1], t[:, 2], base))


def _summary(models: list[str], counts: dict[str, dict], where: dict[str, list[tuple[str, dict]]], gold: ShardedGold,
             cfg: ScoreConfig, executor, work: Path, shards: list[dict]) -> dict:
    """``summarize``'s models from the shards' counts and files (under the key None: the distinct triples and the
    base they are packed with, for the user metrics' columns)."""
    n_pred = max(t[1] for c in counts.values() for t in c["groups"][None][0])
    n_gold = max(t[2] for c in counts.values() for t in c["groups"][None][0])
    base = max(n_pred, n_gold) + 1
    fields = {f: values for f, (_, values) in gold.strata.items()}
    tables = shard_summary.count_tables(counts, models, fields, base, len(STATUS_NAMES))
    overall, by_blocks = grouped_blocks(tables, list(fields.values()), models, base, cfg, list(fields))
    uniq, class_score = shard_summary.class_scores(counts, base, cfg)
    # Ranks: each ranked column's distinct values merged over the shards, then given to the rows by shard.
    files = shard_summary.Files()
    try:
        distinct: dict[str, dict[str, int]] = {}
        for model in models:
            n = counts[model]["n"]
            distinct[model] = {name: shard_summary.merge_ranks(files, where[model], name)
                               for name, _, mask in shard_summary.RANKED if n[mask] >= 2}
        files.close()  # the ranks written, for the units to read
        by_file: dict[str, list[dict]] = {}
        for model in models:
            for prefix, place in where[model]:
                by_file.setdefault(prefix, []).append(place)
        _run(executor, shard_summary.attach_ranks, list(by_file.items()),
             lambda i: f"ranks of {Path(list(by_file)[i]).name}")
        out: dict = {}
        for m, model in enumerate(models):
            block = model_block_base(overall, by_blocks, m)
            shard_summary.model_figures(model, counts[model], files, where[model], uniq, class_score, base, block,
                                        cfg, distinct[model])
            block["unparsed_ids"] = partial(unparsed_ids, work, shards, model)
            out[model] = block
    finally:
        files.close()
    out[None] = (uniq, base)
    return out


def _gold(path: str, shards: list[dict], fields: tuple[str, ...]) -> ShardedGold:
    """The gold's item count and each field's values over every shard, sorted as the local reader sorts them."""
    strata = {f: (None, sorted({v for s in shards for v in s["strata"][f]})) for f in fields}
    return ShardedGold(path, sum(s["n_items"] for s in shards), strata, [])
