"""Typed records: what flows between stages, each with one reader and one writer.

Item        a benchmark item (gold file, ``benchmint xrd build`` items.jsonl)
Prediction  one model answer for one item (``benchmint score`` input, a model run's output)
ScoreRow    one row of scores.jsonl
Grade       how one open answer was graded (rules, symbolic screen or judge)
ModelCall   one call to a model endpoint: the request, then its reply or error

``Kind.from_json(obj, path, line)`` checks a decoded JSON line and raises
``RecordError`` naming the file, the line and the field; ``to_json()`` gives
the dict to write (with ``benchmint.io.dumps``); ``read_<kind>s(path)`` yields
``(line, record)`` or ``(line, RecordError)`` for every non-blank line, so one
bad line never stops a reader. Answers stay JSON values here: their kind
(option letters, Miller indices, ...) is read by ``benchmint.tasks``.

A record's ``problems`` lists fields that were present but unusable and were
left out (a confidence of 1.5, say); the record itself is usable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from benchmint.io import iter_jsonl

DEFAULT_MODEL = "default"
STATUSES = ("ok", "unparsed", "missing")
STAGES = ("rule", "symbolic", "judge", "similarity")


class RecordError(Exception):
    """A record that cannot be used (or a field of it that was left out), with where it was read.

    ``kind`` is the error kind written in errors.jsonl (``missing_id``,
    ``bad_field``, ``malformed_json``, ...); ``field`` names the field at fault.
    """

    def __init__(self, path: str, line: int | None, message: str, *, kind: str = "bad_field",
                 field: str | None = None, id: str | None = None, model: str | None = None) -> None:
        where = path if line is None else f"{path}, line {line}"
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.message = path, line, message
        self.kind, self.field, self.id, self.model = kind, field, id, model

    def row(self) -> dict:
        """The error as a row of errors.jsonl."""
        return error_row(self.kind, self.message, self.path, self.line, id=self.id, model=self.model)

    def __reduce__(self):  # records cross process boundaries with their problems
        return _record_error, (self.path, self.line, self.message, self.kind, self.field, self.id, self.model)


def _record_error(path, line, message, kind, field, id, model) -> RecordError:
    return RecordError(path, line, message, kind=kind, field=field, id=id, model=model)


def error_row(kind: str, message: str, file: str, line: int | None = None, **extra) -> dict:
    """One row of errors.jsonl: kind, message, file, line (when known) and the extra fields that are not None."""
    row: dict[str, Any] = {"kind": kind, "message": message, "file": file}
    if line is not None:
        row["line"] = line
    row.update({k: v for k, v in extra.items() if v is not None})
    return row


class _Absent:
    """The value of a field the line does not have (a JSON null is a value)."""

    _instance: ClassVar[_Absent | None] = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return (_Absent, ())


ABSENT: Any = _Absent()


def lone_surrogate(text: str) -> str | None:
    """Where ``text`` holds a lone surrogate (JSON allows ``"\\ud800"``; UTF-8 cannot hold it), or None."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        return f"a lone surrogate \\u{ord(text[exc.start]):04x} at index {exc.start}"


def _shown(value: Any) -> str:
    """A JSON value as a message shows it: short scalars as written, anything long by its kind and size."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10 ** 40 else "an integer of more than 40 digits"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else {"inf": "Infinity", "-inf": "-Infinity"}.get(repr(value), "NaN")
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} values"
    return f"an object of {len(value)} fields"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_finite(v: Any) -> bool:
    try:
        return _is_number(v) and math.isfinite(v)
    except OverflowError:  # an integer beyond float range
        return False


def _is_fraction(v: Any) -> bool:
    return _is_finite(v) and 0 <= v <= 1


class _Fields:
    """Checks the fields of one decoded line; every message names the field and what was wrong."""

    def __init__(self, obj: Any, path: str, line: int | None, what: str) -> None:
        self.path, self.line, self.what = str(path), line, what
        self.id: str | None = None
        self.model: str | None = None
        self.problems: list[RecordError] = []
        if not isinstance(obj, dict):
            raise self.error(f"{what} must be a JSON object, got {_shown(obj)}", kind="not_object")
        self.obj = obj

    def error(self, message: str, kind: str = "bad_field", field: str | None = None, **ids) -> RecordError:
        ids.setdefault("id", self.id)
        ids.setdefault("model", self.model)
        return RecordError(self.path, self.line, message, kind=kind, field=field, **ids)

    def text_id(self, missing: str) -> str:
        """The record's "id": a string (``missing`` is the message otherwise) holding text."""
        rid = self.obj.get("id")
        if not isinstance(rid, str):
            raise self.error(missing, kind="missing_id", field="id")
        where = lone_surrogate(rid)
        if where:
            raise self.error(f'"id" must be text, it holds {where}', field="id")
        self.id = rid
        return rid

    def text_model(self, required: bool = False) -> str:
        """The "model" (DEFAULT_MODEL when absent and not required)."""
        if "model" not in self.obj:
            if required:
                raise self.error(f'{self.what} needs "model" (a string)', kind="missing_field", field="model")
            self.model = DEFAULT_MODEL
            return DEFAULT_MODEL
        model = self.obj["model"]
        if not isinstance(model, str):
            raise self.error('"model" must be a string', field="model")
        where = lone_surrogate(model)
        if where:
            raise self.error(f'"model" must be text, it holds {where}', field="model")
        self.model = model
        return model

    def get(self, key: str, desc: str, ok: Callable[[Any], bool], default: Any = ABSENT,
            required: bool = False, null_ok: bool = False) -> Any:
        """``obj[key]`` when ``ok`` accepts it; a RecordError when a required field is missing or wrong."""
        if key not in self.obj:
            if required:
                raise self.error(f'{self.what} needs "{key}" ({desc})', kind="missing_field", field=key)
            return default
        value = self.obj[key]
        if (value is None and null_ok) or ok(value):
            return value
        raise self.error(f'"{key}" must be {desc}, got {_shown(value)}', field=key)

    def optional(self, key: str, desc: str, ok: Callable[[Any], bool]) -> Any:
        """``obj[key]`` when present, non-null and accepted; otherwise None, and a problem when it was unusable."""
        value = self.obj.get(key)
        if value is None or ok(value):
            return value
        self.problems.append(self.error(f'"{key}" must be {desc}, got {_shown(value)}; ignored', field=key))
        return None

    def bounded_number(self, key: str, hi: float) -> int | float | None:
        """A finite number in [0, hi] or None; the scorer's wording for anything else."""
        value = self.obj.get(key)
        if value is None:
            return None
        if _is_finite(value) and 0.0 <= value <= hi:
            return value
        self.problems.append(self.error(f'"{key}" must be a finite number in [0.0, {float(hi)}], got {value!r}; '
                                        "ignored", field=key))
        return None

    def extra(self, names: tuple[str, ...]) -> dict:
        return {k: v for k, v in self.obj.items() if k not in names}


def _no_shadowing(record: Any, names: tuple[str, ...]) -> None:
    if not record.extra:
        return
    taken = sorted(set(record.extra) & set(names))
    if taken:
        raise ValueError(f"extra fields of a {type(record).__name__} may not be named like its own fields: {taken}")


def _names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name not in ("extra", "problems"))


def _present(pairs) -> dict:
    return {k: v for k, v in pairs if v is not None and v is not ABSENT}


# ------------------------------------------------------------------ Item ----

@dataclass(frozen=True, slots=True)
class Item:
    """A benchmark item: ``{"id": str, "answer": JSON, "meta": {...}, ...}``; other fields are kept in ``extra``."""

    id: str
    answer: Any
    meta: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    problems: tuple[RecordError, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        _no_shadowing(self, _ITEM_FIELDS)

    @classmethod
    def from_json(cls, obj: Any, path: str, line: int | None) -> Item:
        if not isinstance(obj, dict):
            raise RecordError(str(path), line, 'a gold record needs a string "id"', kind="missing_id", field="id")
        f = _Fields(obj, path, line, "a gold record")
        rid = f.text_id('a gold record needs a string "id"')
        if "answer" not in obj:
            raise f.error(f'gold record {rid!r} has no "answer"', kind="missing_answer", field="answer")
        meta = obj.get("meta", {})
        if not isinstance(meta, dict):
            f.problems.append(f.error(f'"meta" of {rid!r} must be an object; ignored', field="meta"))
            meta = {}
        return cls(rid, obj["answer"], meta, f.extra(_ITEM_FIELDS), tuple(f.problems))

    def value(self, name: str, default: Any = None) -> Any:
        """The field called ``name`` in the item's JSON (own or extra), or ``default``."""
        return getattr(self, name) if name in _ITEM_FIELDS else self.extra.get(name, default)

    def to_json(self) -> dict:
        return {**self.extra, "id": self.id, "answer": self.answer, "meta": self.meta}


_ITEM_FIELDS = ("id", "answer", "meta")


# ------------------------------------------------------------ Prediction ----

@dataclass(frozen=True, slots=True)
class Prediction:
    """One model answer: ``{"id", "output": raw text}`` or ``{"id", "answer": JSON}``, with optional fields.

    ``answer`` is ABSENT when the line has none (a JSON null answer is kept as
    None); ``output`` is None when absent. ``confidence`` and ``difficulty``
    are in [0, 1], ``tokens`` >= 0; ``cached`` and ``attempts`` come from model runs.
    """

    id: str
    model: str = DEFAULT_MODEL
    output: str | None = None
    answer: Any = ABSENT
    confidence: int | float | None = None
    difficulty: int | float | None = None
    tokens: int | float | None = None
    cached: bool | None = None
    attempts: int | None = None
    extra: dict = field(default_factory=dict)
    problems: tuple[RecordError, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        _no_shadowing(self, _PREDICTION_FIELDS)

    @classmethod
    def from_json(cls, obj: Any, path: str, line: int | None) -> Prediction:
        if not isinstance(obj, dict):
            raise RecordError(str(path), line, 'a prediction needs a string "id"', kind="missing_id", field="id")
        f = _Fields(obj, path, line, "a prediction")
        rid = f.text_id('a prediction needs a string "id"')
        model = f.text_model()
        output = obj.get("output")
        if "answer" not in obj and not isinstance(output, str):
            raise f.error('a prediction needs "output" (text) or "answer" (list)', kind="missing_answer",
                          field="output")
        if output is not None and not isinstance(output, str):  # beside an answer, which is read instead
            f.problems.append(f.error(f'"output" must be a string, got {_shown(output)}; ignored', field="output"))
            output = None
        return cls(
            rid, model, output, obj.get("answer", ABSENT),
            confidence=f.bounded_number("confidence", 1.0),
            difficulty=f.bounded_number("difficulty", 1.0),
            tokens=f.bounded_number("tokens", math.inf),
            cached=f.optional("cached", "true or false", lambda v: isinstance(v, bool)),
            attempts=f.optional("attempts", "an integer >= 0", _is_count),
            extra=f.extra(_PREDICTION_FIELDS),
            problems=tuple(f.problems),
        )

    def to_json(self) -> dict:
        out = {**self.extra, **_present((k, getattr(self, k)) for k in _PREDICTION_FIELDS)}
        if self.answer is None:  # a null answer is written as one
            out["answer"] = None
        return out


_PREDICTION_FIELDS = _names(Prediction)


# -------------------------------------------------------------- ScoreRow ----

@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One row of scores.jsonl: the answer as read, its status, the counts and every metric.

    ``extra`` holds further columns (user-defined metrics) as read.
    """

    id: str
    model: str
    answer: list
    status: str
    parse_ok: bool
    tp: int
    fp: int
    fn: int
    over_predicted: bool
    em: float
    spc: float
    sip_f1: float
    jaccard: float
    precision: float
    recall: float
    f1: float
    j_pen: float
    f1_pen: float
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _no_shadowing(self, _SCORE_FIELDS)

    @classmethod
    def from_json(cls, obj: Any, path: str, line: int | None) -> ScoreRow:
        f = _Fields(obj, path, line, "a score row")
        f.text_id('a score row needs a string "id"')
        values: dict[str, Any] = {"id": f.id, "model": f.text_model(required=True)}
        values["answer"] = f.get("answer", "an array", lambda v: isinstance(v, list), required=True)
        values["status"] = f.get("status", f"one of {', '.join(STATUSES)}", lambda v: v in STATUSES, required=True)
        for name in ("parse_ok", "over_predicted"):
            values[name] = f.get(name, "true or false", lambda v: isinstance(v, bool), required=True)
        for name in ("tp", "fp", "fn"):
            values[name] = f.get(name, "an integer >= 0", _is_count, required=True)
        for name in _SCORE_FLOATS:
            values[name] = float(f.get(name, "a finite number", _is_finite, required=True))
        return cls(**values, extra=f.extra(_SCORE_FIELDS))

    def to_json(self) -> dict:
        return {**self.extra, **{k: getattr(self, k) for k in _SCORE_FIELDS}}


_SCORE_FIELDS = _names(ScoreRow)
_SCORE_FLOATS = ("em", "spc", "sip_f1", "jaccard", "precision", "recall", "f1", "j_pen", "f1_pen")


# ----------------------------------------------------------------- Grade ----

@dataclass(frozen=True, slots=True)
class Grade:
    """How one open answer was graded.

    ``answer`` is the answer extracted from the output (None: nothing could be
    read); ``stage`` is the stage that decided ("rule", "symbolic",
    "judge", or "similarity" for a similarity score alone); ``score`` in [0, 1] (1 correct, 0 wrong, between: partial
    credit); ``verdict`` the deciding label as that stage gave it;
    ``judge_reply`` the judge's raw reply; ``attempts`` the judge calls made.
    """

    id: str
    model: str
    answer: Any
    stage: str
    score: float
    verdict: str | None = None
    judge_reply: str | None = None
    attempts: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _no_shadowing(self, _GRADE_FIELDS)

    @classmethod
    def from_json(cls, obj: Any, path: str, line: int | None) -> Grade:
        f = _Fields(obj, path, line, "a grade")
        rid = f.text_id('a grade needs a string "id"')
        model = f.text_model(required=True)
        answer = f.get("answer", "any JSON value (null: nothing read)", lambda v: True, required=True)
        stage = f.get("stage", f"one of {', '.join(STAGES)}", lambda v: v in STAGES, required=True)
        score = float(f.get("score", "a number in [0, 1]", _is_fraction, required=True))
        verdict = f.get("verdict", "a string", lambda v: isinstance(v, str), default=None, null_ok=True)
        reply = f.get("judge_reply", "a string", lambda v: isinstance(v, str), default=None, null_ok=True)
        attempts = f.get("attempts", "an integer >= 0", _is_count, default=0)
        return cls(rid, model, answer, stage, score, verdict, reply, attempts, f.extra(_GRADE_FIELDS))

    def to_json(self) -> dict:
        out = {**self.extra, **{k: getattr(self, k) for k in ("id", "model", "answer", "stage", "score", "attempts")}}
        out.update(_present((k, getattr(self, k)) for k in ("verdict", "judge_reply")))
        return out


_GRADE_FIELDS = _names(Grade)


# ------------------------------------------------------------- ModelCall ----

def _is_messages(v: Any) -> bool:
    return (isinstance(v, list) and bool(v)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in v))


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call to an OpenAI-compatible endpoint: the request, then what came back.

    Request: ``endpoint`` (base URL), ``model``, ``messages`` (objects with
    "role" and "content"; images by content hash), ``settings`` (sampling:
    temperature, top_p, max_tokens, ...), ``seed``, ``schema`` (a JSON schema
    the reply must follow). Outcome: ``reply`` text or ``error`` (the cause of
    giving up), ``tokens_in``/``tokens_out``, ``cached`` (served from the
    request cache) and ``attempts`` (transport attempts made).
    """

    endpoint: str
    model: str
    messages: list
    settings: dict = field(default_factory=dict)
    seed: int | None = None
    schema: dict | None = None
    reply: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cached: bool = False
    attempts: int = 0
    error: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _no_shadowing(self, _CALL_FIELDS)

    @classmethod
    def from_json(cls, obj: Any, path: str, line: int | None) -> ModelCall:
        f = _Fields(obj, path, line, "a model call")
        string = ("a string", lambda v: isinstance(v, str))
        endpoint = f.get("endpoint", *string, required=True)
        model = f.text_model(required=True)
        messages = f.get("messages", 'a non-empty array of objects with "role" (a string) and "content"',
                         _is_messages, required=True)
        values = dict(
            settings=f.get("settings", "an object", lambda v: isinstance(v, dict), default={}),
            seed=f.get("seed", "an integer", _is_int, default=None, null_ok=True),
            schema=f.get("schema", "an object", lambda v: isinstance(v, dict), default=None, null_ok=True),
            reply=f.get("reply", *string, default=None, null_ok=True),
            tokens_in=f.get("tokens_in", "an integer >= 0", _is_count, default=None, null_ok=True),
            tokens_out=f.get("tokens_out", "an integer >= 0", _is_count, default=None, null_ok=True),
            cached=f.get("cached", "true or false", lambda v: isinstance(v, bool), default=False),
            attempts=f.get("attempts", "an integer >= 0", _is_count, default=0),
            error=f.get("error", *string, default=None, null_ok=True),
        )
        return cls(endpoint, model, messages, **values, extra=f.extra(_CALL_FIELDS))

    def to_json(self) -> dict:
        required = ("endpoint", "model", "messages", "settings", "cached", "attempts")
        out = {**self.extra, **{k: getattr(self, k) for k in required}}
        out.update(_present((k, getattr(self, k)) for k in ("seed", "schema", "reply", "tokens_in", "tokens_out",
                                                            "error")))
        return out


_CALL_FIELDS = _names(ModelCall)


# --------------------------------------------------------------- readers ----

def _read(cls, path: str | os.PathLike, what: str) -> Iterator[tuple[int, Any]]:
    path = str(path)
    for line, obj, err in iter_jsonl(path, what):
        if err:
            yield line, RecordError(path, line, err, kind="malformed_json")
            continue
        try:
            yield line, cls.from_json(obj, path, line)
        except RecordError as exc:
            yield line, exc


def read_items(path: str | os.PathLike, what: str = "items") -> Iterator[tuple[int, Item | RecordError]]:
    """(line, Item or RecordError) for every non-blank line; InputError when the file cannot be read at all."""
    return _read(Item, path, what)


def read_predictions(path: str | os.PathLike,
                     what: str = "predictions") -> Iterator[tuple[int, Prediction | RecordError]]:
    """(line, Prediction or RecordError) for every non-blank line."""
    return _read(Prediction, path, what)


def read_score_rows(path: str | os.PathLike, what: str = "scores") -> Iterator[tuple[int, ScoreRow | RecordError]]:
    """(line, ScoreRow or RecordError) for every non-blank line."""
    return _read(ScoreRow, path, what)


def read_grades(path: str | os.PathLike, what: str = "grades") -> Iterator[tuple[int, Grade | RecordError]]:
    """(line, Grade or RecordError) for every non-blank line."""
    return _read(Grade, path, what)


def read_model_calls(path: str | os.PathLike,
                     what: str = "model calls") -> Iterator[tuple[int, ModelCall | RecordError]]:
    """(line, ModelCall or RecordError) for every non-blank line."""
    return _read(ModelCall, path, what)


__all__ = ["ABSENT", "DEFAULT_MODEL", "Grade", "Item", "ModelCall", "Prediction", "RecordError", "ScoreRow",
           "error_row", "lone_surrogate", "read_grades", "read_items", "read_model_calls", "read_predictions",
           "read_score_rows"]
