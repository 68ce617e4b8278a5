"""Reference of ``benchmint.pdf.triage``: what PyMuPDF itself reports, by running the page's display list."""

from __future__ import annotations

import pymupdf


def page_counts(page: pymupdf.Page) -> tuple[int, int]:
    """(images placed, vector paths painted): ``len(page.get_image_info())``, ``len(page.get_drawings())``."""
    return len(page.get_image_info()), len(page.get_drawings())
