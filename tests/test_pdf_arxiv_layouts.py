"""Figure bodies on pages laid out as arXiv papers are: REVTeX and conference pages, title pages, scanned pages.

Each test draws a page whose figure box is known by construction (tests/page_layouts.py) and checks the body
the harvest's page step finds for it: never into the running head, over the gutter, into the title block or
another caption's figure.
"""

import numpy as np
import pymupdf
import pytest
from page_layouts import LEFT, RIGHT, caption, centred, ink, near, new_page, plot, prose, scanned

from benchmint.pdf.captions import page_captions
from benchmint.pdf.figures import find_figures


def figures(page):
    return {f.label: f for f in find_figures(page, page_captions(page))}


@pytest.mark.parametrize("rule", [True, False])
def test_a_plot_under_a_short_running_head_stays_in_its_column(rule):
    """A head of a few words (no running text) with a rule under it: the plot below neither takes the rule and
    grows over the gutter to the page's width, nor reaches up into the head."""
    doc = pymupdf.open()
    page = new_page(doc)
    page.insert_text((54, 40), "A. Author et al.", fontsize=8)
    page.insert_text((550, 40), "3", fontsize=8)
    if rule:
        page.draw_line((54, 45), (558, 45), color=(0, 0, 0), width=0.5)
    want = plot(page, pymupdf.Rect(60, 58, 292, 218))
    caption(page, pymupdf.Rect(LEFT.x0, 226, LEFT.x1, 262), "FIG. 1: Magnetization of the sample against "
            "temperature for three fields along the c axis; lines are fits.")
    prose(page, pymupdf.Rect(LEFT.x0, 270, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 58, RIGHT.x1, 740))
    body = figures(page)["1"].body
    assert near(body, want, tol=1), (body, want)


def test_a_plot_on_a_title_page_does_not_grow_into_the_title_block():
    doc = pymupdf.open()
    page = new_page(doc)
    centred(page, 80, "Spin waves in a frustrated kagome magnet", 14)
    centred(page, 104, "A. Author, B. Author, and C. Author", 10)
    centred(page, 118, "Department of Physics, University of Somewhere, Sometown 12345, Country", 8)
    centred(page, 130, "(Dated: January 5, 2026)", 8)
    prose(page, pymupdf.Rect(LEFT.x0, 150, LEFT.x1, 740))
    want = plot(page, pymupdf.Rect(321, 146, 553, 306))
    caption(page, pymupdf.Rect(RIGHT.x0, 314, RIGHT.x1, 350), "FIG. 1: Dispersion of the lowest mode along the "
            "high symmetry directions; lines are linear spin-wave theory.")
    prose(page, pymupdf.Rect(RIGHT.x0, 358, RIGHT.x1, 740))
    body = figures(page)["1"].body
    assert near(body, want, tol=1), (body, want)


def test_stacked_lettered_plots_at_the_top_of_a_page_are_two_panels():
    """(a) over (b) in one column at the top of a page without a running head, beside another figure: the top
    tick labels are no head (the plots' frames reach across the white below them), so the body holds both
    plots, told apart by their axes (frames of four separate spines are no rectangles)."""
    doc = pymupdf.open()
    page = new_page(doc)
    a = plot(page, pymupdf.Rect(60, 56, 292, 196), "(a)")
    b = plot(page, pymupdf.Rect(60, 202, 292, 342), "(b)", seed=2)
    caption(page, pymupdf.Rect(LEFT.x0, 350, LEFT.x1, 386), "FIG. 2: Susceptibility of the two samples against "
            "temperature, measured in a field of 0.1 T.")
    prose(page, pymupdf.Rect(LEFT.x0, 394, LEFT.x1, 740))
    c = plot(page, pymupdf.Rect(321, 56, 553, 196), "(a)", seed=4)
    caption(page, pymupdf.Rect(RIGHT.x0, 204, RIGHT.x1, 240), "FIG. 3: Specific heat of the first sample.")
    prose(page, pymupdf.Rect(RIGHT.x0, 248, RIGHT.x1, 740))
    found = figures(page)
    assert near(found["2"].body, (min(a[0], b[0]), a[1], max(a[2], b[2]), b[3]), tol=1), (found["2"].body, a, b)
    assert found["2"].panels == 2
    assert near(found["3"].body, c, tol=1) and found["3"].panels == 1


def _journal_page(doc):
    """A two-column page with a plot in the left column between paragraphs, and its ink box."""
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 300))
    want = plot(page, pymupdf.Rect(66, 326, 286, 462))
    caption(page, pymupdf.Rect(LEFT.x0, 472, LEFT.x1, 508), "FIG. 4. Resistivity of the film against "
            "temperature; the arrow marks the transition.")
    prose(page, pymupdf.Rect(LEFT.x0, 516, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 740))
    return page, want


def test_on_a_scanned_page_the_body_is_the_ink_above_the_caption_up_to_the_text():
    doc = pymupdf.open()
    original, want = _journal_page(doc)
    page = scanned(original, doc)
    assert not page.get_drawings() and len(page.get_image_info()) == 1
    [fig] = [f for f in find_figures(page, page_captions(page)) if f.label == "4"]
    assert near(fig.body, want, tol=3), (fig.body, want)


def test_arxivs_stamp_along_the_margin_of_a_first_page_is_no_part_of_a_figure():
    """arXiv sets the identifier upright along the left edge of a paper's first page, beside the left column:
    a plot at the foot of that column does not take it (and up with it the height the stamp spans)."""
    doc = pymupdf.open()
    page = new_page(doc)
    centred(page, 80, "Spin waves in a frustrated kagome magnet", 14)
    centred(page, 104, "A. Author, B. Author, and C. Author", 10)
    prose(page, pymupdf.Rect(LEFT.x0, 140, LEFT.x1, 476))
    want = plot(page, pymupdf.Rect(60, 500, 292, 654))
    caption(page, pymupdf.Rect(LEFT.x0, 662, LEFT.x1, 700), "FIG. 1: Dispersion of the lowest mode along the "
            "high symmetry directions.")
    prose(page, pymupdf.Rect(RIGHT.x0, 140, RIGHT.x1, 740))
    page.insert_text((32, 560), "arXiv:2601.01234v1  [cond-mat.str-el]  5 Jan 2026", fontsize=20, rotate=90,
                     color=(0.5, 0.5, 0.5))
    body = figures(page)["1"].body
    assert near(body, want, tol=1), (body, want)


def test_plots_stacked_on_a_shared_axis_are_one_panel_each():
    """(a) on (b) with no space between them (the x axis of (a) is the top of (b)), ticks in on all four sides,
    their letters outlined: the right spines meet end to end, two axes, not one."""
    doc = pymupdf.open()
    page = new_page(doc)
    a = plot(page, pymupdf.Rect(60, 80, 292, 190), "outlined", x_labels=False)
    b = plot(page, pymupdf.Rect(60, 186, 292, 318), "outlined", seed=2)
    caption(page, pymupdf.Rect(LEFT.x0, 326, LEFT.x1, 362), "FIG. 3: Magnetization and susceptibility of the "
            "film against temperature.")
    prose(page, pymupdf.Rect(LEFT.x0, 370, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 80, RIGHT.x1, 740))
    fig = figures(page)["3"]
    assert near(fig.body, (min(a[0], b[0]), a[1], max(a[2], b[2]), b[3]), tol=1), (fig.body, a, b)
    assert fig.panels == 2


@pytest.mark.parametrize("gap", [1.0, 2.0, 4.0, 10.0])
def test_a_caption_set_close_under_its_plot_does_not_make_the_plots_labels_running_text(gap):
    """REVTeX sets "FIG. 1:" a line's space or less under the figure: the caption's lines are no paragraph with
    the axis title and tick labels above them (a paragraph with the caption's long lines is running text, and
    running text between a plot and its caption left the figure without a body)."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 280))
    want = plot(page, pymupdf.Rect(60, 300, 292, 460))
    top = want[3] + gap
    caption(page, pymupdf.Rect(LEFT.x0, top, LEFT.x1, top + 36), "FIG. 1: Magnetization of the sample against "
            "temperature for three fields along the c axis; lines are fits of the model.")
    prose(page, pymupdf.Rect(LEFT.x0, top + 44, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 740))
    body = figures(page)["1"].body
    assert near(body, want, tol=1), (body, want)


def _raster(width: int, height: int, seed: int) -> pymupdf.Pixmap:
    rng = np.random.default_rng(seed)
    return pymupdf.Pixmap(pymupdf.csRGB, width, height, (rng.random((height, width, 3)) * 255).astype(np.uint8)
                          .tobytes(), False)


@pytest.mark.parametrize("where", ["into the caption's first line", "past the caption's foot"])
def test_an_image_reaching_into_its_caption_is_cut_at_the_caption(where):
    """A conference page with several images: the image above "Figure 2:" was placed with its white margin
    under the caption's lines (its rectangle ends inside the caption, or a little past it): it is the body, cut
    at the caption's top."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    left, right = (57, 290), (305, 538)
    prose(page, pymupdf.Rect(left[0], 60, left[1], 200))
    page.insert_image(pymupdf.Rect(70, 210, 277, 350), pixmap=_raster(300, 200, 1))
    caption(page, pymupdf.Rect(left[0], 356, left[1], 380), "Figure 1: Layout of the injector.")
    prose(page, pymupdf.Rect(left[0], 388, left[1], 780))
    foot = 590 if where.startswith("into") else 605
    page.insert_image(pymupdf.Rect(318, 420, 525, foot), pixmap=_raster(300, 240, 2), keep_proportion=False)
    caption(page, pymupdf.Rect(right[0], 580, right[1], 616), "Figure 2: Measured beam profile at the first "
            "screen, with the fitted Gaussian.")
    prose(page, pymupdf.Rect(right[0], 60, right[1], 410))
    prose(page, pymupdf.Rect(right[0], 624, right[1], 780))
    found = figures(page)
    top = min(w[1] for w in page.get_text("words") if w[4] == "Figure" and w[0] > 300)  # the caption's top
    assert near(found["2"].body, (318, 420, 525, top), tol=1), found["2"].body
    assert near(found["1"].body, (70, 210, 277, 350), tol=1)


def test_displayed_equations_above_a_plot_are_running_text():
    """A report's page: numbered displayed equations, then the plot, then its caption. The equations' pieces are
    short lines like a plot's labels; their row, with its number at the text's right edge, stops the growth."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(90, 80, 520, 250), fontsize=10.5)
    for y, number in ((282, "(1.8)"), (306, "(1.9)")):
        page.insert_text((220, y), "n(r) =", fontsize=10.5)
        page.insert_text((262, y - 6), "N", fontsize=8)
        page.draw_line((258, y - 3.5), (270, y - 3.5), color=(0, 0, 0), width=0.4)
        page.insert_text((262, y + 4), "V", fontsize=8)
        page.insert_text((276, y), "exp(-r/a)", fontsize=10.5)
        page.insert_text((520 - pymupdf.get_text_length(number, fontsize=10.5), y), number, fontsize=10.5)
    want = plot(page, pymupdf.Rect(180, 330, 430, 520))
    caption(page, pymupdf.Rect(90, 530, 520, 560), "Figure 1.2: The electron density along the bond, computed "
            "and fitted.")
    prose(page, pymupdf.Rect(90, 570, 520, 740), fontsize=10.5)
    body = figures(page)["1.2"].body
    assert near(body, want, tol=1), (body, want)


def test_a_shade_behind_a_caption_is_no_body_and_the_figure_below_is_found():
    """A caption in a grey box a few points larger than its lines, its figure below it: the shade's edge above
    the caption is no figure."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 300))
    page.draw_rect(pymupdf.Rect(LEFT.x0 - 3, 317, LEFT.x1 + 3, 357), color=None, fill=(0.9, 0.9, 0.9))
    caption(page, pymupdf.Rect(LEFT.x0, 320, LEFT.x1, 354), "FIG. 5: Heat capacity of the crystal against "
            "temperature, below.")
    want = plot(page, pymupdf.Rect(60, 366, 292, 520))
    prose(page, pymupdf.Rect(LEFT.x0, 540, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 740))
    body = figures(page)["5"].body
    assert near(body, want, tol=1), (body, want)


def _table(page, top: float, x0: float, x1: float) -> float:
    """A ruled table from ``top``: a rule over the head row, one under it, two body rows and a rule at the foot
    (as booktabs and REVTeX draw them); returns the foot rule's y."""
    rows = (("Item", "Units", "Cost", "Total"), ("Gnus", "5", "12.50", "62.50"), ("Sticks", "4", "6.00", "24.00"))
    step = (x1 - x0) / 4
    page.draw_line((x0, top), (x1, top), color=(0, 0, 0), width=0.5)
    y = top + 12
    for i, row in enumerate(rows):
        for k, cell in enumerate(row):
            page.insert_text((x0 + 6 + k * step, y), cell, fontsize=9)
        if i == 0:
            page.draw_line((x0, y + 5), (x1, y + 5), color=(0, 0, 0), width=0.4)
            y += 6
        y += 12
    page.draw_line((x0, y - 6), (x1, y - 6), color=(0, 0, 0), width=0.5)
    return y - 6


@pytest.mark.parametrize("kind", ["plot", "image"])
def test_a_figure_under_a_table_takes_neither_the_table_nor_its_caption(kind):
    """A table caption ("Table 1.") set over its ruled table, then a figure and its caption: the table's rows
    and rules are no part of the figure, which white space alone would not tell."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(72, 60, 540, 200))
    page.insert_text((250, 222), "Table 1.  A sample table", fontsize=9)
    foot = _table(page, 234, 170, 440)
    if kind == "plot":
        want = plot(page, pymupdf.Rect(190, foot + 14, 422, foot + 174))
    else:
        rect = pymupdf.Rect(200, foot + 12, 410, foot + 200)
        page.insert_image(rect, pixmap=_raster(210, 188, 3), keep_proportion=False)
        want = tuple(rect)
    caption(page, pymupdf.Rect(240, want[3] + 10, 380, want[3] + 24), "Figure 1. A sample figure")
    prose(page, pymupdf.Rect(72, want[3] + 36, 540, 730))
    body = figures(page)["1"].body
    assert near(body, want, tol=1), (body, want, foot)


def test_a_wrapped_frame_beside_text_and_a_footnote_is_the_whole_frame():
    """A wrapfigure's placeholder frame (four separate lines, as LaTeX's \\framebox draws it) at the foot of a
    one-column page, the text wrapped to its left and a footnote whose line runs under the frame's side: the
    body is the frame, held together by its upright sides (lines of no width), not its bottom edge alone."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(72, 60, 540, 560))
    prose(page, pymupdf.Rect(72, 580, 290, 660))
    frame = pymupdf.Rect(310, 580, 530, 700)
    for a, b in ((frame.tl, frame.tr), (frame.tr, frame.br), (frame.br, frame.bl), (frame.bl, frame.tl)):
        page.draw_line(a, b, color=(0, 0, 0), width=0.4)
    page.draw_line((72, 675), (190, 675), color=(0, 0, 0), width=0.4)  # the footnote rule, 2 pt over its line
    page.insert_text((80, 684), "*) graphicx.sty is included in the standard LaTeX distributions and in every "
                     "TeX system", fontsize=8)
    caption(page, pymupdf.Rect(306, 708, 534, 730), "Fig. 1. A figure created using the wrapfigure environment.")
    body = figures(page)["1"].body
    assert near(body, tuple(frame), tol=1), (body, tuple(frame))


@pytest.mark.parametrize("gap", [3.0, 6.0])
def test_a_running_head_without_a_rule_close_over_a_plot_is_no_part_of_it(gap):
    """A head of a few words and a folio on one row, no rule under it, less than ``HEAD_GAP`` points over a
    column plot: the white space does not set the head apart, the row across both columns does."""
    doc = pymupdf.open()
    page = new_page(doc)
    page.insert_text((54, 40), "A. Author et al.", fontsize=8)
    page.insert_text((RIGHT.x1 - pymupdf.get_text_length("3", fontsize=8), 40), "3", fontsize=8)  # flush right
    head = page.get_text("words")
    head_foot = max(w[3] for w in head)
    want = plot(page, pymupdf.Rect(60, head_foot + gap + 1, 292, head_foot + gap + 161))  # ink from 1 pt up
    assert abs(want[1] - head_foot - gap) <= 0.5, (want, head_foot)
    caption(page, pymupdf.Rect(LEFT.x0, want[3] + 8, LEFT.x1, want[3] + 44), "FIG. 1: Magnetization of the "
            "sample against temperature for three fields along the c axis; lines are fits.")
    prose(page, pymupdf.Rect(LEFT.x0, want[3] + 52, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 58, RIGHT.x1, 740))
    body = figures(page)["1"].body
    assert near(body, want, tol=1), (body, want)


def _frame(page, rect: pymupdf.Rect) -> None:
    """A placeholder frame as LaTeX's \\framebox draws it: four separate lines (4 paths, under the sieve's 12)."""
    for a, b in ((rect.tl, rect.tr), (rect.tr, rect.br), (rect.br, rect.bl), (rect.bl, rect.tl)):
        page.draw_line(a, b, color=(0, 0, 0), width=0.4)


def _few_path_pages(path) -> pymupdf.Rect:
    """Four pages under the sieve's path threshold, no image on any: (1) a placeholder frame over its caption,
    (2) a caption with nothing drawn near it but a footnote rule at the foot, (3) a frame and text that cannot
    read "Fig", (4) a caption anchor and no path at all. Returns page 1's frame."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 300))
    frame = pymupdf.Rect(80, 320, 270, 440)
    _frame(page, frame)
    caption(page, pymupdf.Rect(LEFT.x0, 450, LEFT.x1, 476), "FIG. 1. A figure caption, set under its frame.")
    prose(page, pymupdf.Rect(LEFT.x0, 484, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 740))
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 300))
    caption(page, pymupdf.Rect(LEFT.x0, 310, LEFT.x1, 336), "FIG. 2. A caption whose figure is on the next page.")
    prose(page, pymupdf.Rect(LEFT.x0, 344, LEFT.x1, 700))
    page.draw_line((LEFT.x0, 712), (LEFT.x0 + 80, 712), color=(0, 0, 0), width=0.4)
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 740))
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 300))
    _frame(page, pymupdf.Rect(80, 320, 270, 440))
    page = new_page(doc)
    caption(page, pymupdf.Rect(LEFT.x0, 310, LEFT.x1, 336), "FIG. 3. A caption on a page without any drawing.")
    prose(page, pymupdf.Rect(LEFT.x0, 344, LEFT.x1, 700))
    doc.save(path)
    return frame


def _read(path):
    import json

    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_placeholder_frame_under_the_path_threshold_gets_a_record_from_the_second_look(tmp_path):
    """The sieve drops a page of 4 paths and no image; the second look reads it (it has a path, no image and may
    read "Fig"), and records its caption with the frame as body, marked as its own. The page's verdict stays
    the sieve's; with ``sieve="paper"`` there is no such record and no page is read past the sieve."""
    from benchmint.pdf.harvest import HarvestConfig, harvest

    frame = _few_path_pages(tmp_path / "few.pdf")
    res = harvest([tmp_path / "few.pdf"], tmp_path / "out", HarvestConfig(), workers=1)
    pages, figs = _read(tmp_path / "out" / "pages.jsonl"), _read(tmp_path / "out" / "figures.jsonl")
    assert [(p["paths"], p["candidate"], p["reason"]) for p in pages] == [
        (4, False, "no graphic (0 images, 4 paths < 12)"), (1, False, "no graphic (0 images, 1 paths < 12)"),
        (4, False, "no graphic (0 images, 4 paths < 12)"), (0, False, "no graphic (0 images, 0 paths < 12)")]
    # pages 1 and 2 are read (page 3 cannot read "Fig", page 4 has no path); a record for page 1 only
    assert [p.get("second_look") for p in pages] == [1, None, None, None]
    assert [p["captions"] for p in pages] == [None] * 4  # the sieve's triage read no text of them
    assert [(f["page"], f["label"], f["sieve"]) for f in figs] == [(1, "1", "second_look")]
    assert near(figs[0]["body_box"], tuple(frame), tol=1), figs[0]["body_box"]
    assert (tmp_path / "out" / figs[0]["thumb"]).is_file()
    assert (res.candidates, res.second_look, res.figures) == (0, 1, 1)

    paper = harvest([tmp_path / "few.pdf"], tmp_path / "out", HarvestConfig(sieve="paper"), workers=1)
    assert _read(tmp_path / "out" / "figures.jsonl") == [] and (paper.second_look, paper.figures) == (0, 0)
    assert _read(tmp_path / "out" / "pages.jsonl") == [{k: v for k, v in p.items() if k != "second_look"}
                                                        for p in pages]
    assert not list((tmp_path / "out" / "thumbs").iterdir())  # the second look's thumbnail is not this run's


def test_the_sieve_option(tmp_path, capsys):
    from benchmint.cli import main
    from benchmint.pdf.harvest import HarvestConfig

    with pytest.raises(ValueError, match="sieve must be one of second_look, paper"):
        HarvestConfig(sieve="loose")
    _few_path_pages(tmp_path / "few.pdf")
    assert main(["harvest", str(tmp_path / "few.pdf"), "--out", str(tmp_path / "bad"), "--sieve", "loose"]) == 2
    assert "sieve must be one of" in capsys.readouterr().err
    assert main(["harvest", str(tmp_path / "few.pdf"), "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    assert "0 candidate pages (+1 by the second look), 1 figures" in capsys.readouterr().out


def test_a_sideways_figure_with_its_caption_rotated_beside_it_is_found_whole():
    """A thesis's figure turned sideways (a landscape plot placed rotated, as \\begin{sidewaysfigure} sets it)
    with its caption rotated to its right, reading upwards, under a running head with a rule: the body is the
    whole plot beside the caption (not the part above the caption's top), and not the head."""
    doc = pymupdf.open()
    page = new_page(doc)
    page.insert_text((72, 40), "2  The LHCb experiment", fontsize=10)
    page.insert_text((536, 40), "5", fontsize=10)
    page.draw_line((72, 45), (540, 45), color=(0, 0, 0), width=0.5)
    src = pymupdf.open()
    sheet = src.new_page(width=640, height=380)
    plot(sheet, pymupdf.Rect(10, 10, 630, 370))
    rect = pymupdf.Rect(90, 60, 470, 700)
    page.show_pdf_page(rect, src, 0, rotate=90)
    page.insert_textbox(pymupdf.Rect(480, 150, 500, 620), "Figure 2.1: Cross-section of the detector in the "
                        "non-bending plane.", fontsize=10, rotate=90)
    want = ink(page, rect)
    assert want[1] > 50 and want[3] > 600  # the plot drawn, rotated, under the head's rule
    body = figures(page)["2.1"].body
    assert near(body, want, tol=1), (body, want)


def test_a_line_of_running_text_broken_by_inline_math_over_a_figure_is_running_text():
    """A sentence with inline math ("Here g_{1l}^{1l} = w_{1S} b_{1l} ... is the nearest-neighbor inter-") set
    right over a figure: MuPDF reads its row as pieces, each shorter than a line of text and of few words (the
    sub- and superscripts, stacked, overlap the pieces beside them), so neither its row nor the short line after
    it counted as running text, and the figure took them. The row is judged whole."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 170))
    y, x = 196.0, RIGHT.x0
    for text, dy, size in (("Here g", 0, 10), ("1l", -4, 7), ("1l", 3, 7), ("= w", 0, 10), ("1S", 3, 7),
                           ("b", 0, 10), ("1l", 3, 7), ("A", 0, 10), ("1l", -4, 7), ("1l", 3, 7),
                           ("(dr1) is the nearest-neighbor inter-", 0, 10)):
        stacked = text == "1l" and dy > 0 and page.get_text("words")[-1][4] == "1l"  # a subscript under a superscript
        at = x - pymupdf.get_text_length("1l", fontsize=7) - 0.5 if stacked else x
        page.insert_text((at, y + dy), text, fontsize=size)
        x = max(x, at + pymupdf.get_text_length(text, fontsize=size) + (2 if size == 10 else 0.5))
    page.insert_text((RIGHT.x0, y + 12), "sphere coupling parameter.", fontsize=10)
    box = pymupdf.Rect(RIGHT.x0 + 2, 222, RIGHT.x1 - 2, 296)
    page.draw_rect(box, color=None, fill=(0.8, 0.8, 0.8))
    caption(page, pymupdf.Rect(RIGHT.x0, 310, RIGHT.x1, 346), "Figure 3: Dispersion of the evanescent polariton; "
            "the dashed line is the chain of spheres touching each other.")
    prose(page, pymupdf.Rect(RIGHT.x0, 356, RIGHT.x1, 740))
    pieces = {(w[5], w[6]) for w in page.get_text("words") if 185 < w[1] < 200}
    assert len(pieces) >= 5  # MuPDF reads the row as pieces
    body = figures(page)["3"].body
    assert near(body, tuple(box), tol=1), (body, tuple(box))


def test_figures_with_their_captions_set_beside_them_are_found_each_whole():
    """Captions set beside their figures (the sidecap package, a book class's side captions): the caption's
    first line stands level with the figure, its column to the figure's right, and the text above and below runs
    across both. Two such figures stacked: neither body was found (nothing above or below a caption is a
    figure), and each is its own plot, not the other's labels across the white space between them."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(72, 60, 540, 150))
    first = plot(page, pymupdf.Rect(120, 170, 330, 330))
    caption(page, pymupdf.Rect(350, 250, 500, 330), "Figure 1: Partition of the variation by two tables of "
            "explanatory variables; the fractions are read from three regressions.")
    second = plot(page, pymupdf.Rect(120, 380, 330, 540))
    caption(page, pymupdf.Rect(350, 440, 500, 520), "Figure 2: The same partition by three tables; seven "
            "regressions give the fractions.")
    prose(page, pymupdf.Rect(72, 580, 540, 720))
    found = figures(page)
    assert near(found["1"].body, first, tol=1), (found["1"].body, first)
    assert near(found["2"].body, second, tol=1), (found["2"].body, second)
