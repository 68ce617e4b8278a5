"""Pairing captions with their figure bodies, locally and without a model.

A figure body is grown from its caption over the page's *figure elements*:
the visible graphics (drawn paths and placed images; white fills without a
stroke are paper, not ink) and the text lines that are not running text (axis
labels, legends, panel titles). Growth starts at the element nearest to the
caption on one side (above first, the common layout; below otherwise) and
takes every element of the caption's column it reaches across white space,
never past another caption of that column. Running text stops it: its lines
are no elements and no element is reached across them, and graphics lying
inside a paragraph's lines (rules, fraction bars) are left out. So are the
running head and the folio: the first block of text rows (and rules under
them) at the top (bottom) of the page that white space of at least
``HEAD_GAP`` points sets apart from the rest, in the outer ``HEAD_SHARE`` of
the page height, with everything beyond it. On a two-column page a figure
whose caption sits in one column takes nothing that reaches over the gutter
from text or rules (a title block, a page-wide heading, the rule under a
running head), and text across the gutter stops its growth.

Running text is told apart by its lines: a paragraph is a run of lines at
line spacing, and it is running text when one of its lines is long (at least
``BODY_LINE_SHARE`` of the column's text width, with ``BODY_LINE_WORDS``
words or more) or two of its lines hold ``PROSE_WORDS`` words or more (prose
and code listings; a plot's labels are short). Columns come from the page: it has two when long lines sit
wholly in each half, or two captions stand side by side, one in each half; a
caption crossing the middle of the page spans it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmint.pdf.captions import Caption

Box = tuple[float, float, float, float]

HEAD_SHARE = 0.12  # running heads and folios sit in the top and bottom bands of this share of the page height
HEAD_GAP = 8.0  # points of white space that set a running head or folio apart from the page's content
HEAD_ROWS_PT = 40.0  # a running head or foot is at most this tall (two or three rows of text and a rule)
RULE_PT = 3.0  # a graphic at most this tall is a rule (under a running head, across a title block)
BODY_LINE_SHARE = 0.6
BODY_LINE_WORDS = 5
PROSE_WORDS = 4  # two such lines at line spacing are prose or code, not labels of a plot
_EQ_NUMBER = re.compile(r"^\([A-Z]?\d{1,3}(?:\.\d{1,3})*[a-z]?\)$")
CUT_MIN_PT = 10.0  # a graphic cut at its caption keeps at least this much beside it
MAX_GAP_SHARE = 0.25  # the first element lies at most this share of the page height from its caption
ROW_GAP = 0.35  # a line starting this share of a line's height or less after another's end continues its row
ROW_OVERLAP = 0.3  # ... when they overlap vertically by this share of the lower one's height (sub- and superscripts)
SIDEWAYS_RATIO = 3.0  # a caption box this many times taller than wide is set sideways
SIDE_REACH_PT = 12.0  # a figure beside its caption takes elements at most this far from what it holds already


@dataclass(frozen=True)
class PairedFigure:
    caption: Caption
    body: Box | None  # page points; None when no graphics sit next to the caption


@dataclass(frozen=True)
class TextLine:
    box: Box
    words: int
    number: bool = False  # the line is an equation's number alone, "(12)", "(2.3)", "(A1)"


def _union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def graphics_boxes(page, drawings=None, images=None) -> list[Box]:
    """Boxes of the visible drawn paths and placed images (page frames and white paper-coloured fills left out).

    ``drawings`` and ``images`` are ``page.get_drawings()`` and ``page.get_image_info()`` when read already.
    """
    w, h = page.rect.width, page.rect.height
    boxes = [tuple(d["rect"]) for d in (page.get_drawings() if drawings is None else drawings) if not _paper(d)]
    boxes += [tuple(i["bbox"]) for i in (page.get_image_info() if images is None else images)]
    return [b for b in boxes if (b[3] - b[1]) < 0.9 * h and (b[2] - b[0]) < 0.98 * w and max(b[2] - b[0], b[3] - b[1]) > 0]


def is_white(color) -> bool:
    """A drawing's fill or stroke colour that leaves no ink on a white page (None is no colour at all)."""
    return color is not None and all(c >= 0.99 for c in color)


def inside(box: Box, outer: Box, slack: float = 0.01) -> bool:
    """``box`` lies within ``outer`` widened by ``slack`` points on every side."""
    return (box[0] >= outer[0] - slack and box[1] >= outer[1] - slack and box[2] <= outer[2] + slack
            and box[3] <= outer[3] + slack)


def _paper(drawing: dict) -> bool:
    """A fill in white with no stroke: it leaves no ink on a white page (plot backgrounds, masks)."""
    return drawing.get("color") is None and is_white(drawing.get("fill"))


def text_lines(words) -> list[TextLine]:
    """Lines of ``page.get_text("words")`` tuples (x0, y0, x1, y1, text, block, line, word)."""
    lines: dict[tuple[int, int], list] = {}
    for w in words:
        lines.setdefault((w[5], w[6]), []).append(w)
    return [TextLine(_union([tuple(w[:4]) for w in ws]), len(ws), len(ws) == 1 and bool(_EQ_NUMBER.match(ws[0][4])))
            for ws in lines.values()]


def two_columns(lines: list[TextLine], width: float) -> bool:
    """Whether long lines sit wholly in the left half and wholly in the right half of the page."""
    mid, long_ = width / 2, 0.3 * width
    left = sum(1 for ln in lines if ln.box[2] <= mid and ln.box[2] - ln.box[0] >= long_)
    right = sum(1 for ln in lines if ln.box[0] >= mid and ln.box[2] - ln.box[0] >= long_)
    return left >= 5 and right >= 5


def _side_by_side(captions: list[Caption], width: float) -> bool:
    """Two captions level with each other, one wholly in each half of the page."""
    mid = width / 2
    left = [c.bbox for c in captions if c.bbox[2] <= mid]
    right = [c.bbox for c in captions if c.bbox[0] >= mid]
    return any(min(a[3], b[3]) > max(a[1], b[1]) for a in left for b in right)


def _column(caption: Caption, width: float, split: bool) -> tuple[float, float]:
    x0, _, x1, _ = caption.bbox
    mid = width / 2
    if not split or _across(caption.bbox, width):
        return 0.0, width
    return (0.0, mid) if (x0 + x1) / 2 < mid else (mid, width)


def _margin_text(box: Box, height: float) -> bool:
    """A line of text set upright along a page's edge over much of its height (arXiv's identifier stamp on a
    first page, a journal's banner): no figure's text, though it stands beside one."""
    h = box[3] - box[1]
    return h > MAX_GAP_SHARE * height and h > 3 * (box[2] - box[0])


def _across(box: Box, width: float) -> bool:
    """``box`` reaches over the middle of the page into both halves (as ``_column`` reads a caption)."""
    return box[0] < 0.48 * width and box[2] > 0.52 * width


def _in_column(box: Box, column: tuple[float, float]) -> bool:
    """Half of ``box``'s width lies in ``column``; an upright line of no width (a frame's side, an axis) when
    it lies in it at all."""
    overlap = min(box[2], column[1]) - max(box[0], column[0])
    return overlap >= 0.5 * (box[2] - box[0])


def _paragraphs(lines: list[TextLine]) -> list[list[TextLine]]:
    """Runs of lines that follow each other at line spacing and overlap horizontally."""
    out: list[list[TextLine]] = []
    for ln in sorted(lines, key=lambda t: (t.box[1], t.box[0])):
        height = ln.box[3] - ln.box[1]
        for para in out:
            last = para[-1].box
            if (-0.5 * height <= ln.box[1] - last[3] <= 0.6 * max(height, last[3] - last[1])
                    and min(ln.box[2], last[2]) > max(ln.box[0], last[0])):
                para.append(ln)
                break
        else:
            out.append([ln])
    return out


def running_text(lines: list[TextLine], column: tuple[float, float], captions: Sequence[Box] = ()) -> list[Box]:
    """Boxes of the running-text lines of a column (every line of a paragraph that has a long line).

    Lines of ``captions`` make paragraphs of their own: a caption set close under its figure would otherwise
    run on from the figure's axis title and tick labels, and make them running text between the two.
    """
    mine = [ln for ln in lines if _in_column(ln.box, column)]
    if not mine:
        return []
    widths = sorted(ln.box[2] - ln.box[0] for ln in mine if ln.words >= BODY_LINE_WORDS)
    text_width = widths[int(0.9 * (len(widths) - 1))] if widths else 0.0
    if text_width <= 0:
        return []
    out: list[Box] = []
    # A line MuPDF splits into pieces (at inline math's sub- and superscripts, at a gap of justified text) is
    # judged as the row it is; each of its pieces is running text with it.
    pieces = _rows(mine)
    rows = list(pieces)
    apart = [any(_overlaps(ln.box, c) for c in captions) for ln in rows]
    of_captions = [ln for ln, a in zip(rows, apart) if a]
    rest = [ln for ln, a in zip(rows, apart) if not a]
    for para in _paragraphs(rest) + _paragraphs(of_captions):
        if (any(ln.words >= BODY_LINE_WORDS and ln.box[2] - ln.box[0] >= BODY_LINE_SHARE * text_width for ln in para)
                or sum(ln.words >= PROSE_WORDS for ln in para) >= 2):
            out.extend(b for ln in para for b in pieces[ln])
    # A displayed equation is running text: the row of a number "(1.8)" set at the text's right edge (its
    # pieces are short lines that would pass for a figure's labels).
    right = max((b[2] for b in out), default=0.0)
    numbers = [ln.box for ln in mine if ln.number and right > 0 and ln.box[2] >= right - 6]
    if numbers:
        taken = set(out)
        out.extend(ln.box for ln in mine if ln.box not in taken and any(
            min(ln.box[3], n[3]) - max(ln.box[1], n[1]) >= 0.5 * (ln.box[3] - ln.box[1]) for n in numbers))
    return out


def _rows(lines: list[TextLine]) -> dict[TextLine, list[Box]]:
    """Pieces of a row of inline math as one line each: {the row: its pieces' boxes}; every other line as
    itself. A piece continues a row when it starts at most ``ROW_GAP`` of the last piece's height right of its
    end (or over it: sub- and superscripts stack) and overlaps it vertically by ``ROW_OVERLAP`` of the lower
    one's height; a row is inline math when one of its pieces stands higher or lower than the one before it (a
    sub- or superscript). Level pieces that meet stay apart: the tick labels of plots side by side, say."""
    Row = tuple[Box, int, list[TextLine], bool]  # box, words, pieces, inline math
    done: list[Row] = []
    open_: list[Row] = []
    for ln in sorted(lines, key=lambda t: (t.box[0], t.box[1])):
        b = ln.box
        h = b[3] - b[1]
        still: list[Row] = []
        for row in open_:  # rows ending too far left for this piece, or any later one, to continue them
            (done if row[0][2] + ROW_GAP * (row[0][3] - row[0][1]) < b[0] else still).append(row)
        open_ = still
        for i, (rb, words, parts, math) in enumerate(open_):
            last = parts[-1].box
            if (b[0] - last[2] <= ROW_GAP * (last[3] - last[1])
                    and min(b[3], last[3]) - max(b[1], last[1]) >= ROW_OVERLAP * min(h, last[3] - last[1])):
                level = abs(b[1] - last[1]) <= 0.5 and abs(b[3] - last[3]) <= 0.5
                open_[i] = (_union([rb, b]), words + ln.words, parts + [ln], math or not level)
                break
        else:
            open_.append((b, ln.words, [ln], False))
    out: dict[TextLine, list[Box]] = {}
    for rb, words, parts, math in done + open_:
        if math:
            out[TextLine(rb, words)] = [p.box for p in parts]
        else:
            out.update({p: [p.box] for p in parts})
    return out


def _inside_text(box: Box, body: list[Box]) -> bool:
    """A graphic lying within a running-text line's band (an underline, a fraction bar, a table rule in text)."""
    return any(box[1] >= b[1] - 3 and box[3] <= b[3] + 3 and min(box[2], b[2]) > max(box[0], b[0]) for b in body)


def _text_in_gap(a: Box, b: Box, barriers: list[Box]) -> bool:
    """Running text lies in the vertical gap between ``a`` and ``b`` (none when they overlap vertically)."""
    lo, hi = (a[3], b[1]) if b[1] >= a[3] else (b[3], a[1])
    return hi > lo and any(t[1] >= lo - 1 and t[3] <= hi + 1 for t in barriers)


def _grow(seed: Box, elements: list[Box], barriers: list[Box]) -> Box:
    """The seed and every element reachable from it without crossing running text (whitespace is crossed)."""
    region, rest = seed, list(elements)
    grew = True
    while grew:
        grew = False
        keep = []
        for e in rest:
            if not _text_in_gap(region, e, barriers):
                region = _union([region, e])
                grew = True
            else:
                keep.append(e)
        rest = keep
    return region


def pair(captions: list[Caption], graphics: list[Box], width: float, height: float,
         lines: Sequence[TextLine] = (), ink: Callable[[Box], Box | None] | None = None,
         images: Sequence[Box] = (), tables: Sequence[Box] = ()) -> list[PairedFigure]:
    """Each caption with the body grown from it over the figure elements of its column.

    ``tables`` are the page's table captions: they bound a body as another figure's caption does, and one
    above a figure bounds it at the foot of the ruled table set under it (see ``_table_foot``).

    ``images`` are the graphics that are placed images. ``ink`` (a scanned page's ``scan.PageInk.box``) gives
    the box of the ink inside a window of the page: a caption that no graphics are next to gets the ink between
    it and the nearest text block of its column, above it or else below it.
    """
    lines = list(lines)
    split = two_columns(lines, width) or _side_by_side(captions, width)
    caption_boxes = [c.bbox for c in captions]
    top, bottom = _content_band(lines, graphics, width, height)
    inked, placed = set(graphics), set(images)
    out = []
    for cap in captions:
        column = _column(cap, width, split)
        body_text = running_text(lines, column, caption_boxes)
        running = set(body_text)
        figure_text = [ln.box for ln in lines if ln.box not in running and not _margin_text(ln.box, height)
                       and not any(_overlaps(ln.box, c) for c in caption_boxes)]
        barriers = body_text
        if column != (0.0, width):
            # Text across the gutter (a title block, a page-wide heading) is no part of a column's figure and
            # stops its growth; so is a rule across it (under a running head, above footnotes).
            across = [ln.box for ln in lines if _across(ln.box, width)
                      and not any(_overlaps(ln.box, c) for c in caption_boxes)]
            figure_text = [b for b in figure_text if not _across(b, width)]
            graphics_here = [b for b in graphics if not (_across(b, width) and b[3] - b[1] <= RULE_PT)]
            barriers = body_text + across
        else:
            graphics_here = graphics
        elements = [b for b in graphics_here + figure_text if _in_column(b, column)
                    and not _inside_text(b, body_text) and b[1] >= top and b[3] <= bottom]
        # Captions that bound this one's body: those in its column and page-wide ones.
        peers = [c for c in captions if c is not cap and (_in_column(c.bbox, column) or
                                                          _column(c, width, split) == (0.0, width))]
        table_peers = [t for t in tables if _in_column(t, column) or _across(t, width)]
        above_limit = max([c.bbox[3] for c in peers if c.bbox[3] <= cap.bbox[1]]
                          + [_table_foot(t, graphics_here, body_text, cap.bbox[1]) for t in table_peers
                             if t[3] <= cap.bbox[1]], default=0.0)
        below_limit = min([c.bbox[1] for c in peers if c.bbox[1] >= cap.bbox[3]]
                          + [t[1] for t in table_peers if t[1] >= cap.bbox[3]], default=height)
        if _sideways(cap.bbox):
            out.append(PairedFigure(cap, _sideways_body(cap.bbox, elements, [c.bbox for c in peers] + table_peers,
                                                        barriers, inked, width)))
            continue
        c0, c1 = cap.bbox[1], cap.bbox[3]
        above = [b for b in elements if b[3] <= c0 + 2 and b[1] >= above_limit - 2]
        below = [b for b in elements if b[1] >= c1 - 2 and b[3] <= below_limit + 2]
        # An image reaching from one side into the caption's lines (white margins, the caption set over its
        # foot) is cut at the caption's edge; drawings there (a shade behind the caption) are not.
        across_caption = [b for b in elements if b[1] < c1 and b[3] > c0 and b in placed]
        cut_above = [(b[0], b[1], b[2], c0) for b in across_caption if b[1] < c0 - CUT_MIN_PT
                     and c0 + 2 < b[3] <= c1 + 4 and b[1] >= above_limit - 2]
        cut_below = [(b[0], c1, b[2], b[3]) for b in across_caption if b[3] > c1 + CUT_MIN_PT
                     and c0 - 4 <= b[1] < c1 - 2 and b[3] <= below_limit + 2]
        ink_here = inked | set(cut_above) | set(cut_below)
        body = (_body_beside(cap.bbox, elements, inked, barriers, (above_limit, below_limit), width)
                or _body_on_side(cap.bbox, above + cut_above, True, barriers, ink_here, height)
                or _body_on_side(cap.bbox, below + cut_below, False, barriers, ink_here, height))
        if body is None and ink is not None:
            body = _ink_body(cap.bbox, column, body_text, barriers, ink, (max(top, above_limit),
                                                                         min(bottom, below_limit)), height)
        out.append(PairedFigure(cap, body))
    return out


def _sideways(caption: Box) -> bool:
    """A caption set sideways (its lines run up or down the page, beside a figure turned with it): its box is
    much taller than wide, which no caption of level lines is."""
    return caption[3] - caption[1] >= SIDEWAYS_RATIO * (caption[2] - caption[0])


def _transposed(box: Box) -> Box:
    return (box[1], box[0], box[3], box[2])


def _sideways_body(caption: Box, elements: list[Box], peers: list[Box], barriers: list[Box], inked: set[Box],
                   width: float) -> Box | None:
    """The body of a sideways caption: grown from the element nearest to it on its left (where a figure turned
    counter-clockwise stands, the caption reading upwards), else on its right, up to the next caption on that
    side. The growth of a level caption, with the page's x and y exchanged. ``elements`` lie within the page's
    content band already, so the running head and foot stay out."""
    t = _transposed
    cap = t(caption)
    left_limit = max((p[2] for p in peers if p[2] <= caption[0]), default=0.0)
    right_limit = min((p[0] for p in peers if p[0] >= caption[2]), default=width)
    left = [t(b) for b in elements if b[2] <= caption[0] + 2 and b[0] >= left_limit - 2]
    right = [t(b) for b in elements if b[0] >= caption[2] - 2 and b[2] <= right_limit + 2]
    turned_ink, turned_text = {t(b) for b in inked}, [t(b) for b in barriers]
    body = (_body_on_side(cap, left, True, turned_text, turned_ink, width)
            or _body_on_side(cap, right, False, turned_text, turned_ink, width))
    return None if body is None else t(body)


def _body_beside(caption: Box, elements: list[Box], inked: set[Box], barriers: list[Box],
                 limits: tuple[float, float], width: float) -> Box | None:
    """The body of a caption set beside its figure (a side caption: its first line level with the figure, its
    column to the figure's right or left): a graphic on that side reaching above and below the caption's first
    line starts it, and it takes the elements beside the caption within ``SIDE_REACH_PT`` of what it holds, up
    to the captions above and below (``limits``). White space bounds it, as the caption's column runs beside
    the whole figure and the text above and below runs across both."""
    c0, c1 = caption[1], caption[3]
    for left in (True, False):
        side = [b for b in elements if (b[2] <= caption[0] + 2 if left else b[0] >= caption[2] - 2)
                and b[1] >= limits[0] - 2 and b[3] <= limits[1] + 2]
        gap = (lambda b: caption[0] - b[2]) if left else (lambda b: b[0] - caption[2])
        seeds = [b for b in side if b in inked and b[1] < c0 and b[3] > c1 and gap(b) <= MAX_GAP_SHARE * width]
        if seeds:
            return _grow_near(min(seeds, key=gap), side, barriers, SIDE_REACH_PT)
    return None


def _grow_near(seed: Box, elements: list[Box], barriers: list[Box], reach: float) -> Box:
    """``_grow`` across white space of at most ``reach`` points."""
    def near(a: Box, b: Box) -> bool:
        return max(a[0] - b[2], b[0] - a[2], a[1] - b[3], b[1] - a[3]) <= reach

    region, rest, grew = seed, list(elements), True
    while grew:
        grew, keep = False, []
        for e in rest:
            if near(region, e) and not _text_in_gap(region, e, barriers):
                region, grew = _union([region, e]), True
            else:
                keep.append(e)
        rest = keep
    return region


def _table_foot(table: Box, graphics: list[Box], barriers: list[Box], end: float) -> float:
    """Where the table under a table caption ends, as a bound for a figure below it (the caption's foot when
    no ruled table follows): just under the last horizontal rule between the caption and the first graphic
    that is no rule (a figure's frame, spine or image), running text or ``end``. A table's rows sit between
    its rules; white space alone does not set a table apart from the figure under it."""
    def level(b: Box) -> bool:  # under the caption's span, or beside it
        return min(b[2], table[2] + 0.5 * (table[2] - table[0])) >= max(b[0], table[0] - 0.5 * (table[2] - table[0]))

    stop = min([b[1] for b in graphics if b[3] - b[1] > RULE_PT and b[1] >= table[3] - 2 and level(b)]
               + [b[1] for b in barriers if b[1] >= table[3] and level(b)] + [end])
    rules = [b[3] for b in graphics if b[3] - b[1] <= RULE_PT and b[1] >= table[3] - 2 and b[3] <= stop - 1
             and level(b)]
    return max(rules) + 2.5 if rules else table[3]  # past the rule's own box (a figure element starts 2 pt out)


def _ink_body(caption: Box, column: tuple[float, float], body_text: list[Box], barriers: list[Box],
              ink: Callable[[Box], Box | None], band: tuple[float, float], height: float) -> Box | None:
    """The ink between the caption and the nearest text block above it (else below it), across the column's
    text width (a scan's dark page edges lie outside it)."""
    x0 = min((b[0] for b in body_text), default=column[0] + 0.03 * (column[1] - column[0]))
    x1 = max((b[2] for b in body_text), default=column[1] - 0.03 * (column[1] - column[0]))
    x0, x1 = min(x0, caption[0]), max(x1, caption[2])
    level = [b for b in barriers if min(b[2], x1) > max(b[0], x0)]
    top = max([band[0]] + [b[3] for b in level if b[3] <= caption[1]])
    found = ink((x0, top + 1, x1, caption[1] - 1))
    if found is not None and caption[1] - found[3] <= MAX_GAP_SHARE * height:
        return found
    end = min([band[1]] + [b[1] for b in level if b[1] >= caption[3]])
    found = ink((x0, caption[3] + 1, x1, end - 1))
    if found is not None and found[1] - caption[3] <= MAX_GAP_SHARE * height:
        return found
    return None


def _body_on_side(caption: Box, group: list[Box], above: bool, body_text: list[Box], inked: set[Box],
                  height: float) -> Box | None:
    """The region grown from the element nearest to the caption on one side, when it holds graphics."""
    if not group:
        return None
    seed = max(group, key=lambda b: b[3]) if above else min(group, key=lambda b: b[1])
    gap = caption[1] - seed[3] if above else seed[1] - caption[3]
    if gap > MAX_GAP_SHARE * height or _text_in_gap(seed, caption, body_text):  # the caption is not next to it
        return None
    region = _grow(seed, group, body_text)
    return region if any(b in inked and inside(b, region) for b in group) else None  # text alone is no figure


def _margin_block(boxes: list[tuple[Box, bool]], height: float) -> float | None:
    """How far a running head reaches down from the top of the page (boxes given as (box, is text), the page
    turned over for the foot), or None when the page has none.

    The head is the first block of the page set apart by ``HEAD_GAP`` points of white space across the whole
    page: text rows and flat rules only (a rule under the head text belongs to it), at most ``HEAD_ROWS_PT``
    tall, ending in the top ``HEAD_SHARE`` of the page. A graphic reaching across the gap (a plot's frame beside
    its top tick label) puts what it reaches in the block, so a figure's own first row is no head. Graphics that
    start above the first text line are not looked at.
    """
    first_text = min((b[1] for b, is_text in boxes if is_text), default=None)
    if first_text is None:
        return None
    # Graphics starting above the first text line are beyond the head (clipped paths of a plot reaching up).
    order = sorted((bt for bt in boxes if bt[0][1] >= first_text - 1), key=lambda bt: bt[0][1])
    start, reach = order[0][0][1], order[0][0][3]
    text = False
    for i, (b, is_text) in enumerate(order):
        if i and b[1] - reach >= HEAD_GAP:
            return reach if text else None
        if not is_text and b[3] - b[1] > RULE_PT:
            return None  # a graphic that is no rule: the page's content has begun
        text |= is_text
        reach = max(reach, b[3])
        if reach - start > HEAD_ROWS_PT or reach > HEAD_SHARE * height:
            return None
    return None  # nothing below it: a page of a few lines has no head


def _head_row(lines: list[TextLine], graphics: list[Box], width: float, height: float) -> float | None:
    """The foot of a running head set close over the page's content (less than ``HEAD_GAP`` points, no rule),
    or None: the page's first row of text, in its top ``HEAD_SHARE``, made of short pieces of which one starts
    at the running text's left edge and another ends at its right edge (a title and a folio), no graphic
    reaching into the row. A figure's top row of labels spans no page from edge to edge."""
    long_ = [ln.box for ln in lines if ln.box[2] - ln.box[0] >= 0.3 * width]
    if not long_ or not lines:
        return None
    left, right = min(b[0] for b in long_), max(b[2] for b in long_)
    first = min(lines, key=lambda ln: ln.box[1]).box
    row = [ln.box for ln in lines if min(ln.box[3], first[3]) - max(ln.box[1], first[1]) > 0.5 * (first[3] - first[1])]
    top, foot = min(b[1] for b in row), max(b[3] for b in row)
    if (len(row) < 2 or foot > HEAD_SHARE * height or any(b[2] - b[0] >= 0.3 * width for b in row)
            or not any(abs(b[0] - left) <= 3 for b in row) or not any(abs(b[2] - right) <= 3 for b in row)
            or any(g[1] < foot and g[3] > top for g in graphics)):
        return None
    return foot


def _content_band(lines: list[TextLine], graphics: list[Box], width: float, height: float) -> tuple[float, float]:
    """(top, bottom) of the page's content: below the running head and above the folio, where there are any."""
    boxes = [(ln.box, True) for ln in lines] + [(b, False) for b in graphics]
    head = _margin_block(boxes, height)
    if head is None:
        head = _head_row(lines, graphics, width, height)
    foot = _margin_block([((b[0], height - b[3], b[2], height - b[1]), t) for b, t in boxes], height)
    return (0.0 if head is None else head + 1, height if foot is None else height - foot - 1)


def _overlaps(a: Box, b: Box) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def page_figures(page, captions: list[Caption], words=None, drawings=None, images=None) -> list[PairedFigure]:
    """Captions of one page paired with their bodies; ``words``, ``drawings`` and ``images`` are the page's
    ``get_text("words")``, ``get_drawings()`` and ``get_image_info()`` when read already."""
    from benchmint.pdf.captions import table_captions
    from benchmint.pdf.scan import PageInk, is_scan

    words = page.get_text("words") if words is None else words
    lines = text_lines(words)
    images = page.get_image_info() if images is None else images
    ink = None
    if is_scan(page.rect.width, page.rect.height, images):  # rendered once, when a caption finds no graphics
        rendered: list[PageInk] = []

        def ink(window: Box) -> Box | None:
            if not rendered:
                rendered.append(PageInk(page))
            return rendered[0].box(window)

    return pair(captions, graphics_boxes(page, drawings, images), page.rect.width, page.rect.height, lines, ink,
                [tuple(i["bbox"]) for i in images], table_captions(words))
