"""Page triage counts without rendering: raster image placements and painted paths.

``page_counts(page)`` returns ``(images, paths)`` where, on the pages we test,
``paths == len(page.get_drawings())`` and ``images == len(page.get_image_info())``,
at a fraction of their cost: PyMuPDF hands over the raw content streams and
resource dictionaries, and the compiled tokenizer (``benchmint._core.triage``)
counts painting operators, following Form XObjects (a form already being run
counts nothing more) and tiling patterns.

Matched exactly (each checked in tests/test_pdf_triage.py):

* a path is counted when painted (S s f F f* B B* b b*) and it holds at least
  one segment (l c v y re after a current point); ``n`` and clipping alone
  paint nothing; several ``re`` before one ``f`` are one drawing;
* a stroke of the same path right after a fill (``B``, or ``f`` then ``S``
  with the same operands and CTM) is one "fs" drawing, as PyMuPDF merges it;
  an ``h`` where the path is back at its start adds nothing to compare, and a
  path with four consecutive lines ending where they began stays two
  drawings (PyMuPDF makes them a "qu" item when stroked, not when filled);
* zero-area, off-page, fully clipped and white paths are counted (PyMuPDF
  counts them); paths under optional content that is off are not;
* a path filled with a shading pattern is no drawing but one image (the
  text-page device that ``get_image_info`` uses turns shadings into image
  blocks; ``sh`` likewise); a tiling pattern's own content is counted when
  the painted area fits in one tile;
* images: every ``Do`` of an image XObject, every inline image, every
  shading, each placement once, except when painted below 50% fill alpha
  (``/ca`` of the ExtGState) or in hidden optional content;
* damaged streams: MuPDF gives up on a content stream after 100 syntax
  errors (unknown operators, stray delimiters, missing resources); so does
  the tokenizer.

Deliberate differences:

* annotations are not counted (``get_drawings`` and ``get_image_info`` run
  annotation appearance streams too); the sieve looks at page content;
* the fill-then-stroke merge compares path operators, operands and the CTM,
  not PyMuPDF's device-space items: a stroke whose different operators give
  the same device-space path (e.g. ``m l l l h`` after ``re f``) stays two
  drawings here;
* forms nested more than 64 deep stop counting and set ``damaged``;
  PyMuPDF raises "exception stack overflow" from about 62 levels;
* tiling patterns: the pattern's content is counted once per painted path;
  MuPDF runs it once per tile it lays, so a hatched area spanning several
  tiles (matplotlib's ``hatch=``) counts more drawings in get_drawings;
* optional content: only OCG on/off states and OCMD /P policies are
  evaluated (no /VE expressions, no usage/intent);
* inline images under a binary filter (Fl, DCT, ...) end at the first
  plausible white-space-delimited ``EI`` (MuPDF decodes the data): a stream
  cut inside such data may count the image where MuPDF does not;
* Type3 glyph procedures are not looked into (neither does get_drawings).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pymupdf

from benchmint import _dispatch
from benchmint.parallel import resolve_workers
from benchmint.pdf import triage_ref

_REF = re.compile(rb"^\s*(\d+)\s+\d+\s+R\s*$")
_DEVICE_SPACES = {"DeviceGray", "DeviceRGB", "DeviceCMYK", "Pattern"}


def _dict_entries(text: str) -> dict[str, str]:
    """Top-level ``/Name value`` pairs of a PDF dictionary's source text."""
    entries: dict[str, str] = {}
    s = text.strip()
    if not s.startswith("<<"):
        return entries
    i, n = 2, len(s) - 2  # inside the outer << >>
    while i < n:
        while i < n and s[i] in " \t\r\n\f\0":
            i += 1
        if i >= n or s[i] != "/":
            break
        j = i + 1
        while j < n and s[j] not in " \t\r\n\f\0/<>[]()":
            j += 1
        key = _unescape_name(s[i + 1 : j])
        k = j
        depth = 0
        while k < n:  # the value ends at the next key of this level
            c = s[k]
            if c in "[(" or s.startswith("<<", k):
                depth += 1
                k += 2 if c == "<" else 1
                continue
            if c in "])" or s.startswith(">>", k):
                depth -= 1
                k += 2 if c == ">" else 1
                continue
            if c == "/" and depth == 0 and s[j:k].strip():
                break
            k += 1
        entries[key] = s[j:k].strip()
        i = k
    return entries


def _unescape_name(raw: str) -> str:
    return re.sub(r"#([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), raw)


class _Extractor:
    """Builds the kernel's resource structures for one document, sharing forms across pages."""

    def __init__(self, doc: pymupdf.Document) -> None:
        self.doc = doc
        self.resources: dict[Any, dict] = {}
        self.forms: dict[int, tuple] = {}
        self.pages: dict[int, tuple[bytes, dict]] = {}
        self.ocg_on = {xref: info["on"] for xref, info in doc.get_ocgs().items()}

    def _resolve(self, owner: int, key: str) -> tuple[int, str]:
        """(xref or 0, source text) of owner's key, following one indirection."""
        kind, value = self.doc.xref_get_key(owner, key)
        if kind == "xref":
            x = int(value.split()[0])
            return x, self.doc.xref_object(x, compressed=True)
        return 0, value if kind == "dict" else ""

    def _visible(self, oc_text: str) -> bool:
        m = _REF.match(oc_text.encode())
        if not m:
            return True
        x = int(m.group(1))
        if x in self.ocg_on:
            return self.ocg_on[x]
        ocgs = self.doc.xref_get_key(x, "OCGs")
        members = [int(v) for v in re.findall(r"(\d+)\s+\d+\s+R", ocgs[1])]
        states = [self.ocg_on.get(v, True) for v in members]
        if not states:
            return True
        policy = self.doc.xref_get_key(x, "P")[1].lstrip("/") or "AnyOn"
        return {"AllOn": all(states), "AnyOff": not all(states), "AllOff": not any(states)}.get(
            policy, any(states)
        )

    def _matrix(self, xref: int) -> tuple | None:
        kind, value = self.doc.xref_get_key(xref, "Matrix")
        if kind != "array":
            return None
        nums = [float(v) for v in value.strip("[] ").split()]
        return tuple(nums) if len(nums) == 6 else None

    def _program(self, kind: str, xref: int) -> tuple:
        if xref in self.forms:
            return self.forms[xref]
        res = self.resources_of(xref) if self.doc.xref_get_key(xref, "Resources")[0] != "null" else None
        if xref in self.forms:  # built while its resources were (it invokes itself)
            return self.forms[xref]
        entry = (kind, self.doc.xref_stream(xref) or b"", res, self._matrix(xref))
        self.forms[xref] = entry
        return entry

    def resources_of(self, owner: int) -> dict:
        """Kernel resources of a page or form xref (pages inherit /Resources from the tree)."""
        while self.doc.xref_get_key(owner, "Resources")[0] == "null":
            kind, parent = self.doc.xref_get_key(owner, "Parent")
            if kind != "xref":
                return {}
            owner = int(parent.split()[0])
        rx, _ = self._resolve(owner, "Resources")
        cache_key = ("x", rx) if rx else ("o", owner)
        if cache_key in self.resources:
            return self.resources[cache_key]
        out: dict = {}
        self.resources[cache_key] = out  # registered first: forms may reach it again
        xobjects: dict = {}
        for name, value in _dict_entries(self._resolve(owner, "Resources/XObject")[1]).items():
            m = _REF.match(value.encode())
            if not m:
                continue
            x = int(m.group(1))
            subtype = self.doc.xref_get_key(x, "Subtype")[1]
            if not self._visible(self.doc.xref_get_key(x, "OC")[1]):
                xobjects[name] = ("hidden",)
            elif subtype == "/Form":
                xobjects[name] = self._program("form", x)
            elif subtype == "/Image":
                xobjects[name] = ("image",)
        out["XObject"] = xobjects
        patterns: dict = {}
        for name, value in _dict_entries(self._resolve(owner, "Resources/Pattern")[1]).items():
            m = _REF.match(value.encode())
            if not m:
                continue
            x = int(m.group(1))
            ptype = self.doc.xref_get_key(x, "PatternType")[1]
            patterns[name] = self._program("tiling", x) if ptype == "1" else ("shading",)
        out["Pattern"] = patterns
        gstates: dict = {}
        for name, value in _dict_entries(self._resolve(owner, "Resources/ExtGState")[1]).items():
            m = _REF.match(value.encode())
            text = self.doc.xref_object(int(m.group(1)), compressed=True) if m else value
            entries = _dict_entries(text)
            gstates[name] = (_number(entries.get("ca"), 1.0), _number(entries.get("CA"), 1.0))
        out["ExtGState"] = gstates
        out["Shading"] = list(_dict_entries(self._resolve(owner, "Resources/Shading")[1]))
        out["ColorSpace"] = list(_dict_entries(self._resolve(owner, "Resources/ColorSpace")[1]))
        props = _dict_entries(self._resolve(owner, "Resources/Properties")[1])
        out["Hidden"] = [name for name, value in props.items() if not self._visible(value)]
        return out

    def page_input(self, page: pymupdf.Page) -> tuple[bytes, dict]:
        """(content, resources) of a page, read once per extractor."""
        got = self.pages.get(page.xref)
        if got is None:
            # Content streams are joined with white space, as MuPDF joins them.
            content = b"\n".join(self.doc.xref_stream(x) or b"" for x in page.get_contents())
            got = self.pages[page.xref] = (content, self.resources_of(page.xref))
        return got


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default


def page_counts(page: pymupdf.Page) -> tuple[int, int]:
    """(images placed, vector paths painted) of one page, without rendering it.

    ``BENCHMINT_IMPL=reference`` returns ``triage_ref.page_counts(page)`` instead.
    """
    if _dispatch.use_reference("triage"):
        return triage_ref.page_counts(page)
    content, res = _Extractor(page.parent).page_input(page)
    images, paths, _ = _dispatch.core().triage.count_paths(content, res)
    return images, paths


def open_document_counts(doc: pymupdf.Document, workers: int = 1, extractor: _Extractor | None = None,
                         pages: Sequence[int] | None = None) -> list[tuple[int, int, bool]]:
    """(images, paths, damaged) for every page of an open document (or the 0-based ``pages``); resources are
    read once for all pages.

    ``workers`` threads count pages in parallel (1 = serial, -1 = all cores);
    stream extraction runs first, in this thread. ``damaged`` says a content
    stream could not be read cleanly (always False on the reference path).
    A caller that goes on reading the pages (``lean_text_copy``) passes its
    own ``extractor``, which keeps what it read.
    """
    resolve_workers(workers)
    # pymupdf.Document iterates through __getitem__, which its annotations do not declare (no __iter__)
    numbers = range(doc.page_count) if pages is None else pages
    if _dispatch.use_reference("triage"):
        return [(*triage_ref.page_counts(doc[n]), False) for n in numbers]
    ex = extractor or _Extractor(doc)
    inputs = [ex.page_input(doc[n]) for n in numbers]
    got = _dispatch.core().triage.count_pages(inputs, workers)
    return [(int(im), int(pa), bool(da)) for im, pa, da in zip(got["images"], got["paths"], got["damaged"])]


# A one-page copy costs about half a millisecond; it pays off when it spares
# MuPDF many form runs (a scatter plot invokes one marker form per point).
LEAN_MIN_DROPPED = 64


def _may_show_text(entry: tuple, seen: set[int]) -> bool:
    """Whether running this form could put text on the page (conservative: any BT, or a form it cannot see)."""
    if id(entry) in seen:
        return False  # a cycle: MuPDF does not run it again
    seen.add(id(entry))
    _, content, res, _ = entry
    if b"BT" in content:
        return True
    if b"Do" not in content and b"scn" not in content and b"SCN" not in content:
        return False
    if res is None:
        return True  # inherits its caller's resources: not worth resolving
    programs = [e for e in (*res["XObject"].values(), *res["Pattern"].values()) if e[0] in ("form", "tiling")]
    return any(_may_show_text(e, seen) for e in programs)


def lean_text_copy(page: pymupdf.Page, extractor: _Extractor) -> pymupdf.Document | None:
    """A one-page copy of ``page`` whose content no longer runs XObjects that cannot show text, or None.

    MuPDF interprets every form a page runs to build its text page, even forms
    that only draw (a marker invoked 6,000 times). Images and such forms leave
    no trace in a text page read without images, so the copy's text equals the
    page's (tests/test_pdf_triage.py checks it) at a fraction of the cost.
    None when fewer than ``LEAN_MIN_DROPPED`` invocations would be saved, and
    on the reference path (``BENCHMINT_IMPL=reference``: the page is read as is).
    """
    if _dispatch.use_reference("triage"):
        return None
    content, resources = extractor.page_input(page)
    xobjects = resources.get("XObject", {})
    names = [name for name, e in xobjects.items()
             if e[0] == "image" or (e[0] == "form" and not _may_show_text(e, set()))]
    if not names:
        return None
    lean, dropped = _dispatch.core().triage.drop_invocations(content, names)
    if dropped < LEAN_MIN_DROPPED:
        return None
    copy = pymupdf.open()
    copy.insert_pdf(page.parent, from_page=page.number, to_page=page.number)
    streams = copy[0].get_contents()
    copy.update_stream(streams[0], lean, compress=False)
    for xref in streams[1:]:
        copy.update_stream(xref, b"")
    return copy


def document_counts(path: str, workers: int = 1) -> list[dict]:
    """Per-page ``{"page", "images", "paths", "damaged"}`` of a PDF file (pages numbered from 0)."""
    with pymupdf.open(path) as doc:
        counts = open_document_counts(doc, workers)
    return [{"page": i, "images": im, "paths": pa, "damaged": da} for i, (im, pa, da) in enumerate(counts)]
