"""Caption-body pairing on generated one- and two-column pages."""

from importlib.resources import files

import pymupdf

from benchmint.pdf.captions import page_captions
from benchmint.pdf.pairing import page_figures


def near(box, want, tol=3.0):
    return box is not None and all(abs(a - b) <= tol for a, b in zip(box, want))


def plot(page, rect):
    page.draw_rect(rect, color=(0, 0, 0), width=0.5)
    page.draw_line((rect.x0 + 5, rect.y1 - 5), (rect.x1 - 5, rect.y0 + 5), color=(0, 0, 1))


def test_bundled_article():
    doc = pymupdf.open(str(files("benchmint") / "samples" / "sample_paper.pdf"))
    [fig1] = page_figures(doc[0], page_captions(doc[0]))
    assert near(fig1.body, (324, 116, 552, 344), tol=4)  # the four panel frames of Figure 1
    [fig2] = page_figures(doc[1], page_captions(doc[1]))
    assert near(fig2.body, (150, 100, 462, 412))  # the micrograph


def test_two_columns_two_figures_side_by_side_and_stacked():
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    plot(page, pymupdf.Rect(60, 80, 290, 240))
    page.insert_textbox(pymupdf.Rect(60, 246, 290, 280), "Figure 1. Left figure.", fontsize=8)
    plot(page, pymupdf.Rect(320, 80, 550, 240))
    page.insert_textbox(pymupdf.Rect(320, 246, 550, 280), "Figure 2. Right figure.", fontsize=8)
    plot(page, pymupdf.Rect(60, 300, 290, 420))
    page.insert_textbox(pymupdf.Rect(60, 426, 290, 460), "Figure 3. Below figure 1.", fontsize=8)
    figs = {f.caption.label: f.body for f in page_figures(page, page_captions(page))}
    assert near(figs["1"], (60, 80, 290, 240), tol=2)
    assert near(figs["2"], (320, 80, 550, 240), tol=2)
    assert near(figs["3"], (60, 300, 290, 420), tol=2)  # not merged with Figure 1 above its caption


def test_full_width_figure_and_caption_above_body():
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(54, 60, 558, 80), "Figure 4. A full-width figure whose caption sits above "
                        "the plot, spanning both columns of the page layout.", fontsize=8)
    plot(page, pymupdf.Rect(54, 90, 558, 300))
    [fig] = page_figures(page, page_captions(page))
    assert near(fig.body, (54, 90, 558, 300), tol=2)


def test_caption_without_graphics():
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(54, 300, 290, 330), "Figure 5. Its body is on another page.", fontsize=8)
    [fig] = page_figures(page, page_captions(page))
    assert fig.body is None


PROSE = ("The estimates in the table are close to the values of the simulation, and the intervals cover them in "
         "nearly every run we made; the figure below shows the residuals of the model for each group. ") * 2


def test_rows_apart_running_head_and_code_above_are_not_the_body():
    """A figure of three rows 40 pt apart: white space is crossed, a running head and a code listing are not."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((300, 60), "Running head of the article", fontsize=9)
    page.insert_textbox(pymupdf.Rect(72, 90, 540, 150), PROSE, fontsize=10)
    code = "R> fit <- lm(y ~ x + z, data = d, weights = w)\nR> summary(fit, correlation = TRUE)\n"
    page.insert_textbox(pymupdf.Rect(72, 160, 400, 200), code, fontsize=9, fontname="cour")
    for top in (230, 300, 370):  # three rows of bars, 40 pt of white space between them
        page.draw_rect(pymupdf.Rect(120, top, 480, top + 30), color=(0, 0, 0.5), fill=(0.8, 0.8, 0.8))
    page.insert_text((490, 390), "Blond", fontsize=8)  # a label of the last row, out to the right
    page.insert_textbox(pymupdf.Rect(150, 420, 460, 440), "Figure 7: Three rows of bars.", fontsize=10)
    [fig] = page_figures(page, page_captions(page))
    assert near(fig.body[:2], (120, 230)) and near(fig.body[3:], (400,)) and fig.body[2] > 505


def test_white_background_is_paper_not_ink():
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_rect(pymupdf.Rect(60, 60, 550, 400), color=None, fill=(1, 1, 1))  # a plot device's background
    plot(page, pymupdf.Rect(120, 120, 480, 340))
    page.insert_textbox(pymupdf.Rect(150, 410, 460, 430), "Figure 2: A plot on a white background.", fontsize=10)
    [fig] = page_figures(page, page_captions(page))
    assert near(fig.body, (120, 120, 480, 340), tol=2)


def test_centred_caption_of_a_one_column_page_spans_the_page():
    """A narrow caption in the middle of a one-column page: the body is the whole figure, not one half of it."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    plot(page, pymupdf.Rect(100, 100, 300, 300))
    plot(page, pymupdf.Rect(320, 100, 520, 300))
    page.insert_textbox(pymupdf.Rect(230, 310, 400, 330), "Figure 3: Two plots.", fontsize=10)
    [fig] = page_figures(page, page_captions(page))
    assert near(fig.body, (100, 100, 520, 300), tol=2)


def test_a_running_head_over_a_figure_at_the_top_of_the_page_is_left_out():
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((250, 58), "Journal of Examples 12", fontsize=9)  # nothing but white space below it
    plot(page, pymupdf.Rect(100, 90, 500, 300))
    page.insert_textbox(pymupdf.Rect(150, 310, 460, 330), "Figure 1: A plot at the top of the page.", fontsize=10)
    [fig] = page_figures(page, page_captions(page))
    assert near(fig.body, (100, 90, 500, 300), tol=2)
