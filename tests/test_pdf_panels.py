"""Panel counts from a figure's drawing, on generated pages whose panels are known by construction."""

import numpy as np
import pymupdf
import pytest
from page_layouts import LEFT, RIGHT, caption, new_page, plot, prose, scanned

from benchmint.pdf.captions import page_captions
from benchmint.pdf.figures import find_figures
from benchmint.pdf.panels import axes, count_panels, frame_panels, frames

BODY = (50.0, 50.0, 550.0, 450.0)


def _page():
    doc = pymupdf.open()
    return doc, doc.new_page(width=612, height=792)


def _axis(page, x0, x1, y, ticks=4):
    page.draw_line((x0, y), (x1, y))
    step = (x1 - x0) / (ticks - 1)
    for k in range(ticks):
        page.draw_line((x0 + k * step, y), (x0 + k * step, y + 4))  # ticks hang below the axis


def _yaxis(page, x, y0, y1, ticks=4):
    page.draw_line((x, y0), (x, y1))
    step = (y1 - y0) / (ticks - 1)
    for k in range(ticks):
        page.draw_line((x, y0 + k * step), (x - 4, y0 + k * step))  # ticks point left


def _count(page, caption="", tokens=()):
    return count_panels(page.get_drawings(), page.get_image_info(), BODY, caption, tokens)


def test_grid_of_framed_plots_inside_a_border():
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(*BODY))  # a border around the whole grid: it holds the panels, it is none
    for row in range(2):
        for col in range(3):
            x, y = 60 + col * 160, 60 + row * 190
            page.draw_rect(pymupdf.Rect(x, y, x + 150, y + 180))
            page.draw_rect(pymupdf.Rect(x + 100, y + 10, x + 140, y + 40))  # a legend box inside the panel
            page.draw_line((x + 10, y + 170), (x + 140, y + 20), color=(0, 0, 1))
    assert _count(page) == 6
    assert frame_panels(frames(page.get_drawings(), [], BODY)) == 6


def test_filled_tiles_and_small_boxes_are_no_panels():
    doc, page = _page()
    for k in range(5):  # mosaic tiles: filled and stroked
        page.draw_rect(pymupdf.Rect(60 + 90 * k, 60, 140 + 90 * k, 300), color=(0, 0, 0.5), fill=(0.8, 0.8, 0.9))
    page.draw_rect(pymupdf.Rect(60, 320, 75, 335))  # a key box below the size of a panel
    assert _count(page) == 1


def test_plots_without_boxes_are_told_by_their_axes():
    doc, page = _page()
    for x in (70, 320):  # two plots side by side, axes only (R's bty = "n")
        _axis(page, x, x + 200, 400)
        _yaxis(page, x - 5, 100, 390)
    assert axes(page.get_drawings(), BODY) == 2 and _count(page) == 2


def test_an_axis_drawn_over_an_l_shaped_frame_is_one_axis():
    doc, page = _page()
    page.draw_polyline([(60, 100), (60, 400), (300, 400)])  # the L of the plot region
    _axis(page, 80, 280, 400)
    _yaxis(page, 60, 120, 380)
    page.draw_line((80, 100), (280, 100))  # a rule without ticks: no axis
    assert axes(page.get_drawings(), BODY) == 1 and _count(page) == 1


def test_uneven_ticks_are_no_axis():
    doc, page = _page()
    for x0 in (60, 320):
        page.draw_line((x0, 400), (x0 + 200, 400))
        for x in (x0, x0 + 10, x0 + 90, x0 + 200):  # bars' edges, not a scale
            page.draw_line((x, 400), (x, 404))
    assert axes(page.get_drawings(), BODY) == 0


def test_images_are_panels():
    doc, page = _page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
    pix.clear_with(128)
    for k in range(4):
        page.insert_image(pymupdf.Rect(60 + 120 * k, 100, 170 + 120 * k, 210), pixmap=pix)
    assert _count(page) == 4


@pytest.mark.parametrize("caption, tokens, want", [
    ("Figure 1. (a-d) Four views of one plot.", (), 4),
    ("Figure 2. A single plot.", ("(a)", "(b)"), 2),
    ("Figure 3. A single plot.", ("h",), 1),
])
def test_one_drawn_panel_falls_back_to_letters(caption, tokens, want):
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(60, 60, 400, 400))
    assert _count(page, caption, tokens) == want


def _inward_plot(page, r, tick_labels=True):
    """A plot as gnuplot or Origin draw it: four separate spines, ticks pointing in on the bottom and left only."""
    for a, b in ((r.tl, r.tr), (r.tr, r.br), (r.br, r.bl), (r.bl, r.tl)):
        page.draw_line(a, b, width=0.6)
    for i in range(6):
        x = r.x0 + i * r.width / 5
        page.draw_line((x, r.y1), (x, r.y1 - 4), width=0.5)
        if tick_labels:
            page.insert_text((x - 4, r.y1 + 9), str(50 * i), fontsize=7)
    for i in range(5):
        y = r.y1 - i * r.height / 4
        page.draw_line((r.x0, y), (r.x0 + 4, y), width=0.5)
        page.insert_text((r.x0 - 16, y + 2.5), f"{i / 2:.1f}", fontsize=7)
    page.draw_polyline([(r.x0 + 3 + k * (r.width - 6) / 39, r.y1 - 5 - (r.height - 10) * (k % 7) / 7)
                        for k in range(40)], color=(0, 0, 1), width=0.8)


def test_plots_stacked_on_a_shared_axis_with_ticks_pointing_in_are_two():
    """Two such plots on one x axis, the upper one's foot the lower one's top, no letters: no frame, no white
    gutter, and no tick on the outer side of any line; the ticks pointing in tell them apart."""
    doc, page = _page()
    _inward_plot(page, pymupdf.Rect(100, 100, 300, 200), tick_labels=False)
    _inward_plot(page, pymupdf.Rect(100, 200, 300, 300))
    assert axes(page.get_drawings(), BODY) == 2 and _count(page) == 2
    doc, page = _page()
    _inward_plot(page, pymupdf.Rect(100, 100, 300, 200))
    assert axes(page.get_drawings(), BODY) == 1 and _count(page) == 1


def test_a_box_with_ticks_pointing_in_on_every_side_is_one_plot():
    """Ticks pointing in on all four spines read as both kinds of axis (the top and right spines' ticks point
    out of the lines below and left of them): still one plot each, stacked or alone."""
    doc, page = _page()
    plot(page, pymupdf.Rect(100, 100, 300, 220))
    assert axes(page.get_drawings(), BODY) == 1
    plot(page, pymupdf.Rect(100, 226, 300, 346), seed=2)
    assert axes(page.get_drawings(), BODY) == 2


def _diagram(page, x, y, w=150, h=120):
    """A state diagram without a frame: five small labelled boxes and the arrows between them."""
    nodes = [(x + w / 2 - 15, y), (x, y + h / 2 - 7), (x + w / 2 - 15, y + h / 2 - 7), (x + w - 30, y + h / 2 - 7),
             (x + w / 2 - 15, y + h - 14)]
    for nx, ny in nodes:
        page.draw_rect(pymupdf.Rect(nx, ny, nx + 30, ny + 14))
    for nx, ny in nodes[1:]:
        page.draw_line((x + w / 2, y + 14), (nx + 15, ny))


def test_diagrams_apart_are_told_by_the_gutters_between_them():
    doc, page = _page()
    for row in range(2):
        for col in range(2):
            _diagram(page, 70 + col * 240, 70 + row * 190)
    assert frames(page.get_drawings(), [], BODY) == [] and axes(page.get_drawings(), BODY) == 0
    assert _count(page) == 4


def test_a_plot_beside_a_diagram_is_two_panels():
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(60, 80, 300, 400))  # the plot's frame
    for k in range(4):
        page.draw_polyline([(70, 390 - 10 * k), (180, 200 + 20 * k), (290, 150 + 30 * k)], color=(0, 0, 1))
    assert frame_panels(frames(page.get_drawings(), [], BODY)) == 1
    _diagram(page, 350, 150)
    assert _count(page) == 2


def test_a_key_apart_or_a_narrow_gutter_adds_no_panel():
    doc, page = _page()
    _diagram(page, 70, 70, w=400, h=300)
    for k in range(6):  # a key of six small swatches, apart from the diagram: enough drawings, too small
        page.draw_rect(pymupdf.Rect(500, 100 + 12 * k, 508, 108 + 12 * k))
    assert _count(page) == 1
    doc, page = _page()
    _diagram(page, 70, 70)
    page.draw_line((300, 100), (520, 400))  # one long stroke apart: large enough, but a single drawing
    assert _count(page) == 1
    doc, page = _page()
    _diagram(page, 70, 70)
    _diagram(page, 70 + 150 + 5, 70)  # 5 points apart: one drawing, not two panels
    assert _count(page) == 1


def _pasted(page, target, draw, size, dpi=150):
    """Paste into ``target`` (page points) one raster image of what ``draw`` puts on a blank page of ``size``
    points, rendered at ``dpi``: plots exported as a bitmap, as conference papers and reports paste them."""
    src = pymupdf.open()
    blank = src.new_page(width=size[0], height=size[1])
    draw(blank)
    page.insert_image(pymupdf.Rect(*target), pixmap=blank.get_pixmap(dpi=dpi), keep_proportion=False)


def _raster_count(page, body, caption=""):
    return count_panels(page.get_drawings(), page.get_image_info(), body, caption, page=page)


@pytest.mark.parametrize("gap", [3.0, 4.0, 10.0])
def test_plots_pasted_as_one_image_are_told_by_the_white_rows_between_them(gap):
    """Three framed plots stacked in one bitmap, ``gap`` points of white between one plot's axis title and
    the next one's top tick label (3-4 points in the papers measured): three panels; a single plot in the same
    bitmap is one, its tick labels and title set 2-3 points off its frame being no panel of their own."""
    def stacked(p):
        y, above = 6.0, 0.0
        for k in range(3):
            box = plot(p, pymupdf.Rect(4, y, 236, y + 120), seed=k)  # drawn top down: nothing below it yet
            above = above or y - box[1]  # how far a plot's ink reaches above its rectangle (its top tick label)
            y = box[3] + gap + above  # the next plot's ink starts ``gap`` under this one's
        assert box[3] <= 418
    doc, page = _page()
    _pasted(page, (100, 60, 340, 480), stacked, (240, 420))
    assert _raster_count(page, (100, 60, 340, 480)) == 3
    page.set_rotation(90)  # a page set sideways: the same figure, rendered turned
    assert _raster_count(page, (100, 60, 340, 480)) == 3
    page.set_rotation(0)
    assert count_panels(page.get_drawings(), page.get_image_info(), (100, 60, 340, 480)) == 1  # no page: no render
    doc, page = _page()
    _pasted(page, (100, 60, 340, 200), lambda p: plot(p, pymupdf.Rect(4, 4, 236, 136)), (240, 140))
    assert _raster_count(page, (100, 60, 340, 200)) == 1


def test_a_harvested_figure_pasted_as_one_image_gets_its_panels():
    """Through the page step: a conference page's bitmap of two stacked plots above its caption."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 200))

    def two(p):
        plot(p, pymupdf.Rect(4, 4, 224, 124))
        plot(p, pymupdf.Rect(4, 131, 224, 251), seed=2)
    _pasted(page, (LEFT.x0 + 5, 212, LEFT.x0 + 233, 467), two, (228, 255))
    caption(page, pymupdf.Rect(LEFT.x0, 475, LEFT.x1, 500), "Figure 1: Signal in time and frequency domain.")
    prose(page, pymupdf.Rect(LEFT.x0, 508, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 740))
    (fig,) = find_figures(page, page_captions(page))
    assert fig.body is not None and fig.panels == 2


@pytest.mark.parametrize("stacked", [True, False])
def test_on_a_scanned_page_the_plots_of_a_figure_are_told_by_the_paper_between_them(stacked):
    """A scanned page (grey paper, grain, dust, OCR text): the figure's body is a part of the page's image, and
    the cut reads the paper's shade as background. Two plots 4-5 points apart: two panels; one plot: one."""
    doc = pymupdf.open()
    page = new_page(doc)
    prose(page, pymupdf.Rect(LEFT.x0, 60, LEFT.x1, 200))
    plot(page, pymupdf.Rect(60, 220, 292, 340))
    if stacked:
        plot(page, pymupdf.Rect(60, 346, 292, 466), seed=2)
    caption(page, pymupdf.Rect(LEFT.x0, 476, LEFT.x1, 500), "FIG. 2: Two quantities against temperature.")
    prose(page, pymupdf.Rect(LEFT.x0, 508, LEFT.x1, 740))
    prose(page, pymupdf.Rect(RIGHT.x0, 60, RIGHT.x1, 740))
    page = scanned(page, doc)
    (fig,) = find_figures(page, page_captions(page))
    assert fig.body is not None and fig.panels == (2 if stacked else 1)


def test_pictures_side_by_side_in_one_image_are_two_panels_a_lone_picture_is_one():
    def pair(p):  # two plots 10 points apart over a legend row across both
        plot(p, pymupdf.Rect(4, 4, 164, 134))
        plot(p, pymupdf.Rect(174, 4, 334, 134), seed=3)
        p.draw_line((60, 150), (80, 150), color=(0, 0, 1), width=0.8)
        p.insert_text((84, 153), "measured            fit", fontsize=8)
    doc, page = _page()
    _pasted(page, (60, 100, 400, 260), pair, (340, 160))
    assert _raster_count(page, (60, 100, 400, 260)) == 2

    def photo(p):  # a micrograph: grey texture to its edges, no white inside
        rng = np.random.default_rng(3)
        grey = (rng.random((60, 80)) * 120 + 60).astype(np.uint8)
        p.insert_image(p.rect, pixmap=pymupdf.Pixmap(pymupdf.csGRAY, 80, 60, grey.tobytes(), False), keep_proportion=False)
    doc, page = _page()
    _pasted(page, (60, 100, 400, 355), photo, (340, 255))
    assert _raster_count(page, (60, 100, 400, 355)) == 1


def _shade(height):
    """A vertical gradient bitmap, 8 pixels wide: how a chart program fills a bar."""
    column = np.linspace(90, 220, height).astype(np.uint8)
    return pymupdf.Pixmap(pymupdf.csGRAY, 8, height, np.repeat(column[:, None], 8, axis=1).tobytes(), False)


def test_bars_filled_with_a_raster_shade_are_one_chart_not_panels():
    """Bars drawn as gradient images of one width on one baseline, unequal heights, in a vector chart (an
    axis, tick labels): one panel. Pictures in a row, one size and both edges shared, stay panels."""
    doc, page = _page()
    _axis(page, 80, 500, 400)
    _yaxis(page, 75, 100, 395)
    for k, top in enumerate((300, 250, 140)):
        page.insert_image(pymupdf.Rect(120 + 130 * k, top, 170 + 130 * k, 400), pixmap=_shade(100), keep_proportion=False)
        page.insert_text((125 + 130 * k, 415), f"run {k}", fontsize=8)
    assert frames(page.get_drawings(), page.get_image_info(), BODY) == []
    assert _raster_count(page, BODY) == 1
    doc, page = _page()
    for k, right in enumerate((150, 250, 420)):  # lying bars from one left edge
        page.insert_image(pymupdf.Rect(80, 100 + 90 * k, right, 160 + 90 * k), pixmap=_shade(40), keep_proportion=False)
    assert _raster_count(page, BODY) == 1
    doc, page = _page()
    for k in range(3):
        page.insert_image(pymupdf.Rect(80 + 150 * k, 200, 200 + 150 * k, 320), pixmap=_shade(100), keep_proportion=False)
    assert _raster_count(page, BODY) == 3


def _words_count(page, caption=""):
    words = [w for w in page.get_text("words") if BODY[0] <= w[0] and w[2] <= BODY[2] and BODY[1] <= w[1]
             and w[3] <= BODY[3]]
    return count_panels(page.get_drawings(), page.get_image_info(), BODY, caption, body_words=words)


def test_letters_in_the_body_count_in_one_style_and_set_apart_as_panels_are():
    """A diagram (one frame, no gutter) with corner letters "(a)" and "(b)" over its halves and a point "C":
    two panels, the point being of another style. Points A and B of a geometry sketch, 15 points apart: labels,
    one panel. Bold corner letters "a" "b" "c" over three thirds of a drawing: three."""
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(60, 60, 540, 440))
    page.draw_line((300, 80), (300, 420))
    page.insert_text((70, 80), "(a)", fontsize=9)
    page.insert_text((310, 80), "(b)", fontsize=9)
    page.draw_circle((200, 250), 2)
    page.insert_text((205, 248), "C", fontsize=9)
    assert _words_count(page, "Figure 1. Two halves of one sketch.") == 2
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(60, 60, 540, 440))
    page.draw_line((200, 300), (215, 290))
    page.insert_text((190, 310), "A", fontsize=9)
    page.insert_text((212, 288), "B", fontsize=9)
    assert _words_count(page, "Figure 2. A sketch.") == 1
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(60, 60, 540, 440))
    for k, letter in enumerate("abc"):
        page.insert_text((70 + 160 * k, 80), letter, fontsize=10, fontname="hebo")
    assert _words_count(page, "Figure 3. Three views.") == 3


def test_small_diagrams_stacked_beside_a_plot_are_one_panel_together():
    """A survival curve with two small state diagrams stacked at its right (each a few boxes and arrows, an
    eighth of the body's height, a gutter apart): each diagram is too small to be a panel, but the block the
    two make, apart from the plot, is one (two panels in all; it was one, the diagrams read as a key)."""
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(60, 80, 330, 420))  # the plot's frame
    for k in range(4):
        page.draw_polyline([(70, 410 - 10 * k), (180, 200 + 20 * k), (320, 150 + 30 * k)], color=(0, 0, 1))
    for y in (110, 230):  # two diagrams: three boxes, two arrows each, 40 points tall, 80 apart
        for nx, ny in ((380, y), (470, y), (470, y + 26)):
            page.draw_rect(pymupdf.Rect(nx, ny, nx + 60, ny + 14))
        page.draw_line((440, y + 7), (470, y + 7))
        page.draw_line((440, y + 7), (470, y + 33))
    assert frame_panels(frames(page.get_drawings(), [], BODY)) == 1 and axes(page.get_drawings(), BODY) == 0
    assert _count(page) == 2
    doc, page = _page()  # one such diagram alone beside the plot stays too small: one panel
    page.draw_rect(pymupdf.Rect(60, 80, 330, 420))
    for k in range(4):
        page.draw_polyline([(70, 410 - 10 * k), (180, 200 + 20 * k), (320, 150 + 30 * k)], color=(0, 0, 1))
    for nx, ny in ((380, 110), (470, 110), (470, 136)):
        page.draw_rect(pymupdf.Rect(nx, ny, nx + 60, ny + 14))
    page.draw_line((440, 117), (470, 117))
    page.draw_line((440, 117), (470, 143))
    assert _count(page) == 1


def test_the_boxes_of_state_diagrams_are_no_plot_frames():
    """Three state diagrams (a multi-state model's boxes with a word in each, arrows between them): each box
    is a stroked rectangle as large as a plot's frame, but none holds a drawing, only its word: nodes, not plot
    areas. Counted as frames they were nine panels; the gutters give the three diagrams."""
    doc, page = _page()
    for x, y in ((70, 70), (310, 70), (70, 260)):
        for bx, by in ((x, y + 30), (x + 130, y), (x + 130, y + 70)):
            page.draw_rect(pymupdf.Rect(bx, by, bx + 60, by + 30))
            page.insert_text((bx + 8, by + 19), "Death", fontsize=9)
        page.draw_line((x + 60, y + 45), (x + 130, y + 15))
        page.draw_line((x + 60, y + 45), (x + 130, y + 85))
    assert axes(page.get_drawings(), BODY) == 0
    assert _count(page) == 3
    doc, page = _page()  # beside plots' frames, a frame holding only words is a panel (a correlation cell)
    for x in (60, 220):
        page.draw_rect(pymupdf.Rect(x, 80, x + 140, 200))
        page.draw_polyline([(x + 10, 190), (x + 70, 120), (x + 130, 100)], color=(0, 0, 1))
    page.draw_rect(pymupdf.Rect(380, 80, 520, 200))
    page.insert_text((420, 145), "Corr: 0.31", fontsize=9)
    assert _count(page) == 3


def _shaded_box(page, box):
    """A box filled grey and stroked as two paths, the stroke a quad, as R's graphics draw one (a fill and a
    stroke drawn as one rectangle read as one filled path, which is no frame)."""
    page.draw_rect(pymupdf.Rect(*box), color=None, fill=(0.83, 0.83, 0.83))
    page.draw_quad(pymupdf.Rect(*box).quad)


def _boxplot(page, frame, upright=True, n=4):
    """A box plot in ``frame``: ``n`` boxes of one width along one axis, each with a median line and dashed
    whiskers from its two ends along its middle to short caps."""
    page.draw_rect(pymupdf.Rect(*frame))
    x0, y0, x1, y1 = frame
    for k in range(n):
        lo, hi = 30 + 12 * k, 110 - 8 * k  # each box's ends, from the frame's start across the value axis
        if upright:
            cx = x0 + (k + 0.5) * (x1 - x0) / n
            box = (cx - 15, y0 + lo, cx + 15, y0 + hi)
            _shaded_box(page, box)
            page.draw_line((box[0], (box[1] + box[3]) / 2), (box[2], (box[1] + box[3]) / 2))  # the median
            for end, tip in ((box[1], y0 + 10), (box[3], y1 - 10)):
                page.draw_line((cx, end), (cx, tip), dashes="[1.4 2.3] 0")
                page.draw_line((cx - 8, tip), (cx + 8, tip))
        else:
            cy = y0 + (k + 0.5) * (y1 - y0) / n
            box = (x0 + lo, cy - 15, x0 + hi, cy + 15)
            _shaded_box(page, box)
            page.draw_line(((box[0] + box[2]) / 2, box[1]), ((box[0] + box[2]) / 2, box[3]))
            for end, tip in ((box[0], x0 + 10), (box[2], x1 - 10)):
                page.draw_line((end, cy), (tip, cy), dashes="[1.4 2.3] 0")
                page.draw_line((tip, cy - 8), (tip, cy + 8))


@pytest.mark.parametrize("upright", [True, False])
def test_the_boxes_of_a_box_plot_are_no_plot_frames(upright):
    """A scatterplot beside a box plot: the box plot's boxes are stroked rectangles of a plot's size inside its
    frame, each with whiskers along its middle. They are one plot's marks: two panels (they were read as the
    frames the plot's frame holds, five)."""
    doc, page = _page()
    page.draw_rect(pymupdf.Rect(60, 80, 290, 380))  # the scatterplot
    for k in range(12):
        page.draw_circle((80 + 17 * k, 360 - 20 * k), 2)
    _boxplot(page, (320, 80, 540, 380), upright)
    assert frame_panels(frames(page.get_drawings(), [], BODY)) == 2
    assert _count(page) == 2
    doc, page = _page()  # a 3 x 2 grid of box plots in a border: six panels
    page.draw_rect(pymupdf.Rect(*BODY))
    for row in range(2):
        for col in range(3):
            x, y = 60 + col * 160, 60 + row * 190
            _boxplot(page, (x, y, x + 150, y + 180), upright, n=3)
    assert _count(page) == 6


def _facets(p, n, gap=1.5, width=None, strip=True, grey_panel=False):
    """``n`` facets side by side ``gap`` points apart, as ggplot draws them: a grey strip with the facet's
    label over each plot area (white, or grey with white grid lines), a curve in each, tick labels below."""
    width = width or (p.rect.width - 8 - (n - 1) * gap) / n
    for k in range(n):
        x = 4 + k * (width + gap)
        if strip:
            p.draw_rect(pymupdf.Rect(x, 4, x + width, 18), color=None, fill=(0.82, 0.82, 0.82))
            p.insert_text((x + width / 2 - 12, 14), f"p: {10 ** (k + 2)}", fontsize=7)
        area = pymupdf.Rect(x, 18, x + width, 120)
        p.draw_rect(area, color=(0.3, 0.3, 0.3), fill=(0.92, 0.92, 0.92) if grey_panel else None, width=0.5)
        for g in range(1, 5):  # grid lines
            gx = x + g * width / 5
            p.draw_line((gx, 18.5), (gx, 119.5), color=(1, 1, 1) if grey_panel else (0.9, 0.9, 0.9), width=0.5)
        p.draw_polyline([(x + 6 + j * (width - 12) / 5, 110 - 15 * j - 3 * k) for j in range(6)], color=(0, 0.6, 0.7))
        for j, label in enumerate(("100", "1000", "10000")):
            p.insert_text((x + 4 + j * (width - 24) / 2, 130), label, fontsize=6)


def test_facets_pasted_touching_are_told_by_their_strip_labels():
    """Four facets in one bitmap, 1.5 points apart (too close for a background gutter at the render's
    resolution), each under a grey strip label: four panels (the cut found one). One facet under its strip,
    or one plot with a grey plot area ruled by white grid lines, stays one; strips of unequal widths (a
    grey header split unevenly) count none."""
    doc, page = _page()
    _pasted(page, (60, 100, 520, 240), lambda p: _facets(p, 4), (460, 140))
    assert _raster_count(page, (60, 100, 520, 240)) == 4
    doc, page = _page()
    _pasted(page, (60, 100, 520, 240), lambda p: _facets(p, 3), (460, 140))
    assert _raster_count(page, (60, 100, 520, 240)) == 3
    doc, page = _page()
    _pasted(page, (60, 100, 280, 240), lambda p: _facets(p, 1), (220, 140))
    assert _raster_count(page, (60, 100, 280, 240)) == 1
    doc, page = _page()
    _pasted(page, (60, 100, 280, 240), lambda p: _facets(p, 1, strip=False, grey_panel=True), (220, 140))
    assert _raster_count(page, (60, 100, 280, 240)) == 1

    def uneven(p):
        _facets(p, 1, width=300)
        p.draw_rect(pymupdf.Rect(305.5, 4, 456, 18), color=None, fill=(0.82, 0.82, 0.82))
    doc, page = _page()
    _pasted(page, (60, 100, 520, 240), uneven, (460, 140))
    assert _raster_count(page, (60, 100, 520, 240)) == 1
