"""Write the bundled sample article (src/benchmint/samples/sample_paper.pdf) and a VLM-style box for its figure.

Two-column first page with a multi-panel vector figure and its caption, a
second page with a raster micrograph; deterministic (fixed seed, no dates).
"""

import json
from pathlib import Path

import numpy as np
import pymupdf

OUT = Path(__file__).resolve().parent.parent / "src" / "benchmint" / "samples"
BODY = ("Scanning tunnelling microscopy of the moire superlattice reveals a periodicity of about 1.2 nm. "
        "As seen in Fig. 1(b), the dI/dV map follows the topography, while the FFT in Fig. 1(d) shows six-fold "
        "spots characteristic of a hexagonal lattice. ") * 3
TEM = ("The transmission electron micrograph in Fig. 2 shows grains of a few tens of nanometres with sharp "
       "boundaries and no visible secondary phase. The contrast varies smoothly inside each grain, which points "
       "to a low density of extended defects, and the grain size agrees with the width of the diffraction peaks "
       "measured on the same batch. Bright spots near the grain boundaries are consistent with a thin oxide "
       "layer formed during the preparation of the lamella rather than with segregation in the bulk. A second "
       "lamella cut from the same film shows the same grain structure, so the micrograph is representative.")


def figure_panels(page, area: pymupdf.Rect, rng) -> None:
    """Four panels (a)-(d): a line plot, a scatter plot, bars and a lattice of dots, all vector paths."""
    w, h = area.width / 2, area.height / 2
    for k, label in enumerate("abcd"):
        x0, y0 = area.x0 + (k % 2) * w, area.y0 + (k // 2) * h
        box = pymupdf.Rect(x0 + 6, y0 + 6, x0 + w - 6, y0 + h - 6)
        page.draw_rect(box, color=(0, 0, 0), width=0.6)
        page.insert_text((box.x0 + 3, box.y0 + 10), f"({label})", fontsize=8)
        inner = pymupdf.Rect(box.x0 + 12, box.y0 + 14, box.x1 - 6, box.y1 - 8)
        if label == "a":
            xs = np.linspace(inner.x0, inner.x1, 60)
            ys = inner.y1 - (np.sin(np.linspace(0, 6, 60)) + 1.2) / 2.4 * inner.height
            page.draw_polyline(list(zip(xs.tolist(), ys.tolist())), color=(0.1, 0.2, 0.8), width=1)
        elif label == "b":
            for x, y in rng.uniform(0, 1, (80, 2)):
                page.draw_circle((inner.x0 + x * inner.width, inner.y0 + y * inner.height), 1.2, color=(0.8, 0.1, 0.1),
                                 fill=(0.8, 0.1, 0.1))
        elif label == "c":
            for i, v in enumerate(rng.uniform(0.2, 1, 8)):
                bw = inner.width / 8
                page.draw_rect(pymupdf.Rect(inner.x0 + i * bw + 1, inner.y1 - v * inner.height, inner.x0 + (i + 1) * bw - 1,
                                            inner.y1), color=None, fill=(0.2, 0.6, 0.3))
        else:
            for i in range(7):
                for j in range(6):
                    cx = inner.x0 + (i + 0.5 * (j % 2)) * inner.width / 7.5
                    page.draw_circle((cx, inner.y0 + j * inner.height / 6 + 4), 1.5, color=None, fill=(0.3, 0.3, 0.3))


def main() -> None:
    rng = np.random.default_rng(3)
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(54, 50, 558, 90), "Moire superlattices on graphene/hBN seen by STM",
                        fontsize=15, align=1)
    left = pymupdf.Rect(54, 110, 300, 740)
    page.insert_textbox(left, BODY, fontsize=9)
    fig = pymupdf.Rect(318, 110, 558, 350)
    figure_panels(page, fig, rng)
    page.insert_textbox(pymupdf.Rect(318, 356, 558, 430),
                        "Figure 1. (a) Line profile across the superlattice. (b) dI/dV map. (c) Histogram of "
                        "apparent heights. (d) Lattice model.", fontsize=8)
    page.insert_textbox(pymupdf.Rect(318, 440, 558, 740), TEM, fontsize=9)
    page2 = doc.new_page(width=612, height=792)
    micrograph = (rng.normal(128, 40, (160, 160)).clip(0, 255)).astype(np.uint8)
    pix = pymupdf.Pixmap(pymupdf.csGRAY, 160, 160, micrograph.tobytes(), False)
    page2.insert_image(pymupdf.Rect(150, 100, 462, 412), pixmap=pix)
    page2.insert_textbox(pymupdf.Rect(150, 420, 462, 470), "Fig. 2: TEM micrograph of the sample.", fontsize=8)
    OUT.mkdir(parents=True, exist_ok=True)
    doc.set_metadata({"title": "benchmint sample article", "producer": "benchmint", "creationDate": "", "modDate": ""})
    doc.save(OUT / "sample_paper.pdf", garbage=4, deflate=True, no_new_id=True)
    # The box a VLM returns for Figure 1 on the page-1 thumbnail, normalised to [0, 1000].
    box = [fig.x0 / 612 * 1000 - 4, fig.y0 / 792 * 1000 - 4, fig.x1 / 612 * 1000 + 4, fig.y1 / 792 * 1000 + 4]
    (OUT / "sample_vlm_box.json").write_text(json.dumps(
        {"pdf": "sample_paper.pdf", "page": 1, "units": "norm1000", "label": "STM figure",
         "box": [round(v, 1) for v in box]}, indent=2) + "\n")
    print(f"wrote {OUT / 'sample_paper.pdf'} and sample_vlm_box.json")


if __name__ == "__main__":
    main()
