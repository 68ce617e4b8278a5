"""Boxes between the spaces a figure passes through (spm-bench §2.2, "llbox" crops).

Spaces, all with y pointing down:
  thumbnail   the page as the VLM saw it: rendered with its rotation, longest
              side ``THUMB_LONGEST`` px; a VLM box is either normalised to
              [0, 1000] on it (default) or in its absolute pixels (Qwen2.5-VL);
  visible     the rotated, cropped page in points (PyMuPDF's ``page.rect``);
              PyMuPDF's ``get_pixmap(clip=...)`` takes clips in this space;
  page        unrotated points relative to the crop box's top-left corner
              (PyMuPDF's text and drawing coordinates): where figure records
              keep their boxes, so captions and bodies share one space.
Rotation and crop-box offsets live in the page's rotation matrices, so every
map is affine and works on arrays of boxes at once (``transform``: compiled
form ``benchmint._core.geometry``, reference ``geometry_ref``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from benchmint import _dispatch
from benchmint.parallel import resolve_workers
from benchmint.pdf import geometry_ref

THUMB_LONGEST = 1024
CROP_DPI = 300
NORM_SCALE = 1000.0
UNITS = ("norm1000", "pixels")


class BoxError(ValueError):
    """A box that cannot be mapped; names the box by its index."""


@dataclass(frozen=True)
class PageFrame:
    """What the maps need from a page: its visible size and rotation matrices."""

    width: float  # visible page, points
    height: float
    rotation: tuple[float, ...]  # page -> visible, (a, b, c, d, e, f)
    derotation: tuple[float, ...]  # visible -> page

    @classmethod
    def from_page(cls, page) -> PageFrame:
        r = page.rect
        return cls(float(r.width), float(r.height), tuple(page.rotation_matrix), tuple(page.derotation_matrix))

    def thumbnail_zoom(self, longest: int = THUMB_LONGEST) -> float:
        return longest / max(self.width, self.height)

    def thumbnail_size(self, longest: int = THUMB_LONGEST) -> tuple[int, int]:
        """Pixel size of the thumbnail PyMuPDF renders at ``thumbnail_zoom`` (its rounding of the scaled rect)."""
        import pymupdf

        irect = (pymupdf.Rect(0, 0, self.width, self.height) * pymupdf.Matrix(self.thumbnail_zoom(longest),
                                                                               self.thumbnail_zoom(longest))).irect
        return irect.width, irect.height


def _as_boxes(boxes) -> np.ndarray:
    a = np.asarray(boxes, dtype=np.float64)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.shape[1] != 4:
        raise BoxError(f"boxes must be (x0, y0, x1, y1) rows, got shape {np.shape(boxes)}")
    return a


def _as_matrix(matrix) -> list[float]:
    m = [float(v) for v in matrix]
    if len(m) != 6:
        raise ValueError(f"the matrix needs 6 numbers (a, b, c, d, e, f), got {len(m)}")
    if not all(math.isfinite(v) for v in m):
        raise ValueError(f"the matrix {m} has a non-finite entry")
    return m


def transform(boxes, matrix, workers: int = 1) -> np.ndarray:
    """The bounding boxes of ``boxes`` under an affine (a, b, c, d, e, f) map (x' = a·x + c·y + e, y' = b·x + d·y + f).

    Non-finite box coordinates are not checked (that would cost another pass
    over the boxes; ``check_boxes`` does it where boxes come from outside) and
    propagate as NumPy's min and max propagate them: a side whose four mapped
    corners include a NaN is NaN, in both forms. The matrix must be finite
    (ValueError otherwise). ``workers``: 1 serial, -1 all cores, n threads.
    """
    boxes = _as_boxes(boxes)
    m = _as_matrix(matrix)
    resolve_workers(workers)
    if _dispatch.use_reference("geometry"):
        return geometry_ref.transform(boxes, m)
    return _dispatch.core().geometry.transform_boxes(boxes, m, workers)


def _first_bad(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(mask)
    return int(bad[0]) if len(bad) else None


def check_boxes(boxes: np.ndarray, width: float, height: float, what: str, min_size: float = 0.0) -> None:
    """Order, bounds and size checks; the error names the first offending box."""
    problems = (
        (~np.isfinite(boxes).all(axis=1), "has a non-finite coordinate"),
        ((boxes[:, 0] >= boxes[:, 2]) | (boxes[:, 1] >= boxes[:, 3]), "is not ordered (need x0 < x1 and y0 < y1)"),
        ((boxes[:, 0] < 0) | (boxes[:, 1] < 0) | (boxes[:, 2] > width) | (boxes[:, 3] > height),
         f"lies outside the {what} (0, 0, {width:g}, {height:g})"),
        (((boxes[:, 2] - boxes[:, 0]) < min_size) | ((boxes[:, 3] - boxes[:, 1]) < min_size),
         f"is smaller than the minimum size {min_size:g}"),
    )
    for mask, message in problems:
        i = _first_bad(mask)
        if i is not None:
            raise BoxError(f"box {i} {boxes[i].tolist()} {message}")  # plain numbers, not np.float64(...)


def thumbnail_to_page(boxes, frame: PageFrame, units: str = "norm1000", longest: int = THUMB_LONGEST,
                      min_size_pt: float = 4.0) -> np.ndarray:
    """VLM boxes on the thumbnail -> boxes in page points (unrotated, crop-box relative)."""
    if units not in UNITS:
        raise ValueError(f"units must be one of {', '.join(UNITS)}; got {units!r}")
    boxes = _as_boxes(boxes)
    if units == "norm1000":
        check_boxes(boxes, NORM_SCALE, NORM_SCALE, "normalised range")
        scale_x, scale_y = frame.width / NORM_SCALE, frame.height / NORM_SCALE
    else:
        tw, th = frame.thumbnail_size(longest)
        check_boxes(boxes, tw, th, f"{tw}x{th} px thumbnail")
        scale_x, scale_y = frame.width / tw, frame.height / th
    visible = boxes * np.array([scale_x, scale_y, scale_x, scale_y])
    check_boxes(visible, frame.width, frame.height, "page", min_size_pt)
    return transform(visible, frame.derotation)


def page_to_visible(boxes, frame: PageFrame) -> np.ndarray:
    return transform(boxes, frame.rotation)


def page_to_crop_pixels(boxes, frame: PageFrame, origin_px: tuple[int, int], dpi: int = CROP_DPI) -> np.ndarray:
    """Page boxes -> pixel boxes inside a crop rendered at ``dpi`` whose top-left device pixel is ``origin_px``.

    ``origin_px`` is ``(pixmap.x, pixmap.y)`` of the rendered crop: PyMuPDF rounds the
    clip outward to whole device pixels, so the crop starts up to a pixel before the clip.
    """
    scale = dpi / 72.0
    return page_to_visible(boxes, frame) * scale - np.tile(np.asarray(origin_px, dtype=np.float64), 2)


def render_thumbnail(page, longest: int = THUMB_LONGEST):
    """The page as a VLM sees it (rotation applied), longest side ``longest`` px."""
    import pymupdf

    zoom = PageFrame.from_page(page).thumbnail_zoom(longest)
    return page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)


def render_crop(page, page_box, dpi: int = CROP_DPI):
    """Only the region ``page_box`` (page points) rendered at ``dpi``, as displayed; never the whole page."""
    import pymupdf

    frame = PageFrame.from_page(page)
    box = _as_boxes(page_box)
    if len(box) != 1:
        raise BoxError(f"render_crop takes one box, got {len(box)}")
    visible = page_to_visible(box, frame)
    check_boxes(visible, frame.width, frame.height, "page")
    return page.get_pixmap(clip=pymupdf.Rect(*visible[0]), dpi=dpi, alpha=False)
