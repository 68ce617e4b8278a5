"""The answer kinds, by name: how each is extracted, normalised, encoded, folded and scored.

Adding a kind is one module in this folder with an ``AnswerKind`` subclass
that has a ``name``: every module here is imported when the package is, and
each such class it defines is registered (a caller can also ``register`` a
kind of its own). ``benchmint score --task`` and the benchmark modules look
kinds up with ``get``.
"""

from __future__ import annotations

import importlib
import pkgutil

from benchmint.tasks.base import AnswerError, AnswerKind

_REGISTRY: dict[str, AnswerKind] = {}


def register(kind: AnswerKind) -> AnswerKind:
    """Make ``kind`` available under ``kind.name``; a second kind with a taken name is an error."""
    if kind.name in _REGISTRY and type(_REGISTRY[kind.name]) is not type(kind):
        raise ValueError(f"an answer kind named {kind.name!r} is registered already")
    _REGISTRY[kind.name] = kind
    return kind


def get(name: str | AnswerKind) -> AnswerKind:
    """The kind called ``name`` (a kind is returned as it is); ValueError listing the names otherwise."""
    if isinstance(name, AnswerKind):
        return name
    kind = _REGISTRY.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"task must be one of {', '.join(names())}; got {name!r}")
    return kind


def names(scoring: str | None = None) -> list[str]:
    """Registered kind names (only those scored by ``scoring``, "set" or "graded", when given)."""
    return [n for n, k in _REGISTRY.items() if scoring is None or k.scoring == scoring]


def discover() -> None:
    """Register the kinds defined by the modules of this package (in module-name order)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, AnswerKind) and obj.__module__ == module.__name__
                    and "name" in vars(obj)):
                register(obj())


discover()

__all__ = ["AnswerError", "AnswerKind", "discover", "get", "names", "register"]
