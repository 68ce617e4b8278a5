"""The summary of a score by id shards (``pipeline_shards``) in bounded driver memory, equal to ``summarize``'s.

Every figure of the summary is either a function of counts (rows per model, stratum and count triple, per
status; each model's rows per triple among those stating a confidence or a difficulty) or a float reduction over
one model's rows in the order of scores.jsonl (means, the ECE bins' sums, the Spearman correlations' sums over
average ranks). The counts are taken in the shard units and added by the driver; the bootstrap draws from them as
``summarize`` does (``aggregate.bootstrap_ci`` resamples triple classes by count, never rows).

The reductions depend on the order of the rows and on how numpy adds them: ``np.add.reduce`` over a float64
column sums pairwise, splitting a length m > 128 at m // 2 rounded down to a multiple of 8, and ``np.bincount``'s
weighted sums go item by item. ``PairwiseSum`` replays the first with each subtree of up to ``CHUNK`` values
summed by numpy itself, ``SequentialSums`` the second, so the driver streams each model's rows once, in the
order of scores.jsonl, block by block, and gets the same bits. Ranks need every row of a model: each shard writes
a model's distinct values of a ranked column with their counts, the driver merges them block by block into each
distinct value's average rank (ties across shards counted whole), a unit per shard gives its rows their ranks,
and the driver's ordered pass reads them with the other columns.

Per model the driver holds a block of rows per shard, the sums' subtrees in progress and the count tables.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

import numpy as np

from benchmint.metrics.aggregate import pack_triples, unpack_triples
from benchmint.metrics.batch import score_counts
from benchmint.metrics.behaviour import (
    calibration_block,
    class_rank_table,
    confidence_bins,
    expected_calibration_error,
    personality,
    selection_from_counts,
    token_label,
)

# Rows (or distinct values) read per step of the driver's merges, shared among the shards (a shard per 64 MB of
# input: their number grows with the input, the driver's buffers must not), at least MIN_BLOCK a shard.
BLOCK = 1 << 15
MIN_BLOCK = 256
N_BINS = 10  # calibration's default ECE bins, as summarize uses them
# A prediction row's order key is (file number << 40) + line; a missing row's comes after every prediction row.
MISSING_KEY = 1 << 62
ROW = np.dtype([("key", "<i8"), ("tp", "<i4"), ("n_pred", "<i4"), ("n_gold", "<i4"), ("confidence", "<f8"),
                ("difficulty", "<f8"), ("tokens", "<f8")])
# The ranked columns: (name, column, mask): confidence and difficulty over the rows stating them, and both over
# the rows stating both (the third Spearman correlation's).
RANKED = (("conf", "confidence", "conf"), ("diff", "difficulty", "diff"), ("conf_both", "confidence", "both"),
          ("diff_both", "difficulty", "both"))
FINAL = np.dtype(ROW.descr + [(f"r_{name}", "<f8") for name, _, _ in RANKED])
MASKS = ("conf", "diff", "both")


class PairwiseSum:
    """``np.add.reduce`` of a float64 column of ``n`` values, fed in order in blocks of any length; holds at most
    one subtree's values and one partial sum per level of the tree."""

    CHUNK = 1 << 13

    def __init__(self, n: int) -> None:
        self.n, self.fed = n, 0
        self.buf = np.empty(0)
        self.stack: list[np.float64] = []
        self.plan = self._walk(n)
        self.step = next(self.plan, None)
        self._drain()  # an empty column: its one subtree is already complete

    def _walk(self, m: int) -> Iterator[int]:
        """Post-order: a subtree of up to CHUNK values as its length, -1 to add the last two partial sums."""
        if m <= self.CHUNK:
            yield m
            return
        half = m // 2
        half -= half % 8
        yield from self._walk(half)
        yield from self._walk(m - half)
        yield -1

    def add(self, values: np.ndarray) -> None:
        self.fed += len(values)
        self.buf = np.concatenate([self.buf, values]) if len(self.buf) else np.asarray(values, dtype=np.float64)
        self._drain()

    def _drain(self) -> None:
        while self.step is not None:
            if self.step < 0:
                b, a = self.stack.pop(), self.stack.pop()
                self.stack.append(a + b)
            elif self.step <= len(self.buf):
                self.stack.append(np.add.reduce(self.buf[: self.step]))
                self.buf = self.buf[self.step:]
            else:
                return
            self.step = next(self.plan, None)

    def total(self) -> np.float64:
        if self.fed != self.n or self.step is not None:
            raise RuntimeError(f"pairwise sum fed {self.fed} values of {self.n}")
        return self.stack[0] if self.stack else np.float64(0.0)

    def mean(self) -> float:
        return float(self.total() / self.n)


class SequentialSums:
    """``np.bincount(bins, weights, n_bins)`` fed in blocks: each bin's sum item by item, as bincount adds."""

    def __init__(self, n_bins: int) -> None:
        self.sums = np.zeros(n_bins)

    def add(self, bins: np.ndarray, weights: np.ndarray) -> None:
        order = np.argsort(bins, kind="stable")
        b, w = bins[order], weights[order]
        cuts = np.searchsorted(b, np.arange(len(self.sums) + 1))
        for k in range(len(self.sums)):
            if cuts[k + 1] > cuts[k]:
                self.sums[k] = np.add.accumulate(np.concatenate([self.sums[k:k + 1], w[cuts[k]:cuts[k + 1]]]))[-1]


# --- in the shard units ---------------------------------------------------------------------------------------------


class ModelRows:
    """One model's rows in a shard, in the order of scores.jsonl, with each row's gold item (its strata)."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, key: int, item: int, tp: int, n_pred: int, n_gold: int, status: int, confidence: float,
            difficulty: float, tokens: float) -> None:
        self.rows.append((key, tp, n_pred, n_gold, confidence, difficulty, tokens, item, status))


def _counter(*columns: np.ndarray) -> Counter:
    """Rows per distinct tuple of the columns (small non-negative integers), packed into one int64 to count."""
    if not len(columns[0]):
        return Counter()
    cols = [np.asarray(c, dtype=np.int64) for c in columns]
    radix = [int(c.max()) + 1 for c in cols]
    if math.prod(radix) >= 1 << 62:  # sets too large to pack: count the rows' tuples as they are
        uniq, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
        return Counter(dict(zip(map(tuple, uniq.tolist()), counts.tolist())))
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for c, r in zip(cols, radix):
        key = key * r + c
    uniq, counts = np.unique(key, return_counts=True)
    parts = []
    for r in reversed(radix):
        parts.append(uniq % r)
        uniq = uniq // r
    return Counter(dict(zip(zip(*(p.tolist() for p in reversed(parts))), counts.tolist())))


def _per_model(counter: Counter, n_models: int, key=lambda rest: tuple(rest)) -> list[Counter]:
    """A Counter keyed by (model, *rest) split into one Counter per model keyed by ``key(rest)``."""
    out = [Counter() for _ in range(n_models)]
    for (m, *rest), k in counter.items():
        out[m][key(rest)] = k
    return out


def write_models(models: list[ModelRows], strata: dict[str, tuple[np.ndarray, list[str]]], prefix: str) -> tuple[
        list[dict], list[dict]]:
    """In a shard unit: the rows of its models, model after model, to ``prefix.rows``, and each ranked column's
    distinct values and counts per model to ``prefix.<name>.v`` / ``.c`` (and ``.r`` for the ranks the driver
    gives them, NaN until then): one set of files for all the models, however many. Returns each model's counts
    (by stratum value, never by code: codes are per shard) and its place in the files (``Place``)."""
    lengths = [len(m.rows) for m in models]
    n_models = len(models)
    both = np.array([r for m in models for r in m.rows], dtype=ROW.descr + [("item", "<i8"), ("status", "<i8")])
    arr = np.empty(len(both), dtype=ROW)
    for name in ROW.names:
        arr[name] = both[name]
    mc = np.repeat(np.arange(n_models, dtype=np.int64), lengths)  # each row's model
    if np.any((np.diff(arr["key"]) <= 0) & (np.diff(mc) == 0)):
        raise RuntimeError("a shard's rows are not in the order of scores.jsonl")
    arr.tofile(prefix + ".rows")
    items, status = both["item"], both["status"]
    tp, n_pred, n_gold = arr["tp"], arr["n_pred"], arr["n_gold"]
    masks = {"conf": ~np.isnan(arr["confidence"]), "diff": ~np.isnan(arr["difficulty"])}
    masks["both"] = masks["conf"] & masks["diff"]
    known = masks["diff"]
    groups: dict = {None: (_per_model(_counter(mc, tp, n_pred, n_gold), n_models),
                           _per_model(_counter(mc, status), n_models))}
    for field, (codes, values) in strata.items():
        code = codes[items]
        groups[field] = (_per_model(_counter(mc, code, tp, n_pred, n_gold), n_models,
                                    lambda rest, values=values: (values[rest[0]], *rest[1:])),
                         _per_model(_counter(mc, code, status), n_models,
                                    lambda rest, values=values: (values[rest[0]], rest[1])))
    classes = {m: _per_model(_counter(mc[masks[m]], tp[masks[m]], n_pred[masks[m]], n_gold[masks[m]]), n_models)
               for m in MASKS}
    answered = n_pred > 0
    flags = {"conf": masks["conf"], "diff": known, "both": masks["both"], "tokens": ~np.isnan(arr["tokens"]),
             "answered": answered, "over": n_pred > n_gold, "under": (tp == n_pred) & answered & (n_pred < n_gold),
             "hard": known & (arr["difficulty"] >= 0.5), "easy": known & (arr["difficulty"] < 0.5)}
    per_model = {f: np.bincount(mc[v], minlength=n_models).tolist() for f, v in flags.items()}
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64).tolist()
    places = [{"rows": (starts[k], lengths[k])} for k in range(n_models)]
    for name, column, mask in RANKED:
        sel = masks[mask]
        v, m = arr[column][sel], mc[sel]
        order = np.lexsort((v, m))
        v, m = v[order], m[order]
        first = np.ones(len(v), dtype=bool)
        first[1:] = (v[1:] != v[:-1]) | (m[1:] != m[:-1])
        at = np.flatnonzero(first)
        v[at].tofile(f"{prefix}.{name}.v")
        np.diff(np.append(at, len(v))).astype(np.int64).tofile(f"{prefix}.{name}.c")
        np.full(len(at), np.nan).tofile(f"{prefix}.{name}.r")
        bounds = np.searchsorted(m[at], np.arange(n_models + 1)).tolist()
        for k in range(n_models):
            places[k][name] = (bounds[k], bounds[k + 1] - bounds[k])
    counts = [{"groups": {f: (triples[k], status[k]) for f, (triples, status) in groups.items()},
               "classes": {m: classes[m][k] for m in MASKS},
               "n": Counter(rows=lengths[k], **{f: per_model[f][k] for f in flags})} for k in range(n_models)]
    return counts, places


def attach_ranks(prefix: str, places: list[dict]) -> int:
    """In a unit per set of files (``write_models``): each model's rows with the ranks the driver gave its
    distinct values (``.<name>.r``), to ``prefix.final`` in the same places; returns the rows written."""
    arr = np.fromfile(prefix + ".rows", dtype=ROW)
    out = np.empty(len(arr), dtype=FINAL)
    for name in ROW.names:
        out[name] = arr[name]
    masks = {"conf": ~np.isnan(arr["confidence"]), "diff": ~np.isnan(arr["difficulty"])}
    masks["both"] = masks["conf"] & masks["diff"]
    for name, column, mask in RANKED:
        values = np.fromfile(f"{prefix}.{name}.v", dtype=np.float64)
        given = np.fromfile(f"{prefix}.{name}.r", dtype=np.float64)
        ranks = np.full(len(arr), np.nan)
        for place in places:
            (r0, rn), (v0, vn) = place["rows"], place[name]
            sel = masks[mask][r0:r0 + rn]
            if vn:
                seg = ranks[r0:r0 + rn]
                seg[sel] = given[v0:v0 + vn][np.searchsorted(values[v0:v0 + vn], arr[column][r0:r0 + rn][sel])]
        out[f"r_{name}"] = ranks
    out.tofile(prefix + ".final")
    return len(arr)


# --- in the driver --------------------------------------------------------------------------------------------------


class Files:
    """The shards' files open in the driver, each once for every model whose records it holds."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, str], object] = {}

    def get(self, path: str, mode: str = "rb"):
        if (path, mode) not in self.open:
            self.open[path, mode] = open(path, mode)
        return self.open[path, mode]

    def close(self) -> None:
        for fh in self.open.values():
            fh.close()  # type: ignore[attr-defined]
        self.open.clear()


class _Blocks:
    """``count`` records of a raw file from record ``start``, read ``rows`` at a time (plain reads, not a map, so
    pages read do not stay; the file may be shared with other readers: each read seeks to its place)."""

    def __init__(self, fh, dtype, rows: int, start: int = 0, count: int = 0) -> None:
        self.fh, self.dtype, self.rows = fh, np.dtype(dtype), rows
        self.pos, self.left = start * self.dtype.itemsize, count

    @property
    def more(self) -> bool:
        return self.left > 0

    def read(self) -> np.ndarray:
        if not self.left:
            return np.empty(0, dtype=self.dtype)
        self.fh.seek(self.pos)
        got = np.fromfile(self.fh, dtype=self.dtype, count=min(self.rows, self.left))
        if not len(got):
            raise RuntimeError(f"{self.fh.name} ends before its records")
        self.pos += got.nbytes
        self.left -= len(got)
        return got


def _sources(files: Files, parts: list[tuple[str, tuple[int, int]]], dtype) -> list[_Blocks]:
    """One reader per shard's part (its file and its records' first and count), BLOCK records a step among them."""
    rows = max(MIN_BLOCK, BLOCK // max(1, len(parts)))
    return [_Blocks(files.get(path), dtype, rows, *place) for path, place in parts]


def _merged(sources: list[_Blocks], key) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
    """Sorted streams (``key`` of a block: its sort keys, increasing within a stream and distinct) merged block by
    block: each step the part of every stream's buffer up to the smallest last key among streams with more to
    read, which holds every record of the streams up to that key. Yields the parts and their keys' order."""
    bufs = [s.read() for s in sources]
    while True:
        for i, s in enumerate(sources):
            if not len(bufs[i]) and s.more:
                bufs[i] = s.read()
        if not any(len(b) for b in bufs):
            return
        open_lasts = [key(b)[-1] for b, s in zip(bufs, sources) if s.more and len(b)]
        bound = min(open_lasts) if open_lasts else None
        parts = []
        for i, b in enumerate(bufs):
            cut = len(b) if bound is None else int(np.searchsorted(key(b), bound, side="right"))
            parts.append(b[:cut])
            bufs[i] = b[cut:]
        yield parts, np.argsort(np.concatenate([key(p) for p in parts]), kind="stable")


def merge_ranks(files: Files, parts: list[tuple[str, dict]], name: str) -> int:
    """The average rank of every distinct value of column ``name`` in each shard's part (``prefix.<name>.r`` at
    the part's place), over the values of every shard, ties given their average rank as
    ``behaviour.average_ranks`` gives it; returns the number of distinct values over all shards."""
    sources = _sources(files, [(f"{p}.{name}.v", place[name]) for p, place in parts], np.float64)
    counts = _sources(files, [(f"{p}.{name}.c", place[name]) for p, place in parts], np.int64)
    outs = [files.get(f"{p}.{name}.r", "r+b") for p, _ in parts]
    at_out = [place[name][0] * 8 for _, place in parts]
    pending = [np.empty(0, dtype=np.int64) for _ in parts]
    below, n_distinct = 0, 0
    for parts_, _ in _merged(sources, lambda b: b):
        cnt = []
        for i, part in enumerate(parts_):
            while len(pending[i]) < len(part):
                pending[i] = np.concatenate([pending[i], counts[i].read()])
            cnt.append(pending[i][: len(part)])
            pending[i] = pending[i][len(part):]
        uniq, inverse = np.unique(np.concatenate(parts_), return_inverse=True)
        equal = np.bincount(inverse, weights=np.concatenate(cnt)).astype(np.int64)
        starts = below + np.concatenate([[0], np.cumsum(equal)[:-1]]).astype(np.int64)
        ranks = (starts + (equal + 1) / 2)[inverse]
        at = 0
        for i, (part, out) in enumerate(zip(parts_, outs)):
            if len(part):
                out.seek(at_out[i])
                ranks[at:at + len(part)].tofile(out)
                at_out[i] += 8 * len(part)
            at += len(part)
        below += int(equal.sum())
        n_distinct += len(uniq)
    for out in outs:
        out.flush()  # the ranks are read by the units that attach them
    return n_distinct


def add_counts(into: dict, part: dict) -> None:
    """A shard's counts of one model added to the model's."""
    if not into:
        into.update(groups={f: (Counter(), Counter()) for f in part["groups"]},
                    classes={m: Counter() for m in MASKS}, n=Counter())
    for f, (triples, status) in part["groups"].items():
        into["groups"][f][0].update(triples)
        into["groups"][f][1].update(status)
    for m in MASKS:
        into["classes"][m].update(part["classes"][m])
    into["n"].update(part["n"])


def count_tables(counts: dict[str, dict], models: list[str], fields: dict[str, list[str]], base: int,
                 n_status: int) -> list[tuple]:
    """Per grouping (the models, then each stratum field by model and value) the tables ``summarize``'s
    ``_blocks`` takes: (groups, triple keys, counts) sorted by group and key, and rows per (group, status)."""
    tables = []
    for field, values in [(None, [None]), *fields.items()]:
        code = {v: i for i, v in enumerate(values)}
        rows, by_status = [], np.zeros((len(models) * len(values), n_status), dtype=np.int64)
        for m, model in enumerate(models):
            triples, status = counts[model]["groups"][field]
            for key, k in triples.items():
                value, t = (None, key) if field is None else (key[0], key[1:])
                rows.append((m * len(values) + code[value], *t, k))
            for key, k in status.items():
                value, s = (None, key[0]) if field is None else key
                by_status[m * len(values) + code[value], s] += k
        table = np.array(rows, dtype=np.int64).reshape(-1, 5)
        keys = pack_triples(table[:, 1], table[:, 2], table[:, 3], base)
        order = np.lexsort((keys, table[:, 0]))
        tables.append(((table[order, 0], keys[order], table[order, 4]), by_status))
    return tables


# Ranked rows of one model up to which their mean rank is known without a pass (below).
EXACT_RANKS = 94_906_264


def _mean_rank(n: int) -> float | None:
    """The mean of n average ranks as numpy takes it, or None past EXACT_RANKS: they add up to n (n + 1) / 2
    whatever the ties, a sum of halves that float64 holds exactly (each partial sum too) below 2**52, so the
    pairwise sum is that number."""
    return float(n * (n + 1) // 2) / n if n <= EXACT_RANKS else None


class ModelPass:
    """One model's float reductions, fed its rows in the order of scores.jsonl."""

    def __init__(self, n: Counter, score_ranks: dict[str, np.ndarray], pairs: dict[str, tuple[str, str, str]],
                 rank_means: dict[str, tuple[float, float]]):
        self.n, self.score_ranks, self.pairs, self.rank_means = n, score_ranks, pairs, rank_means
        self.precision = PairwiseSum(n["answered"])
        if n["conf"]:
            self.conf, self.conf_score, self.brier = (PairwiseSum(n["conf"]) for _ in range(3))
            self.bin_counts = np.zeros(N_BINS, dtype=np.int64)
            self.bin_conf, self.bin_score = SequentialSums(N_BINS), SequentialSums(N_BINS)
        self.difficulty, self.tokens = PairwiseSum(n["diff"]), PairwiseSum(n["tokens"])
        self.tokens_nan0 = PairwiseSum(n["rows"])  # nanmean's sum: every row, NaN as 0
        self.hard, self.easy = PairwiseSum(n["hard"]), PairwiseSum(n["easy"])
        self.products = {name: [PairwiseSum(n[mask]) for _ in range(3)] for name, (_, _, mask) in pairs.items()}

    def add(self, rows: np.ndarray, cls: np.ndarray, score: np.ndarray) -> None:
        tp, n_pred = rows["tp"], rows["n_pred"]
        answered = n_pred > 0
        self.precision.add(tp[answered] / n_pred[answered])
        conf, diff, tokens = rows["confidence"], rows["difficulty"], rows["tokens"]
        masks = {"conf": ~np.isnan(conf), "diff": ~np.isnan(diff)}
        masks["both"] = masks["conf"] & masks["diff"]
        if self.n["conf"]:
            c, s = conf[masks["conf"]], score[masks["conf"]]
            self.conf.add(c)
            self.conf_score.add(s)
            self.brier.add((c - s) ** 2)
            bins = confidence_bins(c, N_BINS)
            self.bin_counts += np.bincount(bins, minlength=N_BINS)
            self.bin_conf.add(bins, c)
            self.bin_score.add(bins, s)
        self.difficulty.add(diff[masks["diff"]])
        has_tok = ~np.isnan(tokens)
        self.tokens.add(tokens[has_tok])
        self.tokens_nan0.add(np.where(has_tok, tokens, 0.0))
        known = masks["diff"]
        self.hard.add(score[known & (diff >= 0.5)])
        self.easy.add(score[known & (diff < 0.5)])
        for name, (ra, rb, mask) in self.pairs.items():
            sel = masks[mask]
            a = self._ranks(ra, rows, cls, sel)
            b = self._ranks(rb, rows, cls, sel)
            mean_a, mean_b = self.rank_means[name]
            da, db = a - mean_a, b - mean_b
            for acc, v in zip(self.products[name], (da * db, da * da, db * db)):
                acc.add(v)

    def _ranks(self, which: str, rows: np.ndarray, cls: np.ndarray, sel: np.ndarray) -> np.ndarray:
        if which.startswith("score_"):
            return self.score_ranks[which[6:]][cls[sel]]
        return rows[f"r_{which}"][sel]

    def calibration(self, constant: set[str]) -> dict | None:
        n = self.n
        if not (n["conf"] or n["diff"] or n["tokens"]):
            return None
        rho: dict = {}
        for name, (sab, saa, sbb) in self.products.items():
            if name in constant:
                rho[name] = None  # a constant rank column: undefined, as _pearson says
                continue
            rho[name] = float(sab.total() / np.sqrt(saa.total() * sbb.total()))
        conf = None
        if n["conf"]:
            conf = {"n_with_confidence": n["conf"], "mean_confidence": self.conf.mean(),
                    "mean_score": self.conf_score.mean(),
                    "ece": expected_calibration_error(self.bin_counts, self.bin_conf.sums, self.bin_score.sums,
                                                      n["conf"]),
                    "brier": self.brier.mean()}
        return calibration_block(conf, rho, (n["diff"], self.difficulty.mean()) if n["diff"] else None,
                                 self.tokens.mean() if n["tokens"] else None)

    def selection(self) -> dict:
        n = self.n
        return selection_from_counts(n["rows"], n["answered"], n["over"], n["under"], self.precision.mean)

    def token_profile(self, sip_mean: float, rules) -> dict | None:
        n = self.n
        if not n["tokens"]:
            return None

        def hard_easy():
            return (self.hard.mean(), self.easy.mean()) if n["hard"] and n["easy"] else None

        return token_label(sip_mean, float(self.tokens_nan0.total() / n["tokens"]), hard_easy, rules)


def _ordered_pass(acc, files: Files, parts: list[tuple[str, dict]], uniq: np.ndarray, class_score: np.ndarray,
                  base: int) -> None:
    """``acc.add`` fed a model's rows from its shards' files, merged in the order of scores.jsonl, by blocks."""
    sources = _sources(files, [(p + ".final", place["rows"]) for p, place in parts], FINAL)
    for parts, order in _merged(sources, lambda b: b["key"]):
        rows = np.concatenate(parts)[order]
        cls = np.searchsorted(uniq, pack_triples(rows["tp"], rows["n_pred"], rows["n_gold"], base))
        acc.add(rows, cls, class_score[cls])


class RankMeans(ModelPass):
    """The rank columns' means, summed pairwise over the rows in order (for more than EXACT_RANKS rows)."""

    def __init__(self, n: Counter, score_ranks: dict[str, np.ndarray], pairs: dict[str, tuple[str, str, str]]):
        self.n, self.score_ranks, self.pairs = n, score_ranks, pairs
        self.sums = {name: (PairwiseSum(n[mask]), PairwiseSum(n[mask])) for name, (_, _, mask) in pairs.items()}

    def add(self, rows: np.ndarray, cls: np.ndarray, score: np.ndarray) -> None:
        masks = {"conf": ~np.isnan(rows["confidence"]), "diff": ~np.isnan(rows["difficulty"])}
        masks["both"] = masks["conf"] & masks["diff"]
        for name, (ra, rb, mask) in self.pairs.items():
            sel = masks[mask]
            self.sums[name][0].add(self._ranks(ra, rows, cls, sel))
            self.sums[name][1].add(self._ranks(rb, rows, cls, sel))

    def means(self) -> dict[str, tuple[float, float]]:
        return {name: (a.total() / a.n, b.total() / b.n) for name, (a, b) in self.sums.items()}


def model_figures(model: str, counts: dict, files: Files, parts: list[tuple[str, dict]], uniq: np.ndarray,
                  class_score: np.ndarray, base: int, block: dict, cfg, distinct: dict[str, int]) -> None:
    """Calibration and personality of one model into its summary ``block``, from its rows streamed in the order of
    scores.jsonl (``prefix.final`` of each shard, at the model's place)."""
    n = counts["n"]
    score_ranks, constant_score = {}, set()
    for m in ("conf", "diff"):
        per = counts["classes"][m]
        k = np.zeros(len(uniq), dtype=np.int64)
        if per:
            t = np.array(list(per), dtype=np.int64)
            k[np.searchsorted(uniq, pack_triples(t[:, 0], t[:, 1], t[:, 2], base))] = list(per.values())
        score_ranks[m] = class_rank_table(k, class_score)
        if len(np.unique(class_score[k > 0])) < 2:
            constant_score.add(m)
    pairs = {name: spec for name, spec in (
        ("spearman_confidence_score", ("conf", "score_conf", "conf")),
        ("spearman_difficulty_score", ("diff", "score_diff", "diff")),
        ("spearman_difficulty_confidence", ("diff_both", "conf_both", "both"))) if n[spec[2]] >= 2}
    constant = {name for name, (ra, rb, _) in pairs.items()
                if any(distinct.get(r, 2) < 2 if not r.startswith("score_") else r[6:] in constant_score
                       for r in (ra, rb))}
    means = {name: (_mean_rank(n[mask]),) * 2 for name, (_, _, mask) in pairs.items()}
    if any(a is None for a, _ in means.values()):  # past EXACT_RANKS: a pass for the means as numpy sums them
        first = RankMeans(n, score_ranks, pairs)
        _ordered_pass(first, files, parts, uniq, class_score, base)
        means = {**means, **first.means()}
    acc = ModelPass(n, score_ranks, pairs, means)
    _ordered_pass(acc, files, parts, uniq, class_score, base)
    metrics = block["metrics"]
    calib = acc.calibration(constant)
    block["personality"] = personality(
        None, None, None, metrics["spc"]["mean"], metrics["sip_f1"]["mean"], metrics["precision"]["mean"],
        metrics["recall"]["mean"], cfg.personality_rules, calib, selection=acc.selection(),
        profile=acc.token_profile(metrics["sip_f1"]["mean"], cfg.personality_rules))
    if calib is not None:
        calib["score_metric"] = cfg.kind.primary_metric
        block["calibration"] = calib


def class_scores(counts: dict[str, dict], base: int, cfg) -> tuple[np.ndarray, np.ndarray]:
    """The distinct triples over every row (packed, sorted) and the primary metric of each, as ``summarize``."""
    triples = sorted({t for c in counts.values() for t in c["groups"][None][0]})
    t = np.array(triples, dtype=np.int64).reshape(-1, 3)
    uniq = pack_triples(t[:, 0], t[:, 1], t[:, 2], base)
    score = score_counts(*unpack_triples(uniq, base), sip_lambda=cfg.sip_lambda,
                         sip_gamma=cfg.sip_gamma)[cfg.kind.primary_metric]
    return uniq, score
