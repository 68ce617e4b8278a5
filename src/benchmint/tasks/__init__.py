"""The answer kinds, by name: how each is extracted, normalised, encoded, folded and scored.

Adding a kind is one module with an ``AnswerKind`` subclass, registered here
(or by the caller with ``register``); ``benchmint score --task`` and the
benchmark modules look kinds up with ``get``.
"""

from __future__ import annotations

from benchmint.tasks.base import AnswerError, AnswerKind
from benchmint.tasks.choices import OptionLetters
from benchmint.tasks.free_text import FreeText
from benchmint.tasks.hkl import MillerIndices
from benchmint.tasks.option_numbers import OptionNumbers
from benchmint.tasks.quantity import Quantities

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


for _kind in (OptionLetters(), MillerIndices(), OptionNumbers(), Quantities(), FreeText()):
    register(_kind)

__all__ = ["AnswerError", "AnswerKind", "get", "names", "register"]
