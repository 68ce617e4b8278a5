"""PDF side: page triage, geometry of figure boxes, crops."""

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def default_text_switches() -> Iterator[None]:
    """PyMuPDF's process-wide switches that change text boxes at their defaults while the block runs, then the
    process's own settings again.

    Importing PyMuPDF 2 also imports pymupdf4llm, which turns quad corrections off for the whole process
    (the boxes of fonts whose ascent and descent span less than an em, as LaTeX's Type 1 fonts do, then come
    out flatter and a point higher or lower). Whether that happened depends on what the process imported first
    (the command blocks pymupdf4llm; a Ray worker or a library user's program may not), so every harvest unit
    reads its pages inside this block: the same boxes, and so the same figures, in every process.
    """
    import pymupdf

    quads, small_glyphs = bool(pymupdf.TOOLS.unset_quad_corrections()), bool(pymupdf.TOOLS.set_small_glyph_heights())
    pymupdf.TOOLS.unset_quad_corrections(False)
    pymupdf.TOOLS.set_small_glyph_heights(False)
    try:
        yield
    finally:
        pymupdf.TOOLS.unset_quad_corrections(quads)
        pymupdf.TOOLS.set_small_glyph_heights(small_glyphs)
