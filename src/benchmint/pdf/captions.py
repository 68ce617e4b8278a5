"""Figure-caption anchors: the "anchor" of the Anchor-Gated Sieve (spm-bench §2.1-2.2).

A text block anchors a figure when it *starts* with a figure header:
``Figure 1.``, ``Fig. 1:``, ``FIG. 1.``, ``Figure 1 |``, ``Figure 1 — ...``,
``Extended Data Fig. 1``, ``Supplementary Figure S1``, ``Figura 1``, numbers
with a letter suffix (``Figure 2a.``) or a chapter (``Figure 2.1:``), or a
header followed directly by a
capitalised caption (``Figure 3 Schematic of ...``). It does not fire on
in-text references (``as seen in Fig. 1``, ``Fig. 1 shows``, ``Figs. 2 and
3``), table captions, or list-of-figures entries (dot leaders and a page
number).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import pymupdf

_PREFIX = r"(?:(?:Extended\s+Data|Supplementary|Supplemental|Suppl\.)\s+)?"
_WORD = r"(?:Figure|FIGURE|Fig\.|FIG\.|Fig|FIG|Figura|FIGURA)"
# Numbers may carry a chapter: "Figure 2.1" (theses, reports, long vignettes) is figure 2.1, not figure 2.
_NUMBER = r"(?P<label>S?\d{1,3}(?:\.\d{1,3})?[a-z]?)"
# After the number: a delimiter, or a space and then a capital letter / opening bracket (the caption itself).
# A period followed by a digit belongs to the number ("Figure 2.3 shows" is a reference, not figure 2).
_AFTER = r"(?:\s*(?:\.(?!\d)|[:|—–])|\s+-\s|\s+(?=[A-Z(\[]))"
HEADER = re.compile(rf"^\s*{_PREFIX}{_WORD}\s*{_NUMBER}{_AFTER}")
# A line that is a caption header and nothing else: "Figure 1", "Fig. 2:", "FIGURE 3."
_BARE_HEADER = re.compile(rf"^\s*{_PREFIX}{_WORD}\s*{_NUMBER}\s*[.:|—–]?\s*$")
# List-of-figures lines: "Figure 3. Title ........ 12"
_LEADERS = re.compile(r"(?:\.\s*){4,}\d+\s*$|\s\d+\s*$(?<=\.{2}\s\d)")


@dataclass(frozen=True)
class Caption:
    label: str  # "1", "2a", "S3"
    text: str  # the whole block, whitespace collapsed
    bbox: tuple[float, float, float, float]  # page points


def caption_label(block_text: str) -> str | None:
    """The figure label when ``block_text`` starts with a figure-caption header, else None."""
    m = HEADER.match(block_text)
    if not m:
        return None
    first_line = block_text.strip().splitlines()[0]
    if _LEADERS.search(first_line):
        return None  # a list-of-figures entry, not a caption
    return m.group("label")


def _segments(block: dict):
    """A text block's lines split where MuPDF merged side-by-side columns or separate paragraphs.

    Yields (text, bbox). A line that starts to the right of the previous line's end
    sits in another column, unless the previous line is a bare caption header on
    the same row ("Figure 1" set apart from "How to read this book.": the caption
    goes on); a vertical gap of more than one line height starts a new paragraph.
    """
    text: list[str] = []
    box: tuple[float, float, float, float] | None = None
    prev: tuple[float, float, float, float] | None = None
    for line in block["lines"]:
        x0, y0, x1, y1 = line["bbox"]
        line_text = "".join(span["text"] for span in line["spans"])
        if prev is not None and _starts_segment(prev, (x0, y0, x1, y1), text, line_text):
            yield "\n".join(text), box
            text, box = [], None
        text.append(line_text)
        box = (x0, y0, x1, y1) if box is None else (min(box[0], x0), min(box[1], y0), max(box[2], x1), max(box[3], y1))
        prev = (x0, y0, x1, y1)
    if text:
        yield "\n".join(text), box


def _starts_segment(prev: tuple[float, float, float, float], line: tuple[float, float, float, float],
                   text: list[str], line_text: str = "") -> bool:
    """Whether ``line`` (reading ``line_text``) starts a new segment after ``prev``, the last of the segment's
    lines ``text``."""
    x0, y0, x1, y1 = line
    if HEADER.match(line_text) and prev[2] - prev[0] < 0.5 * (x1 - x0):
        # A caption set a point under its plot is read into one block with the plot's axis title: a header
        # after a line less than half its own line's width (no full line of a paragraph) starts the caption.
        return True
    if x0 > prev[2] + 5:  # right of the previous line's end: another column, unless it goes on a bare header's row
        return not (len(text) == 1 and _BARE_HEADER.match(text[0]) and y0 < prev[3] and y1 > prev[1])
    return y0 > prev[3] + (prev[3] - prev[1])


_TEXT_ONLY = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES


def text_segments(page) -> list[tuple[str, tuple[float, float, float, float]]]:
    """The page's text as (text, bbox) segments: MuPDF blocks, split at columns and paragraph gaps.

    Read without images: image blocks carry no text, and keeping them makes
    PyMuPDF decode every image for the dict.
    """
    out: list[tuple[str, tuple[float, float, float, float]]] = []
    for block in page.get_text("dict", flags=_TEXT_ONLY, sort=True)["blocks"]:
        if block.get("type") == 0:
            out.extend((text, cast("tuple[float, float, float, float]", tuple(float(v) for v in bbox)))
                       for text, bbox in _segments(block))
    return out


def page_captions(page, segments=None) -> list[Caption]:
    """Caption anchors among the page's text segments, in reading order (top to bottom, left to right)."""
    out = []
    for text, bbox in segments if segments is not None else text_segments(page):
        label = caption_label(text)
        if label is not None:
            out.append(Caption(label, " ".join(text.split()), bbox))
    return sorted(out, key=lambda c: (round(c.bbox[1]), c.bbox[0]))


# Table captions are no figure anchors, but they bound a figure's growth as a figure caption does:
# "Table 1.", "TABLE I:", "Tab. 2", "Table 3 Results of ..." at the start of a text block.
_TABLE_HEADER = re.compile(r"^\s*(?:Table|TABLE|Tab\.|TAB\.)\s*(?:S?\d{1,3}(?:\.\d{1,3})?|[IVXLC]{1,6})"
                           r"(?:\s*(?:\.(?!\d)|[:|—–])|\s+(?=[A-Z(\[]))")


def table_captions(words) -> list[tuple[float, float, float, float]]:
    """Boxes of the table captions among ``page.get_text("words")`` tuples: text blocks whose words start with
    a table header."""
    blocks: dict[int, list] = {}
    for w in words:
        blocks.setdefault(w[5], []).append(w)
    out = []
    for ws in blocks.values():
        ws = sorted(ws, key=lambda w: (w[6], w[7]))
        if _TABLE_HEADER.match(" ".join(w[4] for w in ws[:4])):
            out.append((min(w[0] for w in ws), min(w[1] for w in ws), max(w[2] for w in ws), max(w[3] for w in ws)))
    return out


# Panel letters: "(a)", "(b,c)", "(a-d)", "(a)–(d)", and Nature-style "a, ..." / "b | ..." at sentence starts.
_PANEL_PAREN = re.compile(r"\(\s*([a-h])\s*(?:([-–—,])\s*\(?\s*([a-h])\s*\)?)?\s*\)(?:\s*[-–—]\s*\(\s*([a-h])\s*\))?")
_PANEL_SENTENCE = re.compile(r"(?:^|[.;]\s+|\|\s*)([a-h])\s*[,|:]\s+(?=[A-Z(])")
# A panel letter set in a figure: "(a)", "a)", "a", "A"; its groups the opening bracket, the letter, the closing one.
PANEL_TOKEN = re.compile(r"^(\(?)([a-hA-H])(\)?)$")


def _letters_in(text: str) -> set[int]:
    found: set[int] = set()
    for m in _PANEL_PAREN.finditer(text):
        first, sep, second, range_end = m.groups()
        last = range_end or second
        if last and (range_end or sep in "-–—"):
            found.update(range(ord(first) - 97, ord(last) - 96))
        else:
            found.update(ord(c) - 97 for c in (first, second) if c)
    found.update(ord(m.group(1)) - 97 for m in _PANEL_SENTENCE.finditer(text))
    return found


def estimate_panels(caption_text: str, body_tokens: Sequence[str] = ()) -> int:
    """Number of sub-panels (spm-bench §2.2 keeps figures with >= 4) by letter: the run a, b, c, ... seen.

    Letters come from the caption ("(a)", "(a-d)", "a, ...") and from short text
    tokens drawn inside the figure body ("(c)", "d"). A figure with no panel
    letters counts as one panel.
    """
    letters = _letters_in(caption_text)
    for token in body_tokens:
        m = PANEL_TOKEN.match(token.strip())
        if m:
            letters.add(ord(m.group(2).lower()) - 97)
    # Panels run a, b, c, ...: a lone letter further on is a variable of a plot ("h", "g"), not a panel.
    n = 0
    while n in letters:
        n += 1
    return max(n, 1)
