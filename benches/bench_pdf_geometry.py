"""Box remapping (thumbnail <-> page <-> crop pixels) over 1,000,000 boxes: compiled vs the NumPy reference.

Each bench checks its boxes, bit for bit, against the other form computed apart from the timed call.
"""

import numpy as np
import pytest

from benchmint.pdf import geometry_ref
from benchmint.pdf.geometry import transform

GROUP = "box-remap-1M"
MATRIX = (0.0, -1.0, 1.0, 0.0, 0.0, 612.0)  # a 90-degree page rotation


@pytest.fixture(scope="module")
def boxes():
    xy = np.random.default_rng(0).uniform(0, 600, (1_000_000, 4))
    return np.column_stack([np.minimum(xy[:, 0], xy[:, 2]), np.minimum(xy[:, 1], xy[:, 3]),
                            np.maximum(xy[:, 0], xy[:, 2]), np.maximum(xy[:, 1], xy[:, 3])])


@pytest.fixture(scope="module")
def results(boxes, forced_impl):
    """(reference boxes, compiled boxes), each computed once here."""
    with forced_impl("compiled"):
        return geometry_ref.transform(boxes, MATRIX), transform(boxes, MATRIX, -1)


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("workers", [1, -1])
def test_compiled(benchmark, boxes, results, forced_impl, dispatch_counts, workers):
    with forced_impl("compiled"):
        dispatch_counts.reset()
        out = benchmark(transform, boxes, MATRIX, workers)
        assert dispatch_counts("geometry")["reference"] == 0
    np.testing.assert_array_equal(out, results[0])


@pytest.mark.benchmark(group=GROUP)
def test_numpy_reference(benchmark, boxes, results):
    out = benchmark(geometry_ref.transform, boxes, MATRIX)
    np.testing.assert_array_equal(out, results[1])
