"""Page triage on figure-heavy pages: the compiled tokenizer vs PyMuPDF's get_drawings (the reference).

Each bench checks its counts against the other side, computed apart from the timed call: the
compiled benches against PyMuPDF's counts, the PyMuPDF benches against the compiled counts.
"""

from __future__ import annotations

import json

import pymupdf
import pytest

from benchmint.pdf.triage import _Extractor, open_document_counts, page_counts

import pdf_factory  # tests/, on the path through conftest
from conftest import record_throughput

N_PAGES = 8


@pytest.fixture(scope="module")
def compiled_module(forced_impl):
    with forced_impl("compiled"):
        yield


@pytest.fixture(scope="module")
def scatter_doc(compiled_module):
    """Eight pages, each a matplotlib scatter plot of 5,000 + 1,000 markers (marker Form XObjects),
    with PyMuPDF's path counts and the compiled ones."""
    doc = pymupdf.open()
    for seed in range(N_PAGES):
        doc.insert_pdf(pdf_factory.scatter_pdf(5000, seed=seed))
    doc = pymupdf.open("pdf", doc.tobytes())
    pymupdf_paths = [len(page.get_drawings()) for page in doc]
    assert min(pymupdf_paths) > 6000
    return doc, pymupdf_paths, [paths for _, paths, _ in open_document_counts(doc)]


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_kernel_extracted_content(benchmark, scatter_doc):
    # The counting alone: content streams and resources read before the timer starts.
    doc, expected, _ = scatter_doc
    ex = _Extractor(doc)
    for page in doc:
        ex.page_input(page)  # cached by the extractor
    got = benchmark(open_document_counts, doc, 1, ex)
    assert [paths for _, paths, _ in got] == expected


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_kernel_extracted_content_2_workers(benchmark, scatter_doc):
    doc, expected, _ = scatter_doc
    ex = _Extractor(doc)
    for page in doc:
        ex.page_input(page)  # cached by the extractor
    got = benchmark(open_document_counts, doc, 2, ex)
    assert [paths for _, paths, _ in got] == expected


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_page_counts_with_extraction(benchmark, scatter_doc):
    doc, expected, _ = scatter_doc
    got = benchmark(lambda: [page_counts(page)[1] for page in doc])
    assert got == expected


@pytest.mark.benchmark(group="pdf-triage-scatter-8-pages")
def test_reference_get_drawings(benchmark, scatter_doc):
    doc, _, compiled = scatter_doc
    got = benchmark(lambda: [len(page.get_drawings()) for page in doc])
    assert got == compiled


@pytest.fixture(scope="module")
def mixed_doc(compiled_module):
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
    assert [(im, pa) for im, pa, _ in rows] == [(im, pa) for im, pa, _ in open_document_counts(mixed_doc)]
    # the sieve by hand: a graphic (an image or >= 12 paths) and a caption anchor on the same page
    assert sum(1 for im, pa, labels in rows if (im >= 1 or pa >= 12) and labels) == 10


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
    # Every page row carries PyMuPDF's counts of its page (the 40 files hold the same 22 pages).
    plain = [(im, pa) for im, pa, _ in plain_triage(pymupdf.open(next(pdf_folder.glob("*.pdf"))))]
    rows = [json.loads(line) for line in (out / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["images"], r["paths"]) for r in rows] == plain * 40
