"""Helpers of the equivalence tests: outcomes (result or error) of two forms, compared.

The rule the tests follow: the reference result comes from the ``<module>_ref``
module called directly, the compiled one from the public function under
``BENCHMINT_IMPL=compiled``; results and errors (type and message) must be
equal, and the dispatch counts must show the compiled form ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmint import _dispatch
from benchmint.metrics.batch_ref import METRIC_NAMES

# The fork-join helper of the compiled kernels (csrc/parallel.hpp) starts a
# second thread from 2 x 4096 rows; equivalence tests go above it.
THREADED_ROWS = 2 * 4096


def outcome(fn: Callable, *args, **kwargs) -> tuple:
    """("ok", result) or ("error", exception type, message)."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - both forms must fail alike, whatever the error
        return ("error", type(exc), str(exc))


def assert_same_outcome(ref: tuple, comp: tuple, compare: Callable[[Any, Any], None]) -> None:
    """Both failed with the same error type and message, or both succeeded with results ``compare`` accepts."""
    if ref[0] == "error" or comp[0] == "error":
        assert comp == ref
    else:
        compare(ref[1], comp[1])


def assert_compiled(counts: dict[str, int], calls: int | None = None) -> None:
    """The compiled form ran (``calls`` times when given) and handed nothing to the reference."""
    assert counts["reference"] == 0 and counts["fallback"] == 0, counts
    if calls is None:
        assert counts["compiled"] >= 1, counts
    else:
        assert counts["compiled"] == calls, counts


def assert_metrics_equal(ref: dict, comp: dict) -> None:
    """Every metric array present, with the same dtype and the same values bit for bit."""
    assert set(comp) == set(ref) == set(METRIC_NAMES)
    for name in METRIC_NAMES:
        assert comp[name].dtype == ref[name].dtype, name
        np.testing.assert_array_equal(comp[name], ref[name], err_msg=name)


def compare_forms(force: Callable, kernel: str, reference_call: Callable[[], Any], public_call: Callable[[], Any],
                  compare: Callable[[Any, Any], None], calls: int | None = 1) -> tuple[tuple, tuple]:
    """Run ``reference_call`` (a ``_ref`` function), then ``public_call`` under BENCHMINT_IMPL=compiled.

    Equal outcomes (``compare`` for results, type and message for errors), and
    ``kernel``'s compiled form ran ``calls`` times (any number when None) with
    no fallback to the reference. Returns both outcomes (reference, compiled).
    """
    ref = outcome(reference_call)
    with force("compiled"):
        _dispatch.reset_counts()
        comp = outcome(public_call)
        counts = _dispatch.counts(kernel)
    assert_same_outcome(ref, comp, compare)
    assert_compiled(counts, calls)
    return ref, comp
