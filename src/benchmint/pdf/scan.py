"""Figure bodies on scanned pages, from the ink of a low-resolution render.

A scanned page is one image the size of the page (with, at best, an invisible OCR text layer, which is where
its captions are read from): there are no graphics to grow a body over. Its body is the ink between the
caption and the nearest text block (``pairing`` decides that window from the text lines), found in a
grey-scale render at ``SCAN_DPI``: rows and columns of the window holding ink, trimmed to where the ink is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchmint.pdf.pairing import Box

SCAN_DPI = 50  # a figure's extent, not its details: a letter page is 425 x 550 pixels
SCAN_SHARE = 0.8  # one image covering this share of the page's area makes the page a scan
INK_DROP = 50  # grey levels below the paper's that count as ink (a scan's paper is seldom white)
MIN_INK_PX = 2  # a row or column holds ink when it has this many inked pixels (single specks are noise)
MIN_BODY_PT = 15.0  # ink less tall or wide than this is no figure (a stray mark, a rule)


def is_scan(width: float, height: float, images: Sequence[dict]) -> bool:
    """Whether one placed image covers ``SCAN_SHARE`` of the page (``images``: ``page.get_image_info()``)."""
    area = width * height
    for im in images:
        x0, y0, x1, y1 = im["bbox"]
        w, h = min(x1, width) - max(x0, 0.0), min(y1, height) - max(y0, 0.0)
        if w > 0 and h > 0 and w * h >= SCAN_SHARE * area:
            return True
    return False


class PageInk:
    """A page rendered in grey at ``dpi``, as a boolean ink mask; boxes in and out are page points (the
    rotation matrices map them to the rendered, visible page and back)."""

    def __init__(self, page, dpi: int = SCAN_DPI) -> None:
        import pymupdf

        self.zoom = dpi / 72.0
        self.rotation, self.derotation = page.rotation_matrix, page.derotation_matrix
        pix = page.get_pixmap(matrix=pymupdf.Matrix(self.zoom, self.zoom), colorspace=pymupdf.csGRAY, alpha=False)
        grey = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)[:, : pix.width]
        paper = int(np.median(grey))  # most of a page is paper, whatever its shade
        self.ink = grey < max(paper - INK_DROP, 1)

    def box(self, window: Box) -> Box | None:
        """The box (page points) of the ink inside ``window``, or None when there is too little of it."""
        import pymupdf

        z = self.zoom
        h, w = self.ink.shape
        vis = pymupdf.Rect(window) * self.rotation
        x0, y0 = max(int(np.ceil(vis.x0 * z)), 0), max(int(np.ceil(vis.y0 * z)), 0)
        x1, y1 = min(int(vis.x1 * z), w), min(int(vis.y1 * z), h)
        if x1 - x0 < 2 or y1 - y0 < 2:
            return None
        part = self.ink[y0:y1, x0:x1]
        rows = np.flatnonzero(part.sum(axis=1) >= MIN_INK_PX)
        cols = np.flatnonzero(part.sum(axis=0) >= MIN_INK_PX)
        if rows.size == 0 or cols.size == 0:
            return None
        found = pymupdf.Rect((x0 + cols[0]) / z, (y0 + rows[0]) / z, (x0 + cols[-1] + 1) / z,
                             (y0 + rows[-1] + 1) / z) * self.derotation
        if found.width < MIN_BODY_PT or found.height < MIN_BODY_PT:
            return None
        return (found.x0, found.y0, found.x1, found.y1)
