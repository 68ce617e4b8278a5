"""The compiled streaming path writes exactly what the reference path writes.

The reference run is ``score_files`` under BENCHMINT_IMPL=reference (its
streaming stage is ``pipeline_ref``); the compiled run must take the compiled
loader and stream, handing to the reference only the lines it cannot decide.
"""

import json
import os
import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core, _dispatch
from benchmint.io import InputError, dumps
from benchmint.metrics.pipeline import ScoreConfig, score_files
from benchmint.metrics.synthetic import hkl_dataset, mcq_dataset

OUTPUTS = ("scores.jsonl", "summary.json", "errors.jsonl")


def run_both(forced_impl, tmp_path, preds, gold, cfg):
    """Outputs of both runs, and the compiled run's dispatch counts of the pipeline."""
    results = {}
    for impl in ("reference", "compiled"):
        with forced_impl(impl):
            _dispatch.reset_counts()
            res = score_files(preds, gold, tmp_path / impl, cfg)
            results[impl] = (res.exit_code, {f: (tmp_path / impl / f).read_bytes() for f in OUTPUTS})
    counts = _dispatch.counts("pipeline")
    assert counts["compiled"] == 1 and counts["reference"] == 0, counts  # one gold load, one stream
    results["fallback"] = counts["fallback"]
    return results


def assert_same(results, fallback: int | None = None):
    """Byte-identical outputs; ``fallback``: how many lines the compiled run must have handed to the reference."""
    if fallback is not None:
        assert results["fallback"] == fallback
    ref, comp = results["reference"], results["compiled"]
    assert ref[0] == comp[0]
    for f in OUTPUTS:
        assert comp[1][f] == ref[1][f], f


def write_dataset(tmp_path, records, name="d"):
    gold, pred = tmp_path / f"{name}_gold.jsonl", tmp_path / f"{name}_pred.jsonl"
    with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
        for kind, rec in records:
            (g if kind == "gold" else p).write(dumps(rec) + "\n")
    return gold, pred


@pytest.mark.parametrize("workers", [1, 2])
def test_mcq_dataset(forced_impl, tmp_path, workers):
    gold, pred = write_dataset(tmp_path, mcq_dataset(400, ["wise-model", "gambling-model", "bold-model"], seed=9))
    cfg = ScoreConfig(task="mcq", by=("domain", "level", "n_options"), workers=workers)
    assert_same(run_both(forced_impl, tmp_path, pred, gold, cfg), fallback=0)


def test_hkl_dataset(forced_impl, tmp_path):
    # Every gold and prediction line is decided by the compiled reader.
    gold, pred = write_dataset(tmp_path, hkl_dataset(300, ["wise-model", "bold-model"], seed=4))
    cfg = ScoreConfig(task="hkl", by=("db", "union_size", "angle_range"), workers=2)
    assert_same(run_both(forced_impl, tmp_path, pred, gold, cfg), fallback=0)


def test_float_strata_go_to_the_reference(forced_impl, tmp_path):
    # A float stratum (two_theta_star) is written as Python writes floats: the compiled
    # loader hands each gold line to the reference, and the outputs are still the same.
    gold, pred = write_dataset(tmp_path, hkl_dataset(60, ["wise-model"], seed=4))
    cfg = ScoreConfig(task="hkl", by=("db", "two_theta_star"))
    assert_same(run_both(forced_impl, tmp_path, pred, gold, cfg), fallback=60)


def test_awkward_lines(forced_impl, tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes("\n".join([
        '{"id": "a", "answer": ["A"], "meta": {"domain": "STM", "x": [1, {"y": 2}]}}',
        '{"id": "b\\u00e9\\n\\"q\\"", "answer": ["b", "C"], "meta": {"domain": {"nested": true}}}',
        '{"id": "c", "answer": ["A"], "meta": null}',
        '  ',
        '{"id": "a", "answer": ["B"]}',
        '{"id": "d", "answer": ["A"], "meta": {"domain": 3}}',
        '{"id": "e", "answer": ["A"], "meta": {"domain": -0}}',
        '{"id": "f", "answer": ["A"], "meta": {"domain": 2.50, "domain": "last wins"}}',
        '\ufeff{"id": "g", "answer": ["A"]}',
        '{"id": "h", "answer": ["A", "AB"]}',
        '{"id": "i", "answer": []}\r',
        '{"id": "\\ud83d\\ude00", "answer": ["D"]}',
        '[1, 2]',
        '{"id": "j", "answer": ["A"]} trailing',
    ]).encode("utf-8") + b"\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_bytes("\n".join([
        '{"id": "a", "output": "Answer: A", "confidence": 0.5, "tokens": 12}',
        '{"id": "b\\u00e9\\n\\"q\\"", "answer": ["C", "b", "c"], "model": "m\\t1"}',
        '{"id": "c", "answer": ["A"], "confidence": 1.5}',
        '{"id": "c", "answer": ["A"], "confidence": true, "model": "m\\t1"}',
        '{"id": "d", "answer": null}',
        '{"id": "d", "output": 5}',
        '{"id": "e", "answer": ["E"], "difficulty": NaN}',
        '{"id": "\\ud83d\\ude00", "output": "\\u7b54\\u6848\\uff1aD", "model": "\u00fcber"}',
        '{"id": "i", "output": "I cannot tell", "tokens": 1e400}',
        '{"id": "zz", "answer": ["A"]}',
        '{"id": "a", "answer": ["A"]}',
        '\xff\xfe garbage'.encode("latin-1").decode("latin-1"),
        '',
        '{"id": "f", "answer": ["A"], "id": "d"}',
        '{"id": "d", "answer": ["A"], "tokens": 123456789012345678901234567890}',
    ]).encode("utf-8") + b"\n\xff\xfe{}\n")
    cfg = ScoreConfig(task="mcq", by=("domain", "model"))
    assert_same(run_both(forced_impl, tmp_path, pred, gold, cfg))


def test_hkl_awkward(forced_impl, tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join([
        '{"id": "a", "answer": [[1, 1, 0], [0, 0, 0], [1, 1, 0]]}',
        '{"id": "b", "answer": [[1, 1, -2, 0]]}',
        '{"id": "c", "answer": [[1, 0]]}',
        '{"id": "d", "answer": [[1.0, 0, 0]]}',
        '{"id": "e", "answer": [[3000, 0, 0]]}',
        '{"id": "f", "answer": [[2, 0, 0], [1, 0, 0, 0], [1, 0, 0]]}',
    ]) + "\n", encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    pred.write_text("\n".join([
        '{"id": "a", "output": "{\\"max_peak_hkls\\": [[1,1,0],[0,0,0]]}"}',
        '{"id": "b", "answer": [[1, 1, -2, 0], [1, 1, -2, 0]]}',
        '{"id": "f", "answer": [[1, 0, 0, 0], [2, 0, 0], [1, 0, 0], [0, 0, 0, 0]]}',
        '{"id": "a", "model": "x", "output": "Answer: (9999 0 0)"}',
        '{"id": "b", "model": "x", "answer": [[1, 1, -2, 0, 5]]}',
    ]) + "\n", encoding="utf-8")
    assert_same(run_both(forced_impl, tmp_path, pred, gold, ScoreConfig(task="hkl")))


@pytest.mark.parametrize("workers", [1, 2])
def test_blocks_written_whole_or_row_by_row(forced_impl, tmp_path, workers):
    # The compiled stream hands a parse block of 256 lines to the writer as it is when every line of it is kept,
    # and copies its kept rows otherwise. 40 blocks: most whole, some with a repeated answer (whole but not all
    # kept), an unknown id, a line for the reference, a blank line, in 2 files (one ending without a newline).
    rng = random.Random(5)
    gold_rows = [{"id": f"g{i}", "answer": sorted(rng.sample("ABCDE", rng.randint(1, 3)))} for i in range(3000)]
    pred_lines = []
    for i in range(10_240):
        rid = f"g{i % 3000}"
        model = f"m{i // 3000}"
        if i % 997 == 0:
            model = f"m{max(0, i // 3000 - 1)}"  # that model's second answer to the item: dropped
        line = json.dumps({"id": rid, "model": model, "output": f"Answer: {'ABCDE'[i % 5]}"})
        if i % 1531 == 0:
            line = json.dumps({"id": f"unknown{i}", "output": "A"})
        elif i % 2039 == 0:
            line = '{"id": "' + rid + '", "model": "' + model + '", "output": "A", "output": "B"}'  # repeated key
        elif i % 3001 == 0:
            line = "   "
        pred_lines.append(line)
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in gold_rows), encoding="utf-8")
    first, second = tmp_path / "p1.jsonl", tmp_path / "p2.jsonl"
    first.write_text("\n".join(pred_lines[:6000]) + "\n", encoding="utf-8")
    second.write_text("\n".join(pred_lines[6000:]), encoding="utf-8")
    results = run_both(forced_impl, tmp_path, [first, second], gold, ScoreConfig(task="mcq", workers=workers))
    assert results["fallback"] >= 5  # the repeated keys went to the reference
    assert_same(results)
    errors = results["compiled"][1]["errors.jsonl"].decode()
    assert '"duplicate_id"' in errors and '"unknown_id"' in errors


def test_lines_across_chunks(forced_impl, tmp_path):
    # More than one 4 MiB read, and one line longer than a read.
    rng = random.Random(3)
    gold_rows, pred_rows = [], []
    for i in range(30_000):
        ans = sorted(rng.sample("ABCDE", rng.randint(1, 3)))
        gold_rows.append({"id": f"q{i}", "answer": ans})
        pred_rows.append({"id": f"q{i}", "output": "x" * rng.randint(0, 300) + "\nAnswer: " + ", ".join(ans[:2])})
    pred_rows[12_345]["output"] = "y" * (5 << 20) + "\nAnswer: A"
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in gold_rows), encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(r) + "\n" for r in pred_rows), encoding="utf-8")
    assert_same(run_both(forced_impl, tmp_path, pred, gold, ScoreConfig(task="mcq", workers=2)))


@pytest.mark.parametrize("workers", [2, 3])
def test_columns_filled_per_block_across_chunks(forced_impl, tmp_path, workers):
    # The ordered merge only decides which lines give rows; their columns (model, counts, status, confidence,
    # difficulty, tokens: what the summary is computed from) are filled by threads at each parse block's offset.
    # Three models interleaved over 2 files of more than one 4 MiB read each, so every chunk has more blocks
    # than threads, with the lines that give no row spread over the blocks: a model's second answer (dropped),
    # unknown ids, blank lines, and lines the reference decides (kept, their columns set by the merge itself).
    rng = random.Random(11)
    records = list(mcq_dataset(15_000, ["wise-model", "gambling-model", "bold-model"], seed=2))
    gold_rows = [r for kind, r in records if kind == "gold"]
    preds = [r for kind, r in records if kind == "pred"]
    rng.shuffle(preds)
    lines = []
    for i, rec in enumerate(preds):
        rec = dict(rec, output=rec["output"] + " " * rng.randint(0, 200))
        line = json.dumps(rec)
        if i % 89 == 0:
            line = line[:-1] + ', "model": ' + json.dumps(rec["model"]) + "}"  # a repeated key: the reference's
        lines.append(line)
        if i % 53 == 0:
            lines.append(json.dumps(dict(rec, confidence=0.01, tokens=1)))  # a second answer: dropped
        if i % 71 == 0:
            lines.append(json.dumps({"id": f"nowhere{i}", "output": "A"}))
        if i % 97 == 0:
            lines.append("")
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in gold_rows), encoding="utf-8")
    half = len(lines) // 2
    first, second = tmp_path / "p1.jsonl", tmp_path / "p2.jsonl"
    first.write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[half:]) + "\n", encoding="utf-8")
    assert first.stat().st_size > (5 << 20) and second.stat().st_size > (5 << 20)
    cfg = ScoreConfig(task="mcq", by=("domain", "level"), workers=workers)
    results = run_both(forced_impl, tmp_path, [first, second], gold, cfg)
    assert results["fallback"] >= 500
    assert_same(results)
    errors = results["compiled"][1]["errors.jsonl"].decode()
    assert '"duplicate_id"' in errors and '"unknown_id"' in errors

ids = st.text(alphabet=string.ascii_letters + "é\"\\\n\t😀 ", min_size=0, max_size=4)
letters = st.lists(st.sampled_from(list("ABCDEab") + ["AB", "", 1]), max_size=4)
good_letters = st.lists(st.sampled_from(list("ABCDEab")), max_size=4)
domains = st.one_of(st.sampled_from(["STM", "AFM"]), st.integers(-2, 2), st.booleans(), st.none(),
                    st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=2))


def pred_record(id_strategy):
    return st.fixed_dictionaries(
        {"id": id_strategy},
        optional={
            "model": st.sampled_from(["m1", "m2", "m\u00fc", 3]),
            "answer": st.one_of(good_letters, letters),
            "output": st.one_of(
                st.sampled_from(["Answer: A, C", "**Answer:** (B)", "答案：BD", '{"answer": ["A"]}', "no idea",
                                 "A or B"]),
                st.text(max_size=40).map(lambda t: t + "\nAnswer: C")),
            "confidence": st.one_of(st.floats(-0.5, 1.5), st.none(), st.booleans()),
            "tokens": st.one_of(st.integers(-5, 10**6), st.none()),
        },
    )


gold_record = st.fixed_dictionaries(
    {"id": ids, "answer": letters},
    optional={"meta": st.one_of(st.none(), st.fixed_dictionaries({}, optional={"domain": domains}))},
)


@st.composite
def datasets(draw):
    """Gold and prediction rows, valid and not, with at least one usable gold item and one usable
    prediction of it (so every example gets as far as rows and a summary); predictions mostly name
    gold ids."""
    gold_rows = draw(st.lists(gold_record, max_size=11))
    # an empty gold answer is a gold error: the anchor needs a letter
    anchor = {"id": draw(ids), "answer": draw(good_letters.filter(bool)), "meta": {"domain": draw(domains)}}
    gold_rows.insert(draw(st.integers(0, len(gold_rows))), anchor)
    gold_ids = [r["id"] for r in gold_rows]
    pred_rows = draw(st.lists(pred_record(st.one_of(st.sampled_from(gold_ids), ids)), max_size=20))
    sure = draw(pred_record(st.just(anchor["id"])))
    sure["answer"] = draw(good_letters)
    if not isinstance(sure.get("model", ""), str):
        del sure["model"]
    pred_rows.insert(draw(st.integers(0, len(pred_rows))), sure)
    return gold_rows, pred_rows


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=bool(i % 2)) + "\n" for i, r in enumerate(rows)),
                    encoding="utf-8", errors="surrogatepass")


@settings(max_examples=int(os.environ.get("BENCHMINT_FUZZ_EXAMPLES", "40")), deadline=None)
@given(datasets())
def test_random_records(tmp_path_factory, forced_impl, rows):
    # Every example is scored by both paths and compared: rows, summary and errors.
    gold_rows, pred_rows = rows
    tmp_path = tmp_path_factory.mktemp("rand")
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    _write_rows(gold, gold_rows)
    _write_rows(pred, pred_rows)
    results = run_both(forced_impl, tmp_path, pred, gold, ScoreConfig(task="mcq", by=("domain",)))
    assert results["compiled"][1]["scores.jsonl"]  # rows were written and compared
    assert_same(results)


def test_unusable_files_fail_alike(forced_impl, tmp_path):
    # No usable gold item, then no usable prediction: the same error and the same listed problems.
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    for gold_text, pred_text in (('{"id": "a", "answer": ["AB"]}\n[1]\n', '{"id": "a", "answer": ["A"]}\n'),
                                 ('{"id": "a", "answer": ["A"]}\n', '{"id": "b", "answer": ["A"]}\n{"x": 1}\n')):
        gold.write_text(gold_text, encoding="utf-8")
        pred.write_text(pred_text, encoding="utf-8")
        outcomes = []
        for impl in ("reference", "compiled"):
            with forced_impl(impl):
                with pytest.raises(InputError) as exc:
                    score_files(pred, gold, tmp_path / impl, ScoreConfig(task="mcq"))
                outcomes.append((str(exc.value).replace(str(tmp_path / impl), "OUT"),
                                 (tmp_path / impl / "errors.jsonl").read_bytes()))
        assert outcomes[0] == outcomes[1]


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_repr(x):
    assert _core.pipeline.float_repr(x) == repr(x)


@pytest.mark.parametrize("x", [0.0, -0.0, 1.0, 0.24, 1e-5, 1e-4, 1e16, 1e15, 123456789.0, 2 / 3, 5e-324, 1.7976931348623157e308])
def test_float_repr_edges(x):
    assert _core.pipeline.float_repr(x) == repr(x)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_json_string(s):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates cannot reach the compiled path
    assert _core.pipeline.json_string(s) == json.dumps(s, ensure_ascii=False)


def test_many_stratum_values(forced_impl, tmp_path):
    # More distinct values than the compiled loader's linear scan holds, in a shuffled order.
    rng = random.Random(8)
    papers = [f"paper-{k:02d}" for k in range(40)]
    gold_rows = [{"id": f"q{i}", "answer": ["A"], "meta": {"paper": rng.choice(papers), "year": rng.randint(1990, 2030)}}
                 for i in range(600)]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in gold_rows), encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"id": r["id"], "answer": [rng.choice("AB")]}) + "\n" for r in gold_rows),
                    encoding="utf-8")
    assert_same(run_both(forced_impl, tmp_path, pred, gold, ScoreConfig(task="mcq", by=("paper", "year"))))


INVERSION = [[1, 0, 0, 0, 1, 0, 0, 0, 1], [-1, 0, 0, 0, -1, 0, 0, 0, -1]]


def _lines_of(results, name):
    return [json.loads(x) for x in results["reference"][1][name].decode().splitlines()]


@pytest.mark.parametrize("symmetry", [False, True])
def test_invalid_miller_bravais_labels_are_unparsed_with_the_reason(forced_impl, tmp_path, symmetry):
    # i must be -(h + k): (1 1 5 1) is no plane, though its h, k, l are those of the gold (1 1 1)
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"id": i, "answer": [[1, 1, 1]], "laue_rotations": INVERSION}) + "\n"
                            for i in ("a", "b", "c", "d")))
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(r) + "\n" for r in (
        {"id": "a", "output": "Answer: (1 1 5 1)"}, {"id": "b", "answer": [[1, 1, 1, 1]]},
        {"id": "c", "output": "Answer: (1 1 -2 1)"}, {"id": "d", "output": "Answer: (1 1 1)"})))
    if symmetry:  # folding runs on the reference path alone
        score_files(pred, gold, tmp_path / "reference", ScoreConfig(task="hkl", symmetry=True))
        results = {"reference": (1, {f: (tmp_path / "reference" / f).read_bytes() for f in OUTPUTS})}
    else:
        results = run_both(forced_impl, tmp_path, pred, gold, ScoreConfig(task="hkl"))
        assert_same(results)
    rows = {r["id"]: r for r in _lines_of(results, "scores.jsonl")}
    assert {k: (r["status"], r["em"]) for k, r in rows.items()} == {
        "a": ("unparsed", 0.0), "b": ("unparsed", 0.0), "c": ("ok", 1.0 if symmetry else 0.0), "d": ("ok", 1.0)}
    errors = _lines_of(results, "errors.jsonl")
    assert [(e["kind"], e["id"]) for e in errors] == [("unparsed_answer", "a"), ("wrong_kind", "b")]
    assert "(1 1 5 1) is not a Miller-Bravais label: i must be -(h + k) = -2" in errors[0]["message"]
    assert "(1 1 1 1) is not a Miller-Bravais label" in errors[1]["message"]


def test_gold_that_cannot_be_scored_is_a_gold_error(forced_impl, tmp_path):
    for task, empty in (("mcq", []), ("hkl", [[0, 0, 0]])):
        gold = tmp_path / f"{task}_gold.jsonl"
        good = ["A"] if task == "mcq" else [[1, 0, 0]]
        gold.write_text(json.dumps({"id": "x", "answer": good}) + "\n" + json.dumps({"id": "q2", "answer": empty})
                        + "\n")
        pred = tmp_path / f"{task}_pred.jsonl"
        pred.write_text("".join(json.dumps({"id": i, "answer": []}) + "\n" for i in ("x", "q2")))
        results = run_both(forced_impl, tmp_path / task, pred, gold, ScoreConfig(task=task))
        assert_same(results)
        errors = _lines_of(results, "errors.jsonl")
        assert [(e["kind"], e["line"], e["id"]) for e in errors] == [("empty_gold", 2, "q2"), ("unknown_id", 2, "q2")]
        assert "cannot be scored" in errors[0]["message"]
        # the prediction names the rejected line instead of calling the id unknown
        assert errors[1]["message"].startswith("id 'q2' is in the gold file, but line 2 was rejected (empty_gold")
        assert errors[1]["gold_line"] == 2
        assert [r["id"] for r in _lines_of(results, "scores.jsonl")] == ["x"]  # nothing scores 1 against nothing


def test_structured_answers_as_lenient_as_outputs(forced_impl, tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"id": i, "answer": [[1, 1, 0]]}) + "\n" for i in "abcd"))
    pred = tmp_path / "pred.jsonl"
    pred.write_text('{"id": "a", "answer": [[1.0, 1, 0]]}\n'
                    '{"id": "b", "answer": [[-0.0, 0, 1], [1, 1, 0]]}\n'
                    '{"id": "c", "answer": null, "output": "Answer: (110)"}\n'
                    '{"id": "d", "answer": [[1.5, 1, 0]], "output": "Answer: (110)"}\n')
    results = run_both(forced_impl, tmp_path, pred, gold, ScoreConfig(task="hkl"))
    assert_same(results)
    rows = {r["id"]: r for r in _lines_of(results, "scores.jsonl")}
    assert {k: (r["status"], r["answer"], r["jaccard"]) for k, r in rows.items()} == {
        "a": ("ok", [[1, 1, 0]], 1.0), "b": ("ok", [[0, 0, 1], [1, 1, 0]], 0.5), "c": ("ok", [[1, 1, 0]], 1.0),
        "d": ("ok", [[1, 1, 0]], 1.0)}
    errors = _lines_of(results, "errors.jsonl")
    assert [(e["kind"], e["id"]) for e in errors] == [("wrong_kind", "d")]
    assert errors[0]["message"].endswith("the output is read instead")


def test_strata_values_merge_only_when_equal_as_json_values(forced_impl, tmp_path):
    values = [1, 1.0, "1", "(missing)", None, "STM", "true", "1.5", "10-20", " 2 "]
    gold = tmp_path / "gold.jsonl"
    rows = [{"id": f"q{i}", "answer": ["A"], "meta": {"level": v}} for i, v in enumerate(values)]
    rows.append({"id": "nokey", "answer": ["A"], "meta": {}})
    gold.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"id": r["id"], "answer": ["A"]}) + "\n" for r in rows))
    results = run_both(forced_impl, tmp_path, pred, gold, ScoreConfig(task="mcq", by=("level",)))
    assert_same(results)
    by = json.loads(results["reference"][1]["summary.json"])["models"]["default"]["by"]["level"]
    assert {k: v["n"] for k, v in by.items()} == {
        "1": 2, '"1"': 1, '"(missing)"': 1, "(missing)": 1, "null": 1, "STM": 1, '"true"': 1, '"1.5"': 1,
        "10-20": 1, '" 2 "': 1}
