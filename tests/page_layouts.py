"""Pages laid out as arXiv papers are (two-column REVTeX and conference pages, title pages), drawn with PyMuPDF.

Plots are drawn as plotting programs write them: a frame of four separate spines, tick marks on all four sides
pointing in, tick labels as separate text, curves with markers: a hundred paths and more per plot.
"""

from __future__ import annotations

import math

import pymupdf

LETTER = (612.0, 792.0)
LEFT = pymupdf.Rect(54, 0, 297, 0)  # the columns' x extents of a two-column letter page
RIGHT = pymupdf.Rect(315, 0, 558, 0)
_WORDS = ("the spin wave dispersion along the high symmetry directions was measured at low temperature and "
          "compared with linear theory using exchange constants fitted to the data of the previous section").split()


def new_page(doc: pymupdf.Document) -> pymupdf.Page:
    return doc.new_page(width=LETTER[0], height=LETTER[1])


def prose(page: pymupdf.Page, rect: pymupdf.Rect, fontsize: float = 9.5) -> None:
    """Justified running text filling ``rect`` (as many words as fit)."""
    n = int(rect.width * rect.height / 250)
    while page.insert_textbox(rect, " ".join(_WORDS[i % len(_WORDS)] for i in range(n)), fontsize=fontsize,
                              align=pymupdf.TEXT_ALIGN_JUSTIFY) < 0:
        n -= 5


def caption(page: pymupdf.Page, rect: pymupdf.Rect, text: str) -> None:
    assert page.insert_textbox(rect, text, fontsize=8, align=pymupdf.TEXT_ALIGN_JUSTIFY) >= 0, text


def centred(page: pymupdf.Page, y: float, text: str, fontsize: float) -> None:
    width = pymupdf.get_text_length(text, fontsize=fontsize)
    page.insert_text(((LETTER[0] - width) / 2, y), text, fontsize=fontsize)


def ink(page: pymupdf.Page, rect: pymupdf.Rect) -> tuple[float, float, float, float]:
    """The box of the paths and words PyMuPDF reads back from around ``rect`` (10 points out): what was drawn."""
    out = rect + (-10, -10, 10, 10)

    def within(b) -> bool:
        return b[0] >= out.x0 and b[1] >= out.y0 and b[2] <= out.x1 and b[3] <= out.y1

    boxes = [tuple(d["rect"]) for d in page.get_drawings() if within(d["rect"])]
    boxes += [w[:4] for w in page.get_text("words") if within(w[:4])]
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def plot(page: pymupdf.Page, rect: pymupdf.Rect, letter: str | None = None, seed: int = 0,
         x_labels: bool = True) -> tuple:
    """A line plot drawn inside ``rect`` (tick labels and axis title included); returns the box of its ink.
    Without ``x_labels`` the axes fill ``rect`` to its foot (a panel stacked on another, sharing its x axis)."""
    ax = pymupdf.Rect(rect.x0 + 24, rect.y0 + 4, rect.x1 - 2, rect.y1 - (22 if x_labels else 0))
    black = (0, 0, 0)
    for a, b in ((ax.tl, ax.tr), (ax.tr, ax.br), (ax.br, ax.bl), (ax.bl, ax.tl)):  # spines, one path each
        page.draw_line(a, b, color=black, width=0.6)
    xt, yt = ("0", "50", "100", "150", "200", "250"), ("0.0", "0.5", "1.0", "1.5")
    for i, t in enumerate(xt):
        x = ax.x0 + i * ax.width / (len(xt) - 1)
        page.draw_line((x, ax.y1), (x, ax.y1 - 3.5), color=black, width=0.5)
        page.draw_line((x, ax.y0), (x, ax.y0 + 3.5), color=black, width=0.5)
        if x_labels:
            page.insert_text((x - 2 * len(t), ax.y1 + 9), t, fontsize=7)
    for i, t in enumerate(yt):
        y = ax.y1 - i * ax.height / (len(yt) - 1)
        page.draw_line((ax.x0, y), (ax.x0 + 3.5, y), color=black, width=0.5)
        page.draw_line((ax.x1, y), (ax.x1 - 3.5, y), color=black, width=0.5)
        page.insert_text((ax.x0 - 4 - 3.9 * len(t), y + 2.5), t, fontsize=7)
    if x_labels:
        page.insert_text((ax.x0 + ax.width / 2 - 10, rect.y1 - 2), "T (K)", fontsize=8)
    n = 60
    for k in range(3):  # a curve is one path; its markers are paths of their own
        points = [(ax.x0 + 4 + i * (ax.width - 8) / (n - 1),
                   ax.y1 - 6 - (ax.height - 14) * (0.3 + 0.3 * math.sin(i / 9 + k + seed))) for i in range(n)]
        page.draw_polyline(points, color=(k / 3, 0, 1 - k / 3), width=0.8)
        for p in points[::2]:
            page.draw_circle(p, 1.5, color=(0, 0, 0), width=0.4)
    if letter == "outlined":  # a panel letter a plotting program wrote as a path: no text to read
        page.draw_bezier((ax.x1 - 16, ax.y0 + 20), (ax.x1 - 20, ax.y0 + 12), (ax.x1 - 10, ax.y0 + 12),
                         (ax.x1 - 12, ax.y0 + 20), color=black, width=0.8)
    elif letter:
        page.insert_text((ax.x1 - 18, ax.y0 + 24), letter, fontsize=8)
    return ink(page, rect)


def near(box, want, tol: float = 3.0) -> bool:
    return box is not None and all(abs(a - b) <= tol for a, b in zip(box, want))


def scanned(page: pymupdf.Page, doc: pymupdf.Document, dpi: int = 150, seed: int = 0) -> pymupdf.Page:
    """``page`` as a scanner and OCR leave it, as a new page of ``doc``: one grey-scale image of the whole page
    (grey paper, specks of dust, a dark shadow along the binding edge) under invisible text at the words'
    places."""
    import numpy as np

    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
    words, rect = page.get_text("words"), page.rect  # read before a page is added: that drops ``page``
    grey = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)[:, : pix.width].astype(float)
    rng = np.random.default_rng(seed)
    grey = grey * (232 / 255) + rng.normal(0, 6, grey.shape)  # grey paper, grain
    dust = rng.integers(0, grey.size, 40)
    grey.flat[dust] = 40  # single dark specks
    grey[:, : int(0.25 * dpi)] = 60  # the binding's shadow, a quarter inch wide
    image = pymupdf.Pixmap(pymupdf.csGRAY, pix.width, pix.height, np.clip(grey, 0, 255).astype(np.uint8).tobytes(),
                           False)
    out = doc.new_page(width=rect.width, height=rect.height)
    out.insert_image(out.rect, pixmap=image)
    for x0, y0, _x1, y1, word, *_ in words:
        size = (y1 - y0) / 1.16  # Helvetica's box is 1.16 times its size tall, 0.21 of it below the baseline
        out.insert_text((x0, y1 - 0.21 * size), word, fontsize=size, render_mode=3)
    return out
