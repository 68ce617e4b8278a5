"""Choice between the compiled kernels and the plain reference implementations.

Every hot path has three forms under one naming rule:

==========================  ===========================  ==========================  ==================
public, dispatching module  plain reference              compiled side               C++ source
==========================  ===========================  ==========================  ==================
metrics/batch.py            metrics/batch_ref.py         benchmint._core.batch       csrc/batch.cpp
tasks/extract.py            tasks/extract_ref.py         benchmint._core.extract     csrc/extract.cpp
metrics/pipeline.py         metrics/pipeline_ref.py      benchmint._core.pipeline    csrc/pipeline.cpp
metrics/aggregate.py        metrics/aggregate_ref.py     (NumPy in aggregate.py)     --
metrics/user.py             metrics/user_ref.py          (Numba in user.py)          --
grade/sts.py                grade/sts_ref.py             (Numba in sts.py)           --
xrd/cifread.py              xrd/cifread_ref.py           benchmint._core.cifread     csrc/cifread.cpp
xrd/sticks.py               xrd/sticks_ref.py            benchmint._core.sticks      csrc/sticks.cpp
xrd/profile.py              xrd/profile_ref.py           benchmint._core.profile     csrc/profile.cpp
xrd/cluster.py              xrd/cluster_ref.py           (Numba, cluster_kernel.py)  --
pdf/geometry.py             pdf/geometry_ref.py          benchmint._core.geometry    csrc/geometry.cpp
pdf/triage.py               pdf/triage_ref.py            benchmint._core.triage      csrc/triage.cpp
==========================  ===========================  ==========================  ==================

The kernel name used below is the module's name ("batch", "profile", ...).
``BENCHMINT_IMPL=reference`` forces every hot path onto its reference form;
unset (or ``compiled``) uses the compiled one. This module is the only reader
of the variable. There is no silent fallback on a broken build: if the
compiled module cannot be imported, the error says so.

Each dispatching call is counted per kernel and form: ``compiled`` (the
compiled form ran), ``reference`` (the reference was forced), ``fallback``
(the compiled form was asked for but handed inputs to the reference: an
answer the compiled extractor leaves undecided, a line the streaming reader
does not decide, a CIF outside the fast route, a call the compiled form does
not cover). Counts are per process, taken once per call of the public
function, never per element, so tests can check which path ran.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from types import ModuleType

ENV_VAR = "BENCHMINT_IMPL"
_CHOICES = ("compiled", "reference")
FORMS = ("compiled", "reference", "fallback")

_counts: Counter[tuple[str, str]] = Counter()
_lock = threading.Lock()


def implementation() -> str:
    """"compiled" or "reference", as ``BENCHMINT_IMPL`` asks (ValueError for anything else)."""
    value = os.environ.get(ENV_VAR, "compiled").strip().lower() or "compiled"
    if value not in _CHOICES:
        raise ValueError(f"{ENV_VAR} must be one of {', '.join(_CHOICES)}; got {value!r}")
    return value


def _count(kernel: str, form: str, n: int = 1) -> None:
    with _lock:
        _counts[kernel, form] += n


def use_reference(kernel: str | None = None, available: bool = True) -> bool:
    """Whether the reference form runs now.

    True when ``BENCHMINT_IMPL=reference``, or when the compiled form is not
    ``available`` for this call. With ``kernel`` the choice is counted.
    """
    forced = implementation() == "reference"
    if kernel is not None:
        _count(kernel, "reference" if forced else "compiled" if available else "fallback")
    return forced or not available


def fallback(kernel: str, n: int = 1) -> None:
    """Count ``n`` inputs the compiled form of ``kernel`` handed to its reference."""
    if n:
        _count(kernel, "fallback", n)


def counts(kernel: str) -> dict[str, int]:
    """Calls of ``kernel`` per form since the last ``reset_counts``: {"compiled": .., "reference": .., "fallback": ..}."""
    with _lock:
        return {form: _counts[kernel, form] for form in FORMS}


def reset_counts() -> None:
    with _lock:
        _counts.clear()


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
