"""How many panels a figure body holds, read from its drawing (spm-bench §2.2 keeps figures with >= 4).

A panel is a plot area or sub-image a reader would point to. Five signals,
in this order:

1. **Frames.** Plot areas are framed: an axis-aligned rectangle stroked with
   no fill (or a white one), or a placed image, at least ``FRAME_MIN_PT``
   points and ``FRAME_MIN_SHARE`` of the body on each side. A frame holding
   two or more frames (a border around a grid of plots) counts as what it
   holds; frames inside a single frame (a legend box) count with it. Images
   of one width on one baseline with unequal heights are the bars of a chart
   filled with a raster shade, not pictures (``raster_bars``). Drawn frames
   none of which holds ink (a state diagram's nodes around words) are no plots,
   nor are stroked boxes inside a frame with a whisker along their middle (a
   box plot's boxes).
2. **Axes**, when fewer than two frames are found (plots drawn without a
   box): lines with three or more evenly spaced tick marks, all pointing out
   of the plot (below an x axis, left of a y axis) or all into it; a plot
   has one of each.
3. **Panel letters** of the caption and the body, "(a)" to "(d)"
   (``captions.estimate_panels``), when the drawing shows one panel; the
   body's letters in one style, each standing apart from the one before as
   panels do (``body_letters``).
4. **Gutters**, when nothing above finds two: a recursive XY cut of the
   drawing's ink along white gutters of at least ``GUTTER_PT``; a block is a
   panel when it holds ``PART_MIN_PATHS`` drawings and spans
   ``PART_MIN_SHARE`` of the body each way (state diagrams side by side, a
   plot beside a diagram; a legend or a key is too small to count). A block
   of such small parts, large and busy enough as a whole, is a panel beside
   a block that holds one (small diagrams stacked beside a plot).
5. **Gutters inside one image**, when the body's only large image is the
   figure: the same cut over a ``RASTER_DPI`` grey render of that image
   alone, along rows and columns of its background (``raster_panels``); facets
   pasted touching, with no such gutter, by the breaks across their strip
   labels' grey band (``strip_panels``).

Filled rectangles (mosaic tiles, bars, strips) are not looked into, so a grid
drawn only from filled tiles counts as one panel unless its letters say more.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from benchmint.pdf.captions import PANEL_TOKEN, estimate_panels
from benchmint.pdf.pairing import Box, inside, is_white

FRAME_MIN_PT = 25.0
FRAME_MIN_SHARE = 0.03
AXIS_MIN_PT = 25.0
TICK_PT = (1.5, 8.0)  # tick mark lengths
MIN_TICKS = 3


def _rectangle(drawing: dict) -> Box | None:
    """The box of a path that is one axis-aligned rectangle (``re``, a quad, or four lines closing one)."""
    items = drawing["items"]
    if len(items) == 1 and items[0][0] in ("re", "qu"):
        kind, shape = items[0][0], items[0][1]
        if kind == "qu" and not shape.is_rectangular:
            return None
        r = shape.rect if kind == "qu" else shape
        return (float(r.x0), float(r.y0), float(r.x1), float(r.y1))
    if 3 <= len(items) <= 4 and all(it[0] == "l" for it in items):
        points = [it[1] for it in items] + [items[-1][2]]
        xs = sorted({round(p.x, 1) for p in points})
        ys = sorted({round(p.y, 1) for p in points})
        if len(xs) == 2 and len(ys) == 2 and (len(items) == 4 or drawing.get("closePath")):
            return (xs[0], ys[0], xs[1], ys[1])
    return None


def frames(drawings: Sequence[dict], images: Sequence[dict], body: Box) -> list[Box]:
    """The frames of plot areas and the images inside ``body``, large enough to be a panel."""
    min_w = max(FRAME_MIN_PT, FRAME_MIN_SHARE * (body[2] - body[0]))
    min_h = max(FRAME_MIN_PT, FRAME_MIN_SHARE * (body[3] - body[1]))
    found: set[Box] = set()
    for d in drawings:
        if d.get("color") is None or (d.get("fill") is not None and not is_white(d["fill"])):
            continue  # not stroked, or filled in a colour: a tile, a bar, a strip
        r = _rectangle(d)
        if r is not None:
            found.add(r)
    placed = [r for r in ((float(b[0]), float(b[1]), float(b[2]), float(b[3])) for b in (im["bbox"] for im in images))
              if inside(r, body, 2.0)]
    bars = raster_bars(placed)
    pictures = {r for r in placed if r not in bars}
    sized = [r for r in found | pictures if inside(r, body, 2.0) and r[2] - r[0] >= min_w and r[3] - r[1] >= min_h]
    drawn = [r for r in sized if r not in pictures]
    if not drawn:
        return sized
    # A box plot's boxes are stroked rectangles inside the plot's frame, each with a whisker: a line along its
    # middle from one of its edges outwards. They are marks of one plot, not plot areas.
    boxes = {r for r in drawn if any(_within(r, g) for g in sized) and _whiskered(r, drawings, sized)}
    if boxes:
        sized = [r for r in sized if r not in boxes]
        drawn = [r for r in drawn if r not in boxes]
        if not drawn:
            return sized
    # Drawn frames none of which holds ink, only words, are the nodes of a diagram (a multi-state model's
    # boxes), not plot areas. Beside frames that hold plots, one holding a word is a panel (a scatterplot
    # matrix's correlation cells).
    ink = np.array([tuple(d["rect"]) for d in drawings] + placed, dtype=float).reshape(-1, 4)
    boxed = np.array([_rectangle(d) is not None for d in drawings] + [True] * len(placed), dtype=bool)
    if any(_holds_ink(r, ink, boxed) for r in drawn):
        return sized
    return [r for r in sized if r in pictures]


WHISKER_SLACK_PT = 1.0


def _whiskered(box: Box, drawings: Sequence[dict], frames: Sequence[Box]) -> bool:
    """A stroked line runs along ``box``'s vertical (horizontal) middle from its top or bottom (left or right)
    edge away from it: a box plot's whisker. A line lying in a frame beside the box (a grid line of the next
    plot in a lattice, from their shared edge) is none."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    s = WHISKER_SLACK_PT
    for d in drawings:
        if d.get("color") is None or is_white(d["color"]):
            continue
        for item in d["items"]:
            if item[0] != "l":
                continue
            a, b = item[1], item[2]
            if abs(a.x - cx) <= s and abs(b.x - cx) <= s:  # vertical, through the middle
                lo, hi, edges = min(a.y, b.y), max(a.y, b.y), (box[1], box[3])
            elif abs(a.y - cy) <= s and abs(b.y - cy) <= s:  # horizontal, through the middle
                lo, hi, edges = min(a.x, b.x), max(a.x, b.x), (box[0], box[2])
            else:
                continue
            if hi - lo <= TICK_PT[1]:
                continue  # a tick mark at the middle of a plot's frame, not a whisker
            if (abs(hi - edges[0]) <= s and lo < edges[0] - s) or (abs(lo - edges[1]) <= s and hi > edges[1] + s):
                line = (min(a.x, b.x), min(a.y, b.y), max(a.x, b.x), max(a.y, b.y))
                if not any(g != box and not _within(box, g) and inside(line, g, s) for g in frames):
                    return True
    return False


FRAME_INSET_PT = 2.0  # ink within this of a frame's edge (an arrow's head at a node, ticks pointing out) is not in it


def _holds_ink(frame: Box, ink: np.ndarray, boxed: np.ndarray) -> bool:
    """Some ink (``ink``: boxes of drawings and images; ``boxed``: those that are rectangles) lies within
    ``frame``: a path reaching over its edges counts (a clipped curve), a rectangle around it does not."""
    x0, y0, x1, y1 = (frame[0] + FRAME_INSET_PT, frame[1] + FRAME_INSET_PT,
                      frame[2] - FRAME_INSET_PT, frame[3] - FRAME_INSET_PT)
    meets = (ink[:, 0] < x1) & (ink[:, 2] > x0) & (ink[:, 1] < y1) & (ink[:, 3] > y0)
    # a rectangle around it: its own path (or a copy: a fill and a stroke drawn apart), a border, a background
    around = boxed & ((ink[:, 0] <= frame[0] + 1) & (ink[:, 1] <= frame[1] + 1)
                      & (ink[:, 2] >= frame[2] - 1) & (ink[:, 3] >= frame[3] - 1))
    return bool(np.any(meets & ~around))


BAR_SLACK_PT = 1.0


def _bar_foot(r: Box, upright: bool) -> tuple[float, float, float]:
    """(baseline, thickness, length) of a box read as a bar standing up (upright) or lying from the left."""
    return (r[3], r[2] - r[0], r[3] - r[1]) if upright else (r[0], r[3] - r[1], r[2] - r[0])


def raster_bars(boxes: Sequence[Box]) -> set[Box]:
    """The image boxes that are bars of a chart filled with a raster shade (a gradient drawn as an image):
    two or more images of one width standing on one baseline with unequal heights, or of one height starting
    at one left edge with unequal widths. A row of pictures shares both edges and one size: no bars."""
    out: set[Box] = set()
    for upright in (True, False):
        feet = sorted((_bar_foot(b, upright), b) for b in boxes)  # by baseline: a box's row is a slice of it
        bases = [f[0] for f, _ in feet]
        for (base, thick, _), _b in feet:
            row = [(f, r) for f, r in feet[bisect_left(bases, base - BAR_SLACK_PT):
                                            bisect_right(bases, base + BAR_SLACK_PT)]
                   if abs(f[1] - thick) <= BAR_SLACK_PT]
            lengths = [f[2] for f, _ in row]
            if len(row) >= 2 and max(lengths) - min(lengths) > BAR_SLACK_PT:
                out.update(r for _, r in row)
    return out


def _within(a: Box, b: Box) -> bool:
    return a != b and inside(a, b, 1.0)


def frame_panels(boxes: list[Box]) -> int:
    """Outermost frames, each counted as the frames it directly holds when they are two or more."""
    def count(frame: Box) -> int:
        inner = [g for g in boxes if _within(g, frame)]
        direct = [g for g in inner if not any(_within(g, h) for h in inner)]
        return sum(count(g) for g in direct) if len(direct) >= 2 else 1

    return sum(count(f) for f in boxes if not any(_within(f, g) for g in boxes))


def _ticked(lines: list[tuple[float, float, float]], ticks: list[tuple[float, float]], body: Box,
            horizontal: bool) -> int:
    """Axis lines (lo, hi, at) with ``MIN_TICKS`` or more evenly spaced ticks starting on them."""
    found = set()
    for lo, hi, at in lines:
        box = (lo, at, hi, at) if horizontal else (at, lo, at, hi)
        if not inside(box, body, 2.0):
            continue
        spots = sorted({round(pos, 1) for pos, start in ticks if lo - 0.5 <= pos <= hi + 0.5 and abs(start - at) < 0.6})
        gaps = [b - a for a, b in zip(spots, spots[1:])]
        if len(spots) >= MIN_TICKS and max(gaps) - min(gaps) <= 1.0:
            found.add((lo, hi, at))
    # Lines on one another (an axis drawn over a plot's L-shaped frame) are one axis; lines meeting end to end
    # are two (the spines of plots stacked on a shared axis).
    merged: list[list[float]] = []
    for lo, hi, at in sorted(found, key=lambda t: (round(t[2]), t[0])):
        last = merged[-1] if merged else None
        if last is not None and abs(last[2] - at) < 1.0 and lo < last[1] - 1.0:
            last[1] = max(last[1], hi)
        else:
            merged.append([lo, hi, at])
    return len(merged)


def axes(drawings: Sequence[dict], body: Box) -> int:
    """Plots told by their axes: lines inside ``body`` with ``MIN_TICKS`` or more evenly spaced tick marks.

    Ticks point out of a plot (below an x axis, left of a y axis) or into it (above, right); a plot has one x
    and one y axis of a kind, so each kind counts the smaller of its two numbers where both are drawn (a
    second x axis on top of a plot adds no panel), and the kind finding more plots gives the count. A plot
    boxed with ticks pointing in on all four sides shows each kind once: its top and right spines read as
    axes with ticks pointing out.
    """
    xlines, ylines = [], []
    xticks: list[tuple[float, float, float]] = []  # (x, the end on an axis the tick hangs below, on one it stands on)
    yticks: list[tuple[float, float, float]] = []  # (y, the end on an axis it points left of, on one it points right of)
    for d in drawings:
        if d.get("color") is None or is_white(d["color"]):
            continue  # no stroke, or a white one (grid lines over a grey panel)
        for item in d["items"]:
            if item[0] != "l":
                continue
            a, b = item[1], item[2]
            dx, dy = abs(a.x - b.x), abs(a.y - b.y)
            if dy < 0.3 and dx >= AXIS_MIN_PT:
                xlines.append((min(a.x, b.x), max(a.x, b.x), a.y))
            elif dx < 0.3 and dy >= AXIS_MIN_PT:
                ylines.append((min(a.y, b.y), max(a.y, b.y), a.x))
            elif dx < 0.3 and TICK_PT[0] <= dy <= TICK_PT[1]:
                xticks.append((a.x, min(a.y, b.y), max(a.y, b.y)))
            elif dy < 0.3 and TICK_PT[0] <= dx <= TICK_PT[1]:
                yticks.append((a.y, max(a.x, b.x), min(a.x, b.x)))

    def plots(end: int) -> int:  # end 1: ticks pointing out of the plot; 2: into it
        nx = _ticked(xlines, [(t[0], t[end]) for t in xticks], body, True)
        ny = _ticked(ylines, [(t[0], t[end]) for t in yticks], body, False)
        return min(nx, ny) if nx and ny else nx

    return max(plots(1), plots(2))


GUTTER_PT = 8.0  # white space wider than a tick label's gap to its axis
PART_MIN_SHARE = 0.2
PART_MIN_PATHS = 5


def _cut(boxes: list[Box], axis: int) -> list[list[Box]]:
    """The boxes split into groups by white gutters of at least GUTTER_PT across ``axis`` (0: x, 1: y)."""
    order = sorted(boxes, key=lambda b: b[axis])
    groups: list[list[Box]] = [[order[0]]]
    reach = order[0][axis + 2]
    for b in order[1:]:
        if b[axis] - reach >= GUTTER_PT:
            groups.append([])
        groups[-1].append(b)
        reach = max(reach, b[axis + 2])
    return groups


def _blocks(boxes: list[Box], panel: Callable[[list[Box]], bool]) -> int:
    """Recursive XY cut: the panels among the groups of ink that white gutters separate. A group whose own
    groups hold no panel counts as one when it is large and busy enough and a group beside it holds a panel
    (small state diagrams stacked beside a plot: each too small, together a panel); alone (the tiles of a
    mosaic and its key) such groups stay no panel."""
    for axis in (1, 0):
        groups = _cut(boxes, axis)
        if len(groups) > 1:
            counts = [_blocks(g, panel) for g in groups]
            if any(counts):
                counts = [c or int(panel(g)) for c, g in zip(counts, groups)]
            return sum(counts)
    return int(panel(boxes))


def gutter_panels(drawings: Sequence[dict], images: Sequence[dict], body: Box) -> int:
    """Blocks of drawing that white gutters separate, each large and busy enough to be a panel."""
    ink = [d["rect"] for d in drawings] + [im["bbox"] for im in images]
    boxes: list[Box] = [b for b in ((float(r[0]), float(r[1]), float(r[2]), float(r[3])) for r in ink)
                        if inside(b, body, 2.0)]
    if not boxes:
        return 0
    w, h = body[2] - body[0], body[3] - body[1]

    def panel(part: list[Box]) -> bool:
        x0, y0 = min(b[0] for b in part), min(b[1] for b in part)
        x1, y1 = max(b[2] for b in part), max(b[3] for b in part)
        return len(part) >= PART_MIN_PATHS and x1 - x0 >= PART_MIN_SHARE * w and y1 - y0 >= PART_MIN_SHARE * h

    return _blocks(boxes, panel)


RASTER_DPI = 50  # a raster figure's layout, not its details
RASTER_GUTTER_PT = 3.0  # stacked raster plots stand 3-4 points apart; a 50-DPI render keeps 2 white rows of that
RASTER_TOLERANCE = 16  # grey levels from the background that still count as background (JPEG noise, no ink)


def _ink_runs(mask: np.ndarray, axis: int, min_gap: int) -> list[tuple[int, int]]:
    """The runs of ``mask``'s rows (axis 0) or columns (axis 1) holding ink, split by ``min_gap`` empty ones."""
    filled = np.flatnonzero(mask.any(axis=1 - axis))
    if filled.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(filled) > min_gap)
    starts = np.concatenate(([filled[0]], filled[breaks + 1]))
    ends = np.concatenate((filled[breaks], [filled[-1]])) + 1
    return list(zip(starts.tolist(), ends.tolist()))


def _mask_parts(mask: np.ndarray, min_gap: int) -> list[tuple[int, int, int, int]]:
    """Recursive XY cut of an ink mask along background gutters: the parts' (x0, y0, x1, y1) in pixels."""
    out: list[tuple[int, int, int, int]] = []
    stack = [(0, 0, mask.shape[1], mask.shape[0])]
    while stack:
        x0, y0, x1, y1 = stack.pop()
        sub = mask[y0:y1, x0:x1]
        rows = _ink_runs(sub, 0, min_gap)
        if not rows:
            continue
        if len(rows) > 1:
            stack.extend((x0, y0 + a, x1, y0 + b) for a, b in rows)
            continue
        cols = _ink_runs(sub, 1, min_gap)
        if len(cols) > 1:
            stack.extend((x0 + a, y0, x0 + b, y1) for a, b in cols)
            continue
        out.append((x0 + cols[0][0], y0 + rows[0][0], x0 + cols[0][1], y0 + rows[0][1]))
    return out


def raster_panels(page, images: Sequence[dict], body: Box) -> int:
    """Panels of a figure pasted as one image: parts of a ``RASTER_DPI`` grey render of the image (inside
    ``body``) that background gutters of ``RASTER_GUTTER_PT`` set apart, each spanning ``PART_MIN_SHARE`` of
    the body each way; 0 when the body holds no such image or more than one.

    The background is the render's commonest shade along its border. Inside a framed or axed plot no row is
    all background (its axes cross every row), so the cut falls between plots, not through one; a part as
    small as a legend row or an axis title is no panel."""
    import pymupdf

    w, h = body[2] - body[0], body[3] - body[1]
    clips = []
    for im in images:
        x0, y0 = max(float(im["bbox"][0]), body[0]), max(float(im["bbox"][1]), body[1])
        x1, y1 = min(float(im["bbox"][2]), body[2]), min(float(im["bbox"][3]), body[3])
        if x1 - x0 >= PART_MIN_SHARE * w and y1 - y0 >= PART_MIN_SHARE * h:
            clips.append(pymupdf.Rect(x0, y0, x1, y1))
    if len(clips) != 1:
        return 0
    # Boxes are in the page's unrotated space, a render is of the page as shown: turned there and back.
    pix = page.get_pixmap(dpi=RASTER_DPI, clip=clips[0] * page.rotation_matrix, colorspace=pymupdf.csGRAY,
                          alpha=False)
    if pix.width < 3 or pix.height < 3:
        return 0
    grey = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)[:, : pix.width]
    if page.rotation % 180:
        grey = grey.T  # mirrored as well as turned: the same rows and columns, so the same parts
    border = np.concatenate((grey[0], grey[-1], grey[:, 0], grey[:, -1]))
    background = int(np.bincount(border).argmax())
    mask = np.abs(grey.astype(np.int16) - background) > RASTER_TOLERANCE
    scale = 72.0 / RASTER_DPI
    n = sum((x1 - x0) * scale >= PART_MIN_SHARE * w and (y1 - y0) * scale >= PART_MIN_SHARE * h
            for x0, y0, x1, y1 in _mask_parts(mask, round(RASTER_GUTTER_PT / scale)))
    return n if n >= 2 else max(n, strip_panels(grey, background, scale))


STRIP_PT = (6.0, 20.0)  # a facet's strip label: one line of text on a band
STRIP_ROW_SHARE = 0.5  # of a row in the strip's shade
STRIP_SHADE = 8  # grey levels within the strip's shade


def strip_panels(grey: np.ndarray, background: int, scale: float) -> int:
    """Facets pasted touching (too close for a background gutter), told by their strip labels: bands
    ``STRIP_PT`` high whose rows are mostly one shade off the background, broken across by columns nearer the
    background than that shade (the slivers between facets). A band's parts, two or more, each at least
    ``FRAME_MIN_PT`` wide and all of one width (facets are), are panels; a band in one piece (a row of a heat
    map's cells) or of unequal parts (a grey header split unevenly) counts none. ``scale``: points per pixel."""
    shades = np.array([np.bincount(row, minlength=256).argmax() for row in grey])
    share = (np.abs(grey.astype(np.int16) - shades[:, None]) <= STRIP_SHADE).mean(axis=1)
    banded = (np.abs(shades.astype(np.int16) - background) > RASTER_TOLERANCE) & (share >= STRIP_ROW_SHARE)
    total = 0
    for a, b in _ink_runs(banded[:, None], 0, 1):
        if not STRIP_PT[0] <= (b - a) * scale <= STRIP_PT[1]:
            continue
        band = grey[a:b]
        shade = int(np.bincount(band.ravel()).argmax())
        mean = band.mean(axis=0)
        strip = np.abs(mean - background) >= np.abs(mean - shade)
        parts = [(x1 - x0) * scale for x0, x1 in _ink_runs(strip[None, :], 1, 1)]
        parts = [p for p in parts if p >= FRAME_MIN_PT]
        if len(parts) >= 2 and max(parts) - min(parts) <= max(2 * scale, 0.1 * max(parts)):
            total += len(parts)
    return total


def body_letters(words: Sequence[tuple], body: Box) -> list[str]:
    """The panel letters among ``words`` (``page.get_text("words")`` tuples inside ``body``): the longest run
    a, b, c, ... written in one style ("(a)", "a)", "a", "A") in which each letter stands apart from the one
    before it as panels do, by ``PART_MIN_SHARE`` of the body across or down (some place of the one from
    some place of the other: a letter may also be a word of an axis title). One style only: "(a)" "(b)"
    beside a point "C" are two panels; close together, points A and B of a diagram are labels."""
    w, h = body[2] - body[0], body[3] - body[1]

    def apart(p: tuple, q: tuple) -> bool:
        return abs(p[0] - q[0]) >= PART_MIN_SHARE * w or abs(p[1] - q[1]) >= PART_MIN_SHARE * h

    styles: dict[tuple[str, str, bool], dict[int, list[tuple]]] = {}
    for word in words:
        m = PANEL_TOKEN.match(str(word[4]).strip())
        if m:
            opened, letter, closed = m.groups()
            styles.setdefault((opened, closed, letter.isupper()), {}).setdefault(ord(letter.lower()) - 97, []).append(word)
    best: list[str] = []
    for places in styles.values():
        run = 1 if 0 in places else 0
        while run in places and any(apart(p, q) for p in places[run] for q in places[run - 1]):
            run += 1
        if run > len(best):
            best = [str(places[k][0][4]).strip() for k in range(run)]
    return best


def count_panels(drawings: Sequence[dict], images: Sequence[dict], body: Box, caption_text: str = "",
                 body_tokens: Sequence[str] = (), page=None, body_words: Sequence[tuple] = ()) -> int:
    """Panels of the figure whose body is ``body`` (page points): frames, else axes, else panel letters, else
    gutters of the drawing, else (given the ``page`` to render) gutters inside a raster figure.

    Letters come from the caption, from ``body_tokens`` (strings taken as they are) and from ``body_words``
    (the page's words inside the body, read by ``body_letters``)."""
    n = frame_panels(frames(drawings, images, body))
    if n >= 2:
        return n
    n = axes(drawings, body)
    if n >= 2:
        return n
    n = estimate_panels(caption_text, [*body_tokens, *body_letters(body_words, body)])
    if n >= 2:
        return n
    n = gutter_panels(drawings, images, body)
    if n >= 2 or page is None:
        return max(1, n)
    return max(1, raster_panels(page, images, body))
