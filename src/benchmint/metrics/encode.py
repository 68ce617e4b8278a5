"""Answer sets as integer keys in CSR form, the input of the batch set metrics.

Each answer kind (``benchmint.tasks``) normalises its answers and packs each
element into an int64 key; sets of anything else are numbered through a
shared vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from benchmint.tasks import AnswerKind


def encode_csr(sets: Sequence[Iterable], kind: AnswerKind | None = None,
               vocabulary: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Encode sets as (offsets, keys) with each row's keys sorted and unique.

    With an answer kind, elements are normalised and packed with that kind's
    keys. Without one, any hashable elements are numbered through
    ``vocabulary`` (shared between pred and gold so equal elements get equal keys).
    """
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    keys: list[int] = []
    for i, s in enumerate(sets):
        if kind is not None:
            row = kind.keys(kind.normalize(s))
        else:
            if vocabulary is None:
                raise ValueError("encode_csr needs an answer kind or a vocabulary")
            row = sorted({vocabulary.setdefault(x, len(vocabulary)) for x in s})
        keys.extend(row)
        offsets[i + 1] = len(keys)
    return offsets, np.asarray(keys, dtype=np.int64)
