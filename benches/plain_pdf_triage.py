"""The plain triage `benchmint harvest --triage-only` is measured against: the same job the straightforward way.

For every page of every PDF: PyMuPDF's get_image_info() and get_drawings() for the graphic test, and
get_text("blocks") for caption anchors (benchmint's own anchor rule, ``captions.caption_label``, so both find
the same anchors); one pages.jsonl row per page. One process, one core.

    .venv/bin/python benches/plain_pdf_triage.py OUT_DIR PDF [PDF ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(out: Path, pdfs: list[str]) -> None:
    # PyMuPDF 2 would load its ONNX layout model on import (~0.4 s) that no step here uses; left out, as the
    # benchmint command leaves it out, so that the comparison is of the triage alone.
    sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]
    sys.modules.setdefault("pymupdf4llm", None)  # type: ignore[arg-type]
    import pymupdf

    from benchmint.pdf.captions import caption_label

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "pages.jsonl", "w", encoding="utf-8") as fh:
        for path in pdfs:
            with pymupdf.open(path) as doc:
                for number, page in enumerate(doc, 1):
                    images, paths = len(page.get_image_info()), len(page.get_drawings())
                    labels = [lab for b in page.get_text("blocks") if b[6] == 0 and (lab := caption_label(b[4]))]
                    graphic = images >= 1 or paths >= 12
                    fh.write(json.dumps({"pdf": Path(path).name, "page": number, "images": images, "paths": paths,
                                         "captions": labels, "candidate": graphic and bool(labels)}) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
