"""Choice between the compiled kernels and the plain reference implementations.

``BENCHMINT_IMPL=reference`` forces every hot path onto its reference form;
unset (or ``compiled``) uses ``benchmint._core``. There is no silent fallback:
if the compiled module cannot be imported, the error says so.
"""

from __future__ import annotations

import os
from types import ModuleType

ENV_VAR = "BENCHMINT_IMPL"
_CHOICES = ("compiled", "reference")


def implementation() -> str:
    value = os.environ.get(ENV_VAR, "compiled").strip().lower() or "compiled"
    if value not in _CHOICES:
        raise ValueError(f"{ENV_VAR} must be one of {', '.join(_CHOICES)}; got {value!r}")
    return value


def use_reference() -> bool:
    return implementation() == "reference"


def core() -> ModuleType:
    """The compiled module; raises a clear ImportError when the build is missing."""
    try:
        from benchmint import _core
    except ImportError as exc:  # pragma: no cover - exercised only on a broken install
        raise ImportError(
            "benchmint's compiled module benchmint._core is not importable; rebuild with "
            "`pip install -e .` (needs a C++17 compiler), or set BENCHMINT_IMPL=reference "
            f"to run the pure-Python reference path. Cause: {exc}"
        ) from exc
    return _core
