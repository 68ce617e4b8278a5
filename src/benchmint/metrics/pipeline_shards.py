"""The streaming stage of ``benchmint.metrics.pipeline`` as shards of prediction lines on an executor (``score
--engine ray``), merged by the driver into the rows, errors and columns of the local stream, byte for byte.

A shard is a byte range of one predictions file cut at line ends. Its unit reads, extracts (the compiled extractor
where it decides) and scores every line (``pipeline.read_answer``, ``batch_ref.metrics_from_counts``) against the
gold answers, and sends back per line its problems and its formatted row. What depends on the lines before it (which model a
row belongs to, whether the id is in the gold file, whether the model answered that id already) is decided by
the driver, which takes the shards in file order and writes each kept row: so the output equals the local
stream's whatever order the shards finished in.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

from benchmint import tasks
from benchmint.io import InputError, decode_line, open_input
from benchmint.metrics import batch_ref
from benchmint.metrics.pipeline import Columns, Gold, ScoreConfig, event_error, format_row, read_answer
from benchmint.records import Prediction, RecordError

# Bytes of predictions per shard: a few thousand lines, a fraction of a second of work; small enough that the
# last shards do not leave most workers idle (8 MB shards of 120,000 rows on 2 CPUs: 18.8 s, 1 MB: 12.5 s).
SHARD_BYTES = 1 << 20


def shards_of(path: str, shard_bytes: int = SHARD_BYTES) -> Iterator[tuple[str, int, int, int]]:
    """(path, first byte, end byte, number of its first line) of each shard of ``path``, cut after a newline."""
    with open_input(path, "predictions") as fh:
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


def score_shard(path: str, start: int, end: int, first_line: int, gold: tuple, task: str, sip_lambda: float,
                sip_gamma: float) -> list[tuple]:
    """In a worker: per non-blank line of the shard, (line, problems, row or None).

    ``gold`` is (index by id, answers, fold data or None). A row is (id, model, gold index or None when the id is
    not in the gold file, its scores.jsonl line, tp, n_pred, n_gold, status, confidence, difficulty, tokens).
    """
    index, answers, fold_data = gold
    kind = _CompiledExtract(tasks.get(task))
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    out: list[tuple] = []
    for offset, raw in enumerate(io.BytesIO(data)):  # lines as the local reader iterates them
        line = first_line + offset
        if not raw.strip():
            continue
        obj, err = decode_line(raw)
        if err:
            out.append((line, [RecordError(path, line, err, kind="malformed_json").row()], None))
            continue
        try:
            pred = Prediction.from_json(obj, path, line)
        except RecordError as exc:
            out.append((line, [exc.row()], None))
            continue
        problems: list[dict] = []
        p = read_answer(pred, kind, path, line, problems)
        if p is None:
            out.append((line, problems, None))
            continue
        gi = index.get(p.rid)
        if gi is None:
            out.append((line, problems, (p.rid, p.model, None)))
            continue
        g = answers[gi]
        compared = kind.fold(p.answer, fold_data[gi]) if fold_data is not None else p.answer
        tp = len(set(compared) & set(g))
        metrics = batch_ref.metrics_from_counts(tp, len(compared), len(g), sip_lambda, sip_gamma)
        text = format_row(p.rid, p.model, p.answer, kind, p.status, metrics)
        out.append((line, problems, (p.rid, p.model, gi, text, tp, len(compared), len(g), p.status, p.confidence,
                                     p.difficulty, p.tokens)))
    return out


class _CompiledExtract:
    """An answer kind whose outputs are read by the compiled extractor where it decides (``tasks.extract``): the
    answers of the local compiled stream, at its pace rather than the reference's."""

    def __init__(self, kind: tasks.AnswerKind) -> None:
        from benchmint.tasks.extract import extractor

        self._kind = kind
        self.extract = extractor(kind)

    def __getattr__(self, name: str):
        return getattr(self._kind, name)


def stream(pred_paths, gold: Gold, cfg: ScoreConfig, out, errors: list[dict], progress, executor,
           shard_bytes: int | None = None) -> tuple[Columns, list[set]]:
    """``pipeline_ref.stream`` with the lines read and scored in shards on ``executor``; the same rows, errors,
    columns and ``seen`` sets. ``gold`` is the reference form (its index and answers)."""
    from benchmint.metrics.pipeline_ref import ColumnBuilder
    from benchmint.run.executors import UnitTimeout, WorkerDied

    assert gold.index is not None and gold.answers is not None  # the reference form
    shared = (gold.index, gold.answers, gold.fold_data)
    put = getattr(executor, "put", None)  # sent to the cluster once, not with every shard
    gold_arg = put(shared) if put is not None else shared
    shards = [s for p in pred_paths for s in shards_of(str(p), shard_bytes or SHARD_BYTES)]
    args = [(*s, gold_arg, cfg.kind.name, cfg.sip_lambda, cfg.sip_gamma) for s in shards]
    builder = ColumnBuilder()
    seen: list[set] = []
    waiting: dict[int, list[tuple]] = {}
    next_shard = 0
    try:
        for i, result in executor.map_unordered(score_shard, args):
            if isinstance(result, (UnitTimeout, WorkerDied, BaseException)):
                path, start, end, line = shards[i]
                if isinstance(result, OSError):
                    raise InputError(f"cannot read predictions file {path}: {result}")
                raise RuntimeError(f"the shard of {path} from line {line} failed: {type(result).__name__}: {result}")
            waiting[i] = result
            while next_shard in waiting:  # the driver's part, in file order
                path, lines = shards[next_shard][0], waiting.pop(next_shard)
                for line, problems, row in lines:
                    _merge(line, problems, row, path, builder, seen, out, errors)
                progress(len(lines))  # the predictions read (non-blank lines), as the local stream counts them
                next_shard += 1
    finally:
        executor.close()
    return builder.build(), seen


def _merge(line: int, problems: list[dict], row: tuple | None, path: str, builder, seen: list[set], out,
           errors: list[dict]) -> None:
    """One line's outcome, decided as ``pipeline_ref.stream`` decides it."""
    if row is None:
        errors.extend(problems)
        return
    rid, model, gi = row[0], row[1], row[2]
    if gi is None:
        errors.append(event_error("unknown_id", path, line, rid, model))
        return
    m = builder.model_code(model)
    if m == len(seen):
        seen.append(set())
    if gi in seen[m]:
        errors.append(event_error("duplicate_prediction", path, line, rid, model))
        return
    errors.extend(problems)
    seen[m].add(gi)
    _, _, _, text, tp, n_pred, n_gold, status, confidence, difficulty, tokens = row
    out.write(text + "\n")
    builder.add(model=m, gold_idx=gi, tp=tp, n_pred=n_pred, n_gold=n_gold, status=status, confidence=confidence,
                difficulty=difficulty, tokens=tokens)
