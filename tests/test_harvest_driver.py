"""harvest's driver at dump scale: each range's result read once, page rows joined from the workers' lines, and
the files the same whatever form the ledger holds its results in."""

import shutil
from importlib.resources import files

import pymupdf
import pytest
from killing import kill_once_recorded

from benchmint import io as bio
from benchmint.pdf import harvest as hv
from benchmint.pdf.harvest import HarvestConfig, harvest
from benchmint.run import Ledger

SAMPLE = files("benchmint") / "samples" / "sample_paper.pdf"
OUTPUTS = ("pages.jsonl", "figures.jsonl", "errors.jsonl", "documents.jsonl")


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """The sample article under three names (an arXiv one gives labels), a 40-page document (two ranges) with a
    captioned drawing on its page 35, and a file that is no PDF."""
    root = tmp_path_factory.mktemp("dump")
    data = SAMPLE.read_bytes()
    shutil.copy(SAMPLE, root / "a_article.pdf")
    (root / "2101.00001v2.pdf").write_bytes(data + b"%copy 1\n")
    (root / "sub").mkdir()
    (root / "sub" / "a_article.pdf").write_bytes(data + b"%copy 2\n")
    long = pymupdf.open()
    for n in range(1, 41):
        page = long.new_page()
        page.insert_text((72, 80), f"Page {n} of a long report with running text only.")
        if n == 35:
            for i in range(14):
                page.draw_rect(pymupdf.Rect(100 + 10 * i, 200, 105 + 10 * i, 200 + 8 * i))
            page.insert_text((100, 420), "Figure 3. Fourteen bars of growing height.")
    long.save(root / "long.pdf")
    (root / "z_broken.pdf").write_bytes(b"%PDF-1.7\nnot a PDF at all")
    return root


def outputs(out):
    return {name: (out / name).read_bytes() for name in OUTPUTS} | {
        "thumbs": sorted(p.name for p in (out / "thumbs").iterdir()) if (out / "thumbs").is_dir() else []}


def counting(monkeypatch, owner, name, calls):
    inner = getattr(owner, name)

    def counted(*a, **k):
        calls[name] = calls.get(name, 0) + 1
        return inner(*a, **k)

    monkeypatch.setattr(owner, name, counted)


@pytest.mark.parametrize("triage_only", [True, False])
def test_the_driver_reads_each_result_once_and_encodes_no_page_row(dump, tmp_path, monkeypatch, triage_only):
    """The code before read every page range's result from the ledger three or four times (for the follow-up
    ranges, the stuck-page check, the results kept, a read-back nobody used), encoded every page row again and
    looked for figure citations in every paragraph of a document with figures."""
    calls: dict[str, int] = {}
    counting(monkeypatch, Ledger, "get", calls)
    counting(monkeypatch, bio, "dumps", calls)
    from benchmint.pdf import context

    counting(monkeypatch, context, "figure_refs", calls)  # the workers' calls are counted in their processes
    if hasattr(hv, "dumps"):
        counting(monkeypatch, hv, "dumps", calls)
    out = tmp_path / "out"
    res = harvest([dump], out, HarvestConfig(triage_only=triage_only), workers=1)
    with Ledger(out / "ledger.sqlite", "harvest") as ledger:
        units = len(ledger)
    monkeypatch.undo()
    # 4 documents of one range and one of two ranges (the broken file's one range says so); in a full harvest,
    # the text pass's units: the pages of the long document's two ranges that were not read (the sample's two
    # pages are both candidates, read already)
    assert units == (6 if triage_only else 6 + 2)
    assert calls["get"] == units
    assert res.pages == 3 * 2 + 40 and res.pages > 2 * 5
    rows = res.pages
    # what the driver encodes: the documents' and figures' and errors' rows, and the fields of each document
    # (pdf, sha256, the arXiv id and version of one), never one a page
    assert calls["dumps"] < rows
    assert calls["dumps"] <= 5 + res.figures + len(res.errors) + 5 * 4
    # the discussions: the workers found the paragraphs citing one figure; the driver read none of the text
    assert "figure_refs" not in calls
    assert triage_only or res.figures >= 4


def old_text(result):
    """A range's result as the code before stored it: page rows as objects, the pages' paragraphs as "text"."""
    return {("text" if k == "cited" else k): v for k, v in result.items()}


def _old_read_texts(path, numbers, open_seconds=None):
    """The text pass's unit as the code before ran it: every paragraph of the pages."""
    from benchmint.pdf.captions import text_segments

    doc, problem = hv._open(path)
    if doc is None:
        return {"error": problem}
    with doc, hv.default_text_switches():
        return {"text": [[n, [text for text, _ in text_segments(doc[n - 1])]] for n in numbers]}


def test_results_in_the_form_before_give_the_same_files(dump, tmp_path, monkeypatch):
    """A ledger of the code before (page rows as objects), and one holding both forms, resume to the same
    files, byte for byte, as a fresh run at 1 and 2 workers."""
    fresh = tmp_path / "fresh"
    harvest([dump], fresh, HarvestConfig(), workers=1)
    two = tmp_path / "two"
    harvest([dump], two, HarvestConfig(), workers=2)
    assert outputs(two) == outputs(fresh)

    before = tmp_path / "before"
    with monkeypatch.context() as m:  # the workers (forked) make results as the code before did
        m.setattr(hv, "_framed_rows", lambda result, fields: old_text(result))
        m.setattr(hv, "_cited", lambda first, segments: [[first + i, [text for text, _ in segs]]
                                                         for i, segs in enumerate(segments) if segs is not None])
        m.setattr(hv, "_read_texts", _old_read_texts)
        harvest([dump], before, HarvestConfig(), workers=1)
    with Ledger(before / "ledger.sqlite", "harvest") as ledger:
        stored = [r for _, _, r in ledger.results()]
    kept = [r for r in stored if "pages" in r]
    assert kept and not any("page_rows" in r or "cited" in r for r in stored)  # the old form, every unit
    assert sum("text" in r for r in stored) == 2 + 4  # the text pass's two, the four ranges' with figures
    assert outputs(before) == outputs(fresh)
    res = harvest([dump], before, HarvestConfig(), workers=2)  # resumed: every unit from the old form
    assert res.skipped == 5
    assert outputs(before) == outputs(fresh)

    import sqlite3

    with sqlite3.connect(before / "ledger.sqlite") as db:  # half the units run again, in the new form
        keys = [k for (k,) in db.execute("SELECT key FROM units ORDER BY key")]
        db.executemany("DELETE FROM units WHERE key = ?", [(k,) for k in keys[::2]])
    harvest([dump], before, HarvestConfig(), workers=2)
    with Ledger(before / "ledger.sqlite", "harvest") as ledger:
        stored = [r for _, _, r in ledger.results()]
    assert {"page_rows" in r for r in stored if "pages" in r or "page_rows" in r} == {True, False}
    assert {"cited" in r for r in stored if "text" in r or "cited" in r} == {True, False}
    assert outputs(before) == outputs(fresh)


def test_a_row_that_spells_a_mark_keeps_its_result_and_other_fields_fall_back():
    rows = [{"pdf": "x.pdf", "page": 1, "images": 0, "paths": 3, "captions": None, "candidate": False,
             "reason": "no graphic"},
            {"pdf": "x.pdf", "page": 2, "images": 1, "paths": 0, "captions": ["1"], "candidate": True,
             "reason": "graphic and caption anchor", "second_look": 2}]
    result = {"page_count": 2, "pages": rows, "figures": []}
    ident = {"pdf": "/d/x.pdf", "sha256": "ab" * 32, "arxiv_id": "2101.00001", "arxiv_version": 2}
    by_hand = "".join(bio.dumps({**ident, **row, "pdf": ident["pdf"]}) + "\n" for row in rows)
    framed = hv._framed_rows(result, ("arxiv_id", "arxiv_version", "pdf", "sha256"))
    assert "pages" not in framed and framed["rows"] == 2 and framed["candidates"] == 1
    assert framed["second_look"] == 1 and framed["thumb_pages"] == [2]
    assert hv._page_lines(framed, ident) == by_hand
    # the same result met by a document of other fields (no arXiv labels): decoded and encoded here
    other = {"pdf": "/e/x.pdf", "sha256": None}
    assert hv._page_lines(framed, other) == "".join(
        bio.dumps({**other, **row, "pdf": other["pdf"]}) + "\n" for row in rows)
    assert hv._page_rows(framed) == [{k: v for k, v in row.items() if k != "pdf"} for row in rows]  # pdf: a mark
    # a caption spelled like a mark: the rows stay objects
    odd = {**result, "pages": [{**rows[1], "captions": ["\0pdf\0"]}]}
    assert hv._framed_rows(odd, ("pdf", "sha256")) is odd
    assert hv._page_lines(odd, other) == bio.dumps({**other, **odd["pages"][0], "pdf": other["pdf"]}) + "\n"


def test_rows_holding_a_line_separator_fall_back_whole():
    # U+2028 is kept raw by the project's JSON form; str.splitlines() would cut a row there
    row = {"pdf": "x.pdf", "page": 1, "images": 0, "paths": 0, "captions": ["Fig.\u20281 a\u2029b"],
           "candidate": True, "reason": "graphic and caption anchor"}
    framed = hv._framed_rows({"page_count": 1, "pages": [row], "figures": []}, ("pdf", "sha256"))
    other = {"pdf": "/e/x.pdf", "sha256": None, "arxiv_id": "2101.00001"}
    assert hv._page_rows(framed) == [{k: v for k, v in row.items() if k != "pdf"}]
    assert hv._page_lines(framed, other) == bio.dumps({**other, **row, "pdf": other["pdf"]}) + "\n"


def grouping(monkeypatch, on: bool) -> None:
    """Groups of first ranges at this test's size (on), or none (off: each range a unit, as the code before);
    their ends at GROUP_DOCS alone, never at a key (GROUP_CUT past a byte's values)."""
    monkeypatch.setattr(hv, "GROUP_MIN_DOCS", 2 if on else 10**9)
    monkeypatch.setattr(hv, "GROUP_CUT", 257)


@pytest.fixture(scope="module")
def many(dump, tmp_path_factory):
    """The dump and six more copies of the sample (each bytes of its own): eleven documents."""
    root = tmp_path_factory.mktemp("many")
    shutil.copytree(dump, root / "dump")
    for i in range(6):
        (root / f"c{i}.pdf").write_bytes(SAMPLE.read_bytes() + f"%more {i}\n".encode())
    return root


def units_of(out):
    with Ledger(out / "ledger.sqlite", "harvest") as ledger:
        return {key: result for key, _, result in ledger.results()}


def test_triage_only_runs_short_documents_in_groups_with_the_same_files(many, tmp_path, monkeypatch):
    """--triage-only over many documents: their first ranges go several to a unit (one result, one record, one
    read for the group), the files byte for byte those of a range a unit, at 1 and 2 workers; a rerun runs
    nothing, and a ledger of ranges alone (the code before: ranges of CHUNK_PAGES) resumes without running any
    of them again."""
    cfg = HarvestConfig(triage_only=True)
    alone = tmp_path / "alone"
    grouping(monkeypatch, False)
    harvest([many], alone, cfg, workers=1)
    assert len(units_of(alone)) == 11 + 1  # eleven first ranges, the long document's second
    grouping(monkeypatch, True)
    monkeypatch.setattr(hv, "GROUP_DOCS", 4)
    for workers in (1, 2):
        out = tmp_path / f"grouped{workers}"
        harvest([many], out, cfg, workers=workers)
        assert outputs(out) == outputs(alone)
        stored = units_of(out)
        # 11 documents in groups of 4, 4 and 3; the long document's 40 pages in one range of TRIAGE_PAGES
        assert sorted(len(r["group"]) if "group" in r else 1 for r in stored.values()) == [3, 4, 4]
        again = harvest([many], out, cfg, workers=workers)
        assert again.skipped == 11 and units_of(out) == stored
    monkeypatch.setattr(hv, "TRIAGE_PAGES", 16)  # the long document's other ranges follow its first: 17-32, 33-40
    short = tmp_path / "short"
    harvest([many], short, cfg, workers=2)
    assert outputs(short) == outputs(alone)
    assert sorted(len(r["group"]) if "group" in r else r["rows"] for r in units_of(short).values()) == [
        3, 4, 4, 8, 16]
    res = harvest([many], alone, cfg, workers=2)  # the ledger of ranges alone: every range is read as it is
    assert res.skipped == 11 and len(units_of(alone)) == 12
    assert outputs(alone) == outputs(tmp_path / "grouped1")


def test_a_group_resumed_after_its_result_was_lost_runs_again_alone(many, tmp_path, monkeypatch):
    """A run killed before a group's result was kept: the next run forms the same groups and runs that one again;
    the files are the same."""
    import sqlite3

    cfg = HarvestConfig(triage_only=True)
    grouping(monkeypatch, True)
    monkeypatch.setattr(hv, "GROUP_DOCS", 4)
    out = tmp_path / "out"
    harvest([many], out, cfg, workers=2)
    before, stored = outputs(out), units_of(out)
    lost = sorted(k for k, r in stored.items() if "group" in r)[0]
    with sqlite3.connect(out / "ledger.sqlite") as db:
        db.execute("DELETE FROM units WHERE key = ?", (lost,))
    res = harvest([many], out, cfg, workers=2)
    assert res.skipped == 11 - len(stored[lost]["group"])
    assert units_of(out).keys() == stored.keys() and outputs(out) == before


def test_a_group_stopped_by_a_stuck_page_gives_way_to_its_documents(tmp_path, monkeypatch):
    """A page past the page time limit stops its group's unit: the group's documents run again one a unit, the
    stuck page is skipped as without groups, and the files are those of a run without groups."""
    from pdf_factory import append_slow_page

    (tmp_path / "in").mkdir()
    for i in range(3):
        (tmp_path / "in" / f"a{i}.pdf").write_bytes(SAMPLE.read_bytes() + f"%copy {i}\n".encode())
    doc = pymupdf.open()
    append_slow_page(doc, depth=6)  # its text: some 10 s
    doc.save(tmp_path / "in" / "b_slow.pdf")
    cfg = HarvestConfig(triage_only=True, page_seconds=0.5)
    grouping(monkeypatch, False)
    harvest([tmp_path / "in"], tmp_path / "alone", cfg, workers=2)
    grouping(monkeypatch, True)
    res = harvest([tmp_path / "in"], tmp_path / "grouped", cfg, workers=2)
    assert outputs(tmp_path / "grouped") == outputs(tmp_path / "alone")
    assert [e["error"] for e in res.errors] == ["skipped: page 1 text ran past the page time limit (0.5 s)"]
    stored = units_of(tmp_path / "grouped")
    # stopped: the group's unit, then the slow document's range alone, which runs a third time without its page
    assert [r["time_limit"]["stage"] for r in stored.values() if "time_limit" in r] == ["page 1 text"] * 2
    assert len(stored) == 1 + 4 + 1 and not any("group" in r for r in stored.values())


def test_a_killed_triage_in_groups_resumes_to_the_same_files(tmp_path):
    """--triage-only over GROUP_MIN_DOCS documents and more (the settings users get: groups of documents), killed
    with SIGKILL once some units are recorded: the rerun forms the same groups, runs none it recorded again, and
    writes the files of an uninterrupted run."""
    import subprocess
    import sys

    dump = tmp_path / "dump"
    dump.mkdir()
    for i in range(hv.GROUP_MIN_DOCS + 44):  # distinct files (content keys) of the sample article
        (dump / f"paper{i:03d}.pdf").write_bytes(SAMPLE.read_bytes() + f"%{i}\n".encode())
    run = [sys.executable, "-m", "benchmint.cli", "harvest", str(dump), "--triage-only", "--workers", "2", "--out"]
    killed = tmp_path / "killed"
    kill_once_recorded([*run, str(killed)], killed / "ledger.sqlite", 3)  # some groups, long before the end
    before = units_of(killed)
    assert len(before) >= 3
    assert subprocess.run([*run, str(killed)], capture_output=True).returncode == 0
    after = units_of(killed)
    assert {k: after[k] for k in before} == before and len(before) < len(after)
    assert sum("group" in r for r in after.values()) > len(after) // 2  # groups, and a document alone here and there
    clean = tmp_path / "clean"
    assert subprocess.run([*run, str(clean)], capture_output=True).returncode == 0
    assert units_of(clean).keys() == after.keys()
    assert outputs(killed) == outputs(clean)


def test_a_group_whose_worker_died_gives_way_to_its_documents(many, tmp_path, monkeypatch):
    """A worker lost in the middle of a group (here: it exits on one document, as a crash in MuPDF would end it):
    the group's documents run again one a unit, the others are harvested, and the files, that document's error
    row included, are those of a run without groups."""
    import os

    real = hv._harvest_range

    def crashing(path, *a, **k):  # in the forked workers
        if str(path).endswith("c3.pdf"):
            os._exit(3)
        return real(path, *a, **k)

    monkeypatch.setattr(hv, "_harvest_range", crashing)
    cfg = HarvestConfig(triage_only=True)
    grouping(monkeypatch, False)
    harvest([many], tmp_path / "alone", cfg, workers=2)
    grouping(monkeypatch, True)
    monkeypatch.setattr(hv, "GROUP_DOCS", 4)
    res = harvest([many], tmp_path / "grouped", cfg, workers=2)
    assert outputs(tmp_path / "grouped") == outputs(tmp_path / "alone")
    assert [e["pdf"].rsplit("/", 1)[1] for e in res.errors if "WorkerDied" in e["error"]] == ["c3.pdf"]
    stored = units_of(tmp_path / "grouped")
    assert sum("group" in r for r in stored.values()) == 2  # the two groups that ran through; the third gave way
