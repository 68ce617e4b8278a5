"""benchmint harvest: verdicts, figure records, thumbnails, bad files, resumable runs."""

import hashlib
import json
import shutil
from importlib.resources import files

import pymupdf
import pytest
from killing import kill_once_recorded

from benchmint.cli import main
from benchmint.pdf.harvest import HarvestConfig, harvest

SAMPLE = files("benchmint") / "samples" / "sample_paper.pdf"


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("pdfs")
    shutil.copy(SAMPLE, root / "a_article.pdf")
    text_only = pymupdf.open()
    page = text_only.new_page()
    page.insert_textbox(pymupdf.Rect(72, 72, 540, 700), "As seen in Fig. 1, nothing is drawn here. " * 20)
    text_only.save(root / "b_text_only.pdf")
    scanned = pymupdf.open()  # an image-only page: a raster and no text layer
    page = scanned.new_page()
    pix = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 64, 64), False)
    pix.set_rect(pix.irect, (180,))
    page.insert_image(pymupdf.Rect(72, 72, 400, 400), pixmap=pix)
    scanned.save(root / "c_scanned.pdf")
    (root / "d_corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage" + bytes(range(256)))
    locked = pymupdf.open(root / "a_article.pdf")
    locked.save(root / "e_encrypted.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    (root / "f_zero_pages.pdf").write_bytes(
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
        b"trailer<</Root 1 0 R>>\n%%EOF\n")
    return root


def test_harvest_corpus(corpus, tmp_path):
    res = harvest([corpus], tmp_path / "out", HarvestConfig(), workers=2)
    out = tmp_path / "out"
    pages = read(out / "pages.jsonl")
    by_pdf = {}
    for row in pages:
        by_pdf.setdefault(row["pdf"].rsplit("/", 1)[1], []).append(row)
    assert [r["candidate"] for r in by_pdf["a_article.pdf"]] == [True, True]
    assert by_pdf["a_article.pdf"][0]["captions"] == ["1"] and by_pdf["a_article.pdf"][0]["paths"] >= 12
    assert by_pdf["b_text_only.pdf"][0]["reason"] == "no graphic (0 images, 0 paths < 12)"
    assert by_pdf["b_text_only.pdf"][0]["captions"] is None  # text not read: the gate cannot pass
    scanned = corpus / "c_scanned.pdf"
    assert by_pdf["c_scanned.pdf"][0] == {"pdf": str(scanned), "sha256": hashlib.sha256(scanned.read_bytes()).hexdigest(),
                                          "page": 1, "images": 1, "paths": 0, "captions": [],
                                          "candidate": False, "reason": "graphic but no figure-caption anchor"}
    errors = {e["pdf"].rsplit("/", 1)[-1]: e["error"] for e in read(out / "errors.jsonl")}
    assert set(errors) == {"d_corrupt.pdf", "e_encrypted.pdf", "f_zero_pages.pdf"}
    assert "encrypted" in errors["e_encrypted.pdf"] and "no pages" in errors["f_zero_pages.pdf"]
    figures = read(out / "figures.jsonl")
    assert [(f["label"], f["panels"]) for f in figures] == [("1", 4), ("2", 1)]
    assert figures[0]["discussion"].startswith("Scanning tunnelling microscopy")
    assert figures[1]["discussion"].startswith("The transmission electron micrograph")
    thumb = pymupdf.Pixmap(str(out / figures[0]["thumb"]))
    assert max(thumb.width, thumb.height) == 1024
    assert (res.pdfs, res.candidates, res.figures, len(res.errors)) == (6, 2, 2, 3)


def test_rerun_and_interrupted_run_give_the_same_files(corpus, tmp_path):
    full = tmp_path / "full"
    harvest([corpus], full, workers=1)
    again = harvest([corpus], full, workers=1)
    assert again.skipped == 6  # nothing recomputed
    # An interrupted run: only some files finished before it stopped, then the whole run again.
    part = tmp_path / "part"
    harvest(sorted(corpus.glob("[ac]*.pdf")), part, workers=1)
    resumed = harvest([corpus], part, workers=2)
    assert resumed.skipped == 2
    for name in ("pages.jsonl", "figures.jsonl"):
        assert (part / name).read_bytes() == (full / name).read_bytes()


def test_triage_only_and_min_panels(corpus, tmp_path):
    harvest([corpus / "a_article.pdf"], tmp_path / "t", HarvestConfig(triage_only=True))
    assert len(read(tmp_path / "t" / "pages.jsonl")) == 2 and read(tmp_path / "t" / "figures.jsonl") == []
    assert not (tmp_path / "t" / "thumbs").exists()
    harvest([corpus / "a_article.pdf"], tmp_path / "p", HarvestConfig(min_panels=4))
    assert [f["label"] for f in read(tmp_path / "p" / "figures.jsonl")] == ["1"]


def test_cli(corpus, tmp_path, capsys):
    assert main(["harvest", str(corpus / "a_article.pdf"), "--out", str(tmp_path / "o")]) == 0
    assert "2 candidate pages, 2 figures" in capsys.readouterr().out
    assert main(["harvest", str(corpus), "--out", str(tmp_path / "o2"), "--workers", "1"]) == 1  # unreadable files
    assert main(["harvest", str(tmp_path / "missing"), "--out", str(tmp_path / "o3")]) == 2


def test_killed_harvest_resumes_to_the_same_files(corpus, tmp_path):
    import subprocess
    import sys

    from benchmint.run import Ledger

    dump = tmp_path / "dump"
    dump.mkdir()
    for i in range(150):  # distinct files (content keys) of the sample article
        (dump / f"paper{i:02d}.pdf").write_bytes(SAMPLE.read_bytes() + f"%{i}\n".encode())
    run = [sys.executable, "-m", "benchmint.cli", "harvest", str(dump), "--out"]  # the settings users get
    killed = tmp_path / "killed"
    ledger_file = killed / "ledger.sqlite"
    kill_once_recorded([*run, str(killed)], ledger_file, 3)  # some PDFs, long before the end
    with Ledger(ledger_file, "harvest") as ledger:
        assert 3 <= len(ledger) < 150
    assert subprocess.run([*run, str(killed)], capture_output=True).returncode == 0
    clean = tmp_path / "clean"
    assert subprocess.run([*run, str(clean)], capture_output=True).returncode == 0
    for name in ("pages.jsonl", "figures.jsonl", "errors.jsonl"):
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name
    assert sorted(p.name for p in (killed / "thumbs").iterdir()) == sorted(p.name for p in (clean / "thumbs").iterdir())


def test_a_page_past_the_page_time_limit_is_skipped_and_the_document_harvested(tmp_path):
    from pdf_factory import append_slow_page

    doc = pymupdf.open(SAMPLE)
    append_slow_page(doc)  # page 3: ~10 s to render (and 1 s of text), far past a 3 s page limit
    (tmp_path / "in").mkdir()
    doc.save(tmp_path / "in" / "slow.pdf")
    res = harvest([tmp_path / "in"], tmp_path / "out", HarvestConfig(page_seconds=3.0), workers=1)
    pages = read(tmp_path / "out" / "pages.jsonl")
    assert [p["candidate"] for p in pages] == [True, True, False]
    assert pages[2]["reason"] in {"skipped: page 3 thumbnail ran past the page time limit (3 s)",
                                  "skipped: page 3 text ran past the page time limit (3 s)"}
    assert [(f["label"], f["page"]) for f in read(tmp_path / "out" / "figures.jsonl")] == [("1", 1), ("2", 2)]
    errors = read(tmp_path / "out" / "errors.jsonl")
    assert errors == [{"pdf": str(tmp_path / "in" / "slow.pdf"), "sha256": pages[2]["sha256"], "page": 3,
                       "error": pages[2]["reason"]}]
    assert res.errors == errors and res.figures == 2


def test_every_pass_preloads_what_its_units_import(tmp_path, monkeypatch):
    """A range's and a text pass's units import nothing their pass's preload did not (read in a fresh process),
    and every pass gets its preload: the range run again without a stuck page and the text pass as much as the
    first pass. An import inside a unit would count against a page's time limit."""
    import subprocess
    import sys

    from benchmint.pdf import harvest as harvest_module

    from pdf_factory import append_slow_page

    code = ("import sys\nfrom benchmint.pdf import harvest as h\n"
            "preload = h._TRIAGE_MODULES if sys.argv[1] == 'text' else h._range_modules(h.HarvestConfig())\n"
            "for name in preload: __import__(name)\n"
            "before = set(sys.modules)\n"
            "if sys.argv[1] == 'text': h._read_texts(sys.argv[2], [1, 2])\n"
            "else: h._harvest_range(sys.argv[2], 'p', sys.argv[3], h.HarvestConfig(), 1, 32, None)\n"
            "print(sorted(m for m in set(sys.modules) - before if not m.startswith(('encodings', 'concurrent'))))")
    for unit in ("range", "text"):
        done = subprocess.run([sys.executable, "-c", code, unit, str(SAMPLE), str(tmp_path / unit)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]", unit
    made, real = [], harvest_module._executor
    monkeypatch.setattr(harvest_module, "_executor", lambda *a, **k: made.append(a[2]) or real(*a, **k))
    doc = pymupdf.open(SAMPLE)
    append_slow_page(doc)  # page 3 stops its range: the range runs again without it
    (tmp_path / "in").mkdir()
    doc.save(tmp_path / "in" / "a_slow.pdf")
    long_doc = pymupdf.open()  # figures on its last pages, its first range's text unread: a text pass
    for k in range(harvest_module.CHUNK_PAGES + 3):
        long_doc.new_page().insert_text((72, 72), f"Page {k + 1}: as Fig. 1 shows, the film is flat.")
    long_doc.insert_pdf(pymupdf.open(SAMPLE))
    long_doc.save(tmp_path / "in" / "b_long.pdf")
    harvest([tmp_path / "in"], tmp_path / "out", HarvestConfig(page_seconds=2.0), workers=1)
    ranges = harvest_module._range_modules(HarvestConfig())
    assert made == [ranges, ranges, harvest_module._TRIAGE_MODULES]  # first pass, the retry, the text pass


def test_a_document_past_the_document_time_limit_is_an_error_row(tmp_path, corpus):
    from pdf_factory import append_slow_page

    doc = pymupdf.open()
    append_slow_page(doc)
    (tmp_path / "in").mkdir()
    doc.save(tmp_path / "in" / "b_slow.pdf")
    shutil.copy(SAMPLE, tmp_path / "in" / "a_article.pdf")
    res = harvest([tmp_path / "in"], tmp_path / "out", HarvestConfig(document_seconds=2.0), workers=2)
    errors = read(tmp_path / "out" / "errors.jsonl")
    assert len(errors) == 1 and errors[0]["time_limit"]["limit"] == "unit"
    assert errors[0]["error"].endswith("ran past the unit time limit of 2 s; its worker was stopped")
    assert res.figures == 2  # the other document is harvested in full


def test_files_with_the_same_bytes_keep_their_own_names(tmp_path):
    (tmp_path / "in").mkdir()
    for name in ("x.pdf", "y.pdf"):
        shutil.copy(SAMPLE, tmp_path / "in" / name)
    for name in ("e1.pdf", "e2.pdf"):  # empty downloads
        (tmp_path / "in" / name).write_bytes(b"")
    res = harvest([tmp_path / "in"], tmp_path / "out", HarvestConfig(triage_only=True), workers=2)
    assert [(p["pdf"].rsplit("/", 1)[1], p["page"]) for p in read(tmp_path / "out" / "pages.jsonl")] == [
        ("x.pdf", 1), ("x.pdf", 2), ("y.pdf", 1), ("y.pdf", 2)]
    errors = read(tmp_path / "out" / "errors.jsonl")
    # PyMuPDF's message quotes the path: the error names the file by its base name, the row by its path
    assert [(e["pdf"].rsplit("/", 1)[1], e["error"].endswith("='e1.pdf'." if i == 0 else "='e2.pdf'."))
            for i, e in enumerate(errors)] == [("e1.pdf", True), ("e2.pdf", True)]
    assert res.pdfs == 4


def test_a_long_document_is_shared_out_in_page_ranges(tmp_path):
    """A document of 3+ ranges: rows for every page in order, figures where they are, and a figure's discussion
    found on a page of another range; the rows equal those of the same pages harvested as a short document."""
    from benchmint.pdf.harvest import CHUNK_PAGES
    from benchmint.run import Ledger

    sample = pymupdf.open(SAMPLE)
    doc = pymupdf.open()
    for k in range(2 * CHUNK_PAGES + 3):
        page = doc.new_page()
        text = ("In the transmission electron micrograph of Fig. 2 the grain boundaries of the film run straight "
                "across the field of view." if k == 1 else f"Page {k + 1} holds running text only. " * 12)
        page.insert_textbox(pymupdf.Rect(72, 72, 540, 700), text)
    doc.insert_pdf(sample)  # the article's two pages at the end
    (tmp_path / "in").mkdir()
    doc.save(tmp_path / "in" / "long.pdf")
    harvest([tmp_path / "in"], tmp_path / "out", HarvestConfig(), workers=2)
    pages = read(tmp_path / "out" / "pages.jsonl")
    n = doc.page_count
    assert [p["page"] for p in pages] == list(range(1, n + 1))
    figures = read(tmp_path / "out" / "figures.jsonl")
    assert [(f["label"], f["page"]) for f in figures] == [("1", n - 1), ("2", n)]
    assert "grain boundaries of the film run straight" in figures[1]["discussion"]  # from page 2, another range
    with Ledger(tmp_path / "out" / "ledger.sqlite", "harvest") as ledger:
        assert len(ledger) >= 3  # the ranges ran as units of their own
    harvest([SAMPLE], tmp_path / "short", HarvestConfig(), workers=1)
    short = read(tmp_path / "short" / "pages.jsonl")
    assert [{**p, "page": p["page"] - (n - 2), "pdf": "x", "sha256": "y"} for p in pages[-2:]] == [
        {**p, "pdf": "x", "sha256": "y"} for p in short]


def test_the_command_runs_without_pymupdfs_layout_model():
    """PyMuPDF 2 loads onnxruntime through pymupdf.layout and pymupdf4llm; the command blocks both (start-up)."""
    import subprocess
    import sys

    code = ("import sys, benchmint.cli, pymupdf; "
            "print(sorted(m for m in ('onnxruntime', 'pymupdf4llm', 'pymupdf.layout') if sys.modules.get(m)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_units_text_boxes_do_not_depend_on_what_its_process_imported_first(tmp_path):
    """PyMuPDF 2 imports pymupdf4llm, which turns quad corrections off for the whole process; the command blocks
    it, a Ray worker or a library user's program may not. A page range's caption box (a font whose ascent and
    descent span less than an em) is PyMuPDF's default box in both: 7.5 pt above the baseline at 500 to 2.5 pt
    below it, not 3 and 1."""
    import subprocess
    import sys

    from pdf_factory import short_font_page

    doc = pymupdf.open()
    short_font_page(doc, baseline=500.0)
    doc.save(tmp_path / "short.pdf")
    code = ("import sys\nif sys.argv[1] == 'command': import benchmint.cli\nimport json, pymupdf\n"
            "from benchmint.pdf.harvest import HarvestConfig, _harvest_range\n"
            "before = bool(pymupdf._globals.skip_quad_corrections)\n"
            "r = _harvest_range(sys.argv[2], 'p', sys.argv[3], HarvestConfig(), 1, 32, None)\n"
            "print(json.dumps([before, [f['caption_box'] for f in r['figures']]]))")
    got = {}
    for first in ("command", "pymupdf"):
        done = subprocess.run([sys.executable, "-c", code, first, str(tmp_path / "short.pdf"), str(tmp_path / first)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        got[first] = json.loads(done.stdout)
    assert got["command"][0] is False and got["pymupdf"][0] is True  # the import order did flip the switch
    assert got["command"][1] == got["pymupdf"][1] == [[150.0, 492.5, 354.54, 502.5]]


def test_a_triage_only_unit_runs_without_numpy(tmp_path):
    """A triage worker's imports are most of a small run's start-up: NumPy (~65 ms a process) stays out."""
    import subprocess
    import sys

    pdf = tmp_path / "a.pdf"
    doc = pymupdf.open()
    page = doc.new_page()
    for i in range(20):
        page.draw_line((50, 100 + 10 * i), (500, 100 + 10 * i))
    page.insert_text((50, 400), "Figure 1. Twenty lines.")
    doc.save(pdf)
    code = ("import sys, benchmint.cli; from benchmint.pdf.harvest import HarvestConfig, _harvest_range; "
            f"r = _harvest_range({str(pdf)!r}, 'p', {str(tmp_path)!r}, HarvestConfig(triage_only=True), 1, 32, None); "
            "print(r['pages'][0]['candidate'], 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


# Files as real collections hold them: one name in several folders, one file under several names, files that
# cannot be read, reruns with other settings.

def sha256_of(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pdfs_of_one_name_in_several_folders_stay_apart(corpus, tmp_path):
    """p1/main.pdf and p2/main.pdf differ, p3/main.pdf is a copy of p1's: every output names each by its path
    and content hash, and the copy gets its own rows."""
    src = tmp_path / "in"
    for folder, name in (("p1", "a_article.pdf"), ("p2", "c_scanned.pdf"), ("p3", "a_article.pdf")):
        (src / folder).mkdir(parents=True)
        shutil.copy(corpus / name, src / folder / "main.pdf")
    (src / "p2" / "broken.pdf").write_bytes(b"%PDF-1.4 nothing else")
    out = tmp_path / "out"
    res = harvest([src], out, HarvestConfig(), workers=2)
    docs = {f: (str(src / f / "main.pdf"), sha256_of(src / f / "main.pdf")) for f in ("p1", "p2", "p3")}
    pages = read(out / "pages.jsonl")
    assert [(p["pdf"], p["sha256"], p["page"]) for p in pages] == [
        (*docs["p1"], 1), (*docs["p1"], 2), (*docs["p2"], 1), (*docs["p3"], 1), (*docs["p3"], 2)]
    figures = read(out / "figures.jsonl")
    assert [(f["pdf"], f["sha256"], f["label"]) for f in figures] == [
        (*docs["p1"], "1"), (*docs["p1"], "2"), (*docs["p3"], "1"), (*docs["p3"], "2")]
    assert all((out / f["thumb"]).is_file() for f in figures) and "paper" not in figures[0]
    (error,) = read(out / "errors.jsonl")
    assert (error["pdf"], error["sha256"]) == (str(src / "p2" / "broken.pdf"), sha256_of(src / "p2" / "broken.pdf"))
    assert res.pdfs == 4 and res.figures == 4


def test_the_same_file_given_twice_is_listed_as_a_duplicate(corpus, tmp_path, monkeypatch, capsys):
    import os

    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(corpus / "a_article.pdf", src / "main.pdf")
    os.link(src / "main.pdf", src / "z_hard_link.pdf")
    monkeypatch.chdir(tmp_path)
    # the folder by its absolute path, then the file again by a relative one
    assert main(["harvest", str(src), "in/main.pdf", "--out", str(tmp_path / "out"), "--workers", "1"]) == 1
    said = capsys.readouterr().out
    assert said.startswith("3 PDFs (0 already done, 2 left out: found twice or unreadable), 2 pages,")
    first = str(src / "main.pdf")
    assert read(tmp_path / "out" / "errors.jsonl") == [
        {"pdf": str(src / "z_hard_link.pdf"), "kind": "duplicate_file", "duplicate_of": first,
         "error": f"the same file as {first} (given twice); left out"},
        {"pdf": "in/main.pdf", "kind": "duplicate_file", "duplicate_of": first,
         "error": f"the same file as {first} (given twice); left out"}]
    assert {p["pdf"] for p in read(tmp_path / "out" / "pages.jsonl")} == {first}


def test_an_unreadable_pdf_and_a_link_loop_are_rows_and_the_run_goes_on(corpus):
    import os

    from unprivileged import open_folder, open_subfolder, run_cli

    root = open_folder()
    try:
        src = open_subfolder(root, "in")
        shutil.copy(corpus / "a_article.pdf", src / "a.pdf")
        shutil.copy(corpus / "c_scanned.pdf", src / "b_locked.pdf")
        os.chmod(src / "b_locked.pdf", 0)
        (src / "c_loop.pdf").symlink_to(src / "c_loop.pdf")
        (src / "d_gone.pdf").symlink_to(src / "nothing_here.pdf")
        out = open_subfolder(root, "out")
        done = run_cli(["harvest", str(src), "--out", str(out), "--workers", "1"], out)
        assert done.returncode == 1, done.stderr
        assert [(p["pdf"], p["page"]) for p in read(out / "pages.jsonl")] == [(str(src / "a.pdf"), 1),
                                                                               (str(src / "a.pdf"), 2)]
        errors = [(e["pdf"].rsplit("/", 1)[1], e["kind"], e["error"]) for e in read(out / "errors.jsonl")]
        assert errors == [
            ("b_locked.pdf", "unreadable", "cannot be read: PermissionError: Permission denied"),
            ("c_loop.pdf", "unreadable", "cannot be read: a loop of symbolic links (Too many levels of symbolic links)"),
            ("d_gone.pdf", "unreadable", "cannot be read: a symbolic link to nothing (No such file or directory)")]
        assert "4 PDFs (0 already done, 3 left out: found twice or unreadable)" in done.stdout
    finally:
        shutil.rmtree(root)


def test_a_rerun_with_other_settings_leaves_only_its_own_thumbnails(corpus, tmp_path):
    out = tmp_path / "out"
    harvest([corpus / "a_article.pdf"], out, HarvestConfig(), workers=1)
    first = sorted(p.name for p in (out / "thumbs").iterdir())
    harvest([corpus / "a_article.pdf"], out, HarvestConfig(min_paths=11), workers=1)
    second = sorted(p.name for p in (out / "thumbs").iterdir())
    assert len(first) == len(second) == 2 and not set(first) & set(second)
    assert sorted(f["thumb"] for f in read(out / "figures.jsonl")) == [f"thumbs/{name}" for name in second]
    harvest([corpus / "a_article.pdf"], out, HarvestConfig(min_paths=11, triage_only=True), workers=1)
    assert list((out / "thumbs").iterdir()) == []


def test_opening_and_counting_run_under_the_range_limit_not_the_page_limit(tmp_path):
    """A page whose drawing takes ~1 s to count and ~10 s to read: with a 0.5 s page limit the count is not one
    page's stage (the range goes on); the text reading is, and the page is skipped with its stage named."""
    from pdf_factory import append_slow_page

    doc = pymupdf.open()
    append_slow_page(doc, depth=6)
    (tmp_path / "in").mkdir()
    doc.save(tmp_path / "in" / "slow.pdf")
    res = harvest([tmp_path / "in"], tmp_path / "out", HarvestConfig(page_seconds=0.5), workers=1)
    (page,) = read(tmp_path / "out" / "pages.jsonl")
    assert page["reason"] == "skipped: page 1 text ran past the page time limit (0.5 s)"
    assert [e["error"] for e in res.errors] == [page["reason"]]


def test_range_seconds_is_checked(tmp_path, capsys):
    assert main(["harvest", str(SAMPLE), "--out", str(tmp_path / "o"), "--range-seconds", "0"]) == 2
    assert "range_seconds must be a positive number of seconds, got 0" in capsys.readouterr().err


def test_a_text_pass_that_cannot_read_its_pages_is_an_error_row(tmp_path, monkeypatch):
    """The text pass reads a document again for its discussions: a file that changed between the passes (here
    overwritten) costs the discussions that text, and errors.jsonl says which pages went unread and why; the
    figures are still written."""
    from benchmint.pdf import harvest as harvest_module

    long_doc = pymupdf.open()  # figures on its last pages, its first range's text unread: a text pass
    for k in range(harvest_module.CHUNK_PAGES + 3):
        long_doc.new_page().insert_text((72, 72), f"Page {k + 1}: as Fig. 1 shows, the film is flat.")
    long_doc.insert_pdf(pymupdf.open(SAMPLE))
    (tmp_path / "in").mkdir()
    pdf = tmp_path / "in" / "b_long.pdf"
    long_doc.save(pdf)
    real = harvest_module._Run.unread_text

    def overwritten_first(run, docs):
        pdf.write_bytes(b"%PDF-1.7 not a document any more")
        return real(run, docs)

    monkeypatch.setattr(harvest_module._Run, "unread_text", overwritten_first)
    res = harvest([tmp_path / "in"], tmp_path / "out", HarvestConfig(), workers=1)
    errors = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    first = list(range(1, harvest_module.CHUNK_PAGES + 1))
    n = harvest_module.CHUNK_PAGES
    assert [(e["pdf"], e["text_of_pages"]) for e in errors] == [(str(pdf), first), (str(pdf), [n + 1, n + 2, n + 3])]
    assert errors[0]["error"] and res.errors == errors and res.figures == 2


def test_past_the_hashing_pools_threshold_an_unreadable_pdf_is_its_row_in_place(corpus):
    """More PDFs than the hashing pool's threshold, one of them unreadable, two workers: the unreadable one is
    its error row, every other document is listed in input order with the SHA-256 of its bytes, and a rerun
    finds them all done."""
    import hashlib
    import os

    from unprivileged import open_folder, open_subfolder, run_cli

    from benchmint.run.runner import HASH_POOL_MIN_FILES

    root = open_folder()
    try:
        src = open_subfolder(root, "in")
        n = HASH_POOL_MIN_FILES + 8
        text_only = (corpus / "b_text_only.pdf").read_bytes()
        for i in range(n):  # each a document of its own: a different comment after the end
            (src / f"p{i:04d}.pdf").write_bytes(text_only + f"% copy {i}\n".encode())
        locked = src / f"p{n // 2:04d}.pdf"
        os.chmod(locked, 0)
        out = open_subfolder(root, "out")
        done = run_cli(["harvest", str(src), "--out", str(out), "--workers", "2", "--triage-only"], out)
        assert done.returncode == 1, done.stderr
        assert [(e["pdf"], e["kind"], e["error"]) for e in read(out / "errors.jsonl")] == [
            (str(locked), "unreadable", "cannot be read: PermissionError: Permission denied")]
        docs = read(out / "documents.jsonl")
        others = [src / f"p{i:04d}.pdf" for i in range(n) if src / f"p{i:04d}.pdf" != locked]
        assert [(d["pdf"], d["sha256"]) for d in docs] == [
            (str(p), hashlib.sha256(p.read_bytes()).hexdigest()) for p in others]
        again = run_cli(["harvest", str(src), "--out", str(out), "--workers", "2", "--triage-only"], out)
        assert f"{n} PDFs ({n - 1} already done, 1 left out" in again.stdout, again.stdout
    finally:
        shutil.rmtree(root)


def test_key_settings_are_each_configurations_own_and_a_new_dict_each_call():
    """Computed once a configuration: a caller changing the dict it got changes no later key, and two
    configurations never share theirs."""
    cfg = HarvestConfig()
    got = cfg.key_settings()
    got["name"] = "x.pdf"
    assert "name" not in cfg.key_settings()
    assert cfg.key_settings() == {"min_paths": 12, "sieve": "second_look", "min_panels": 1, "triage_only": False,
                                  "max_pages": 5000, "thumb_longest": 1024, "discussion_tokens": (100, 300)}
    assert HarvestConfig(min_paths=3).key_settings()["min_paths"] == 3
    assert HarvestConfig(page_seconds=5.0).key_settings() == cfg.key_settings()  # time limits shape no result
