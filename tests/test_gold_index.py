"""The compiled gold index equals the reference's reading of the gold file, item for item.

The compiled loader merges each 4 MiB chunk over threads (the id table in shards by id hash, items numbered
from counts of first lines per part of the chunk, each part's stratum values in a table of its own). These
files are larger than two chunks, with more lines per chunk than one thread takes, so every part of that runs
on more than one thread; ids repeat within and across chunks, next to lines the reference has to read.
"""

import json
import os
import random

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from benchmint import _dispatch, tasks
from benchmint.metrics import pipeline, pipeline_ref
from benchmint.metrics.pipeline import ScoreConfig, score_files

CHUNK = 4 << 20
FIELDS = ("domain", "paper")


def decided(rid, rng, papers, pad):
    """A line the compiled parse reads by itself."""
    meta = {"domain": rng.choice(["STM", "AFM", "XRD"]), "paper": rng.choice(papers)}
    return json.dumps({"id": rid, "answer": sorted(rng.sample("ABCDE", rng.randint(1, 3))), "meta": meta,
                       "note": "x" * pad})


def undecided(rid, rng, papers, kind):
    """A line the reference has to read: (line, what it becomes)."""
    paper = rng.choice(papers)
    if kind == "repeated_key":  # the reference keeps the last "answer": an item
        rid_json, paper_json = json.dumps(rid), json.dumps(paper)
        return f'{{"id": {rid_json}, "answer": ["A"], "answer": ["B", "D"], "meta": {{"paper": {paper_json}}}}}', "item"
    if kind == "float_stratum":  # an item whose stratum the reference spells
        return json.dumps({"id": rid, "answer": ["C"], "meta": {"domain": 0.5, "paper": paper}}), "item"
    if kind == "json_like_stratum":  # a string that reads as a number: quoted by the reference
        return json.dumps({"id": rid, "answer": ["E"], "meta": {"domain": "12", "paper": paper}}), "item"
    if kind == "meta_not_object":  # an item with a warning: "meta" ignored
        return json.dumps({"id": rid, "answer": ["B"], "meta": "odd"}), "item"
    if kind == "empty_answer":  # an id with no usable answer: only the duplicate check sees it
        return json.dumps({"id": rid, "answer": [], "meta": {"paper": paper}}), "probe"
    if kind == "wrong_kind":
        return json.dumps({"id": rid, "answer": ["7"]}), "probe"
    if kind == "malformed":  # no id at all
        return '{"id": ' + json.dumps(rid) + ', "answer": ["A"', "none"
    if kind == "no_id":
        return json.dumps({"answer": ["A"], "meta": {"paper": paper}}), "none"
    raise AssertionError(kind)


UNDECIDED = ("repeated_key", "float_stratum", "json_like_stratum", "meta_not_object", "empty_answer", "wrong_kind",
             "malformed", "no_id")


def compare(path, workers, by=FIELDS):
    """Loads ``path`` both ways and asserts every part of the index is the same; returns the compiled Gold and
    how many lines the reference read for the compiled loader."""
    kind = tasks.get("mcq")
    ref = pipeline_ref.load_gold(str(path), kind, by, False)
    os.environ[_dispatch.ENV_VAR] = "compiled"
    try:
        _dispatch.reset_counts()
        got = pipeline.load_gold(path, "mcq", by, workers)
        counts = _dispatch.counts("pipeline")
    finally:
        del os.environ[_dispatch.ENV_VAR]
    assert got.native is not None and counts["compiled"] == 1
    assert got.n_items == ref.n_items
    items = list(range(ref.n_items))
    assert got.native.ids_of(items) == ref.ids
    assert got.native.keys_of(items) == [sorted(ord(a) - ord("A") for a in ans) for ans in ref.answers]
    assert got.strata.keys() == ref.strata.keys()
    for f, (codes, values) in ref.strata.items():
        assert got.strata[f][1] == values, f
        np.testing.assert_array_equal(got.strata[f][0], codes)
    assert got.errors == ref.errors
    return got, counts["fallback"]


def chunk_of(lines):
    """The 4 MiB read each line falls in (no line here is longer than a read)."""
    out, pos = [], 0
    for line in lines:
        out.append(pos // CHUNK)
        pos += len(line.encode()) + 1
    return out


@st.composite
def gold_files(draw):
    """A recipe for a gold file of more than two chunks: its lines are made from a seeded generator."""
    return {
        "seed": draw(st.integers(0, 2**32 - 1)),
        "lines": draw(st.integers(25_000, 40_000)),
        "ids": draw(st.floats(0.2, 1.2)),  # distinct ids per line: below 1, ids repeat
        "undecided": draw(st.sampled_from([0.0, 0.002, 0.02, 0.1])),
        "blank": draw(st.sampled_from([0.0, 0.01])),
        "papers": draw(st.integers(1, 60)),  # more than 16 values: past the value tables' scan
        "workers": draw(st.sampled_from([2, 3, 4])),
    }


def build(path, recipe):
    rng = random.Random(recipe["seed"])
    n = recipe["lines"]
    pool = [f"q{k}" for k in range(max(1, int(n * recipe["ids"])))]
    papers = [f"paper-{k:02d}" for k in range(recipe["papers"])]
    pad = (9 * CHUNK) // (4 * n)  # about 2.25 chunks
    lines = []
    for _ in range(n):
        rid = rng.choice(pool)
        x = rng.random()
        if x < recipe["blank"]:
            lines.append("")
        elif x < recipe["blank"] + recipe["undecided"]:
            lines.append(undecided(rid, rng, papers, rng.choice(UNDECIDED))[0])
        else:
            lines.append(decided(rid, rng, papers, pad))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


# No shrinking: a failing recipe is already a seed and a few numbers, and each smaller file costs seconds.
@settings(max_examples=int(os.environ.get("BENCHMINT_GOLD_EXAMPLES", "6")), deadline=None,
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(gold_files())
def test_generated_gold_files(tmp_path_factory, recipe):
    path = tmp_path_factory.mktemp("gold") / "gold.jsonl"
    lines = build(path, recipe)
    assert path.stat().st_size > 2 * CHUNK
    got, fallback = compare(path, recipe["workers"])
    assert fallback == sum(1 for line in lines if line and '"note"' not in line)


def test_repeated_ids_next_to_lines_the_reference_reads(tmp_path):
    # The order rules at a chunk's start, middle and end and across chunks, among enough decided lines that
    # every chunk is merged by 4 threads: a line the reference reads as an item before a decided line of the
    # same id keeps the id (the decided one is the duplicate), and after it is the duplicate; a line with the id
    # but no usable answer takes nothing (the decided line after it is the item) and after one is a duplicate;
    # the first of two decided lines is the item.
    rng = random.Random(5)
    papers = [f"paper-{k:02d}" for k in range(40)]
    lines = [decided(f"f{i}", rng, papers, 160) for i in range(48_000)]
    chunks = chunk_of(lines)
    starts = [i for i in range(1, len(lines)) if chunks[i] != chunks[i - 1]]
    assert len(starts) == 2 and len(lines) - starts[-1] > 1000
    kinds = ("repeated_key", "float_stratum", "json_like_stratum", "meta_not_object", "empty_answer", "wrong_kind")
    duplicates = set()  # (id, line) of the lines that must be duplicate_gold errors
    for k, at in enumerate([5, 10_000, starts[0] - 10, starts[0] + 30, starts[1] - 9, starts[1] + 40]):
        for j, kind in enumerate(kinds):
            pos = at + 4 * j
            later = pos + 2 if k % 2 else starts[-1] + 100 + 10 * k + j  # the same chunk, or the last one
            rid = f"r{k}-{kind}"
            line, becomes = undecided(rid, rng, papers, kind)
            if (k + j) % 2:
                lines[pos], lines[later] = decided(rid, rng, papers, 160), line
                duplicates.add((rid, later + 1))
            else:
                lines[pos], lines[later] = line, decided(rid, rng, papers, 160)
                if becomes == "item":
                    duplicates.add((rid, later + 1))
            twice = f"d{k}-{j}"
            lines[pos + 1] = decided(twice, rng, papers, 160)
            lines[starts[-1] + 500 + 10 * k + j] = decided(twice, rng, papers, 160)
            duplicates.add((twice, starts[-1] + 500 + 10 * k + j + 1))
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got, fallback = compare(path, workers=4)
    assert fallback == 6 * len(kinds)
    assert {(e["id"], e["line"]) for e in got.errors if e["kind"] == "duplicate_id"} == duplicates


@pytest.mark.parametrize("workers", [1, 4])
def test_many_stratum_values_spread_over_parts(tmp_path, workers):
    # Stratum values first seen in different parts of different chunks, in an order unlike the sorted one, some
    # fields with more values than the scan holds: after finish() each item's code is its value's rank.
    rng = random.Random(21)
    values = [f"v{rng.randrange(10**6):06d}" for _ in range(300)]
    lines = []
    for i in range(60_000):
        meta = {"domain": values[(i * 7919) % len(values)] if i > 20_000 else rng.choice(values[:5]),
                "paper": rng.choice(values[: 2 + i // 2000])}
        lines.append(json.dumps({"id": f"s{i % 50_000}", "answer": ["B"], "meta": meta, "note": "y" * 100}))
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > 2 * CHUNK
    got, fallback = compare(path, workers)
    assert fallback == 0 and got.n_items == 50_000
    assert len(got.strata["domain"][1]) == 300 and len(got.strata["paper"][1]) > 16


def test_scores_against_a_large_gold_with_repeats(forced_impl, tmp_path):
    # End to end: the rows, summary and errors of scoring against such a gold file are the reference's.
    recipe = {"seed": 77, "lines": 30_000, "ids": 0.7, "undecided": 0.02, "blank": 0.01, "papers": 25,
              "workers": 3}
    gold = tmp_path / "gold.jsonl"
    build(gold, recipe)
    rng = random.Random(4)
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"id": f"q{k}", "model": "m", "answer": sorted(rng.sample("ABCDE", 2))})
                            + "\n" for k in range(0, 21_000, 3)), encoding="utf-8")
    cfg = ScoreConfig(task="mcq", by=("domain", "paper"), workers=3)
    out = {}
    for impl in ("reference", "compiled"):
        with forced_impl(impl):
            res = score_files(pred, gold, tmp_path / impl, cfg)
            out[impl] = (res.exit_code, [(tmp_path / impl / f).read_bytes()
                                         for f in ("scores.jsonl", "summary.json", "errors.jsonl")])
    assert out["compiled"] == out["reference"]
    assert b'"duplicate_id"' in out["compiled"][1][2]
