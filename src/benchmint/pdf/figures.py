"""One page's figures as the harvest records them: each caption with its body box and panel count.

The body comes from ``pairing`` (growth over the page's graphics and figure text); its panels from
``panels`` (frames, axes, letters, gutters), or from the caption's letters alone where no body was found.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmint.pdf.captions import Caption, estimate_panels
from benchmint.pdf.pairing import Box, page_figures
from benchmint.pdf.panels import count_panels


@dataclass(frozen=True)
class PageFigure:
    caption: Caption
    body: Box | None  # page points
    panels: int

    @property
    def label(self) -> str:
        return self.caption.label


def find_figures(page, captions: list[Caption], words=None, drawings=None, images=None) -> list[PageFigure]:
    """The figures of ``captions`` on ``page``; ``words``, ``drawings`` and ``images`` are the page's
    ``get_text("words")``, ``get_drawings()`` and ``get_image_info()`` when read already."""
    words = page.get_text("words") if words is None else words
    drawings = page.get_drawings() if drawings is None else drawings
    images = page.get_image_info() if images is None else images
    out = []
    for fig in page_figures(page, captions, words, drawings, images):
        body = fig.body
        if body is None:
            out.append(PageFigure(fig.caption, None, estimate_panels(fig.caption.text)))
            continue
        inner = [w for w in words if w[0] >= body[0] - 1 and w[2] <= body[2] + 1
                 and w[1] >= body[1] - 1 and w[3] <= body[3] + 1]
        out.append(PageFigure(fig.caption, body, count_panels(drawings, images, body, fig.caption.text,
                                                              page=page, body_words=inner)))
    return out
