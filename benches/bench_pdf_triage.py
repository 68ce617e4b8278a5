"""Page triage on figure-heavy pages: the compiled tokenizer vs PyMuPDF's get_drawings (the reference)."""

from __future__ import annotations

import sys
from pathlib import Path

import pymupdf
import pytest

from benchmint import _core
from benchmint.pdf.triage import _Extractor, page_counts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import pdf_factory  # noqa: E402

N_PAGES = 8


@pytest.fixture(scope="module")
def scatter_doc():
    """Eight pages, each a matplotlib scatter plot of 5,000 + 1,000 markers (marker Form XObjects)."""
    doc = pymupdf.open()
    for seed in range(N_PAGES):
        doc.insert_pdf(pdf_factory.scatter_pdf(5000, seed=seed))
    doc = pymupdf.open("pdf", doc.tobytes())
    expected = [len(page.get_drawings()) for page in doc]
    assert min(expected) > 6000
    return doc, expected


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_kernel_extracted_content(benchmark, scatter_doc):
    doc, expected = scatter_doc
    ex = _Extractor(doc)
    inputs = [ex.page_input(page) for page in doc]
    got = benchmark(_core.pdf.count_pages, inputs, 1)
    assert got["paths"].tolist() == expected


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_kernel_extracted_content_2_workers(benchmark, scatter_doc):
    doc, expected = scatter_doc
    ex = _Extractor(doc)
    inputs = [ex.page_input(page) for page in doc]
    got = benchmark(_core.pdf.count_pages, inputs, 2)
    assert got["paths"].tolist() == expected


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_page_counts_with_extraction(benchmark, scatter_doc):
    doc, expected = scatter_doc
    got = benchmark(lambda: [page_counts(page)[1] for page in doc])
    assert got == expected


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_reference_get_drawings(benchmark, scatter_doc):
    doc, expected = scatter_doc
    got = benchmark(lambda: [len(page.get_drawings()) for page in doc])
    assert got == expected
