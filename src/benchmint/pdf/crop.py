"""From a VLM's box on a page thumbnail to a 300-DPI PNG of just that region."""

from __future__ import annotations

import os
from pathlib import Path

from benchmint.io import InputError
from benchmint.pdf.geometry import CROP_DPI, THUMB_LONGEST, BoxError, PageFrame, render_crop, thumbnail_to_page

# Beyond this a crop of a whole page is billions of pixels; the papers crop at 300.
MAX_DPI = 2400
# A crop larger than this (about 300 MB as RGB) is refused before MuPDF is asked for it.
MAX_PIXELS = 100_000_000


def open_page(pdf_path: str | os.PathLike, page_number: int):
    """(document, page) for a 1-based page number, with clear errors for unusable files."""
    import pymupdf

    path = Path(pdf_path)
    if not path.is_file():
        raise InputError(f"PDF not found: {path}")
    try:
        doc = pymupdf.open(path)
    except Exception as exc:  # PyMuPDF raises its own types for damaged files
        raise InputError(f"cannot open {path} as a PDF: {exc}") from exc
    if doc.needs_pass:
        doc.close()
        raise InputError(f"{path} is encrypted")
    if not 1 <= page_number <= doc.page_count:
        count = doc.page_count
        doc.close()
        raise InputError(f"{path} has {count} pages; page {page_number} does not exist")
    return doc, doc[page_number - 1]


def crop_figure(pdf_path: str | os.PathLike, page_number: int, box, out_png: str | os.PathLike,
                units: str = "norm1000", label: str | None = None, dpi: int = CROP_DPI,
                longest: int = THUMB_LONGEST) -> dict:
    """Map a thumbnail box back to the page and write only that clip, rendered at ``dpi``, to ``out_png``.

    Returns the record of the crop: page box in points (unrotated, crop-box
    relative), pixel size, dpi, label. InputError, before anything is read, for a ``dpi`` outside
    1-``MAX_DPI`` or an ``out_png`` not named .png; InputError too when MuPDF cannot render the crop
    or the file cannot be written.
    """
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 1 <= dpi <= MAX_DPI:
        raise InputError(f"the DPI must be a whole number from 1 to {MAX_DPI}, got {dpi}")
    out = Path(out_png)
    if out.suffix.lower() != ".png":
        raise InputError(f"the crop is written as PNG: name it .png, not {out.name}")
    doc, page = open_page(pdf_path, page_number)
    try:
        page_box = thumbnail_to_page(box, PageFrame.from_page(page), units=units, longest=longest)[0]
        width, height = (float(page_box[2] - page_box[0]) * dpi / 72, float(page_box[3] - page_box[1]) * dpi / 72)
        if width * height > MAX_PIXELS:
            raise InputError(f"the crop would be {width:.0f} x {height:.0f} px at {dpi} DPI, more than "
                             f"{MAX_PIXELS:,} pixels: lower --dpi or the box")
        try:
            pix = render_crop(page, page_box, dpi=dpi)
            png = pix.tobytes("png")
        except BoxError:
            raise
        except Exception as exc:  # MuPDF's own types: a pixmap beyond its limits, no memory for it
            raise InputError(f"MuPDF cannot render this crop at {dpi} DPI: {exc}") from exc
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(png)
        except OSError as exc:
            raise InputError(f"cannot write {out}: {exc.strerror or exc}") from exc
        return {"pdf": Path(pdf_path).name, "page": page_number, "label": label, "units": units,
                "thumb_box": [float(x) for x in box], "page_box": [round(float(x), 3) for x in page_box],
                "dpi": dpi, "width_px": pix.width, "height_px": pix.height, "png": str(out)}
    finally:
        doc.close()
