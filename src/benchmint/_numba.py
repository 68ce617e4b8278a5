"""One place for Numba options: cached compilation, no fast-math (results must equal the references)."""

from __future__ import annotations

import numba


def jit(**options):
    options.setdefault("cache", True)
    options.setdefault("nogil", True)
    return numba.njit(**options)
