"""Box remapping (thumbnail <-> page <-> crop pixels) over 1,000,000 boxes: compiled vs the NumPy reference."""

import numpy as np
import pytest

from benchmint import _core
from benchmint.pdf.geometry import transform_reference

GROUP = "box-remap-1M"
MATRIX = (0.0, -1.0, 1.0, 0.0, 0.0, 612.0)  # a 90-degree page rotation


@pytest.fixture(scope="module")
def boxes():
    xy = np.random.default_rng(0).uniform(0, 600, (1_000_000, 4))
    return np.column_stack([np.minimum(xy[:, 0], xy[:, 2]), np.minimum(xy[:, 1], xy[:, 3]),
                            np.maximum(xy[:, 0], xy[:, 2]), np.maximum(xy[:, 1], xy[:, 3])])


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("workers", [1, -1])
def test_compiled(benchmark, boxes, workers):
    out = benchmark(_core.geometry.transform_boxes, boxes, list(MATRIX), workers)
    np.testing.assert_array_equal(out[:1000], transform_reference(boxes[:1000], MATRIX))


@pytest.mark.benchmark(group=GROUP)
def test_numpy_reference(benchmark, boxes):
    out = benchmark(transform_reference, boxes, MATRIX)
    assert out.shape == boxes.shape
