"""Caption anchors: strict figure headers at the start of a text block."""

import pymupdf
import pytest

from benchmint.pdf.captions import caption_label, page_captions

ANCHORS = [
    ("Figure 1. STM topography of the surface.", "1"),
    ("Fig. 1: dI/dV spectra.", "1"),
    ("FIG. 1. Band structure.", "1"),
    ("Figure 1 | Moiré superlattice.", "1"),
    ("Figure 12 — Phase diagram.", "12"),
    ("Figure 4 - Overview of the setup", "4"),
    ("Extended Data Fig. 1 | Additional STM images.", "1"),
    ("Extended Data Figure 10. Raw data.", "10"),
    ("Supplementary Figure S1. Sample preparation.", "S1"),
    ("Supplementary Fig. S12: More spectra.", "S12"),
    ("Figura 1. Micrografía MET.", "1"),
    ("Figure 2a. Close-up of panel a.", "2a"),
    ("Figure 3 Schematic of the tip-sample junction.", "3"),
    ("Fig. 5 (a) Topography and (b) current map.", "5"),
    ("  Figure 6.\nSecond line of the caption.", "6"),
    ("FIGURE 7. Upper-case header.", "7"),
    ("Fig 8: no period after Fig.", "8"),
    ("Figure 2.1: Overall survival curves.", "2.1"),  # a chapter's figure
    ("Figure 2.10. Curves.", "2.10"),
    ("Figure 2. 1,000 samples.", "2"),  # a period and a space: the number ends at the period
]
NOT_ANCHORS = [
    "As seen in Fig. 1, the lattice is hexagonal.",
    "Fig. 1 shows the topography of the surface.",
    "Figure 1 illustrates the setup.",
    "Figs. 2 and 3 compare the spectra.",
    "Figures 2-4 summarise the results.",
    "Table 1. Lattice parameters.",
    "TABLE I. Fit results.",
    "Figure 3. Band structure ........ 12",
    "Figure 3. Band structure . . . . . . . 12",
    "The figure 1 in the appendix",
    "Configuration 1. Not a figure.",
    "Figure. A figure without a number.",
    "Figure 1shows missing space",
    "Figure 2.3 shows the transplant curves.",  # an in-text reference to a chapter's figure
    "",
]


@pytest.mark.parametrize("text, label", ANCHORS)
def test_anchors(text, label):
    assert caption_label(text) == label


@pytest.mark.parametrize("text", NOT_ANCHORS)
def test_not_anchors(text):
    assert caption_label(text) is None


def test_page_captions_on_a_generated_two_column_page():
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(54, 60, 300, 200), "As seen in Fig. 1, the moiré period is 1.2 nm. "
                        "Figs. 2 and 3 show spectra.", fontsize=9)
    page.insert_textbox(pymupdf.Rect(54, 420, 300, 470), "Figure 1. Topography of graphene on hBN.", fontsize=8)
    page.insert_textbox(pymupdf.Rect(318, 420, 558, 470), "Fig. 2: Tunnelling spectra.", fontsize=8)
    page.insert_textbox(pymupdf.Rect(318, 600, 558, 640), "Table 1. Fit parameters.", fontsize=8)
    found = page_captions(page)
    assert [c.label for c in found] == ["1", "2"]
    assert found[0].text.startswith("Figure 1.") and found[0].bbox[1] >= 419


def test_a_header_set_apart_on_the_row_of_its_caption():
    # A book layout (test_3789.pdf of PyMuPDF's tests): the bold header, a gap, the caption on the same row.
    # MuPDF makes them two lines of one block; the second starting right of the first's end is not a column.
    doc = pymupdf.open()
    page = doc.new_page(width=500, height=700)
    page.insert_text((83, 100), "The chapters can be read independently, as Figure 1 shows.", fontsize=9.5)
    page.insert_text((83, 604), "Figure 1", fontsize=8.5, fontname="hebo")
    page.insert_text((124, 604), "How to read this book.", fontsize=8.5)  # 8 pt on: MuPDF starts a line
    page.insert_text((83, 640), "Figure 2", fontsize=8.5, fontname="hebo")  # alone: no caption follows
    page.insert_text((300, 660), "Another column.", fontsize=8.5)  # below the row: a column still
    found = page_captions(page)
    assert [(c.label, c.text) for c in found] == [("1", "Figure 1 How to read this book.")]


def test_bundled_sample_article():
    from importlib.resources import files

    doc = pymupdf.open(str(files("benchmint") / "samples" / "sample_paper.pdf"))
    assert [[c.label for c in page_captions(page)] for page in doc] == [["1"], ["2"]]
    caption = page_captions(doc[0])[0]
    assert caption.text.startswith("Figure 1. (a) Line profile") and caption.bbox[0] > 300  # right column


@pytest.mark.parametrize("caption, body, panels", [
    ("Figure 1. (a) Topography. (b) dI/dV map. (c) Histogram. (d) Model.", [], 4),
    ("Figure 2. (a-f) Six STM images at increasing bias.", [], 6),
    ("Figure 3. (a)–(c) Spectra; (d,e) maps.", [], 5),
    ("Fig. 4 | a, STM image. b, Line profile. c, FFT.", [], 3),
    ("Figure 5. Overview of the setup.", [], 1),
    ("Figure 6. Panels as labelled.", ["(a)", "(b)", "c", "(d)", "Bias (V)"], 4),
    ("Figure 7. Single image (scale bar 5 nm).", ["A", "x"], 1),
    ("Figure 8. Running speed against body mass.", ["h", "G"], 1),  # variables of the plot, no run from a
    ("Figure 9. (a) and (c) only.", [], 1),
])
def test_estimate_panels(caption, body, panels):
    from benchmint.pdf.captions import estimate_panels

    assert estimate_panels(caption, body) == panels
