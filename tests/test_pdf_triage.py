"""Page triage counts: the compiled tokenizer against PyMuPDF's get_drawings / get_image_info."""

from __future__ import annotations

import pymupdf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.pdf.triage import _Extractor, document_counts, open_document_counts, page_counts
from benchmint.pdf.triage_ref import page_counts as reference_counts

import pdf_factory

# Pages whose content stream is malformed on purpose: the counts still match
# the reference, and the kernel says the stream was damaged.
DAMAGED = {
    "comments strings names",  # uses an unknown operator ("pop")
    "form cycle of two",  # "/Pong Do" names a resource the page lacks
    "truncated",
    "garbage bytes",
    "100 syntax errors",
    "99 syntax errors",
    "errors across streams",
    "unterminated inline image",
}


@pytest.fixture(scope="module")
def factory_doc():
    doc, names = pdf_factory.build_document()
    # Round-trip through bytes: the pages are then read as any file would be.
    return pymupdf.open("pdf", doc.tobytes()), names


def _kernel(doc, page):
    content, res = _Extractor(doc).page_input(page)
    return _core.triage.count_paths(content, res)


def test_every_page_matches_reference(factory_doc):
    doc, names = factory_doc
    mismatches = []
    for page, name in zip(doc, names):
        images, paths, damaged = _kernel(doc, page)
        ref = reference_counts(page)
        if (images, paths) != ref or damaged != (name in DAMAGED):
            mismatches.append((name, (images, paths, damaged), ref))
    assert not mismatches


def _same_counts(ref, got):
    assert [(im, pa) for im, pa, _ in got] == [(im, pa) for im, pa in ref]


@pytest.mark.parametrize("workers", [1, 2, -1])
def test_document_counts_equal_reference(factory_doc, compare_forms, workers):
    # Pages counted on worker threads (count_pages) against PyMuPDF's own counts, page by page.
    doc, names = factory_doc
    compare_forms("triage", lambda: [reference_counts(page) for page in doc],
                  lambda: open_document_counts(doc, workers), _same_counts)
    got = open_document_counts(doc, workers)
    assert [da for _, _, da in got] == [n in DAMAGED for n in names]


def test_document_counts_file_and_implementations(factory_doc, tmp_path, impl, dispatch_counts):
    doc, names = factory_doc
    path = tmp_path / "factory.pdf"
    doc.save(path)
    rows = document_counts(str(path), workers=2)
    assert [r["page"] for r in rows] == list(range(len(names)))
    assert [(r["images"], r["paths"]) for r in rows] == [reference_counts(page) for page in doc]
    # damaged is the kernel's finding; the reference path reports none
    assert [r["damaged"] for r in rows] == [impl == "compiled" and n in DAMAGED for n in names]
    assert dispatch_counts("triage")[impl] == 1
    with pytest.raises(ValueError, match="workers"):
        document_counts(str(path), workers=0)


def test_page_counts_public(factory_doc, compare_forms):
    doc, names = factory_doc
    page = doc[names.index("nested forms")]
    ref, _ = compare_forms("triage", lambda: reference_counts(page), lambda: page_counts(page), _equal)
    assert ref[1] == (4, 6)


def _equal(a, b):
    assert a == b


def test_scatter_5000_markers(compare_forms):
    doc = pdf_factory.scatter_pdf(5000)
    ref, _ = compare_forms("triage", lambda: reference_counts(doc[0]), lambda: page_counts(doc[0]), _equal)
    assert ref[1][1] > 6000


def test_hatch_tiles_documented_difference():
    """A hatch pattern runs once per painted bar here, once per laid tile in MuPDF."""
    doc = pymupdf.open("pdf", pdf_factory.figure_pdf(hatch=True))
    images, paths = page_counts(doc[0])
    ref_images, ref_paths = reference_counts(doc[0])
    assert images == ref_images
    # Each extra tile adds two drawings: the tile's background fill and its hatch lines ("fs").
    assert ref_paths > paths and (ref_paths - paths) % 2 == 0
    plain = pymupdf.open("pdf", pdf_factory.figure_pdf(hatch=False))
    assert page_counts(plain[0]) == reference_counts(plain[0])


def test_deep_nesting_documented_difference():
    """PyMuPDF raises beyond ~62 nested forms; the kernel stops at 64 and flags damage."""
    inner = ("form", b"0 0 m 1 1 l S", None, None)
    for _ in range(99):
        inner = ("form", b"0 0 m 1 1 l S /N Do", {"XObject": {"N": inner}}, None)
    images, paths, damaged = _core.triage.count_paths(b"/N Do", {"XObject": {"N": inner}})
    assert (images, paths, damaged) == (0, 64, True)


def test_self_cycle_in_kernel():
    res: dict = {"XObject": {}}
    res["XObject"]["F"] = ("form", b"0 0 m 1 1 l S /F Do", res, None)
    assert _core.triage.count_paths(b"/F Do /F Do", res) == (0, 2, False)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 400))
def test_garbage_never_crashes(noise, cut):
    base = pdf_factory.PRIMITIVES["inline images"] + b" (str <</A [1 2"
    data = base[:cut] + noise + base[cut:]
    images, paths, damaged = _core.triage.count_paths(data, {"XObject": {"Im1": ("image",)}})
    assert images >= 0 and paths >= 0 and isinstance(damaged, bool)


def test_truncations_match_reference():
    """Every prefix of a content stream: same counts as MuPDF, never a crash.

    The stream ends before the Flate-compressed inline image: data under a
    binary filter is delimited by scanning for EI (MuPDF decodes it), so a cut
    inside such data may count the image where MuPDF does not.
    """
    b = pdf_factory.Builder()
    inline = pdf_factory.PRIMITIVES["inline images"]
    content = pdf_factory.PRIMITIVES["b* B* f* F s"] + b" " + inline[: inline.index(b"BI /W 3")]
    cuts = list(range(len(content)))
    for cut in cuts:
        b.raw_page(str(cut), content[:cut])
    doc = pymupdf.open("pdf", b.doc.tobytes())
    ex = _Extractor(doc)
    for page in doc:
        c, r = ex.page_input(page)
        assert _core.triage.count_paths(c, r)[:2] == reference_counts(page)


def test_dict_entries_by_hand():
    from benchmint.pdf.objects import dict_entries, unescape_name

    text = ("<< /Type /Font /Sub#74ype/Type1 /Widths [1 2 [3]] /Enc << /Differences [65 /A /B] >> "
            "/Title (a /slash (nested) ) /K true /Ref 12 0 R /Hex <4142> >>")
    assert dict_entries(text) == {"Type": "/Font", "Subtype": "/Type1", "Widths": "[1 2 [3]]",
                                  "Enc": "<< /Differences [65 /A /B] >>", "Title": "(a /slash (nested) )",
                                  "K": "true", "Ref": "12 0 R", "Hex": "<4142>"}
    assert dict_entries("  <</A<4142>>>  ") == {"A": "<4142>"}  # a hex string right before the end
    assert dict_entries("[1 2]") == {} and dict_entries("<<>>") == {}
    assert unescape_name("F#2Esc") == "F.sc" and unescape_name("A#2") == "A#2"


def test_batch_kernels_name_a_malformed_page_and_return_plain_values():
    from benchmint import _core

    for call in (lambda pages: _core.triage.count_pages(pages), lambda pages: _core.triage.figure_words(pages, {})):
        with pytest.raises(ValueError, match=r"each page is \(content bytes, resources\)"):
            call([(b"0 0 m 1 1 l S",)])
    # Plain Python values, as the reference gives them (a triage worker never imports NumPy for them).
    assert _core.triage.count_pages([(b"0 0 m 1 1 l S 2 2 m 3 3 l S", None), (b"", None)], 2) == [(0, 2, False),
                                                                                                  (0, 0, False)]
    assert _core.triage.figure_words([(b"", None)], {}) == [False]
