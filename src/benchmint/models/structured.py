"""Structured output: asking for JSON that conforms to a schema, on servers that support it and on those that do not.

A request with a ``schema`` is sent in one of four forms:

1. ``json_schema``: ``response_format = {"type": "json_schema", "json_schema": {"name", "schema"}}``; the server
   constrains its output (OpenAI, vLLM, SGLang, llama.cpp's own server).
2. ``json_object_schema``: ``response_format = {"type": "json_object", "schema": schema}`` and the schema written
   into the prompt: the form llama-cpp-python's server takes (it answers ``json_schema`` with HTTP 500) and
   enforces by a grammar built from the schema, so even a small local model replies with the schema's shape.
3. ``json_object``: ``response_format = {"type": "json_object"}`` (any JSON object) and the schema in the prompt.
4. ``prompt``: no ``response_format``; the schema written into the prompt only.

In ``auto`` mode an endpoint starts at ``json_schema``. When the server answers a structured request with HTTP
400, 404, 415, 422, 500 or 501 (some servers answer an unknown ``response_format`` with 500) and that form has not
yet worked for this endpoint and model, the engine moves one form down and asks again at once; the form reached
is remembered in the cache file, so a rerun starts there. Once a form has produced a reply for an endpoint and
model it is confirmed, and later errors are treated as ordinary transport errors. A fixed form can be chosen
instead (``structured="json_object"``, ...), which turns the fallback off.

Without a parser of its own, a stage with a schema gets ``parse_json``: the reply's JSON object (code fences and
text around it tolerated), with the schema's top-level ``required`` keys present; full validation against the
schema is left to the stage's parser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from benchmint.io import dumps

JSON_SCHEMA = "json_schema"
JSON_OBJECT_SCHEMA = "json_object_schema"
JSON_OBJECT = "json_object"
PROMPT = "prompt"
LADDER = (JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT, PROMPT)
MODES = ("auto", *LADDER)
FALLBACK_STATUSES = frozenset({400, 404, 415, 422, 500, 501})


def response_format(mode: str, name: str, schema: Mapping[str, Any]) -> dict | None:
    if mode == JSON_SCHEMA:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if mode == JSON_OBJECT_SCHEMA:
        return {"type": "json_object", "schema": schema}
    if mode == JSON_OBJECT:
        return {"type": "json_object"}
    return None


def instruction(schema: Mapping[str, Any]) -> str:
    """The text added to the last user message when the schema travels in the prompt."""
    return ("Reply with one JSON object that conforms to this JSON Schema, and nothing else:\n" + dumps(schema))


def next_mode(mode: str) -> str | None:
    i = LADDER.index(mode)
    return LADDER[i + 1] if i + 1 < len(LADDER) else None


def _json_object(text: str) -> Any:
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        s = s.rsplit("```", 1)[0]
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        pass
    start, end = s.find("{"), s.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:
        return json.loads(s[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON in the reply ({exc.msg} at column {exc.colno})") from None


def parse_json(text: str, schema: Mapping[str, Any] | None = None) -> Any:
    """The JSON value of a reply; ValueError when there is none or a required top-level key is missing."""
    value = _json_object(text)
    if schema and schema.get("type") == "object":
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        missing = [k for k in schema.get("required", ()) if k not in value]
        if missing:
            raise ValueError(f"JSON object lacks required keys {missing}")
    return value
