"""Reading a page's text from a lean copy (no runs of forms that cannot show text) gives the page's own text."""

from __future__ import annotations

import pymupdf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.pdf import triage
from benchmint.pdf.captions import text_segments
from benchmint.pdf.triage import LEAN_MIN_DROPPED, _Extractor, lean_text_copy

import pdf_factory


def _lean_segments(doc, page):
    """(segments read the lean way, whether a lean copy was used)."""
    copy = lean_text_copy(page, _Extractor(doc))
    return text_segments(copy[0] if copy else page), copy is not None


@pytest.mark.parametrize(
    "content, names, want, dropped",
    [
        (b"q /M0 Do Q /M1 Do", ["M0"], b"q   Q /M1 Do", 1),
        (b"/M0 Do/M0 Do", ["M0"], b"  ", 2),
        (b"/M#30 Do", ["M0"], b" ", 1),  # names compare decoded
        (b"BT (/M0 Do) Tj ET", ["M0"], b"BT (/M0 Do) Tj ET", 0),  # inside a string
        (b"% /M0 Do\n0 0 m", ["M0"], b"% /M0 Do\n0 0 m", 0),  # inside a comment
        (b"/M0 5 Do /M0 /M1 Do", ["M0"], b"/M0 5 Do /M0 /M1 Do", 0),  # not the operand of Do
        (b"[/M0 Do] pop <</M0 Do>> pop", ["M0"], b"[/M0 Do] pop <</M0 Do>> pop", 0),
        (b"BI /W 8 /H 1 /CS /G /BPC 8 ID /M0 Do\x00\x00 EI /M0 Do", ["M0"],
         b"BI /W 8 /H 1 /CS /G /BPC 8 ID /M0 Do\x00\x00 EI  ", 1),  # inline image data is never cut
        (b"BI /W 9 /H 9 /F /Fl ID /M0 Do", ["M0"], b"BI /W 9 /H 9 /F /Fl ID /M0 Do", 0),  # unterminated
        (b"", ["M0"], b"", 0),
        (b"/M0 Do", [], b"/M0 Do", 0),
        (b"/M0 D", ["M0"], b"/M0 D", 0),
    ],
)
def test_drop_invocations(content, names, want, dropped):
    assert _core.triage.drop_invocations(content, names) == (want, dropped)


def test_scatter_page_text_is_unchanged():
    doc = pymupdf.open("pdf", pdf_factory.scatter_pdf(3000).tobytes())
    segments, lean = _lean_segments(doc, doc[0])
    assert lean
    assert segments == text_segments(doc[0])
    assert any("scatter" in text for text, _ in segments)


def test_factory_pages_text_is_unchanged(monkeypatch):
    # Lean copies for every page with anything to drop (not only past the size threshold): the
    # copy's text is compared with the page's own wherever a copy is made.
    monkeypatch.setattr(triage, "LEAN_MIN_DROPPED", 1)
    doc, _ = pdf_factory.build_document()
    doc = pymupdf.open("pdf", doc.tobytes())
    lean_pages = 0
    for page in doc:
        copy = lean_text_copy(page, _Extractor(doc))
        if copy is not None:
            lean_pages += 1
            assert text_segments(copy[0]) == text_segments(page), page.number
    assert lean_pages >= 10  # the pages with images or drawing-only forms


def test_few_invocations_keep_the_page():
    doc = pymupdf.open("pdf", pdf_factory.scatter_pdf(LEAN_MIN_DROPPED // 3).tobytes())
    assert _lean_segments(doc, doc[0]) == (text_segments(doc[0]), False)


def _page(marker_runs, text_form_runs, texts, rotate, crop_dx):
    """A page mixing marker forms (no text), forms that show text, images and text runs."""
    b = pdf_factory.Builder()
    font = "<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >>"
    marker = b.form(b"0 0 m 2 2 l 2 0 l h f")
    labelled = b.form(b"0 0 m 2 2 l S BT /F1 6 Tf 0 0 Td (tick) Tj ET", font)
    nested = b.form(b"/Lab Do", f"<< /XObject << /Lab {labelled} 0 R >> >>")
    inherits = b.form(b"/Lab Do")  # no resources of its own: may show text
    parts = []
    for i, (x, y) in enumerate(marker_runs):
        parts.append(f"q 1 0 0 1 {x} {y} cm /Mk0 Do Q".encode())
        if i % 7 == 0:
            parts.append(f"q 20 0 0 20 {x} {y} cm /Im1 Do Q".encode())
    for k, (x, y) in enumerate(text_form_runs):
        parts.append(f"q 1 0 0 1 {x} {y} cm /{('Lab', 'Nest', 'Inh')[k % 3]} Do Q".encode())
    for k, (x, y) in enumerate(texts):
        parts.insert(k * 5 % (len(parts) + 1), f"BT /F1 9 Tf {x} {y} Td (Figure {k + 1}. word) Tj ET".encode())
    page = b.raw_page("mixed", b"\n".join(parts),
                      f"/Mk0 {marker} 0 R /Lab {labelled} 0 R /Nest {nested} 0 R /Inh {inherits} 0 R")
    if crop_dx:
        page.set_cropbox(pymupdf.Rect(crop_dx, crop_dx, pdf_factory.W - 5, pdf_factory.H - 5))
    page.set_rotation(rotate)
    doc = pymupdf.open("pdf", b.doc.tobytes())
    return doc, doc[0]


def test_forms_that_show_text_are_kept():
    doc, page = _page([(i, i) for i in range(100)], [(50, 50), (60, 60), (70, 70)], [(10, 10)], 0, 0)
    segments, lean = _lean_segments(doc, page)
    assert lean
    assert [text for text, _ in segments] == ["tick", "tick", "tick", "Figure 1. word"]


points = st.tuples(st.integers(0, 190), st.integers(0, 190))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 150), st.integers(0, 2**32 - 1), st.lists(points, max_size=6), st.lists(points, max_size=6),
       st.sampled_from([0, 90, 180, 270]), st.sampled_from([0, 7]))
def test_lean_copy_reads_the_same_text(n_markers, seed, text_form_runs, texts, rotate, crop_dx):
    import random

    rng = random.Random(seed)
    marker_runs = [(rng.randint(0, 190), rng.randint(0, 190)) for _ in range(n_markers)]
    doc, page = _page(marker_runs, text_form_runs, texts, rotate, crop_dx)
    segments, lean = _lean_segments(doc, page)
    assert segments == text_segments(page)
    assert lean == (len(marker_runs) + len(marker_runs[::7]) >= LEAN_MIN_DROPPED)


def test_reference_path_reads_the_page_itself(forced_impl, dispatch_counts):
    from benchmint.pdf.harvest import HarvestConfig, triage_pages

    doc = pymupdf.open("pdf", pdf_factory.scatter_pdf(3000).tobytes())
    with forced_impl("reference"):
        assert lean_text_copy(doc[0], _Extractor(doc)) is None
        ref = triage_pages(doc, "s.pdf", HarvestConfig())
    with forced_impl("compiled"):
        dispatch_counts.reset()
        assert lean_text_copy(doc[0], _Extractor(doc)) is not None  # the fast path reads a lean copy
        fast = triage_pages(doc, "s.pdf", HarvestConfig())
        assert dispatch_counts("triage")["reference"] == 0
    assert ref[0] == fast[0] and ref[2] == fast[2]  # page rows and text segments
