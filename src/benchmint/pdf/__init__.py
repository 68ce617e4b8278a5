"""PDF side: page triage, geometry of figure boxes, crops."""


def default_text_switches() -> None:
    """Set PyMuPDF's process-wide switches that change text boxes back to its defaults.

    Importing PyMuPDF 2 also imports pymupdf4llm, which turns quad corrections off for the whole process
    (the boxes of fonts whose ascent and descent span less than an em, as LaTeX's Type 1 fonts do, then
    come out flatter). Whether that happened depends on what the process imported first (the command blocks
    pymupdf4llm; a Ray worker or a library user's program may not), so a harvest unit calls this before it
    reads a page: its text boxes are PyMuPDF's default ones in every process.
    """
    import pymupdf

    pymupdf.TOOLS.unset_quad_corrections(False)
    pymupdf.TOOLS.set_small_glyph_heights(False)
