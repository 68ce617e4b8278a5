"""Typed records and readers that survive hostile lines.

Every reader turns a hostile line (100,000-deep nesting, invalid UTF-8, raw
NUL bytes, integers beyond Python's digit limit, a truncated last line) into
one error naming file and line and goes on; the scorer's two implementations
write the same bytes for such files.
"""

import json
import math
import os
import pickle
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint.cli import main
from benchmint.io import MAX_DEPTH, decode_line, dumps
from benchmint.metrics.batch_ref import metrics_from_counts
from benchmint.metrics.synthetic import hkl_dataset, mcq_dataset
from benchmint.records import (
    ABSENT,
    Grade,
    Item,
    ModelCall,
    Prediction,
    RecordError,
    ScoreRow,
    read_grades,
    read_items,
    read_model_calls,
    read_predictions,
    read_score_rows,
)
from benchmint.run import Ledger, SerialExecutor, Unit, run_units
from benchmint.tasks.extract_ref import extract_choices

OUTPUTS = ("scores.jsonl", "summary.json", "errors.jsonl")
FUZZ_EXAMPLES = int(os.environ.get("BENCHMINT_FUZZ_EXAMPLES", "40"))


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def at_stack_depth(frames: int, fn, *args):
    """``fn(*args)`` called ``frames`` Python frames deeper than here."""
    if frames == 0:
        return fn(*args)
    return at_stack_depth(frames - 1, fn, *args)


# --------------------------------------------------------------- decode_line ----

@pytest.mark.parametrize("raw, message", [
    # The regression: json.loads raised RecursionError and the run died.
    (nested(100_000), "malformed JSON (nested deeper than 512 levels at column 513)"),
    # '{"id":"q1","answer":' is 20 characters; the '{' is level 1, so the 512th '[' (column 21 + 511) is level 513.
    (b'{"id":"q1","answer":' + nested(100_000) + b"}", "malformed JSON (nested deeper than 512 levels at column 532)"),
    (nested(MAX_DEPTH + 1), "malformed JSON (nested deeper than 512 levels at column 513)"),
    # Brackets after a string ending in an escaped backslash count: '["a\\",' is 7 characters.
    (b'["a\\\\",' + nested(600) + b"]", "malformed JSON (nested deeper than 512 levels at column 519)"),
    # '{"id":"q1","output":"' is 21 bytes: the bad byte is byte 21.
    (b'{"id":"q1","output":"\xff"}', "not UTF-8 text (invalid start byte at byte 21)"),
    (b'{"id":"q1","output":"\xed\xa0\x80"}', "not UTF-8 text (invalid continuation byte at byte 21)"),  # a surrogate
    (b'{"id":"q1","output":"\xe2\x82', "not UTF-8 text (unexpected end of data at byte 21)"),
    (b"\xff\xfe{}", "not UTF-8 text (invalid start byte at byte 0)"),  # no UTF-16 guessing
    (b"\x00\x00\x00{}", "malformed JSON (Expecting value at column 1)"),  # nor UTF-32
    (b'{"id":"q1","output":"A\x00"}', "malformed JSON (Invalid control character at at column 23)"),
    (b'\x00{"id":"q1"}', "malformed JSON (Expecting value at column 1)"),
    (b'{"id":"q1"}\x00', "malformed JSON (Extra data at column 12)"),
    (b'{"a":' + b"9" * 5000 + b"}", "malformed JSON (Exceeds the limit (4300 digits) for integer string conversion)"),
    (b'{"id":"q1","answer":["A"', "malformed JSON (Expecting ',' delimiter at column 25)"),  # a truncated last line
    (b"\xef\xbb\xbf\xef\xbb\xbf{}", "malformed JSON (Unexpected UTF-8 BOM (decode using utf-8-sig) at column 1)"),
])
def test_hostile_lines_are_error_messages(raw, message):
    assert decode_line(raw) == (None, message)


@pytest.mark.parametrize("raw, value", [
    (nested(MAX_DEPTH), json.loads(nested(MAX_DEPTH))),
    (b'["' + b"[" * 1000 + b'"]', ["[" * 1000]),  # brackets inside strings do not nest
    (b'["\\"' + b"{" * 1000 + b'"]', ['"' + "{" * 1000]),
    (b'{"id":"q\\u0000"}', {"id": "q\x00"}),  # an escaped NUL is text
    (b'\xef\xbb\xbf{"id":"q1"}\n', {"id": "q1"}),  # one byte-order mark is skipped
    (b'{"id":"\\ud800"}', {"id": "\ud800"}),  # JSON may escape a lone surrogate
    (b'{"t":1e400,"n":' + b"9" * 4300 + b"}", {"t": math.inf, "n": int("9" * 4300)}),
])
def test_valid_lines_decode(raw, value):
    assert decode_line(raw) == (value, None)


def test_a_five_megabyte_output_decodes():
    text = "x" * (5 << 20) + "\nAnswer: A"
    assert decode_line(json.dumps({"id": "q1", "output": text}).encode()) == ({"id": "q1", "output": text}, None)


def test_depth_limit_does_not_depend_on_the_callers_stack():
    # json.loads alone would read 600 levels from a shallow stack and fail from a deep one.
    too_deep = decode_line(nested(600))
    assert too_deep == (None, "malformed JSON (nested deeper than 512 levels at column 513)")
    assert at_stack_depth(350, decode_line, nested(600)) == too_deep
    assert at_stack_depth(350, decode_line, nested(MAX_DEPTH)) == decode_line(nested(MAX_DEPTH))


PIECES = [b"[", b"]", b"{", b"}", b'"', b"\\", b":", b",", b"1", b"\x00", b"\xff", b"\xef\xbb\xbf", b"\xed\xa0\x80",
          b'"a"', b"\n"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.lists(st.sampled_from(PIECES), max_size=80).map(b"".join)))
def test_decode_line_never_raises(raw):
    obj, err = decode_line(raw)
    assert (obj is None and isinstance(err, str)) or err is None


def test_dumps_escapes_lone_surrogates_only():
    value = {"a": "\ud800é😀", "b": ["\udfff"]}
    text = dumps(value)
    assert text == '{"a":"\\ud800é😀","b":["\\udfff"]}'
    assert json.loads(text.encode("utf-8")) == value


# ------------------------------------------------------------- the records ----

P = "data/f.jsonl"


def error_of(cls, obj, line=7) -> RecordError:
    with pytest.raises(RecordError) as info:
        cls.from_json(obj, P, line)
    return info.value


@pytest.mark.parametrize("cls, obj, kind, message, ids", [
    (Item, [1, 2], "missing_id", 'a gold record needs a string "id"', {}),
    (Item, {"answer": ["A"]}, "missing_id", 'a gold record needs a string "id"', {}),
    (Item, {"id": 3, "answer": ["A"]}, "missing_id", 'a gold record needs a string "id"', {}),
    (Item, {"id": "a\ud800", "answer": ["A"]}, "bad_field",
     '"id" must be text, it holds a lone surrogate \\ud800 at index 1', {}),
    (Item, {"id": "a"}, "missing_answer", "gold record 'a' has no \"answer\"", {"id": "a"}),
    (Prediction, "text", "missing_id", 'a prediction needs a string "id"', {}),
    (Prediction, {"id": None, "answer": ["A"]}, "missing_id", 'a prediction needs a string "id"', {}),
    (Prediction, {"id": "a", "model": 5, "answer": ["A"]}, "bad_field", '"model" must be a string', {"id": "a"}),
    (Prediction, {"id": "a", "model": "\udc00", "answer": ["A"]}, "bad_field",
     '"model" must be text, it holds a lone surrogate \\udc00 at index 0', {"id": "a"}),
    (Prediction, {"id": "a"}, "missing_answer", 'a prediction needs "output" (text) or "answer" (list)',
     {"id": "a", "model": "default"}),
    (Prediction, {"id": "a", "model": "m", "output": 5}, "missing_answer",
     'a prediction needs "output" (text) or "answer" (list)', {"id": "a", "model": "m"}),
    (ScoreRow, [], "not_object", "a score row must be a JSON object, got an array of 0 values", {}),
    (ScoreRow, {"model": "m"}, "missing_id", 'a score row needs a string "id"', {}),
    (ScoreRow, {"id": "a"}, "missing_field", 'a score row needs "model" (a string)', {"id": "a"}),
    (ScoreRow, {"id": "a", "model": "m", "answer": "A"}, "bad_field", "\"answer\" must be an array, got 'A'",
     {"id": "a", "model": "m"}),
    (Grade, {"id": "a", "model": "m", "answer": None, "stage": "magic", "score": 1}, "bad_field",
     "\"stage\" must be one of rule, symbolic, judge, similarity, got 'magic'", {"id": "a", "model": "m"}),
    (Grade, {"id": "a", "model": "m", "answer": None, "stage": "judge", "score": 1.5}, "bad_field",
     '"score" must be a number in [0, 1], got 1.5', {"id": "a", "model": "m"}),
    (Grade, {"id": "a", "model": "m", "stage": "judge", "score": 1}, "missing_field",
     'a grade needs "answer" (any JSON value (null: nothing read))', {"id": "a", "model": "m"}),
    (Grade, {"id": "a", "model": "m", "answer": "x", "stage": "judge", "score": 1, "attempts": True}, "bad_field",
     '"attempts" must be an integer >= 0, got true', {"id": "a", "model": "m"}),
    (ModelCall, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "missing_field",
     'a model call needs "endpoint" (a string)', {}),
    (ModelCall, {"endpoint": "http://127.0.0.1:8000/v1", "model": "m", "messages": []}, "bad_field",
     '"messages" must be a non-empty array of objects with "role" (a string) and "content", got an array of 0 values',
     {"model": "m"}),
    (ModelCall, {"endpoint": "e", "model": "m", "messages": [{"content": "hi"}]}, "bad_field",
     '"messages" must be a non-empty array of objects with "role" (a string) and "content", got an array of 1 values',
     {"model": "m"}),
    (ModelCall, {"endpoint": "e", "model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 1.5},
     "bad_field", '"seed" must be an integer, got 1.5', {"model": "m"}),
    (ModelCall, {"endpoint": "e", "model": "m", "messages": [{"role": "user", "content": "hi"}],
                 "tokens_out": -10 ** 50},
     "bad_field", '"tokens_out" must be an integer >= 0, got an integer of more than 40 digits', {"model": "m"}),
])
def test_field_errors_name_file_line_and_field(cls, obj, kind, message, ids):
    err = error_of(cls, obj)
    assert str(err) == f"{P}, line 7: {message}"
    assert err.row() == {"kind": kind, "message": message, "file": P, "line": 7, **ids}


def score_row_json(**change) -> dict:
    row = {"id": "q1", "model": "m", "answer": ["A"], "status": "ok", "parse_ok": True,
           **metrics_from_counts(1, 1, 2, 0.6, 6.0)}
    row.update(change)
    return row


@pytest.mark.parametrize("field, value, message", [
    ("status", "fine", "\"status\" must be one of ok, unparsed, missing, got 'fine'"),
    ("parse_ok", 1, '"parse_ok" must be true or false, got 1'),
    ("tp", -1, '"tp" must be an integer >= 0, got -1'),
    ("fn", 1.0, '"fn" must be an integer >= 0, got 1.0'),
    ("em", math.nan, '"em" must be a finite number, got NaN'),
    ("f1_pen", "x" * 41, '"f1_pen" must be a finite number, got a string of 41 characters'),
])
def test_score_row_field_errors(field, value, message):
    err = error_of(ScoreRow, score_row_json(**{field: value}), line=3)
    assert (err.message, err.field, err.line) == (message, field, 3)
    missing = score_row_json()
    del missing[field]
    assert error_of(ScoreRow, missing).kind == "missing_field"


def test_prediction_keeps_what_it_can_and_lists_what_it_left_out():
    p = Prediction.from_json({"id": "a", "answer": ["A"], "output": 5, "confidence": 1.5, "difficulty": True,
                              "tokens": 1e400, "cached": "yes", "attempts": -1, "seed": 3}, P, 2)
    assert p == Prediction("a", "default", None, ["A"], extra={"seed": 3})
    assert [(e.field, e.message) for e in p.problems] == [
        ("output", '"output" must be a string, got 5; ignored'),
        ("confidence", '"confidence" must be a finite number in [0.0, 1.0], got 1.5; ignored'),
        ("difficulty", '"difficulty" must be a finite number in [0.0, 1.0], got True; ignored'),
        ("tokens", '"tokens" must be a finite number in [0.0, inf], got inf; ignored'),
        ("cached", "\"cached\" must be true or false, got 'yes'; ignored"),
        ("attempts", '"attempts" must be an integer >= 0, got -1; ignored'),
    ]
    assert all(e.row()["id"] == "a" and e.row()["model"] == "default" and e.line == 2 for e in p.problems)
    # A null answer is an answer (of the wrong kind for every task); an absent one is not.
    assert Prediction.from_json({"id": "a", "answer": None}, P, 1).answer is None
    assert Prediction.from_json({"id": "a", "output": "x"}, P, 1).answer is ABSENT
    assert Prediction("a", answer=None).to_json() == {"id": "a", "model": "default", "answer": None}
    assert Prediction("a", output="x").to_json() == {"id": "a", "model": "default", "output": "x"}


def test_records_and_their_problems_cross_processes():
    item = Item.from_json({"id": "x", "answer": [], "meta": "m", "image": "a.png"}, P, 4)
    pred = Prediction.from_json({"id": "q", "model": "m", "output": "x", "cached": 1}, P, 5)
    for record in (item, pred):
        again = pickle.loads(pickle.dumps(record))
        assert again == record
        assert [(e.row(), e.field, str(e)) for e in again.problems] == [(e.row(), e.field, str(e))
                                                                         for e in record.problems]
    assert pickle.loads(pickle.dumps(pred)).problems[0].row() == {
        "kind": "bad_field", "message": '"cached" must be true or false, got 1; ignored', "file": P, "line": 5,
        "id": "q", "model": "m"}
    assert pickle.loads(pickle.dumps(pred)).answer is ABSENT


def test_item_keeps_every_field():
    line = {"id": "NaCl", "answer": [[2, 0, 0]], "meta": {"db": "ICSD"},
            "laue_rotations": [[1, 0, 0, 0, 1, 0, 0, 0, 1]],
            "formula": "NaCl"}
    item = Item.from_json(line, P, 1)
    assert item == Item("NaCl", [[2, 0, 0]], {"db": "ICSD"},
                        {"laue_rotations": [[1, 0, 0, 0, 1, 0, 0, 0, 1]], "formula": "NaCl"})
    assert item.to_json() == line and item.value("formula") == "NaCl" and item.value("meta") == {"db": "ICSD"}
    bad_meta = Item.from_json({"id": "x", "answer": [], "meta": [1]}, P, 4)
    assert bad_meta.meta == {} and [e.row() for e in bad_meta.problems] == [
        {"kind": "bad_field", "message": "\"meta\" of 'x' must be an object; ignored", "file": P, "line": 4, "id": "x"}]
    with pytest.raises(ValueError, match="may not be named like its own fields"):
        Item("x", [], extra={"meta": 1})


def test_writers_give_the_lines_readers_read():
    lines = {
        Item: {"id": "q", "answer": ["A"], "meta": {}, "image": "a.png"},
        Prediction: {"id": "q", "model": "m", "output": "Answer: A", "confidence": 0.5, "tokens": 12, "cached": True,
                     "attempts": 2, "setting": "TV"},
        ScoreRow: score_row_json(user_metric=0.25),
        Grade: {"id": "q", "model": "m", "answer": "3 m/s", "stage": "judge", "score": 1.0, "verdict": "correct",
                "judge_reply": "CORRECT", "attempts": 1, "setting": "TO"},
        ModelCall: {"endpoint": "http://127.0.0.1:8000/v1", "model": "m",
                    "messages": [{"role": "user", "content": "hi"}],
                    "settings": {"temperature": 0}, "seed": 1, "schema": {"type": "object"}, "reply": "hello",
                    "tokens_in": 3, "tokens_out": 1, "cached": False, "attempts": 1, "stage": "qa"},
    }
    for cls, line in lines.items():
        record = cls.from_json(line, P, 1)
        assert record.to_json() == line, cls.__name__
        assert cls.from_json(json.loads(dumps(record.to_json())), P, 1) == record


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
fraction = st.floats(0, 1)
extras = lambda names: st.dictionaries(text.filter(lambda k: k not in names), json_values, max_size=2)  # noqa: E731

items = st.builds(Item, text, json_values, st.dictionaries(text, json_values, max_size=3),
                  extras({"id", "answer", "meta"}))
predictions = st.builds(
    Prediction, text, text, st.none() | text, st.just(ABSENT) | json_values, confidence=st.none() | fraction,
    difficulty=st.none() | fraction, tokens=st.none() | st.integers(0, 10 ** 9), cached=st.none() | st.booleans(),
    attempts=st.none() | st.integers(0, 9), extra=extras({"id", "model", "output", "answer", "confidence",
                                                         "difficulty", "tokens", "cached", "attempts"}),
).filter(lambda p: p.answer is not ABSENT or p.output is not None)
score_rows = st.builds(
    lambda rid, model, tp, extra_pred, missed, status: ScoreRow(
        id=rid, model=model, answer=["A"] * (tp + extra_pred), status=status, parse_ok=status == "ok",
        **metrics_from_counts(tp, tp + extra_pred, tp + missed, 0.6, 6.0)),
    text, text, st.integers(0, 5), st.integers(0, 5), st.integers(0, 5), st.sampled_from(["ok", "unparsed", "missing"]),
).filter(lambda r: r.tp + r.fn > 0)
grades = st.builds(Grade, text, text, json_values, st.sampled_from(["rule", "symbolic", "judge"]), fraction,
                   st.none() | text, st.none() | text, st.integers(0, 5))
model_calls = st.builds(
    ModelCall, text, text,
    st.lists(st.fixed_dictionaries({"role": text, "content": json_values}), min_size=1, max_size=2),
    st.dictionaries(text, json_values, max_size=2), st.none() | st.integers(), st.none() | st.just({"type": "object"}),
    st.none() | text, st.none() | st.integers(0, 99), st.none() | st.integers(0, 99), st.booleans(), st.integers(0, 3),
    st.none() | text)
KINDS = {Item: (items, read_items), Prediction: (predictions, read_predictions),
         ScoreRow: (score_rows, read_score_rows), Grade: (grades, read_grades),
         ModelCall: (model_calls, read_model_calls)}


@pytest.mark.parametrize("cls", KINDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_trip(cls, data):
    record = data.draw(KINDS[cls][0])
    assert cls.from_json(json.loads(dumps(record.to_json())), P, 1) == record


# ------------------------------------------------ readers on hostile files ----

# Lines no reader can use, whatever the record kind, and the one malformed_json error each must give.
HOSTILE = {
    "nested 100,000 deep": (nested(100_000), "malformed JSON (nested deeper than 512 levels at column 513)"),
    # '{"id":"q","answer":' is 19 characters: level 513 is the '[' at column 20 + 511.
    "an object nested 100,000 deep": (b'{"id":"q","answer":' + nested(100_000) + b"}",
                                      "malformed JSON (nested deeper than 512 levels at column 531)"),
    "nested 513 deep": (nested(513), "malformed JSON (nested deeper than 512 levels at column 513)"),
    # '{"id":"q","output":"' is 20 bytes.
    "invalid UTF-8": (b'{"id":"q","output":"\xff\xfe Answer: A"}', "not UTF-8 text (invalid start byte at byte 20)"),
    "an encoded surrogate": (b'{"id":"q","output":"\xed\xa0\x80"}',
                             "not UTF-8 text (invalid continuation byte at byte 20)"),
    "a raw NUL in a string": (b'{"id":"q","output":"A\x00B"}',
                              "malformed JSON (Invalid control character at at column 22)"),
    "a raw NUL first": (b'\x00{"id":"q","answer":["A"]}', "malformed JSON (Expecting value at column 1)"),
    "a raw NUL last": (b'{"id":"q","answer":["A"]}\x00', "malformed JSON (Extra data at column 26)"),
    "a 5000-digit integer": (b'{"id":"q","answer":["A"],"x":' + b"9" * 5000 + b"}",
                             "malformed JSON (Exceeds the limit (4300 digits) for integer string conversion)"),
    "a byte-order mark inside": (b'{"id":"q",\xef\xbb\xbf"answer":["A"]}',
                                 "malformed JSON (Expecting property name enclosed in double quotes at column 11)"),
    "UTF-16": ('{"id":"q","answer":["A"]}'.encode("utf-16"), "not UTF-8 text (invalid start byte at byte 0)"),
}
TRUNCATED = b'{"id":"q","answer":["A"'


def valid_line(record, variant: str) -> bytes:
    """A record's line as written, or one of the valid oddities readers must accept."""
    obj = record.to_json()
    if variant == "bom":
        return b"\xef\xbb\xbf" + dumps(obj).encode()
    if variant == "ascii":
        return json.dumps(obj, ensure_ascii=True).encode()  # every non-ASCII character escaped, pairs included
    if variant == "5 MB":
        return dumps({**obj, "pad": "x" * (5 << 20)}).encode()
    return dumps(obj).encode()


@pytest.mark.parametrize("cls", KINDS)
@settings(max_examples=max(10, FUZZ_EXAMPLES // 2), deadline=None)
@given(data=st.data())
def test_readers_survive_hostile_lines(cls, data, tmp_path_factory):
    strategy, reader = KINDS[cls]
    plan = data.draw(st.lists(st.one_of(
        st.tuples(st.just("valid"), strategy, st.sampled_from(["plain", "plain", "bom", "ascii"])),
        st.tuples(st.just("hostile"), st.sampled_from(sorted(HOSTILE)), st.none()),
        st.tuples(st.just("blank"), st.sampled_from([b"", b"  \t", b"\r"]), st.none())), max_size=10))
    big = data.draw(st.booleans())
    truncated = data.draw(st.booleans())
    if big:
        plan.insert(data.draw(st.integers(0, len(plan))), ("valid", data.draw(strategy), "5 MB"))
    lines = [valid_line(r, v) if what == "valid" else HOSTILE[r][0] if what == "hostile" else r for what, r, v in plan]
    path = tmp_path_factory.mktemp("reader") / "f.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + (TRUNCATED if truncated else b""))

    got = dict(reader(path))
    expected_lines = [n for n, (what, _, _) in enumerate(plan, 1) if what != "blank"]
    if truncated:
        expected_lines.append(len(plan) + 1)
    assert list(got) == expected_lines
    for n, (what, r, v) in enumerate(plan, 1):
        if what == "valid":
            want = r if v != "5 MB" else cls.from_json({**r.to_json(), "pad": "x" * (5 << 20)}, str(path), n)
            assert got[n] == want
        elif what == "hostile":
            err = got[n]
            assert isinstance(err, RecordError) and (err.kind, err.path, err.line) == ("malformed_json", str(path), n)
            assert err.row() == {"kind": "malformed_json", "message": HOSTILE[r][1], "file": str(path), "line": n}
    if truncated:
        assert got[len(plan) + 1].message == "malformed JSON (Expecting ',' delimiter at column 24)"


# --------------------------------------------------- benchmint score, end to end ----

def score_both(forced_impl, tmp_path, pred, gold, *extra) -> dict:
    """Exit status and outputs of benchmint score in each implementation."""
    out = {}
    for impl in ("reference", "compiled"):
        with forced_impl(impl):
            rc = main(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / impl),
                       "--quiet", "--workers", "2", *extra])
            out[impl] = (rc, {f: (tmp_path / impl / f).read_bytes() for f in OUTPUTS})
    assert out["reference"] == out["compiled"]
    return out["reference"]


def rows(data: bytes) -> list[dict]:
    return [json.loads(x) for x in data.decode("utf-8").splitlines()]


def test_a_prediction_nested_100000_deep_is_one_error_row(forced_impl, tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "q1", "answer": ["A"]}\n{"id": "q2", "answer": ["B"]}\n', encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    pred.write_bytes(b'{"id": "q1", "answer": ["A"]}\n{"id":"q2","answer":' + nested(100_000) + b"}\n")
    rc, out = score_both(forced_impl, tmp_path, pred, gold)
    assert rc == 1
    assert rows(out["errors.jsonl"]) == [
        {"file": str(pred), "kind": "malformed_json", "line": 2,
         "message": "malformed JSON (nested deeper than 512 levels at column 532)"},
        {"file": str(gold), "id": "q2", "kind": "missing_prediction", "model": "default",
         "message": "model 'default' has no prediction for id 'q2'; scored as empty"},
    ]
    assert [(r["id"], r["status"], r["em"]) for r in rows(out["scores.jsonl"])] == [("q1", "ok", 1.0),
                                                                                     ("q2", "missing", 0.0)]
    assert json.loads(out["summary.json"])["errors"]["by_kind"] == {"malformed_json": 1, "missing_prediction": 1}


@pytest.mark.parametrize("task, dataset", [("mcq", mcq_dataset), ("hkl", hkl_dataset)])
def test_score_rows_read_back_to_the_bytes_both_implementations_wrote(forced_impl, tmp_path, task, dataset):
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    with open(gold, "w", encoding="utf-8") as g, open(pred, "w", encoding="utf-8") as p:
        for which, rec in dataset(150, ["wise-model", "bold-model"], seed=2):
            (g if which == "gold" else p).write(json.dumps(rec) + "\n")
    for impl in ("reference", "compiled"):
        with forced_impl(impl):
            main(["score", str(pred), "--gold", str(gold), "--task", task, "--out", str(tmp_path / impl), "--quiet"])
            scores = tmp_path / impl / "scores.jsonl"
            read = list(read_score_rows(scores))
            assert len(read) == 300 and all(isinstance(r, ScoreRow) for _, r in read)
            assert "".join(dumps(r.to_json()) + "\n" for _, r in read).encode() == scores.read_bytes()


def test_the_scorer_reports_problems_only_with_fields_it_reads(forced_impl, tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "q1", "answer": ["A"]}\n', encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    pred.write_text('{"id": "q1", "answer": ["A"], "output": 5, "cached": "yes", "attempts": -1, "tokens": -2}\n',
                    encoding="utf-8")
    rc, out = score_both(forced_impl, tmp_path, pred, gold)
    assert rc == 1 and rows(out["errors.jsonl"]) == [
        {"file": str(pred), "id": "q1", "kind": "bad_field", "line": 1, "model": "default",
         "message": '"tokens" must be a finite number in [0.0, inf], got -2; ignored'}]


def test_integers_beyond_pythons_digit_limit_are_errors_in_both_implementations(forced_impl, tmp_path):
    # The compiled reader used to read such lines itself and score them.
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes(b'{"id": "q1", "answer": ["A"]}\n{"id": "q2", "answer": ["A"], "meta": {"x": ' + b"2" * 4301
                     + b"}}\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_bytes(b'{"id": "q1", "answer": ["A"], "seed": ' + b"1" * 5000 + b'}\n{"id": "q1", "answer": ["B"]}\n')
    rc, out = score_both(forced_impl, tmp_path, pred, gold, "--by", "x")
    limit = "malformed JSON (Exceeds the limit (4300 digits) for integer string conversion)"
    assert rc == 1 and [(r["file"], r.get("line"), r["message"]) for r in rows(out["errors.jsonl"])] == [
        (str(gold), 2, limit), (str(pred), 1, limit)]
    assert [(r["id"], r["answer"]) for r in rows(out["scores.jsonl"])] == [("q1", ["B"])]


def test_gold_values_no_file_can_hold_are_warnings(forced_impl, tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes(b"\n".join([
        b'{"id": "q1", "answer": ["A"], "meta": {"x": NaN}}',
        b'{"id": "q2", "answer": ["A"], "meta": {"x": 1e400, "y": "\\udfff"}}',
        b'{"id": "q3", "answer": ["A"], "meta": {"x": [1, "\\ud800"]}}',  # escaped in the stratum's JSON text
        b'{"id": "\\ud800", "answer": ["A"]}',
        b'{"id": "q4", "answer": ["A"], "meta": {"x": ' + b"1" * 700 + b"}}",  # the compiled reader leaves it to Python
    ]) + b"\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(f'{{"id": "q{i}", "answer": ["A"]}}\n' for i in range(1, 5)), encoding="utf-8")
    rc, out = score_both(forced_impl, tmp_path, pred, gold, "--by", "x", "--by", "y")
    assert rc == 1
    assert [(r["line"], r["message"]) for r in rows(out["errors.jsonl"])] == [
        (1, "\"meta\" of 'q1': 'x' holds a number that is not finite; counted as '(missing)'"),
        (2, "\"meta\" of 'q2': 'x' holds a number that is not finite; 'y' holds a lone surrogate \\udfff at index 0; "
            "counted as '(missing)'"),
        (4, '"id" must be text, it holds a lone surrogate \\ud800 at index 0'),
    ]
    by_x = json.loads(out["summary.json"])["models"]["default"]["by"]["x"]
    assert sorted(by_x) == ["(missing)", "1" * 700, '[1,"\\ud800"]']
    assert by_x["(missing)"]["n"] == 2


# One prediction line per template: (bytes for id q<i>, what the scorer must make of it).
# ("scored", model, warnings) lines get a row; ("error", kind) lines get exactly one error row.
PRED_LINES = {
    "answer": (lambda q: b'{"id":"%s","answer":["A"]}' % q, ("scored", "default", 0)),
    "output": (lambda q: b'{"id":"%s","model":"m2","output":"Answer: B"}' % q, ("scored", "m2", 0)),
    "byte-order mark": (lambda q: b'\xef\xbb\xbf{"id":"%s","answer":["D"]}' % q, ("scored", "default", 0)),
    "escaped NUL": (lambda q: b'{"id":"%s","output":"A\\u0000 Answer: A"}' % q, ("scored", "default", 0)),
    "escaped lone surrogate": (lambda q: b'{"id":"%s","output":"\\ud800 Answer: B"}' % q, ("scored", "default", 0)),
    "infinite confidence": (lambda q: b'{"id":"%s","answer":["A"],"confidence":1e400}' % q, ("scored", "default", 1)),
    "fields the scorer does not read": (
        lambda q: b'{"id":"%s","answer":["A"],"output":[],"cached":0,"attempts":"x"}' % q, ("scored", "default", 0)),
    "700-digit tokens": (lambda q: b'{"id":"%s","answer":["A"],"tokens":%s}' % (q, b"7" * 700),
                         ("scored", "default", 1)),  # beyond float range: ignored, with a warning
    "deep JSON in the output": (lambda q: b'{"id":"%s","output":"Answer: C {\\"answer\\": [\\"B\\"], \\"x\\": %s}"}'
                                % (q, nested(600)), ("scored", "default", 0)),
    "nested 100,000 deep": (lambda q: nested(100_000), ("error", "malformed_json")),
    "answer nested 100,000 deep": (lambda q: b'{"id":"%s","answer":%s}' % (q, nested(100_000)),
                                   ("error", "malformed_json")),
    "invalid UTF-8": (lambda q: b'{"id":"%s","output":"\xff Answer: A"}' % q, ("error", "malformed_json")),
    "encoded surrogate": (lambda q: b'{"id":"%s","output":"\xed\xa0\x80"}' % q, ("error", "malformed_json")),
    "raw NUL in a string": (lambda q: b'{"id":"%s","output":"A\x00"}' % q, ("error", "malformed_json")),
    "raw NUL first": (lambda q: b'\x00{"id":"%s","answer":["A"]}' % q, ("error", "malformed_json")),
    "raw NUL last": (lambda q: b'{"id":"%s","answer":["A"]}\x00' % q, ("error", "malformed_json")),
    "5000-digit integer": (lambda q: b'{"id":"%s","answer":["A"],"x":%s}' % (q, b"9" * 5000),
                           ("error", "malformed_json")),
    "lone surrogate id": (lambda q: b'{"id":"%s\\ud800","answer":["A"]}' % q, ("error", "bad_field")),
    "lone surrogate model": (lambda q: b'{"id":"%s","model":"\\udc00","answer":["A"]}' % q, ("error", "bad_field")),
    "huge number as model": (lambda q: b'{"id":"%s","model":1e400,"answer":["A"]}' % q, ("error", "bad_field")),
}
BIG = (lambda q: b'{"id":"%s","output":"%s\\nAnswer: C"}' % (q, b"x" * (5 << 20)), ("scored", "default", 0))
GOLD_HOSTILE = [nested(100_000), b'{"id":"g","answer":["A"],"m":"\xff"}', b'{"id":"g","answer":["A"]}\x00',
                b'{"id":"g\\udfff","answer":["A"]}', b'{"id":"g","answer":["A"],"n":' + b"1" * 4400 + b"}"]


@settings(max_examples=max(10, FUZZ_EXAMPLES // 2), deadline=None)
@given(st.lists(st.sampled_from(sorted(PRED_LINES)), max_size=12), st.booleans(), st.booleans(),
       st.lists(st.sampled_from(range(len(GOLD_HOSTILE))), max_size=4), st.booleans())
def test_score_survives_hostile_lines(forced_impl, tmp_path_factory, names, big, truncated, gold_hostile, blank):
    tmp_path = tmp_path_factory.mktemp("score")
    # The first line is always usable, so every run has a model to score.
    templates = [PRED_LINES["answer"]] + [PRED_LINES[n] for n in names] + ([BIG] if big else [])
    pred_lines = [make(b"q%d" % i) for i, (make, _) in enumerate(templates)]
    blank_lines = [b"   "] if blank else []
    pred = tmp_path / "pred.jsonl"
    pred.write_bytes(b"".join(line + b"\n" for line in pred_lines + blank_lines)
                     + (b'{"id":"qt","answer":["A"' if truncated else b""))
    gold = tmp_path / "gold.jsonl"
    gold_lines = [b'{"id":"q%d","answer":["A","B"]}' % i for i in range(len(templates))]
    gold_lines += [GOLD_HOSTILE[k] for k in gold_hostile]
    gold.write_bytes(b"".join(line + b"\n" for line in gold_lines)
                     + (b'{"id":"gt","answer":["A"' if truncated else b""))

    rc, out = score_both(forced_impl, tmp_path, pred, gold)
    errors = rows(out["errors.jsonl"])
    assert rc == (1 if errors else 0)
    per_line: dict[tuple, list] = {}
    for e in errors:
        if "line" in e:
            per_line.setdefault((e["file"], e["line"]), []).append(e)
    scored = {(r["id"], r["model"]) for r in rows(out["scores.jsonl"]) if r["status"] != "missing"}
    for i, (_, expect) in enumerate(templates):
        got = per_line.pop((str(pred), i + 1), [])
        if expect[0] == "error":
            assert [e["kind"] for e in got] == [expect[1]]
        else:
            assert (f"q{i}", expect[1]) in scored
            assert [e["kind"] for e in got] == ["bad_field"] * expect[2]
    for k in range(len(gold_hostile)):
        assert [e["kind"] for e in per_line.pop((str(gold), len(templates) + k + 1))] in (["malformed_json"],
                                                                                      ["bad_field"])
    if truncated:
        last = len(pred_lines) + len(blank_lines) + 1
        assert per_line.pop((str(pred), last)) == [{"file": str(pred), "kind": "malformed_json", "line": last,
                                                    "message": "malformed JSON (Expecting ',' delimiter at column 25)"}]
        assert [e["kind"] for e in per_line.pop((str(gold), len(gold_lines) + 1))] == ["malformed_json"]
    assert per_line == {}  # nothing else went wrong
    summary = json.loads(out["summary.json"])
    assert summary["gold"]["n_items"] == len(templates)
    assert summary["errors"]["count"] == len(errors)


def test_extraction_of_deep_json_does_not_depend_on_the_stack():
    # 600 levels of JSON: json.loads alone reads it from a shallow stack ("B") and not from a deep one ("C").
    text = 'Answer: C\n{"answer": ["B"], "pad": ' + "[" * 600 + "]" * 600 + "}"
    assert extract_choices(text) == ["C"]
    assert at_stack_depth(300, extract_choices, text) == ["C"]
    shallow = 'Answer: C\n{"answer": ["B"], "pad": ' + "[" * 300 + "]" * 300 + "}"
    assert extract_choices(shallow) == ["B"]


# ------------------------------------------------------------------ the ledger ----

def test_ledger_stores_what_reads_back_and_reads_what_it_can(tmp_path):
    db = tmp_path / "run.sqlite"
    deep: list = []
    for _ in range(600):
        deep = [deep]
    with Ledger(db, "demo") as ledger:
        ledger.record("a", {"x": deep})
        ledger.record("b", {"x": object()})
        ledger.record("c", {"t": "\ud800 text"})
        ledger.record("d", {"x": 1})
        ledger.record("e", {"x": 2})
        ledger.record("f", {"x": 3})
        # '{"x": ' is 6 characters, the '{' level 1: the 512th '[' (column 7 + 511) is level 513.
        assert ledger.get("a") == (False, {"error": "result not storable as JSON: malformed JSON (nested deeper than "
                                                    "512 levels at column 518)"})
        assert ledger.get("b") == (False, {"error": "result not storable as JSON: TypeError: Object of type object is "
                                                    "not JSON serializable"})
        assert ledger.get("c") == (True, {"t": "\ud800 text"})
    con = sqlite3.connect(db)  # damage three stored results the way a broken disk or an older writer might
    con.execute("UPDATE units SET result = CAST(X'FF7B7D' AS TEXT) WHERE key = 'd'")
    con.execute("UPDATE units SET result = '[1]' WHERE key = 'e'")
    con.execute("""UPDATE units SET result = '{"x": 3' WHERE key = 'f'""")
    con.commit()
    con.close()
    with Ledger(db, "demo") as ledger:
        assert ledger.get("d") == (False, {"error": "stored result unreadable: not UTF-8 text (invalid start byte at "
                                                    "byte 0)"})
        assert ledger.get("e") == (False, {"error": "stored result unreadable: not a JSON object"})
        assert ledger.get("f") == (False, {"error": "stored result unreadable: malformed JSON (Expecting ',' delimiter "
                                                    "at column 8)"})
        assert [(k, ok) for k, ok, _ in ledger.results()] == [("a", False), ("b", False), ("c", True), ("d", False),
                                                               ("e", False), ("f", False)]


def deep_result(i: int) -> dict:
    value: list = []
    for _ in range(2000 if i == 1 else 0):
        value = [value]
    return {"i": i, "v": value}


def test_a_unit_whose_result_cannot_be_stored_is_that_units_error(tmp_path):
    units = [Unit(f"k{i}", (i,), str(i)) for i in range(3)]
    with Ledger(tmp_path / "run.sqlite", "demo") as ledger:
        results, skipped = run_units(ledger, units, deep_result, SerialExecutor())
    assert skipped == 0 and results[0] == {"i": 0, "v": []} and results[2] == {"i": 2, "v": []}
    assert results[1]["error"].startswith("result not storable as JSON: RecursionError: maximum recursion depth")
