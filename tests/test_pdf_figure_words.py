"""The figure-word check of page triage: font code classes against MuPDF's own text, the compiled scan against
its plain reading (triage_ref.may_show_figure_word), and the promise that a page it clears shows no "Fig"."""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.pdf import fonts
from benchmint.pdf.captions import _TEXT_ONLY
from benchmint.pdf.fonts import ANY, G_LOWER, G_UPPER, I_LOWER, I_UPPER, OTHER, F
from benchmint.pdf.triage import _Extractor, may_show_figure_words
from benchmint.pdf.triage_ref import may_show_figure_word

import pdf_factory

FIG = re.compile("Fig|FIG")


def _ttf() -> str:
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


# ---------------------------------------------------------------- font tables, by hand


def test_glyph_names_read_as_mupdf_reads_them():
    assert fonts.glyph_classes("F") == bytes([F])
    assert fonts.glyph_classes("a70") == bytes([F])  # "a" + decimal code
    assert fonts.glyph_classes("uni0069") == bytes([I_LOWER])
    assert fonts.glyph_classes("G.sc") == bytes([G_UPPER])  # a suffix after the period is dropped
    assert fonts.glyph_classes("Gamma") == bytes([OTHER])
    assert fonts.glyph_classes("no-such-glyph") == bytes([ANY])


def test_to_unicode_sections():
    cmap = b"""/CIDInit /ProcSet findresource begin 12 dict begin begincmap
    1 begincodespacerange <00> <FF> endcodespacerange
    3 beginbfchar <41> <0046> <42> <00690067> <43> <0049> endbfchar
    2 beginbfrange <50> <52> <0061> <60> <61> [<0047> <D835DC00>] endbfrange
    endcmap CMapName currentdict /CMap defineresource pop end end"""
    mapped, complete = fonts.parse_to_unicode(cmap)
    assert complete
    assert mapped == {0x41: "F", 0x42: "ig", 0x43: "I", 0x50: "a", 0x51: "b", 0x52: "c", 0x60: "G",
                      0x61: "\U0001d400"}
    assert fonts.classes(mapped[0x42]) == bytes([I_LOWER, G_LOWER])
    # a range whose last unit counts up; odd digit counts leave the map incomplete
    assert fonts.parse_to_unicode(b"1 beginbfrange <0001> <0003> <0045> endbfrange") == ({1: "E", 2: "F", 3: "G"}, True)
    assert not fonts.parse_to_unicode(b"1 beginbfrange <0001> <0003> <00450> endbfrange")[1]
    assert not fonts.parse_to_unicode(b"/Other usecmap 1 beginbfchar <01> <0046> endbfchar")[1]
    assert not fonts.parse_to_unicode(b"1 begincidrange <00> <FF> 0 endcidrange")[1]


def test_type1_builtin_encodings():
    standard = b"%!PS-AdobeFont-1.0: X\n/Encoding StandardEncoding def\ncurrentfile eexec\x80\x81"
    assert fonts.type1_builtin(standard)[0x46] == bytes([F])
    custom = (b"/Encoding 256 array\n0 1 255 {1 index exch /.notdef put} for\ndup 65 /F put\n"
              b"dup 66 /i put\ndup 67 /Gamma put\nreadonly def\ncurrentfile eexec\x00dup 68 /g put")
    assert fonts.type1_builtin(custom) == {65: bytes([F]), 66: bytes([I_LOWER]), 67: bytes([OTHER])}
    assert fonts.type1_builtin(b"no encoding here eexec") is None


def test_differences_and_table_precedence():
    assert fonts.parse_differences("[ 65 /F /i 70 /g#2Esc /x ]") == {65: "F", 66: "i", 70: "g.sc", 71: "x"}
    # ToUnicode over Differences over the base encoding; outside printable ASCII a base encoding says nothing.
    width, default, table = fonts.simple_table("WinAnsiEncoding", {0x46: "Gamma", 0x80: "G"}, None, False,
                                               ({0x47: "F"}, True))
    assert (width, default) == (1, ANY)
    assert table[0x46] == bytes([OTHER]) and table[0x47] == bytes([F]) and table[0x80] == bytes([G_UPPER])
    assert table[0x69] == bytes([I_LOWER]) and 0xE9 not in table
    # a non-embedded, non-symbolic font without an encoding reads StandardEncoding
    assert fonts.simple_table(None, {}, None, True, None)[2][0x46] == bytes([F])
    assert fonts.simple_table(None, {}, None, False, None)[2] == {}  # an embedded program's own encoding
    assert fonts.simple_table("MacExpertEncoding", {}, None, True, None)[2] == {}
    # a ToUnicode map with what is not read here leaves every other code unknown
    assert fonts.simple_table("WinAnsiEncoding", {}, None, False, ({0x41: "x"}, False))[2] == {0x41: bytes([OTHER])}
    assert fonts.composite_table(False, ({1: "F"}, True)) == fonts.OPAQUE
    assert fonts.composite_table(True, ({1: "F"}, True)) == (2, ANY, {1: bytes([F])})


# ---------------------------------------------------------------- font tables against MuPDF


def _add(doc: pymupdf.Document, text: str, stream: bytes | None = None) -> int:
    x = doc.get_new_xref()
    doc.update_object(x, text)
    if stream is not None:
        doc.update_stream(x, stream)
    return x


def _code_grid(font: str, codes: range, to_unicode: bytes | None = None) -> tuple[pymupdf.Document, fonts.FontTable]:
    """A page showing each code in its own cell of a 16-column grid in the font ``font`` (dictionary source;
    ``{tu}`` stands for its ToUnicode stream), and the font's table as read here."""
    doc = pymupdf.open()
    page = doc.new_page(width=16 * 40 + 20, height=(len(codes) // 16 + 2) * 40)
    ops = [f"BT /F1 12 Tf {10 + (k % 16) * 40} {page.rect.height - 30 - (k // 16) * 40} Td <{code:02X}> Tj ET"
           for k, code in enumerate(codes)]
    if to_unicode is not None:
        font = font.replace("{tu}", f"{_add(doc, '<<>>', to_unicode)} 0 R")
    xf = _add(doc, font)
    doc.xref_set_key(page.xref, "Contents", f"{_add(doc, '<<>>', chr(10).join(ops).encode())} 0 R")
    doc.xref_set_key(page.xref, "Resources", f"<< /Font << /F1 {xf} 0 R >> >>")
    doc = pymupdf.open("pdf", doc.tobytes())
    ex = _Extractor(doc)
    _, res = ex.page_input(doc[0])
    return doc, ex.font_tables([res])[res["Font"]["F1"]]


def _mupdf_reading(doc: pymupdf.Document, codes: range) -> dict[int, str]:
    """code -> the text MuPDF extracts for it (flags of the harvest's text pass)."""
    out: dict[int, str] = {}
    for block in doc[0].get_text("rawdict", flags=_TEXT_ONLY)["blocks"]:
        for line in block.get("lines", ()):
            for span in line["spans"]:
                for char in span["chars"]:
                    col = round((char["origin"][0] - 10) / 40)
                    row = round((char["origin"][1] - 30) / 40)
                    k = row * 16 + col
                    if 0 <= k < len(codes):
                        out[codes[k]] = out.get(codes[k], "") + char["c"]
    return out


def _disagreements(table: fonts.FontTable, reading: dict[int, str], codes) -> list:
    """Codes whose class is known here but is not the class of what MuPDF shows."""
    _, default, entries = table
    return [(code, entries.get(code), reading.get(code)) for code in codes
            if ANY not in entries.get(code, bytes([default]))
            and fonts.classes(reading.get(code, "")) != entries.get(code, bytes([default]))]


SIMPLE_FONTS = {
    "Helvetica, no encoding": "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    "Times WinAnsi": "<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding /WinAnsiEncoding >>",
    "Courier MacRoman": "<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /MacRomanEncoding >>",
    "Differences": "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Type /Encoding "
                   "/Differences [65 /F /i /g /G /I /a70 /uni0069 /g.sc /Gamma /fi 97 /A /B] >> >>",
    "Differences on WinAnsi": "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << "
                              "/BaseEncoding /WinAnsiEncoding /Differences [70 /x 128 /F] >> >>",
    "Symbol": "<< /Type /Font /Subtype /Type1 /BaseFont /Symbol >>",
}


@pytest.mark.parametrize("name", list(SIMPLE_FONTS))
def test_simple_font_classes_are_mupdfs(name):
    codes = range(0x20, 0x100)
    doc, table = _code_grid(SIMPLE_FONTS[name], codes)
    reading = _mupdf_reading(doc, codes)
    assert len(reading) > 90
    assert _disagreements(table, reading, codes) == []
    known = [c for c in codes if ANY not in table[2].get(c, bytes([table[1]]))]
    assert len(known) >= (0 if name == "Symbol" else 90)  # Symbol's own encoding is not read: all unknown


def test_to_unicode_classes_are_mupdfs():
    cmap = (b"1 begincodespacerange <00> <FF> endcodespacerange 2 beginbfchar <41> <0046> <42> <0069> endbfchar "
            b"1 beginbfrange <60> <7F> <0041> endbfrange")
    codes = range(0x20, 0x100)
    doc, table = _code_grid("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding "
                            "/ToUnicode {tu} >>", codes, cmap)
    reading = _mupdf_reading(doc, codes)
    assert reading[0x41] == "F" and reading[0x60] == "A" and reading[0x46] == "F"
    assert table[2][0x41] == bytes([F]) and table[2][0x60] == bytes([OTHER])
    assert _disagreements(table, reading, codes) == []


def test_identity_font_classes_are_mupdfs():
    # PyMuPDF embeds a TrueType file as a Type0 font under Identity-H with a ToUnicode map.
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((50, 100), "Figure 1. Ahoj gig FIG", fontname="F0", fontfile=_ttf())
    page.insert_text((50, 200), "Leaf Tiger", fontname="F0", fontfile=_ttf())
    doc = pymupdf.open("pdf", doc.tobytes())
    ex = _Extractor(doc)
    _, res = ex.page_input(doc[0])
    (table,) = ex.font_tables([res]).values()
    assert table[0] == 2
    font = pymupdf.Font(fontfile=_ttf())
    for ch in "FigGIaeL":
        assert table[2][font.has_glyph(ord(ch))] == fonts.classes(ch)
    assert may_show_figure_words(doc, [0]) == [True]
    plain = pymupdf.open()
    plain.new_page().insert_text((50, 100), "Leaf Tiger", fontname="F0", fontfile=_ttf())
    assert may_show_figure_words(pymupdf.open("pdf", plain.tobytes()), [0]) == [False]


# ---------------------------------------------------------------- pages: designed cases against MuPDF


def _page_with(content: bytes, annotation: str = "") -> pymupdf.Document:
    """A page with ``content``, its fonts as objects: F1 Helvetica, F2 Helvetica whose Differences make A B C
    read F i g."""
    b = pdf_factory.Builder()
    b.raw_page("case", content)
    doc = b.doc
    f1 = _add(doc, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    f2 = _add(doc, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Differences [65 /F /i /g] >> >>")
    doc.xref_set_key(doc[0].xref, "Resources/Font", f"<< /F1 {f1} 0 R /F2 {f2} 0 R >>")
    if annotation:
        doc[0].add_freetext_annot(pymupdf.Rect(10, 10, 150, 40), annotation)
    return pymupdf.open("pdf", doc.tobytes())


CASES = {
    # name: (content, annotation, may the text read Fig?)
    "plain Fig": (b"BT /F1 9 Tf 10 10 Td (Fig. 3) Tj ET", "", True),
    "FIG in capitals": (b"BT /F1 9 Tf 10 10 Td (FIG. 3) Tj ET", "", True),
    "Fig inside a word": (b"BT /F1 9 Tf 10 10 Td (Figs are fruit: fig! f i g, FiG) Tj ET", "", True),
    "nothing like it": (b"BT /F1 9 Tf 10 10 Td (A plot of the data, Table 2) Tj ET", "", False),
    "word split over TJ": (b"BT /F1 9 Tf 10 10 Td [(F) -10 (i) 20 <67> (ure 1.)] TJ ET", "", True),
    "word split over operators": (b"BT /F1 9 Tf 10 10 Td (F) Tj (ig) ' ET", "", True),
    "escapes": (b"BT /F1 9 Tf 10 10 Td (\\106\\151g\\\nure) Tj ET", "", True),
    "fake bold": (b"BT /F1 9 Tf 10 10 Td (FFiigg) Tj ET", "", True),
    "Differences spell it": (b"BT /F2 9 Tf 10 10 Td (ABC) Tj ET", "", True),
    "Differences hide it": (b"BT /F2 9 Tf 10 10 Td (Fxy) Tj ET", "", False),
    "font restored by Q": (b"BT /F1 9 Tf q /F2 9 Tf Q 10 10 Td (ABC) Tj ET", "", False),
    "unknown font": (b"BT /F9 9 Tf 10 10 Td (xyz) Tj ET", "", True),
    "actual text": (b"/Span << /ActualText (Fig. 1) >> BDC BT /F1 9 Tf 10 10 Td (x) Tj ET EMC", "", True),
    "annotation": (b"BT /F1 9 Tf 10 10 Td (abc) Tj ET", "Figure 1. An annotation", True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_designed_pages(name):
    content, annotation, may = CASES[name]
    doc = _page_with(content, annotation)
    text = doc[0].get_text(flags=_TEXT_ONLY)
    assert may_show_figure_words(doc, [0]) == [may]
    if not may:
        assert not FIG.search(text), text
    ex = _Extractor(doc)
    c, res = ex.page_input(doc[0])
    assert may_show_figure_word(c, res, ex.font_tables([res])) == (may and name != "annotation")


@pytest.mark.parametrize("props, may", [("<< /ActualText (Fig. 1) >>", True), ("<< /MCID 0 >>", False)])
def test_actual_text_in_named_properties(props, may):
    doc = _page_with(b"/Span /MC1 BDC BT /F1 9 Tf 10 10 Td (x) Tj ET EMC")
    doc.xref_set_key(doc[0].xref, "Resources/Properties", f"<< /MC1 {_add(doc, props)} 0 R >>")
    assert may_show_figure_words(doc, [0]) == [may]


def test_matplotlib_type3_fonts():
    """matplotlib writes its labels in Type 3 fonts: a figure that says "Fig" and one that does not."""
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    docs = []
    for title in ("Figure 1: growth", "Growth of the strain"):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([0, 1, 2], [1, 0, 2])
        ax.set_title(title)
        buf = io.BytesIO()
        fig.savefig(buf, format="pdf")
        plt.close(fig)
        docs.append(pymupdf.open("pdf", buf.getvalue()))
    assert [may_show_figure_words(d, [0]) for d in docs] == [[True], [False]]
    assert not FIG.search(docs[1][0].get_text(flags=_TEXT_ONLY))


def test_factory_pages_agree_and_hold_the_promise(factory_doc_pages):
    doc = factory_doc_pages
    ex = _Extractor(doc)
    numbers = list(range(doc.page_count))
    got = may_show_figure_words(doc, numbers, ex)
    inputs = [ex.page_input(doc[n]) for n in numbers]
    tables = ex.font_tables([r for _, r in inputs])
    assert got == [may_show_figure_word(c, r, tables) for c, r in inputs]
    for n, may in zip(numbers, got):
        assert may or not FIG.search(doc[n].get_text(flags=_TEXT_ONLY))


@pytest.fixture(scope="module")
def factory_doc_pages():
    doc, _ = pdf_factory.build_document()
    return pymupdf.open("pdf", doc.tobytes())


# ---------------------------------------------------------------- the kernel against its reference


def _classes_strategy():
    cls = st.sampled_from([OTHER, F, I_LOWER, G_LOWER, I_UPPER, G_UPPER, ANY])
    return st.lists(cls, min_size=1, max_size=3).map(bytes)


FONT_TABLES = st.fixed_dictionaries({
    1: st.tuples(st.just(1), st.sampled_from([OTHER, ANY]),
                 st.dictionaries(st.integers(0, 255), _classes_strategy(), max_size=12)),
    2: st.tuples(st.just(2), st.sampled_from([OTHER, ANY]),
                 st.dictionaries(st.integers(0, 0x4848), _classes_strategy(), max_size=12)),
    3: st.just(fonts.OPAQUE),
})

_STRING = st.binary(max_size=6).map(lambda b: b"(" + b.replace(b"\\", b"\\\\").replace(b"(", b"\\(")
                                      .replace(b")", b"\\)") + b")") | st.binary(max_size=6).map(
    lambda b: b"<" + b.hex().encode() + b">") | st.sampled_from(
    [b"(Fig)", b"(F\\151g)", b"<466967>", b"<46 69 6>", b"(a\\\r\nb)", b"(x\r\ny)", b"(\\(nest (ed)\\))", b"(FI",
     b"<004600690067>", b"(\\0)"])
_TOKEN = st.one_of(
    st.sampled_from([b"BT", b"ET", b"q", b"Q", b"/F1 9 Tf", b"/F2 9 Tf", b"/F3 9 Tf", b"/F9 9 Tf", b"Tf",
                     b"/Fm1 Do", b"/Fm2 Do", b"/Im1 Do", b"/Gone Do", b"/P1 scn", b"/P2 SCN", b"/Sh scn",
                     b"/Span << /ActualText (Fig) >> BDC", b"/Span << /Alt (x) >> BDC", b"/Span /MC0 BDC",
                     b"/Span /MC1 BDC", b"EMC", b"1 0 0 1 5 5 cm", b"pop", b")", b"]", b">>", b"{", b"% note\n",
                     b"BI /W 2 /H 1 /CS /G /BPC 8 ID \x00\x01 EI", b"BI /W 1 /H 1 /F /AHx ID 00> EI",
                     b"BI /W 9 /H 9 /F /Fl ID x\x9cEI", b"true", b"null", b"1.5", b"-.5"]),
    st.builds(lambda s: s + b" Tj", _STRING),
    st.builds(lambda s: s + b" '", _STRING),
    st.builds(lambda s: b"1 2 " + s + b' "', _STRING),
    st.builds(lambda items: b"[" + b" -20 ".join(items) + b"] TJ", st.lists(_STRING, max_size=4)),
)
STREAM = st.lists(_TOKEN, max_size=40).map(b"\n".join)


def _resources(form1: bytes, form2: bytes, pattern: bytes) -> dict:
    res: dict = {"Font": {"F1": 1, "F2": 2, "F3": 3}, "ActualText": ["MC1"], "Pattern": {}, "XObject": {}}
    fm1 = ("form", form1, None, None)  # inherits the caller's resources
    fm2 = ("form", form2, res, None)
    res["XObject"] = {"Fm1": fm1, "Fm2": fm2, "Im1": ("image",), "Hid": ("hidden",)}
    res["Pattern"] = {"P1": ("tiling", pattern, res, None), "P2": ("tiling", b"/Fm1 Do", res, None),
                      "Sh": ("shading",)}
    return res


@settings(max_examples=400, deadline=None)
@given(STREAM, STREAM, STREAM, STREAM, FONT_TABLES)
def test_kernel_equals_reference(page, form1, form2, pattern, tables):
    res = _resources(form1, form2, pattern)
    want = may_show_figure_word(page, res, tables)
    assert bool(_core.triage.figure_words([(page, res)], tables)[0]) == want


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), FONT_TABLES)
def test_kernel_equals_reference_on_noise(noise, tables):
    res = _resources(b"", b"", b"")
    assert bool(_core.triage.figure_words([(noise, res)], tables)[0]) == may_show_figure_word(noise, res, tables)


@pytest.mark.parametrize("workers", [1, 2, -1])
def test_a_batch_on_threads_equals_the_reference(workers):
    """Pages are scanned on worker threads (one page per block): each verdict is the plain reading's."""
    tables = {1: (1, OTHER, {ord(c): fonts.classes(c) for c in "FigIG"}), 2: (2, ANY, {0x46: bytes([F])}),
              3: fonts.OPAQUE}
    form = ("form", b"/F1 1 Tf (ig) Tj", None, None)
    res = {"Font": {"F1": 1, "F2": 2, "F3": 3}, "XObject": {"Fm": form}}
    contents = [b"/F1 1 Tf (Fig) Tj", b"/F1 1 Tf (FxG) Tj", b"/F2 1 Tf <0046> Tj <0000> Tj <00> Tj",
                b"/F2 1 Tf <0046> Tj", b"/F3 1 Tf (a) Tj", b"/F1 1 Tf (F) Tj /Fm Do", b"/F1 1 Tf (x) Tj /Fm Do",
                b"", b"pop " * 100, b"/F1 1 Tf [(F) -5 (I) 3 (G)] TJ"]
    pages = [(contents[k % len(contents)], res) for k in range(3 * len(contents) + 1)]
    want = [may_show_figure_word(c, r, tables) for c, r in pages]
    assert 0 < sum(want) < len(want)
    assert [bool(v) for v in _core.triage.figure_words(pages, tables, workers)] == want


def test_kernel_edges():
    simple = {1: (1, OTHER, {ord(c): fonts.classes(c) for c in "FigIG"}), 2: (2, ANY, {0x46: bytes([F])})}
    res = {"Font": {"F1": 1, "F2": 2}}

    def scan(content: bytes, resources=res) -> bool:
        got = bool(_core.triage.figure_words([(content, resources)], simple)[0])
        assert got == may_show_figure_word(content, resources, simple)
        return got

    assert scan(b"/F1 1 Tf (Fig) Tj") and scan(b"/F1 1 Tf (FIG) Tj") and not scan(b"/F1 1 Tf (FiG) Tj")
    assert scan(b"/F1 1 Tf (FFFiiiggg) Tj")  # duplicated glyphs
    assert not scan(b"/F1 1 Tf (F ig) Tj") and not scan(b"() Tj /F1 1 Tf (x) Tj")  # nothing shown without a font
    assert scan(b"(x) Tj")  # text shown before any font: unknown
    assert scan(b"/F2 1 Tf <0046> Tj <0000> Tj <00> Tj")  # F, an unknown code, a code cut short
    assert not scan(b"/F2 1 Tf <0046> Tj <00> Tj")
    # an end of line inside a literal string reads as one \n (here OTHER), whether CR LF or CR
    lines = {1: (1, ANY, {ord("F"): bytes([F]), ord("g"): bytes([G_LOWER]), 10: bytes([OTHER])})}
    assert not bool(_core.triage.figure_words([(b"/F1 1 Tf (F\r\ng) Tj (F\rg) Tj", res)], lines)[0])
    assert not may_show_figure_word(b"/F1 1 Tf (F\r\ng) Tj (F\rg) Tj", res, lines)
    # marked content whose named properties carry /ActualText
    marked = {"Font": {"F1": 1}, "ActualText": ["MC1"]}
    assert scan(b"/F1 1 Tf /Span /MC1 BDC (x) Tj EMC", marked) and not scan(b"/F1 1 Tf /Span /MC0 BDC (x) Tj EMC", marked)
    errors_99 = b"pop " * 99 + b"/F1 1 Tf (x) Tj"
    assert not scan(errors_99) and scan(errors_99 + b" pop")  # MuPDF's error limit: then anything may follow
    # forms nested deeper than 64 levels, and a form that runs itself
    deep: dict = {"Font": {"F1": 1}, "XObject": {}}
    inner = deep
    for _ in range(70):
        nxt: dict = {"Font": {"F1": 1}, "XObject": {}}
        inner["XObject"]["X"] = ("form", b"/X Do", nxt, None)
        inner = nxt
    assert scan(b"/X Do", deep)
    loop: dict = {"Font": {"F1": 1}, "XObject": {}}
    loop["XObject"]["X"] = ("form", b"/F1 1 Tf (ab) Tj /X Do", loop, None)
    assert not scan(b"/X Do", loop)
    with pytest.raises(ValueError, match="code bytes"):
        _core.triage.figure_words([(b"", {})], {1: (3, 0, {})})


# ---------------------------------------------------------------- real files


CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "files"


@pytest.mark.real
@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: python scripts/fetch_corpus.py")
def test_real_pages_keep_the_promise():
    """On every page of the real corpus (articles, and PyMuPDF's own test files with their odd fonts and
    broken streams): the compiled scan equals the plain reading, and a page it clears shows no "Fig" or
    "FIG" in MuPDF's text."""
    cleared = pages = 0
    broken = []
    for path in sorted(CORPUS.glob("pdf*/*/*.pdf")):
        articles = path.parts[-3] == "pdf"
        try:
            doc = pymupdf.open(path)
            ex = _Extractor(doc)
            numbers = list(range(doc.page_count))
            inputs = [ex.page_input(doc[n]) for n in numbers]
        except Exception:  # noqa: BLE001 - the torture set holds files MuPDF cannot read
            assert not articles, path
            continue
        got = may_show_figure_words(doc, numbers, ex)
        tables = ex.font_tables([r for _, r in inputs])
        for n, may, (content, res) in zip(numbers, got, inputs):
            annotated = any(kind != pymupdf.PDF_ANNOT_LINK for _, kind, _ in doc[n].annot_xrefs())
            if may != (may_show_figure_word(content, res, tables) or annotated):
                broken.append((path.name, n, "compiled != reference"))
            if not may and FIG.search(doc[n].get_text(flags=_TEXT_ONLY)):
                broken.append((path.name, n, "cleared but MuPDF reads Fig"))
            if articles:
                cleared += not may
                pages += 1
    assert not broken, broken[:10]
    assert pages == 1415 and cleared > 0.6 * pages


def _two_graphic_pages() -> pymupdf.Document:
    """Two pages of 13 painted paths: one says "see Table 2", the other has the caption "Figure 1."."""
    paths = b" ".join(b"%d 10 m %d 90 l S" % (x, x) for x in range(10, 140, 10))  # 13 painted paths
    b = pdf_factory.Builder()
    for text in (b"(The fitted curve, see Table 2.)", b"(Figure 1. The fitted curve.)"):
        b.raw_page("page", paths + b" BT /F1 9 Tf 10 150 Td " + text + b" Tj ET")
    doc = b.doc
    font = _add(doc, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for page in doc:
        doc.xref_set_key(page.xref, "Resources/Font", f"<< /F1 {font} 0 R >>")
    return pymupdf.open("pdf", doc.tobytes())


def test_triage_reads_no_text_of_a_cleared_page(impl):
    """A graphic page whose text cannot read "Fig" gets the no-anchor verdict without MuPDF's text page;
    a graphic page whose text can is read, and its anchor found."""
    from benchmint.pdf.harvest import HarvestConfig, triage_pages

    rows, candidates, segments = triage_pages(_two_graphic_pages(), "two.pdf", HarvestConfig())
    assert [r["paths"] for r in rows] == [13, 13]
    assert [(r["candidate"], r["captions"], r["reason"]) for r in rows] == [
        (False, [], "graphic but no figure-caption anchor"), (True, ["1"], "graphic and caption anchor")]
    assert segments[0] is None and segments[1] is not None  # the first page's text was never read
    assert [n for n, _ in candidates] == [2]


def test_a_failing_check_leaves_the_pages_to_mupdf(monkeypatch):
    from benchmint.pdf import triage
    from benchmint.pdf.harvest import HarvestConfig, triage_pages

    def broken(*args, **kwargs):
        raise RuntimeError("a font the check cannot handle")

    monkeypatch.setattr(triage, "may_show_figure_words", broken)
    rows, candidates, segments = triage_pages(_two_graphic_pages(), "two.pdf", HarvestConfig())
    assert [(r["candidate"], r["captions"]) for r in rows] == [(False, []), (True, ["1"])]
    assert segments[0] is not None  # read by MuPDF after all


@pytest.mark.real
@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: python scripts/fetch_corpus.py")
def test_real_harvest_outputs_are_the_same_without_the_check(tmp_path, monkeypatch):
    """The check only spares MuPDF's text pages: a whole harvest (figures, discussions from the text pass)
    writes the same files with it as with every graphic page read by MuPDF."""
    from benchmint.pdf import triage
    from benchmint.pdf.harvest import HarvestConfig, harvest

    pdfs = [CORPUS / "pdf" / name for name in ("r-zoo/zoo.pdf", "r-vcd/strucplot.pdf", "r-sandwich/sandwich.pdf",
                                               "journal-classes/aastex__sample631.pdf")]
    harvest(pdfs, tmp_path / "with", HarvestConfig(), workers=1)
    monkeypatch.setattr(triage, "may_show_figure_words", lambda doc, numbers, *a, **k: [True] * len(numbers))
    harvest(pdfs, tmp_path / "without", HarvestConfig(), workers=1)
    for name in ("pages.jsonl", "figures.jsonl", "errors.jsonl"):
        assert (tmp_path / "with" / name).read_bytes() == (tmp_path / "without" / name).read_bytes(), name
    assert (tmp_path / "with" / "figures.jsonl").read_text().count("\n") > 20
