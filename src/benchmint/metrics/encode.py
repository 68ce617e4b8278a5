"""Canonical answer sets and their integer encodings.

Answers are normalised once, here: option letters become uppercase and
unique; Miller indices become unique int tuples with (000)/(0000) removed
(crystalxrd-bench §2.4). Sets are then encoded either as one uint64 bitmask
(option letters) or as sorted int64 keys in CSR form (anything).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

TASKS = ("mcq", "hkl")
HKL_LIMIT = 2047  # |index| bound of the 12-bit packing below


class AnswerError(ValueError):
    """An answer that is not of the kind the task expects."""


def check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    return task


def normalize_choices(value: Any) -> tuple[str, ...]:
    """A list of option letters -> sorted unique uppercase letters."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise AnswerError(f"expected a list of option letters, got {type(value).__name__} {value!r}")
    letters = set()
    for item in value:
        if not (isinstance(item, str) and len(item) == 1 and "A" <= item.upper() <= "Z"):
            raise AnswerError(f"expected option letters A-Z, got {item!r}")
        letters.add(item.upper())
    return tuple(sorted(letters))


def _as_index(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise AnswerError(f"Miller indices must be integers, got {x!r}")
    x = int(x)
    if abs(x) > HKL_LIMIT:
        raise AnswerError(f"Miller index {x} is out of range (|index| <= {HKL_LIMIT})")
    return x


def normalize_hkls(value: Any) -> tuple[tuple[int, ...], ...]:
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
        if any(hkl):
            out.add(hkl)
    return tuple(sorted(out))


def normalize(value: Any, task: str) -> tuple:
    return normalize_choices(value) if task == "mcq" else normalize_hkls(value)


def hkl_key(hkl: Sequence[int]) -> int:
    """Pack (h, k, l) or (h, k, i, l) into one int64: length tag, then 12 bits per index."""
    key = len(hkl)
    for x in hkl:
        key = (key << 12) | (x + 2048)
    return key


def choice_key(letter: str) -> int:
    return ord(letter) - ord("A")


def answer_keys(answer: tuple, task: str) -> list[int]:
    """Sorted keys of a normalised answer."""
    if task == "mcq":
        return [choice_key(c) for c in answer]  # letters are sorted already
    return sorted(hkl_key(h) for h in answer)


def choices_bitmask(answer: tuple[str, ...]) -> int:
    mask = 0
    for c in answer:
        mask |= 1 << choice_key(c)
    return mask


def encode_csr(sets: Sequence[Iterable], task: str | None = None,
               vocabulary: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Encode sets as (offsets, keys) with each row's keys sorted and unique.

    With a task, elements are normalised and packed with that task's keys.
    Without one, any hashable elements are numbered through ``vocabulary``
    (shared between pred and gold so equal elements get equal keys).
    """
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    keys: list[int] = []
    for i, s in enumerate(sets):
        if task is not None:
            row = answer_keys(normalize(s, task), task)
        else:
            if vocabulary is None:
                raise ValueError("encode_csr needs a task or a vocabulary")
            row = sorted({vocabulary.setdefault(x, len(vocabulary)) for x in s})
        keys.extend(row)
        offsets[i + 1] = len(keys)
    return offsets, np.asarray(keys, dtype=np.int64)
