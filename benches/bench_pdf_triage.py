"""Page triage on figure-heavy pages: the compiled tokenizer vs PyMuPDF's get_drawings (the reference)."""

from __future__ import annotations

import sys
from pathlib import Path

import pymupdf
import pytest
from conftest import record_throughput

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


@pytest.fixture(scope="module")
def mixed_doc():
    """A mixed set: article pages, dense text pages, raster pages and two 5,000-marker scatter plots."""
    from importlib.resources import files

    doc = pymupdf.open()
    sample = pymupdf.open(str(files("benchmint") / "samples" / "sample_paper.pdf"))
    for _ in range(5):
        doc.insert_pdf(sample)
    text = ("As seen in Fig. 2, the lattice relaxes near the step edge, and the spectra of Fig. 3 "
            "change accordingly. ") * 40
    for k in range(10):
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(54, 54, 558, 738), f"Figure {k + 1}. " + text, fontsize=8)
    for seed in range(2):
        doc.insert_pdf(pdf_factory.scatter_pdf(5000, seed=seed))
    return pymupdf.open("pdf", doc.tobytes())


def plain_triage(doc):
    """The plain PyMuPDF way: image info, drawings and text blocks of every page."""
    from benchmint.pdf.captions import caption_label

    rows = []
    for page in doc:
        labels = [b[4] for b in page.get_text("blocks") if b[6] == 0 and caption_label(b[4])]
        rows.append((len(page.get_image_info()), len(page.get_drawings()), len(labels)))
    return rows


@pytest.mark.benchmark(group="pdf-triage-mixed-22-pages")
def test_triage_pages(benchmark, mixed_doc):
    from benchmint.pdf.harvest import HarvestConfig, triage_pages

    pages, _, _ = benchmark(triage_pages, mixed_doc, "mixed.pdf", HarvestConfig())
    plain = plain_triage(mixed_doc)
    assert [(p["images"], p["paths"]) for p in pages] == [(im, pa) for im, pa, _ in plain]
    assert sum(p["candidate"] for p in pages) == 10  # both pages of the five sample articles


@pytest.mark.benchmark(group="pdf-triage-mixed-22-pages")
def test_plain_pymupdf_triage(benchmark, mixed_doc):
    rows = benchmark.pedantic(plain_triage, args=(mixed_doc,), rounds=3, iterations=1)
    assert len(rows) == 22


@pytest.fixture(scope="module")
def pdf_folder(tmp_path_factory, mixed_doc):
    """40 PDFs of 22 mixed pages each (880 pages)."""
    root = tmp_path_factory.mktemp("dump")
    data = mixed_doc.tobytes()
    for i in range(40):
        (root / f"paper{i:02d}.pdf").write_bytes(data + f"%{i}\n".encode())  # distinct content keys
    return root


@pytest.mark.benchmark(group="harvest-triage-880-pages")
@pytest.mark.parametrize("workers", [1, -1])
def test_harvest_triage_only(benchmark, pdf_folder, tmp_path, workers):
    import shutil

    from benchmint.pdf.harvest import HarvestConfig, harvest

    out = tmp_path / "out"

    def fresh():
        shutil.rmtree(out, ignore_errors=True)
        return (pdf_folder, out, HarvestConfig(triage_only=True), workers), {}

    res = benchmark.pedantic(lambda *a: harvest([a[0]], *a[1:]), setup=fresh, rounds=2, iterations=1)
    assert res.pages == 880 and res.skipped == 0
    record_throughput(benchmark, 880)  # pages per second
