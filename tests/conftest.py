"""Shared fixtures: running a test under each implementation, and checking which path ran.

``impl`` runs a test once per implementation ("compiled", "reference") with
``BENCHMINT_IMPL`` set accordingly. Equivalence tests use ``compare_forms``:
the reference result comes from the ``<module>_ref`` module called directly,
the compiled one from the public function under ``BENCHMINT_IMPL=compiled``,
and the dispatch counts must show that the compiled form ran.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

pytest.register_assert_rewrite("harness")

from harness import compare_forms as _compare_forms  # noqa: E402

from benchmint import _dispatch  # noqa: E402

IMPLEMENTATIONS = ("compiled", "reference")


@contextmanager
def _forced(name: str) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(_dispatch.ENV_VAR, name)
        yield name


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request) -> Iterator[str]:
    """The implementation this run of the test uses; BENCHMINT_IMPL is set for its duration."""
    with _forced(request.param) as name:
        yield name


@pytest.fixture(scope="session")
def forced_impl():
    """``with forced_impl("reference"): ...`` for a test that runs both forms within one example
    (hypothesis bodies, where function-scoped fixtures are not reset between examples)."""
    return _forced


class _Counts:
    """``counts("batch")`` -> {"compiled": n, "reference": n, "fallback": n} since the last ``reset()``."""

    def __call__(self, kernel: str) -> dict[str, int]:
        return _dispatch.counts(kernel)

    def reset(self) -> None:
        _dispatch.reset_counts()


@pytest.fixture
def dispatch_counts() -> _Counts:
    counts = _Counts()
    counts.reset()
    return counts


@pytest.fixture(scope="session")
def compare_forms():
    """``compare_forms(kernel, reference_call, public_call, compare, calls=1)``: see harness.compare_forms."""
    return functools.partial(_compare_forms, _forced)
