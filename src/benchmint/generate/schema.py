"""Checking a model's JSON reply against the JSON Schema it was asked for.

The schemas the generators send use a small part of JSON Schema (``type``, ``properties``, ``required``,
``additionalProperties: false``, ``enum``, ``items``, ``minItems``/``maxItems``, ``minimum``/``maximum``,
``minLength``), the part structured-output servers enforce; this checks that part and refuses a schema that uses
anything else, so a check never passes by ignoring a keyword. The first problem is reported with its JSON path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KNOWN = frozenset({"type", "properties", "required", "additionalProperties", "enum", "items", "minItems",
                   "maxItems", "minimum", "maximum", "minLength", "description", "title"})
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


class SchemaError(ValueError):
    """A value that does not conform; the message names where (``$.options[2]``) and why."""


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "null":
        return value is None
    return isinstance(value, _TYPES[kind])


def validate(value: Any, schema: Mapping[str, Any], path: str = "$") -> None:
    """Raise ``SchemaError`` at the first place ``value`` breaks ``schema``."""
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"schema at {path} uses keywords this checker does not know: {sorted(unknown)}")
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not any(_is_type(value, k) for k in kinds):
            raise SchemaError(f"{path}: expected {' or '.join(kinds)}, got {type(value).__name__}")
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaError(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and len(value.strip()) < schema.get("minLength", 0):
        raise SchemaError(f"{path}: text shorter than {schema['minLength']} characters")
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise SchemaError(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise SchemaError(f"{path}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, list):
        _array(value, schema, path)
    if isinstance(value, dict):
        _object(value, schema, path)


def _array(value: list, schema: Mapping[str, Any], path: str) -> None:
    if len(value) < schema.get("minItems", 0):
        raise SchemaError(f"{path}: {len(value)} items, at least {schema['minItems']} needed")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise SchemaError(f"{path}: {len(value)} items, at most {schema['maxItems']} allowed")
    if "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{path}[{i}]")


def _object(value: dict, schema: Mapping[str, Any], path: str) -> None:
    missing = [k for k in schema.get("required", ()) if k not in value]
    if missing:
        raise SchemaError(f"{path}: missing {missing}")
    props = schema.get("properties", {})
    if schema.get("additionalProperties") is False:
        extra = sorted(set(value) - set(props))
        if extra:
            raise SchemaError(f"{path}: unexpected keys {extra}")
    for name, sub in props.items():
        if name in value:
            validate(value[name], sub, f"{path}.{name}")
