"""What every answer kind declares: how an answer is read, normalised, encoded, folded and scored."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar


class AnswerError(ValueError):
    """An answer that is not of the kind the task expects."""


class AnswerKind(ABC):
    """One kind of answer, looked up by ``name`` (the ``--task`` of the CLI).

    Set-scored kinds (option letters, Miller indices) turn an answer into a
    sorted tuple of elements and each element into an int64 key; the set
    metrics count keys. Graded kinds (numbers with units, free text) are read
    and normalised here and judged by the grading stage.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    #: "set": scored by the set metrics over ``keys``; "graded": by rules, symbolic checks or a judge.
    scoring: ClassVar[str] = "set"
    #: the metric a summary leads with
    primary_metric: ClassVar[str] = "jaccard"
    #: the kind's name in the compiled scoring stream and extractor, or None (reference path only)
    compiled: ClassVar[str | None] = None
    #: the gold item field ``fold`` needs (None: the kind does not fold)
    fold_field: ClassVar[str | None] = None

    @abstractmethod
    def extract(self, text: str) -> list | None:
        """The answer written in a raw model output, or None when none can be read (the reference rules)."""

    @abstractmethod
    def normalize(self, value: Any) -> tuple:
        """A JSON answer -> the canonical tuple; AnswerError when it is not of this kind."""

    def keys(self, answer: tuple) -> list[int]:
        """Sorted int64 keys of a normalised answer, one per element (set-scored kinds only)."""
        raise ValueError(f"answers of kind {self.name!r} are graded, not scored as sets")

    def to_json(self, answer: tuple) -> list:
        """A normalised answer as the JSON value written in scores.jsonl."""
        return list(answer)

    def check_fold_data(self, value: Any, rid: str) -> Any:
        """The gold item's ``fold_field`` value, validated (ValueError naming the item otherwise)."""
        raise ValueError(f"answers of kind {self.name!r} are not folded")

    def fold(self, answer: tuple, data: Any) -> tuple:
        """``answer`` with elements the item treats as equal made identical (e.g. symmetry-equivalent planes)."""
        raise ValueError(f"answers of kind {self.name!r} are not folded")
