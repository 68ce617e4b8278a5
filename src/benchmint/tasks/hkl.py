"""Miller indices of the strongest XRD peak (CrystalXRD-Bench): sets of 3- or 4-index reflections.

Normalisation follows crystalxrd-bench §2.4: unique integer tuples, (000) and
(0000) removed; an index written as an integral float (``1.0``, ``-0.0``) is
that integer, as the extraction rules read it; a 4-index label whose i is not
−(h + k) is no Miller–Bravais label and so no answer (AnswerError naming it). Scoring is strict tuple equality unless the run folds by
symmetry (crystalxrd-bench §5-6): reflections related by the item's Laue
group (its point group plus the inversion Friedel's law adds) become one, and
a 4-index Miller-Bravais label (h, k, i, l), i = -(h + k), is the plane
(h, k, l). Each item carries the rotation parts of its symmetry operations in
its own cell's fractional basis (``laue_rotations``, written by ``benchmint
xrd build``); a reflection h (a row vector) maps to h·R under an operation R.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from benchmint.tasks.base import AnswerError, AnswerKind
from benchmint.tasks.extract_ref import extract_hkls

HKL_LIMIT = 2047  # |index| bound of the 12-bit packing in hkl_key


def _as_index(x: Any) -> int:
    if isinstance(x, (float, np.floating)) and math.isfinite(x) and float(x).is_integer():
        x = int(x)  # 1.0 and -0.0 are the integers 1 and 0
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise AnswerError(f"Miller indices must be integers, got {x!r}")
    x = int(x)
    if abs(x) > HKL_LIMIT:
        raise AnswerError(f"Miller index {x} is out of range (|index| <= {HKL_LIMIT})")
    return x


def hkl_key(hkl: Sequence[int]) -> int:
    """Pack (h, k, l) or (h, k, i, l) into one int64: length tag, then 12 bits per index."""
    key = len(hkl)
    for x in hkl:
        key = (key << 12) | (x + 2048)
    return key


def three_index(hkl: Sequence[int]) -> tuple[int, ...]:
    if len(hkl) == 4:
        h, k, _i, l = hkl
        return (h, k, l)
    return tuple(hkl)


def fold(hkls: Iterable[Sequence[int]], rotations: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    """Each reflection replaced by the largest member (lexicographic) of its Laue orbit; sorted, unique."""
    mats = np.array(rotations, dtype=np.int64).reshape(-1, 3, 3)
    out = set()
    for hkl in hkls:
        h = np.array(three_index(hkl), dtype=np.int64)
        orbit = h @ mats  # (n_ops, 3): h·R for every operation
        out.add(max(tuple(int(v) for v in row) for row in orbit))
    return tuple(sorted(out))


def check_rotations(value: Any, rid: str) -> list[list[int]]:
    """The ``laue_rotations`` of a gold item, validated."""
    if (not isinstance(value, list) or not value
            or not all(isinstance(r, list) and len(r) == 9 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                   for x in r) for r in value)):
        raise ValueError(f'item {rid!r} has no usable "laue_rotations" (lists of 9 integers); '
                         f"build items with benchmint xrd build to score with --symmetry")
    return value


class MillerIndices(AnswerKind):
    name = "hkl"
    description = "sets of Miller indices, 3 (hkl) or 4 (hkil) integers each"
    primary_metric = "jaccard"
    compiled = "hkl"
    fold_field = "laue_rotations"

    def extract(self, text: str) -> list | None:
        return extract_hkls(text)

    def normalize(self, value: Any) -> tuple[tuple[int, ...], ...]:
        """A list of 3- or 4-index Miller indices -> sorted unique tuples without (000)."""
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise AnswerError(f"expected a list of Miller indices, got {type(value).__name__} {value!r}")
        out = set()
        for item in value:
            if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
                raise AnswerError(f"expected a list of 3 or 4 integers per reflection, got {item!r}")
            hkl = tuple(_as_index(x) for x in item)
            if len(hkl) not in (3, 4):
                raise AnswerError(f"a reflection needs 3 (hkl) or 4 (hkil) indices, got {list(hkl)}")
            if len(hkl) == 4 and hkl[0] + hkl[1] + hkl[2] != 0:
                raise AnswerError(f"({' '.join(map(str, hkl))}) is not a Miller-Bravais label: i must be "
                                  f"-(h + k) = {-(hkl[0] + hkl[1])}")
            if any(hkl):
                out.add(hkl)
        return tuple(sorted(out))

    def keys(self, answer: tuple) -> list[int]:
        return sorted(hkl_key(h) for h in answer)

    def to_json(self, answer: tuple) -> list:
        return [list(h) for h in answer]

    def check_fold_data(self, value: Any, rid: str) -> list[list[int]]:
        return check_rotations(value, rid)

    def fold(self, answer: tuple, data: Any) -> tuple:
        return fold(answer, data)
