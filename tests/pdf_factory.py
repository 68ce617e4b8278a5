"""Realistic test PDFs for page triage, built in memory with PyMuPDF (and matplotlib's PDF backend).

``build_document()`` returns ``(doc, names)``: one page per case, names in page order.
"""

from __future__ import annotations

import io

import numpy as np
import pymupdf

W = H = 200


class Builder:
    def __init__(self) -> None:
        self.doc = pymupdf.open()
        self.names: list[str] = []
        self.img = self.obj(
            "<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceRGB /BitsPerComponent 8 >>",
            bytes(range(12)),
        )
        self.mask = self.obj(
            "<< /Type /XObject /Subtype /Image /Width 8 /Height 1 /ImageMask true /BitsPerComponent 1 >>", b"\x55"
        )
        self.ocg_off = self.doc.add_ocg("hidden", on=False)
        self.ocg_on = self.doc.add_ocg("shown", on=True)

    def obj(self, text: str, stream: bytes | None = None) -> int:
        x = self.doc.get_new_xref()
        self.doc.update_object(x, text)
        if stream is not None:
            self.doc.update_stream(x, stream)
        return x

    def form(self, content: bytes, resources: str = "", extra: str = "") -> int:
        res = f"/Resources {resources}" if resources else ""
        return self.obj(f"<< /Type /XObject /Subtype /Form /BBox [0 0 {W} {H}] {res} {extra} >>", content)

    def raw_page(self, name: str, content: bytes | list[bytes], xobjects: str = "", extra_res: str = "") -> pymupdf.Page:
        page = self.doc.new_page(width=W, height=H)
        streams = content if isinstance(content, list) else [content]
        refs = " ".join(f"{self.obj('<<>>', c)} 0 R" for c in streams)
        self.doc.xref_set_key(page.xref, "Contents", f"[{refs}]")
        self.doc.xref_set_key(
            page.xref,
            "Resources",
            f"<< /XObject << /Im1 {self.img} 0 R /Mk {self.mask} 0 R {xobjects} >> "
            f"/ExtGState << /A3 << /ca 0.3 /CA 0.3 >> /A5 << /ca 0.5 >> /Z << /CA 0 >> >> "
            f"/Properties << /Off {self.ocg_off} 0 R /On {self.ocg_on} 0 R >> "
            f"/Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> {extra_res} >>",
        )
        self.names.append(name)
        return page

    def page(self, name: str) -> pymupdf.Page:
        self.names.append(name)
        return self.doc.new_page(width=W * 3, height=H * 4)


PRIMITIVES = {
    "line stroke": b"0 0 m 100 100 l S",
    "curves v y c": b"10 10 m 20 20 30 30 40 10 c 50 50 60 60 v 70 70 80 80 y h S",
    "two re one fill": b"10 10 50 50 re 70 70 20 20 re f",
    "B fill+stroke": b"10 10 50 50 re B",
    "f then same S": b"10 10 50 50 re f 10 10 50 50 re S",
    "f then same S in q": b"10 10 50 50 re f q 1 0 0 RG 10 10 50 50 re S Q",
    "f then other S": b"10 10 50 50 re f 10 10 40 50 re S",
    "f then moved S": b"10 10 50 50 re f 1 0 0 1 5 0 cm 10 10 50 50 re S",
    "S then f": b"10 10 50 50 re S 10 10 50 50 re f",
    "B then S": b"10 10 50 50 re B 10 10 50 50 re S",
    # "h" back at the start adds no segment: the fill and the closed stroke are one "fs" drawing.
    "f then S closed where it began": b"10 10 m 60 10 l 40 50 l 10 10 l f 0 G 2 w 10 10 m 60 10 l 40 50 l 10 10 l h S",
    # Four lines ending where they began are a quad in a stroked path, not in a filled one: two drawings.
    "quad B": b"10 10 m 60 10 l 70 50 l 20 50 l 10 10 l h B",
    "quad f then S": b"10 10 m 60 10 l 70 50 l 20 50 l 10 10 l f 10 10 m 60 10 l 70 50 l 20 50 l 10 10 l S",
    "four lines not closing": b"10 10 m 60 10 l 70 50 l 20 50 l 15 12 l h B",
    "quad after a fifth line": b"0 0 m 10 10 l 60 10 l 70 50 l 20 50 l 10 10 l B",
    "two quads and a curve": b"10 10 m 60 10 l 70 50 l 20 50 l 10 10 l 80 80 m 90 80 l 90 90 l 80 90 l 80 80 l "
    b"85 85 95 95 99 80 c B",
    "b* B* f* F s": b"10 10 m 20 20 l 30 10 l b* 10 10 m 20 20 l B* 0 0 m 5 5 l f* 1 1 m 3 3 l F 9 9 m 4 4 l s",
    "n no paint": b"10 10 50 50 re n",
    "clip only": b"10 10 50 50 re W n 20 20 m 30 30 l W* n",
    "clip then fill": b"10 10 50 50 re W f",
    "zero area": b"10 10 0 0 re f 5 5 m 5 5 l S",
    "moveto only": b"10 10 m S 20 20 m h f",
    "lineto without moveto": b"20 20 l S 1 2 3 4 5 6 c f",
    "outside and clipped": b"1000 1000 10 10 re f 0 0 1 1 re W n 50 50 10 10 re f",
    "white and transparent": b"1 g 10 10 50 50 re f /A3 gs 10 10 5 5 re f /Z gs 1 1 5 5 re B",
    "text only": b"BT /F1 12 Tf 10 10 Td (A path: 0 0 m 1 1 l S) Tj 3 Tr [(re) -20 (f)] TJ ET",
    "path spans q and text": b"10 10 m 20 20 l q BT ET 30 30 m 40 40 l Q S",
    "optional content": b"/OC /Off BDC 10 10 50 50 re f q 10 0 0 10 0 0 cm /Im1 Do Q EMC "
    b"/OC /On BDC 0 0 m 1 1 l S /X BMC EMC EMC",
    "marked content": b"/Artifact BMC 0 0 m 1 1 l S EMC /Span << /MCID 0 >> BDC 0 0 m 2 2 l S EMC",
    "comments strings names": b"% 0 0 m 1 1 l S\n0 0 m (a \\) ( nested ) 0 0 m S) pop 1 1 l S <4142> pop "
    b"/Na#6de pop [1 (x]) <<>> ] pop << /K [1 2] /S (>>) >> pop 2 2 l S",
    "image placed thrice": b"q 50 0 0 50 10 10 cm /Im1 Do Q q 50 0 0 50 80 80 cm /Im1 Do Q "
    b"q 20 0 0 20 0 0 cm /Im1 Do Q",
    "image alpha": b"q /A3 gs 10 0 0 10 0 0 cm /Im1 Do Q q /A5 gs 10 0 0 10 0 0 cm /Im1 Do Q "
    b"q 0 0 0 0 0 0 cm /Im1 Do Q q 1 0 0 1 900 900 cm /Im1 Do Q",
    "image mask": b"q 50 0 0 50 10 10 cm /Mk Do Q",
    "inline images": b"q 50 0 0 50 10 10 cm BI /W 2 /H 2 /CS /RGB /BPC 8 ID \x00\x01\x02\x03\x04\x05"
    b"EI\x06\x07\x08\x09\x0a\x0b EI Q 0 0 m 1 1 l S "
    b"BI /W 4 /H 1 /IM true ID \xf0 EI "
    b"BI /W 2 /H 2 /F /AHx /CS /G ID 00ff EI ff00> EI "
    b"BI /W 3 /H 3 /F /Fl /BPC 8 ID x\x9c\x00EI\x7f\x80 EI 5 5 m 6 6 l S",
}


def build_document() -> tuple[pymupdf.Document, list[str]]:
    b = Builder()
    for name, content in PRIMITIVES.items():
        b.raw_page(name, content)

    # Forms: nesting, self reference, inherited resources, matrices, hidden forms.
    leaf = b.form(b"0 0 m 10 10 l S q 5 0 0 5 0 0 cm /Im1 Do Q", f"<< /XObject << /Im1 {b.img} 0 R >> >>")
    mid = b.form(b"/Leaf Do 1 1 10 10 re f /Leaf Do", f"<< /XObject << /Leaf {leaf} 0 R >> >>", "/Matrix [2 0 0 2 5 5]")
    inherit = b.form(b"q 10 0 0 10 0 0 cm /Im1 Do Q 0 0 m 3 3 l S")
    me = b.doc.get_new_xref()
    b.doc.update_object(me, f"<< /Type /XObject /Subtype /Form /BBox [0 0 9 9] /Resources << /XObject << /Me {me} 0 R >> >> >>")
    b.doc.update_stream(me, b"0 0 m 9 9 l S /Me Do 0 0 m 8 8 l S")
    ping = b.doc.get_new_xref()
    pong = b.form(b"0 0 m 1 1 l S /Ping Do", f"<< /XObject << /Ping {ping} 0 R >> >>")
    b.doc.update_object(ping, f"<< /Type /XObject /Subtype /Form /BBox [0 0 9 9] /Resources << /XObject << /Pong {pong} 0 R >> >> >>")
    b.doc.update_stream(ping, b"0 0 m 2 2 l S /Pong Do")
    hidden = b.form(b"0 0 m 10 10 l S", "", f"/OC {b.ocg_off} 0 R")
    fillform = b.form(b"10 10 50 50 re f")
    xo = f"/Mid {mid} 0 R /Inh {inherit} 0 R /Me {me} 0 R /Ping {ping} 0 R /Hid {hidden} 0 R /FF {fillform} 0 R"
    b.raw_page("nested forms", b"/Mid Do q 1 0 0 1 50 50 cm /Mid Do Q", xo)
    b.raw_page("form inherits resources", b"/Inh Do /Inh Do", xo)
    b.raw_page("self-referencing form", b"/Me Do", xo)
    b.raw_page("form cycle of two", b"/Ping Do /Pong Do", xo)
    b.raw_page("hidden form", b"/Hid Do", xo)
    b.raw_page("fill in form, stroke outside", b"/FF Do 10 10 50 50 re S", xo)

    # Patterns and shadings.
    tile = b.obj(
        "<< /Type /Pattern /PatternType 1 /PaintType 1 /TilingType 1 /BBox [0 0 10 10] /XStep 10 /YStep 10 "
        "/Resources << >> >>",
        b"0 0 m 5 5 l S",
    )
    shade = (
        "<< /ShadingType 2 /ColorSpace /DeviceRGB /Coords [0 0 100 0] "
        "/Function << /FunctionType 2 /Domain [0 1] /C0 [1 0 0] /C1 [0 0 1] /N 1 >> >>"
    )
    shpat = b.obj(f"<< /Type /Pattern /PatternType 2 /Shading {shade} >>")
    sh = b.obj(shade)
    pres = f"/Pattern << /P0 {tile} 0 R /P1 {shpat} 0 R >> /Shading << /S0 {sh} 0 R >>"
    b.raw_page(
        "patterns and shadings",
        b"/Pattern cs /P0 scn 10 10 50 50 re f /Pattern CS /P1 SCN 0 0 m 9 9 l S "
        b"/Pattern cs /P1 scn 5 5 9 9 re B 0 g 1 1 2 2 re f /S0 sh q /A3 gs /S0 sh Q",
        extra_res=pres,
    )

    # Damaged streams: truncated, garbage, too many syntax errors, split across streams.
    b.raw_page("truncated", b"10 10 m 20 20 l S (unterminated 30 30 m 40 40 l S")
    b.raw_page("truncated number", b"10 10 m 20 20 l S 30 30 m 40")
    b.raw_page("garbage bytes", b"0 0 m 1 1 l S \xff\xfe\x00\x80 foo ) ] >> { } 2 2 m 3 3 l S")
    b.raw_page("100 syntax errors", b"0 0 m 1 1 l S " + b"foo " * 99 + b"/Nope Do 0 0 m 2 2 l S")
    b.raw_page("99 syntax errors", b"0 0 m 1 1 l S " + b"foo " * 98 + b"/Nope Do 0 0 m 2 2 l S")
    b.raw_page("errors across streams", [b"0 0 m 1 1 l S " + b"} " * 60, b"] " * 60 + b"0 0 m 2 2 l S"])
    b.raw_page("split operators", [b"0 0 m 1 1", b"l S"])
    b.raw_page("unterminated inline image", b"0 0 m 1 1 l S BI /W 9 /H 9 ID \x00\x01\x02")

    # Real pages: PyMuPDF drawing API, text, images, rotation, cropbox.
    page = b.page("text page")
    page.insert_textbox(page.rect + (36, 36, -36, -36), "Plain body text. " * 200, fontsize=9)
    page = b.page("shapes")
    for i in range(30):
        page.draw_rect(pymupdf.Rect(20 + i * 15, 20, 30 + i * 15, 60), color=(0, 0, 1), fill=(1, 0, 0) if i % 2 else None)
        page.draw_line((20, 100 + i * 5), (500, 100 + i * 5))
        page.draw_bezier((20, 300), (100, 250 + i), (200, 350), (300, 300))
    png = _png()
    page = b.page("images placed several times")
    xref = page.insert_image(pymupdf.Rect(10, 10, 110, 110), stream=png)
    for k in range(1, 4):
        page.insert_image(pymupdf.Rect(10 + 120 * k, 10, 110 + 120 * k, 110), xref=xref)
    page = b.page("rotated page")
    page.draw_circle((100, 100), 40)
    page.insert_image(pymupdf.Rect(200, 200, 300, 300), stream=png)
    page.set_rotation(90)
    page = b.page("cropbox offset")
    page.draw_rect(pymupdf.Rect(50, 50, 120, 120), fill=(0, 1, 0))
    page.draw_rect(pymupdf.Rect(400, 500, 450, 550), color=(1, 0, 0))
    page.set_cropbox(pymupdf.Rect(40, 40, 500, 700))

    # matplotlib figures: marker Form XObjects, clip paths, text, images.
    scatter = scatter_pdf(500)
    page = b.page("matplotlib scatter via show_pdf_page")
    page.show_pdf_page(pymupdf.Rect(0, 0, 600, 400), scatter, 0)
    page.show_pdf_page(pymupdf.Rect(0, 400, 600, 800), pymupdf.open("pdf", figure_pdf()), 0)
    b.doc.insert_pdf(scatter)
    b.names.append("matplotlib scatter, direct")
    b.doc.insert_pdf(pymupdf.open("pdf", figure_pdf()))
    b.names.append("matplotlib lines, imshow, bars, direct")
    return b.doc, b.names


def _png() -> bytes:
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 16, 16), False)
    pix.set_rect(pix.irect, (200, 30, 30))
    return pix.tobytes("png")


def scatter_pdf(n_points: int, seed: int = 0) -> pymupdf.Document:
    """A matplotlib scatter plot (markers become one Form XObject invoked n times)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(rng.normal(size=n_points), rng.normal(size=n_points), s=6, marker="o")
    ax.scatter(rng.normal(size=n_points // 5), rng.normal(size=n_points // 5), s=9, marker="^", c="r")
    ax.set_xlabel("x")
    ax.set_title("scatter")
    buf = io.BytesIO()
    fig.savefig(buf, format="pdf")
    plt.close(fig)
    return pymupdf.open("pdf", buf.getvalue())


def figure_pdf(hatch: bool = False) -> bytes:
    """Lines with markers, a translucent band, an image, bars (hatched on request), error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(1)
    fig, axes = plt.subplots(2, 2, figsize=(6, 5))
    x = np.linspace(0, 10, 200)
    axes[0, 0].plot(x, np.sin(x), "-o", markevery=10)
    axes[0, 0].fill_between(x, np.sin(x) - 0.2, np.sin(x) + 0.2, alpha=0.3)
    axes[0, 1].imshow(rng.random((20, 20)))
    axes[1, 0].bar(range(8), rng.random(8) + 0.5, hatch="//" if hatch else None)
    axes[1, 1].errorbar(x[::20], np.cos(x[::20]), yerr=0.1, fmt="s")
    buf = io.BytesIO()
    fig.savefig(buf, format="pdf")
    plt.close(fig)
    return buf.getvalue()


def append_slow_page(doc: pymupdf.Document, depth: int = 5, invocations: int = 1) -> None:
    """Append a page with a figure caption and a drawing MuPDF needs seconds to render.

    The drawing is one filled triangle reached through ``depth`` levels of Form
    XObjects, each drawing the level below ten times: 10**depth fills from a
    file of a few kilobytes (depth 5: about 10 s to render at 40 dpi here,
    1 s to extract the text, 0.1 s to count the paths). The page invokes it
    ``invocations`` times: from 64 on, the harvest reads the page's text from a
    copy without them (triage.lean_text_copy), so only rendering is slow.
    """
    page = doc.new_page(width=600, height=800)
    page.insert_text((72, 700), "Figure 9. A nested vector drawing that is slow to render.", fontsize=10)
    for i in range(14):
        page.draw_line((72 + 10 * i, 300), (72 + 10 * i, 600))

    def form(content: bytes, resources: str = "") -> int:
        x = doc.get_new_xref()
        doc.update_object(x, f"<< /Type /XObject /Subtype /Form /BBox [0 0 600 800] {resources} >>")
        doc.update_stream(x, content)
        return x

    level = form(b"0.5 g 100 300 m 500 300 l 300 600 l h f")
    for _ in range(depth):
        level = form(b"q /F Do Q " * 10, f"/Resources << /XObject << /F {level} 0 R >> >>")
    page.clean_contents()  # one content stream, so the drawing can be appended to it
    contents = page.get_contents()[0]
    doc.update_stream(contents, doc.xref_stream(contents) + b"\nq /Slow Do Q\n" * invocations)
    resources = doc.xref_get_key(page.xref, "Resources")
    res_xref = int(resources[1].split()[0]) if resources[0] == "xref" else page.xref
    prefix = "" if resources[0] == "xref" else "Resources/"
    doc.xref_set_key(res_xref, prefix + "XObject", f"<< /Slow {level} 0 R >>")


def short_font_page(doc: pymupdf.Document, baseline: float = 500.0) -> None:
    """Append a page with a plot and its caption (Helvetica, 10 pt, baseline at ``baseline``) whose font
    descriptor gives an ascent of 300 and a descent of -100 thousandths: less than an em in all, as in LaTeX's
    Type 1 fonts. PyMuPDF's quad corrections (on by default) stretch such a span to the font size, keeping its
    proportions: the caption's box runs from 7.5 pt above the baseline to 2.5 pt below it (3 and 1 without)."""
    from page_layouts import plot

    page = doc.new_page(width=612, height=792)
    plot(page, pymupdf.Rect(150, 200, 450, baseline - 30))
    page.insert_text((150, baseline), "Figure 1. Magnon dispersion of the film at 5 K.", fontsize=10)
    for xref, *_ in doc.get_page_fonts(page.number):
        descriptor = doc.get_new_xref()
        doc.update_object(descriptor, "<< /Type /FontDescriptor /FontName /Helvetica /Flags 32 /ItalicAngle 0 "
                                      "/FontBBox [0 -100 600 300] /Ascent 300 /Descent -100 /CapHeight 300 /StemV 80 >>")
        doc.xref_set_key(xref, "FontDescriptor", f"{descriptor} 0 R")
