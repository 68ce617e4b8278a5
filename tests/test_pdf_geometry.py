"""llbox geometry: thumbnail <-> page points <-> 300-DPI crops, with rotation and crop-box offsets."""

import numpy as np
import pymupdf
import pytest
from harness import THREADED_ROWS
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.pdf import geometry_ref
from benchmint.pdf.geometry import (
    BoxError,
    PageFrame,
    page_to_crop_pixels,
    render_crop,
    render_thumbnail,
    thumbnail_to_page,
    transform,
)

RED = (1, 0, 0)
FIGURE = pymupdf.Rect(120, 210, 320, 330)  # in mediabox coordinates when drawn


def red_bbox(pix) -> tuple[int, int, int, int]:
    a = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)
    ys, xs = np.nonzero((a[:, :, 0] > 200) & (a[:, :, 1] < 60) & (a[:, :, 2] < 60))
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def make_page(rotation: int, cropbox: tuple | None):
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_rect(FIGURE, color=None, fill=RED)  # no stroke: the painted area is exactly the rect
    page.insert_text((72, 100), "Figure 1. A red square.", fontsize=11)
    if cropbox:
        page.set_cropbox(pymupdf.Rect(*cropbox))
    page.set_rotation(rotation)
    return doc, page


CASES = [(rot, crop) for rot in (0, 90, 180, 270) for crop in (None, (40, 60, 560, 760))]


@pytest.mark.parametrize("rotation, cropbox", CASES)
def test_vlm_box_maps_back_to_the_figure(rotation, cropbox):
    doc, page = make_page(rotation, cropbox)
    frame = PageFrame.from_page(page)
    # Where the figure sits in page coordinates (crop-box relative), as PyMuPDF reports it.
    [drawing] = [d for d in page.get_drawings() if d["fill"] == RED]
    truth = np.array(list(drawing["rect"]))
    thumb = render_thumbnail(page)
    assert max(thumb.width, thumb.height) == 1024
    assert (thumb.width, thumb.height) == frame.thumbnail_size()
    x0, y0, x1, y1 = red_bbox(thumb)
    tol = 72 / frame.thumbnail_zoom() / 72 * 1.5 + 0.5  # about one thumbnail pixel, in points
    pixels = thumbnail_to_page([x0, y0, x1, y1], frame, units="pixels")[0]
    norm = [x0 / thumb.width * 1000, y0 / thumb.height * 1000, x1 / thumb.width * 1000, y1 / thumb.height * 1000]
    normed = thumbnail_to_page(norm, frame, units="norm1000")[0]
    assert np.abs(pixels - truth).max() <= tol
    assert np.abs(normed - truth).max() <= tol
    doc.close()


@pytest.mark.parametrize("rotation, cropbox", CASES)
def test_crop_renders_only_the_box_at_300_dpi(rotation, cropbox):
    doc, page = make_page(rotation, cropbox)
    [drawing] = [d for d in page.get_drawings() if d["fill"] == RED]
    box = np.array(list(drawing["rect"]))
    margin = box + np.array([-10, -10, 10, 10])
    pix = render_crop(page, margin)
    w_pt, h_pt = margin[2] - margin[0], margin[3] - margin[1]
    if rotation in (90, 270):
        w_pt, h_pt = h_pt, w_pt
    # PyMuPDF rounds the clip outward to whole device pixels: at most one extra pixel per side.
    assert 0 <= pix.width - w_pt * 300 / 72 <= 2 and 0 <= pix.height - h_pt * 300 / 72 <= 2
    # The figure sits where page_to_crop_pixels says, in the crop as displayed.
    expected = page_to_crop_pixels(box, PageFrame.from_page(page), (pix.x, pix.y))[0]
    assert np.abs(np.array(red_bbox(pix)) - expected).max() <= 1
    doc.close()


@pytest.mark.parametrize("size", [(595.28, 841.89), (612, 792), (500.5, 333.3), (1190.55, 841.89), (300, 300)])
def test_thumbnail_size_is_what_pymupdf_renders(size):
    doc = pymupdf.open()
    page = doc.new_page(width=size[0], height=size[1])
    pix = render_thumbnail(page)
    assert (pix.width, pix.height) == PageFrame.from_page(page).thumbnail_size()
    assert max(pix.width, pix.height) == 1024


@pytest.mark.parametrize("box, units, message", [
    ([500, 100, 400, 200], "norm1000", "box 0 .* not ordered"),
    ([0, 0, 1001, 10], "norm1000", "outside the normalised range"),
    ([float("nan"), 0, 10, 10], "norm1000", "non-finite"),
    ([10, 10, 12, 12], "norm1000", "smaller than the minimum size"),
    ([0, 0, 2000, 50], "pixels", "outside the 792x1024 px thumbnail"),
    ([1, 2, 3], "pixels", "shape"),
])
def test_bad_boxes(box, units, message):
    doc, page = make_page(0, None)
    with pytest.raises(BoxError, match=message):
        thumbnail_to_page(box, PageFrame.from_page(page), units=units)
    with pytest.raises(ValueError, match="units"):
        thumbnail_to_page([0, 0, 500, 500], PageFrame.from_page(page), units="percent")


def test_error_names_the_offending_box():
    doc, page = make_page(90, None)
    boxes = [[0, 0, 500, 500], [100, 100, 900, 900], [600, 600, 500, 700]]
    with pytest.raises(BoxError, match="box 2"):
        thumbnail_to_page(boxes, PageFrame.from_page(page))
    assert thumbnail_to_page(boxes[:2], PageFrame.from_page(page)).shape == (2, 4)


matrices = st.sampled_from([(1, 0, 0, 1, 0, 0), (0, 1, -1, 0, 800, 0), (-1, 0, 0, -1, 600, 800),
                            (0, -1, 1, 0, 0, 600), (2.5, 0, 0, 2.5, -10, 7)])
coords = st.floats(0, 1000, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(coords, coords, coords, coords), min_size=1, max_size=20), matrices)
def test_vectorised_transform_equals_pymupdf(rows, matrix):
    boxes = np.array([[min(a, c), min(b, d), max(a, c), max(b, d)] for a, b, c, d in rows])
    got = transform(boxes, matrix)
    for box, row in zip(boxes, got):
        want = pymupdf.Rect(*box) * pymupdf.Matrix(*matrix)
        np.testing.assert_allclose(row, list(want), rtol=1e-6, atol=1e-4)  # PyMuPDF's Rect is float32


def test_crop_cli_and_errors(tmp_path, capsys):
    import json

    from benchmint.cli import main

    doc, page = make_page(90, (40, 60, 560, 760))
    pdf = tmp_path / "paper.pdf"
    doc.save(pdf)
    thumb = render_thumbnail(page)
    x0, y0, x1, y1 = red_bbox(thumb)
    box = [x0 / thumb.width * 1000, y0 / thumb.height * 1000, x1 / thumb.width * 1000, y1 / thumb.height * 1000]
    out = tmp_path / "crops" / "fig1.png"
    assert main(["crop", str(pdf), "--page", "1", "--box", *map(str, box), "--label", "micrograph", "--out", str(out)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["label"] == "micrograph" and record["dpi"] == 300
    crop = pymupdf.Pixmap(str(out))
    assert (crop.width, crop.height) == (record["width_px"], record["height_px"])
    a = np.frombuffer(crop.samples, dtype=np.uint8).reshape(crop.height, crop.width, crop.n)
    assert ((a[:, :, 0] > 200) & (a[:, :, 1] < 60)).mean() > 0.9  # the crop is the figure
    assert main(["crop", str(pdf), "--page", "3", "--box", "0", "0", "10", "10", "--out", str(out)]) == 2
    assert "has 1 pages; page 3" in capsys.readouterr().err
    assert main(["crop", str(tmp_path / "nope.pdf"), "--page", "1", "--box", "0", "0", "9", "9", "--out", str(out)]) == 2
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.7 garbage")
    assert main(["crop", str(tmp_path / "bad.pdf"), "--page", "1", "--box", "0", "0", "9", "9", "--out", str(out)]) == 2
    assert main(["crop", str(pdf), "--page", "1", "--box", "9", "0", "1", "9", "--out", str(out)]) == 2
    assert "not ordered" in capsys.readouterr().err


finite = st.floats(-1e6, 1e6, allow_nan=False)
# Coordinates for the NaN rule: NaN, infinities, signed zeros, values whose products overflow.
anything = st.one_of(finite, st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308]))


def _same_boxes(ref, got):
    assert got.dtype == ref.dtype == np.float64 and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)  # bit for bit; NaN exactly where the reference has NaN


@st.composite
def box_batches(draw, coordinate=finite):
    """Up to 40 drawn rows, tiled above the threading threshold half of the time."""
    rows = draw(st.lists(st.tuples(coordinate, coordinate, coordinate, coordinate), max_size=40))
    if rows and draw(st.booleans()):
        rows = [rows[i % len(rows)] for i in range(draw(st.integers(THREADED_ROWS, THREADED_ROWS + 3000)))]
    return np.array(rows, dtype=np.float64).reshape(-1, 4)


@settings(max_examples=150, deadline=None)
@given(box_batches(), st.tuples(finite, finite, finite, finite, finite, finite), st.sampled_from([1, 2, -1]))
def test_compiled_transform_equals_reference(compare_forms, boxes, matrix, workers):
    compare_forms("geometry", lambda: geometry_ref.transform(boxes, matrix),
                  lambda: transform(boxes, matrix, workers), _same_boxes)


@settings(max_examples=150, deadline=None)
@given(box_batches(anything), st.tuples(finite, finite, finite, finite, finite, finite), st.sampled_from([1, 2]))
def test_non_finite_boxes_propagate_alike(compare_forms, boxes, matrix, workers):
    # NaN and infinite coordinates: a NaN corner makes that side NaN, as NumPy's min/max do.
    compare_forms("geometry", lambda: geometry_ref.transform(boxes, matrix),
                  lambda: transform(boxes, matrix, workers), _same_boxes)


def test_nan_box_regression(compare_forms):
    # std::min skipped the NaN here and gave [1, 2, 1, 4]; every side is NaN (0·NaN is NaN too).
    boxes = np.array([[1.0, 2.0, np.nan, 4.0]])
    _, (_, got) = compare_forms("geometry", lambda: geometry_ref.transform(boxes, (1, 0, 0, 1, 0, 0)),
                                lambda: transform(boxes, (1, 0, 0, 1, 0, 0)), _same_boxes)
    assert np.isnan(got).all()


@pytest.mark.parametrize("box, matrix, error, message", [
    ([[0, 0, 1, 1]], (1, 0, 0, np.nan, 0, 0), ValueError, "non-finite entry"),
    ([[0, 0, 1, 1]], (1, 0, 0, np.inf, 0, 0), ValueError, "non-finite entry"),
    ([[0, 0, 1, 1]], (1, 0, 0, 1), ValueError, "6 numbers"),
    ([[0, 0, 1]], (1, 0, 0, 1, 0, 0), BoxError, "shape"),
])
def test_transform_rejects_bad_input(impl, dispatch_counts, box, matrix, error, message):
    with pytest.raises(error, match=message):
        transform(box, matrix)
    assert dispatch_counts("geometry") == {"compiled": 0, "reference": 0, "fallback": 0}  # checked before dispatch


def test_boxes_from_outside_are_checked():
    # Where boxes come from a VLM, non-finite ones are rejected before any map.
    doc, page = make_page(0, None)
    with pytest.raises(BoxError, match=r"box 1 .* has a non-finite coordinate"):
        thumbnail_to_page([[0, 0, 500, 500], [0, 0, np.inf, 10]], PageFrame.from_page(page))


def test_transform_workers_and_empty(impl, dispatch_counts):
    with pytest.raises(ValueError, match="workers"):
        transform([[0, 0, 1, 1]], (1, 0, 0, 1, 0, 0), workers=0)
    assert transform(np.zeros((0, 4)), (0, -1, 1, 0, 0, 612)).shape == (0, 4)
    # A 90-degree rotation by hand: (x0, y0, x1, y1) -> (y0, 612 - x1, y1, 612 - x0).
    got = transform([[10, 20, 30, 50]], (0, -1, 1, 0, 0, 612))
    assert got.tolist() == [[20.0, 582.0, 50.0, 602.0]]
    assert dispatch_counts("geometry")[impl] == 2


def test_compiled_transform_kernel_errors():
    with pytest.raises(ValueError, match="rows"):
        _core.geometry.transform_boxes(np.zeros((3, 3)), [1, 0, 0, 1, 0, 0])
    with pytest.raises(ValueError, match="6 numbers"):
        _core.geometry.transform_boxes(np.zeros((3, 4)), [1, 0, 0, 1])
