"""Pairing captions with their figure bodies, locally and without a model.

The body of a figure is the graphics (vector drawings and placed images) next
to its caption in the caption's column: above it first (the common layout),
below it otherwise, never across another caption of that column. Columns come
from the caption itself: a caption narrower than ~55% of the page sits in the
left or right half; a wider one spans the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmint.pdf.captions import Caption

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PairedFigure:
    caption: Caption
    body: Box | None  # page points; None when no graphics sit next to the caption


def _union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _column(caption: Caption, width: float) -> tuple[float, float]:
    x0, _, x1, _ = caption.bbox
    if x1 - x0 >= 0.55 * width:
        return 0.0, width
    return (0.0, width / 2) if (x0 + x1) / 2 < width / 2 else (width / 2, width)


def _in_column(box: Box, column: tuple[float, float]) -> bool:
    overlap = min(box[2], column[1]) - max(box[0], column[0])
    return overlap >= 0.5 * max(box[2] - box[0], 1e-6)


def graphics_boxes(page) -> list[Box]:
    """Bounding boxes of the drawn paths and placed images (page frames and hairline page rules left out)."""
    w, h = page.rect.width, page.rect.height
    boxes = [tuple(d["rect"]) for d in page.get_drawings()] + [tuple(i["bbox"]) for i in page.get_image_info()]
    return [b for b in boxes if (b[3] - b[1]) < 0.9 * h and (b[2] - b[0]) < 0.98 * w and max(b[2] - b[0], b[3] - b[1]) > 0]


def pair(captions: list[Caption], graphics: list[Box], width: float, height: float,
         max_gap: float = 0.25) -> list[PairedFigure]:
    """Each caption with the union of the graphics between it and its column's neighbouring captions."""
    out = []
    for cap in captions:
        column = _column(cap, width)
        # Captions that bound this one's body: those in its column and page-wide ones.
        peers = [c for c in captions
                 if c is not cap and (_in_column(c.bbox, column) or c.bbox[2] - c.bbox[0] >= 0.55 * width)]
        above_limit = max([c.bbox[3] for c in peers if c.bbox[3] <= cap.bbox[1]], default=0.0)
        below_limit = min([c.bbox[1] for c in peers if c.bbox[1] >= cap.bbox[3]], default=height)
        mine = [b for b in graphics if _in_column(b, column)]
        above = [b for b in mine if b[3] <= cap.bbox[1] + 2 and b[1] >= above_limit - 2]
        below = [b for b in mine if b[1] >= cap.bbox[3] - 2 and b[3] <= below_limit + 2]
        body = None
        for group, gap in ((above, lambda u, cap=cap: cap.bbox[1] - u[3]),
                           (below, lambda u, cap=cap: u[1] - cap.bbox[3])):
            if group:
                u = _union(group)
                if gap(u) <= max_gap * height:
                    body = u
                    break
        out.append(PairedFigure(cap, body))
    return out


def page_figures(page, captions: list[Caption]) -> list[PairedFigure]:
    return pair(captions, graphics_boxes(page), page.rect.width, page.rect.height)
