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
from benchmint.pdf import fonts, triage_ref
from benchmint.pdf.fonts import FontTable
from benchmint.pdf.objects import REF, dict_entries, unescape_name

_ANNOT_LINK = 1  # PyMuPDF's PDF_ANNOT_LINK: links draw no text
_DEVICE_SPACES = {"DeviceGray", "DeviceRGB", "DeviceCMYK", "Pattern"}


class _Extractor:
    """Builds the kernel's resource structures for one document, sharing forms across pages."""

    def __init__(self, doc: pymupdf.Document) -> None:
        self.doc = doc
        self.resources: dict[Any, dict] = {}
        self.forms: dict[int, tuple] = {}
        self.pages: dict[int, tuple[bytes, dict]] = {}
        self.ocg_on = {xref: info["on"] for xref, info in doc.get_ocgs().items()}
        self.font_cache: dict[int, FontTable] = {}
        self.parsed: dict[int, dict[str, str]] = {}

    def _entries(self, xref: int) -> dict[str, str]:
        """The top-level entries of an object's dictionary (a stream's dictionary for streams), parsed once."""
        got = self.parsed.get(xref)
        if got is None:
            got = self.parsed[xref] = dict_entries(self.doc.xref_object(xref, compressed=True))
        return got

    def _dict_of(self, value: str | None) -> dict[str, str]:
        """The entries of a dictionary value, inline or referenced."""
        m = REF.match((value or "").encode())
        return self._entries(int(m.group(1))) if m else dict_entries(value or "")

    def _object(self, text: str | None) -> str:
        """The source text of a value, following one indirect reference."""
        m = REF.match((text or "").encode())
        return self.doc.xref_object(int(m.group(1)), compressed=True) if m else (text or "")

    def _visible(self, oc_text: str) -> bool:
        m = REF.match(oc_text.encode())
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

    @staticmethod
    def _matrix(value: str | None) -> tuple | None:
        if not value or not value.startswith("["):
            return None
        try:
            nums = [float(v) for v in value.strip("[] ").split()]
        except ValueError:
            return None
        return tuple(nums) if len(nums) == 6 else None

    def _program(self, kind: str, xref: int, entries: dict[str, str]) -> tuple:
        if xref in self.forms:
            return self.forms[xref]
        res = self.resources_of(xref, entries) if entries.get("Resources", "null") != "null" else None
        if xref in self.forms:  # built while its resources were (it invokes itself)
            return self.forms[xref]
        entry = (kind, self.doc.xref_stream(xref) or b"", res, self._matrix(entries.get("Matrix")))
        self.forms[xref] = entry
        return entry

    def resources_of(self, owner: int, entries: dict[str, str] | None = None) -> dict:
        """Kernel resources of a page or form xref (pages inherit /Resources from the tree)."""
        entries = self._entries(owner) if entries is None else entries
        while entries.get("Resources", "null") == "null":
            parent = REF.match(entries.get("Parent", "").encode())
            if not parent:
                return {}
            owner = int(parent.group(1))
            entries = self._entries(owner)
        value = entries["Resources"]
        m = REF.match(value.encode())
        cache_key = ("x", int(m.group(1))) if m else ("o", owner)
        if cache_key in self.resources:
            return self.resources[cache_key]
        out: dict = {}
        self.resources[cache_key] = out  # registered first: forms may reach it again
        resources = self._dict_of(value)

        def named(key: str) -> dict[str, str]:
            return self._dict_of(resources.get(key))

        xobjects: dict = {}
        for name, value in named("XObject").items():
            m = REF.match(value.encode())
            if not m:
                continue
            x = int(m.group(1))
            xobject = self._entries(x)
            subtype = xobject.get("Subtype")
            if not self._visible(xobject.get("OC", "")):
                xobjects[name] = ("hidden",)
            elif subtype == "/Form":
                xobjects[name] = self._program("form", x, xobject)
            elif subtype == "/Image":
                xobjects[name] = ("image",)
        out["XObject"] = xobjects
        patterns: dict = {}
        for name, value in named("Pattern").items():
            m = REF.match(value.encode())
            if not m:
                continue
            x = int(m.group(1))
            pattern = self._entries(x)
            patterns[name] = self._program("tiling", x, pattern) if pattern.get("PatternType") == "1" else ("shading",)
        out["Pattern"] = patterns
        gstates: dict = {}
        for name, value in named("ExtGState").items():
            gstate = self._dict_of(value)
            gstates[name] = (_number(gstate.get("ca"), 1.0), _number(gstate.get("CA"), 1.0))
        out["ExtGState"] = gstates
        out["Shading"] = list(named("Shading"))
        out["ColorSpace"] = list(named("ColorSpace"))
        props = named("Properties")
        out["Hidden"] = [name for name, value in props.items() if not self._visible(value)]
        out["ActualText"] = [name for name, value in props.items() if self._carries_actual_text(value)]
        out["Font"] = {name: int(m.group(1)) if (m := REF.match(value.encode())) else 0
                       for name, value in named("Font").items()}
        return out

    def _carries_actual_text(self, value: str) -> bool:
        text = self._object(value)
        return "ActualText" in text or "#" in text

    def font_tables(self, resources: Sequence[dict | None]) -> dict[int, FontTable]:
        """The code tables of every font the given resources (and the forms and patterns they run) name."""
        out: dict[int, FontTable] = {}
        seen: set[int] = set()
        todo = [r for r in resources if r is not None]
        while todo:
            res = todo.pop()
            if id(res) in seen:
                continue
            seen.add(id(res))
            for xref in res.get("Font", {}).values():
                if xref and xref not in out:
                    out[xref] = self.font_table(xref)
            todo.extend(e[2] for e in (*res.get("XObject", {}).values(), *res.get("Pattern", {}).values())
                        if e[0] in ("form", "tiling") and e[2] is not None)
        return out

    def font_table(self, xref: int) -> FontTable:
        got = self.font_cache.get(xref)
        if got is None:
            try:
                got = self._read_font(xref)
            except Exception:  # an unreadable font dictionary: its text may read as anything
                got = fonts.OPAQUE
            self.font_cache[xref] = got
        return got

    def _read_font(self, xref: int) -> FontTable:
        font = self._entries(xref)
        m = REF.match(font.get("ToUnicode", "").encode())
        to_unicode = fonts.parse_to_unicode(self.doc.xref_stream(int(m.group(1))) or b"") if m else None
        encoding = self._object(font.get("Encoding")).strip()
        if font.get("Subtype") == "/Type0":
            return fonts.composite_table(encoding in ("/Identity-H", "/Identity-V"), to_unicode)
        base, differences = None, {}
        if encoding.startswith("/"):
            base = unescape_name(encoding[1:])
        elif encoding.startswith("<<"):
            entries = dict_entries(encoding)
            if entries.get("BaseEncoding", "").startswith("/"):
                base = unescape_name(entries["BaseEncoding"][1:])
            differences = fonts.parse_differences(self._object(entries.get("Differences")))
        descriptor = self._dict_of(font.get("FontDescriptor"))
        embedded = any(k in descriptor for k in ("FontFile", "FontFile2", "FontFile3"))
        builtin = None
        if m := REF.match(descriptor.get("FontFile", "").encode()):
            builtin = fonts.type1_builtin(self.doc.xref_stream(int(m.group(1))) or b"")
        base_font = re.sub(r"^/([A-Z]{6}\+)?", "", font.get("BaseFont", ""))
        symbolic = int(_number(descriptor.get("Flags"), 0)) & 4 or base_font in ("Symbol", "ZapfDingbats")
        standard = font.get("Subtype") != "/Type3" and not embedded and not symbolic
        return fonts.simple_table(base, differences, builtin, standard, to_unicode)

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
    return _dispatch.core().triage.count_pages(inputs, workers)


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


def may_show_figure_words(doc: pymupdf.Document, numbers: Sequence[int], extractor: _Extractor | None = None,
                          workers: int = 1) -> list[bool]:
    """For each 0-based page number: whether the page's text may read "Fig" or "FIG", without a text page.

    False proves the page holds no figure-caption anchor (every anchor starts
    with one of them), so MuPDF need not extract its text; True is no claim.
    The shown text is decoded through each font's encoding or ToUnicode map
    (benchmint.pdf.fonts); fonts whose codes cannot be read without loading
    their programs, /ActualText, damaged streams, and annotations other than
    links (their appearance streams add text) all answer True.

    Deliberate difference: a character MuPDF drops (outside the media box)
    between two letters is not dropped here, so "F?ig" with "?" off the page
    would read as no "Fig". ``BENCHMINT_IMPL=reference`` runs the plain
    reading in triage_ref.
    """
    resolve_workers(workers)
    ex = extractor or _Extractor(doc)
    pages = [doc[n] for n in numbers]
    inputs = [ex.page_input(page) for page in pages]
    tables = ex.font_tables([res for _, res in inputs])
    if _dispatch.use_reference("triage"):
        got = [triage_ref.may_show_figure_word(content, res, tables) for content, res in inputs]
    else:
        got = _dispatch.core().triage.figure_words(inputs, tables, workers)
    return [may or any(kind != _ANNOT_LINK for _, kind, _ in page.annot_xrefs()) for page, may in zip(pages, got)]


def document_counts(path: str, workers: int = 1) -> list[dict]:
    """Per-page ``{"page", "images", "paths", "damaged"}`` of a PDF file (pages numbered from 0)."""
    with pymupdf.open(path) as doc:
        counts = open_document_counts(doc, workers)
    return [{"page": i, "images": im, "paths": pa, "damaged": da} for i, (im, pa, da) in enumerate(counts)]
