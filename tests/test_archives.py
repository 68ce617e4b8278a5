"""Dumps as they ship: PDFs and CIFs read out of tar, tar.gz and zip archives, arXiv ids, the metadata join."""

import io
import json
import tarfile
import zipfile

import pymupdf
import pytest
from killing import kill_once_recorded

from benchmint.arxiv import Filters, MetadataIndex, joined, parse_id
from benchmint.cli import main
from benchmint.io import InputError
from benchmint.pdf.harvest import HarvestConfig, harvest
from benchmint.run.archives import MemberError, list_members, read_member

from pdf_factory import figure_pdf


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def figure():
    return figure_pdf()


def paper(figure: bytes, n: int) -> bytes:
    """A one-page paper: the generated figure, its caption and a paragraph naming it; ``n`` makes it unique."""
    doc = pymupdf.open()
    page = doc.new_page()
    with pymupdf.open("pdf", figure) as fig:
        page.show_pdf_page(pymupdf.Rect(72, 72, 540, 430), fig, 0)
    page.insert_textbox(pymupdf.Rect(72, 440, 540, 480), f"Figure 1. (a) A curve, (b) an image of run {n}.")
    page.insert_textbox(pymupdf.Rect(72, 500, 540, 760), f"As Fig. 1 shows, run {n} behaves. " * 12)
    return doc.tobytes()


def add(tf: tarfile.TarFile, name: str, data: bytes, mtime: int = 1_700_000_000) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), mtime
    tf.addfile(info, io.BytesIO(data))


# Both id schemes and several versions of one paper.
NAMES = ["2301/2301.05883v1.pdf", "2301/2301.05883v2.pdf", "2301/2301.05883v3.pdf", "2301/2301.00042v1.pdf",
         "0102/cond-mat0102536v1.pdf", "0102/cond-mat0102536v2.pdf", "0102/hep-th0102001v1.pdf"]


def test_arxiv_ids_of_both_schemes_keep_their_versions():
    assert parse_id("2301.05883v1.pdf") == ("2301.05883", 1)
    assert parse_id("2301/2301.05883v12.pdf") == ("2301.05883", 12)
    assert parse_id("0704.0001.pdf") == ("0704.0001", None)
    assert parse_id("cond-mat0102536v1.pdf") == ("cond-mat/0102536", 1)
    assert parse_id("hep-th0102001v3.pdf") == ("hep-th/0102001", 3)
    assert parse_id("math0309136.pdf") == ("math/0309136", None)
    for other in ("main.pdf", "2301.0588v1.pdf", "2301.058831v1.pdf", "0704.00001v1.pdf",
                  "cond-mat010253v1.pdf", "a_article.pdf"):
        assert parse_id(other) is None, other


def test_members_are_listed_in_order_and_read_by_their_place(tmp_path):
    data = {f"d/{i}.cif": f"data_{i}\n".encode() * (i + 1) for i in range(5)}
    paths = {}
    for mode, suffix in (("w", ".tar"), ("w:gz", ".tar.gz")):
        paths[suffix] = tmp_path / f"a{suffix}"
        with tarfile.open(paths[suffix], mode) as tf:
            add(tf, "readme.txt", b"not listed")
            for name, b in data.items():
                add(tf, name, b)
    paths[".zip"] = tmp_path / "a.zip"
    with zipfile.ZipFile(paths[".zip"], "w", zipfile.ZIP_DEFLATED) as zf:
        for name, b in data.items():
            zf.writestr(name, b)
    for suffix, path in paths.items():
        members, damage = list_members(path, ".cif")
        assert damage is None
        assert [m.name for m in members] == list(data), suffix
        assert [m.size for m in members] == [len(b) for b in data.values()]
        # read backwards too: a compressed tar is rewound, not misread
        assert [read_member(m) for m in reversed(members)] == list(reversed(data.values())), suffix
    tar, zipped = list_members(paths[".tar"], ".cif")[0], list_members(paths[".zip"], ".cif")[0]
    assert tar[0].stamp.startswith("mtime 1700000000 chksum ")
    assert zipped[0].stamp == f"crc32 {zipfile.ZipFile(paths['.zip']).getinfo('d/0.cif').CRC:08x}"


def test_a_truncated_tar_keeps_the_members_before_the_damage(tmp_path):
    whole = tmp_path / "whole.tar"
    with tarfile.open(whole, "w") as tf:
        add(tf, "a.pdf", b"A" * 2000)
        add(tf, "b.pdf", b"B" * 2000)
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole.read_bytes()[:512 + 2048 + 512 + 1000])  # b.pdf's header and half its data
    members, damage = list_members(cut, ".pdf")
    assert [m.name for m in members] == ["a.pdf", "b.pdf"]
    assert damage == "cannot read the archive past member b.pdf: ReadError: unexpected end of data"
    assert read_member(members[0]) == b"A" * 2000
    with pytest.raises(MemberError, match=r"cannot read member b.pdf of .*cut.tar: truncated \(1000 of 2000 bytes\)"):
        read_member(members[1])


@pytest.fixture(scope="module")
def dump(tmp_path_factory, figure):
    """The same papers as loose files (by id scheme folders) and in a tar, a tar.gz and a zip."""
    root = tmp_path_factory.mktemp("dump")
    loose = root / "loose"
    for i, name in enumerate(NAMES):
        (loose / name).parent.mkdir(parents=True, exist_ok=True)
        (loose / name).write_bytes(paper(figure, i))
    with tarfile.open(root / "arXiv_pdf_2301_001.tar", "w") as tf:
        for name in NAMES:
            add(tf, name, (loose / name).read_bytes())
    with tarfile.open(root / "arXiv_pdf_2301_001.tar.gz", "w:gz") as tf:
        for name in NAMES:
            add(tf, name, (loose / name).read_bytes())
    with zipfile.ZipFile(root / "arXiv_pdf_2301_001.zip", "w") as zf:
        for name in NAMES:
            zf.writestr(name, (loose / name).read_bytes())
    return root


def rows_by_member(out, name):
    """A file's rows keyed by the member's name (the path under the folder or archive), without that path."""
    got = []
    for row in read(out / name):
        where = row.pop("pdf")
        row.pop("archive", None)
        row.pop("member", None)
        row.pop("thumb", None)  # named by the unit key: a member's key is not a file's
        got.append((where.split("/", where.count("/") - 1)[-1], row))
    return got


def test_harvest_from_each_archive_equals_the_unpacked_files(dump, tmp_path):
    want = harvest([dump / "loose"], tmp_path / "loose", HarvestConfig(), workers=2)
    assert (want.pdfs, want.figures, want.errors) == (7, 7, [])
    for archive in ("arXiv_pdf_2301_001.tar", "arXiv_pdf_2301_001.tar.gz", "arXiv_pdf_2301_001.zip"):
        out = tmp_path / archive
        res = harvest([dump / archive], out, HarvestConfig(), workers=2)
        assert (res.pdfs, res.pages, res.figures, res.errors) == (7, 7, 7, []), archive
        for name in ("pages.jsonl", "figures.jsonl", "documents.jsonl"):
            # a folder is read in name order, an archive in its own
            assert sorted(rows_by_member(out, name), key=str) == sorted(rows_by_member(tmp_path / "loose", name),
                                                                        key=str), (archive, name)
        pages = read(out / "pages.jsonl")
        assert [(r["pdf"], r["archive"], r["member"], r["arxiv_id"], r["arxiv_version"]) for r in pages[:5:4]] == [
            (f"{dump / archive}/2301/2301.05883v1.pdf", str(dump / archive), "2301/2301.05883v1.pdf", "2301.05883",
             1),
            (f"{dump / archive}/0102/cond-mat0102536v1.pdf", str(dump / archive), "0102/cond-mat0102536v1.pdf",
             "cond-mat/0102536", 1)]


def test_damaged_archives_and_members_are_rows_and_the_run_goes_on(dump, tmp_path, figure):
    good = paper(figure, 100)
    with tarfile.open(tmp_path / "mixed.tar", "w") as tf:
        add(tf, "2302/2302.00001v1.pdf", good)
        add(tf, "2302/2302.00002v1.pdf", b"%PDF-1.4 this is no PDF at all")  # named .pdf, not a PDF
        add(tf, "2302/2302.00001v1.pdf", paper(figure, 101))  # the same name again
        add(tf, "2302/notes.txt", b"not a PDF member: not listed")
    whole = (dump / "arXiv_pdf_2301_001.tar").read_bytes()
    third = list_members(dump / "arXiv_pdf_2301_001.tar", ".pdf")[0][2]
    (tmp_path / "cut.tar").write_bytes(whole[:third.offset + third.size // 2])  # through 2301.05883v3's bytes
    (tmp_path / "broken.zip").write_bytes((dump / "arXiv_pdf_2301_001.zip").read_bytes()[:-100])
    res = harvest([tmp_path / "mixed.tar", tmp_path / "cut.tar", tmp_path / "broken.zip"], tmp_path / "out",
                  HarvestConfig(triage_only=True), workers=2)
    errors = read(tmp_path / "out" / "errors.jsonl")
    mixed, cut = str(tmp_path / "mixed.tar"), str(tmp_path / "cut.tar")
    assert [(e.get("archive"), e.get("member"), e.get("kind")) for e in errors] == [
        (mixed, "2302/2302.00002v1.pdf", None),
        (mixed, "2302/2302.00001v1.pdf", "duplicate_member"),
        (cut, "2301/2301.05883v3.pdf", None),  # the member the cut goes through: read short
        (cut, "2301/2301.05883v3.pdf", "unreadable"),  # the archive, past its last member listed
        (None, None, "unreadable")]  # the zip, whose directory is cut off
    assert errors[0]["error"].startswith("cannot open as a PDF")
    assert errors[1]["duplicate_of"] == f"{mixed}/2302/2302.00001v1.pdf"
    assert errors[2]["error"].startswith(f"cannot read member 2301/2301.05883v3.pdf of {cut}: truncated")
    assert errors[3]["error"].startswith("cannot read the archive past member 2301/2301.05883v3.pdf")
    assert errors[4] == {"pdf": str(tmp_path / "broken.zip"), "kind": "unreadable",
                         "error": "cannot read the archive: BadZipFile: File is not a zip file"}
    # the first good member of mixed.tar and the two of cut.tar before the cut
    assert [(r["pdf"].rsplit("/", 1)[1], r["candidate"]) for r in read(tmp_path / "out" / "pages.jsonl")] == [
        ("2302.00001v1.pdf", True), ("2301.05883v1.pdf", True), ("2301.05883v2.pdf", True)]
    assert res.pdfs == 8  # 7 members found (3 + 1 again in mixed.tar, 3 in cut.tar) and the zip


def snapshot_line(i: int) -> str:
    """Record i of a generated snapshot: id 2301.{i:05d}, categories by i % 3, versions by i % 4."""
    cats = ("cond-mat.mtrl-sci physics.app-ph", "hep-th", "cond-mat.str-el")[i % 3]
    days = [(1 + i % 28, "Jan"), (2 + i % 27, "Mar"), (3 + i % 26, "Jun")][:1 + i % 3]
    versions = [{"version": f"v{k + 1}", "created": f"Mon, {d} {m} 2023 12:00:00 GMT"} for k, (d, m) in
                enumerate(days)]
    return json.dumps({"id": f"2301.{i:05d}", "submitter": "A. Person", "authors": "A. Person, B. Person",
                       "title": f"Paper\n  number {i}", "abstract": "Words. " * 60, "categories": cats,
                       "doi": f"10.5555/{i}" if i % 2 else None, "journal-ref": None, "versions": versions,
                       "update_date": "2023-07-01"})


def write_snapshot(path, n: int, bad_lines: tuple[int, ...] = ()) -> None:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write("{not json\n" if i in bad_lines else snapshot_line(i) + "\n")


def test_a_snapshot_of_100000_records_is_indexed_joined_and_filtered(tmp_path, figure):
    snapshot = tmp_path / "snapshot.jsonl"
    write_snapshot(snapshot, 100_000, bad_lines=(77_777,))
    index = MetadataIndex.open(snapshot, tmp_path / "metadata.sqlite")
    assert len(index) == 99_999 and index.problems()[0][0] == 77_778
    got = index.lookup(["2301.00004", "2301.99999", "2301.77777", "9999.00001"])
    assert sorted(got) == ["2301.00004", "2301.99999"]
    # 4: categories 4 % 3 = 1 -> hep-th; 1 + 4 % 3 = 2 versions: 1 + 4 = 5 Jan, 2 + 4 = 6 Mar; even: no DOI
    assert got["2301.00004"] == {"categories": ["hep-th"], "versions": {1: "2023-01-05", 2: "2023-03-06"},
                                 "update_date": "2023-07-01", "title": "Paper number 4", "doi": None,
                                 "journal_ref": None}
    # 99999: 99999 % 3 = 0 -> two categories, one version on 1 + 11 = 12 Jan (99999 = 28 * 3571 + 11); odd: a DOI
    assert joined(got["2301.99999"], None) == {
        "in_metadata": True, "categories": ["cond-mat.mtrl-sci", "physics.app-ph"], "created": "2023-01-12",
        "update_date": "2023-07-01", "title": "Paper number 99999", "doi": "10.5555/99999"}
    index.close()
    # A dump of twelve files: which the filters keep, worked out by hand from snapshot_line.
    names = ["2301.00000v1", "2301.00001v1", "2301.00002v1", "2301.00002v3", "2301.00003v1", "2301.00003v2",
             "2301.00005v2", "2301.00005v1", "2301.00004v1", "2301.77777v1", "2301.00008v3", "misc"]
    with tarfile.open(tmp_path / "d.tar", "w") as tf:
        for i, name in enumerate(names):
            add(tf, f"2301/{name}.pdf", paper(figure, i))
    res = harvest([tmp_path / "d.tar"], tmp_path / "out", HarvestConfig(triage_only=True), workers=1,
                  metadata=snapshot, filters=Filters(categories=("cond-mat",), date_from="2023-01-02",
                                                     date_to="2023-03-31", latest_version=True))
    dropped = [(r["member"].split("/")[1], r["reason"]) for r in read(tmp_path / "out" / "dropped.jsonl")]
    assert dropped == [
        ("2301.00000v1.pdf", "dated before --from"),  # cond-mat.mtrl-sci, v1 on 1 Jan
        ("2301.00001v1.pdf", "not in --categories"),  # hep-th
        ("2301.00002v3.pdf", "dated after --to"),  # cond-mat.str-el, v3 on 5 Jun (its v1, 3 Jan, is kept)
        ("2301.00003v2.pdf", "no date for its version in the metadata snapshot"),  # paper 3 has one version
        ("2301.00005v1.pdf", "not the latest version"),  # v1 6 Jan and v2 7 Mar both pass the dates: v2 kept
        ("2301.00004v1.pdf", "not in --categories"),  # hep-th
        ("2301.77777v1.pdf", "not in the metadata snapshot"),  # its line is broken
        ("2301.00008v3.pdf", "dated after --to"),  # cond-mat.str-el, v3 on 3 + 8 = 11 Jun
        ("misc.pdf", "no arXiv id in the file name")]
    kept = [(r["arxiv_id"], r["arxiv_version"], r["categories"], r["created"], r["doi"])
            for r in read(tmp_path / "out" / "documents.jsonl")]
    assert kept == [("2301.00002", 1, ["cond-mat.str-el"], "2023-01-03", None),
                    ("2301.00003", 1, ["cond-mat.mtrl-sci", "physics.app-ph"], "2023-01-04", "10.5555/3"),
                    ("2301.00005", 2, ["cond-mat.str-el"], "2023-03-07", "10.5555/5")]
    assert [r["pdf"].rsplit("/", 1)[1] for r in read(tmp_path / "out" / "pages.jsonl")] == [
        "2301.00002v1.pdf", "2301.00003v1.pdf", "2301.00005v2.pdf"]
    assert res.dropped == {"dated after --to": 2, "dated before --from": 1, "no arXiv id in the file name": 1,
                           "no date for its version in the metadata snapshot": 1, "not in --categories": 2,
                           "not in the metadata snapshot": 1, "not the latest version": 1}
    assert read(tmp_path / "out" / "errors.jsonl") == [
        {"metadata": str(snapshot), "line": 77_778, "error": index_error(snapshot)}]


def index_error(snapshot):
    return MetadataIndex.open(snapshot, snapshot.parent / "metadata.sqlite").problems()[0][1]


def test_filter_options_are_checked_before_any_work(dump, tmp_path, capsys):
    base = ["harvest", str(dump / "arXiv_pdf_2301_001.tar"), "--out", str(tmp_path / "out")]
    assert main([*base, "--categories", "hep-th"]) == 2
    assert "--categories, --from and --to need --metadata" in capsys.readouterr().err
    assert main([*base, "--metadata", str(tmp_path / "none.jsonl"), "--from", "2023-13-01"]) == 2
    assert "--from takes a date as YYYY-MM-DD, got '2023-13-01'" in capsys.readouterr().err
    assert main([*base, "--metadata", str(tmp_path / "none.jsonl")]) == 2
    assert f"--metadata {tmp_path / 'none.jsonl'}: No such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_killed_run_over_several_archives_resumes_to_the_same_files_without_reading_finished_members(tmp_path):
    import sqlite3
    import subprocess
    import sys
    from importlib.resources import files

    sample = (files("benchmint") / "samples" / "sample_paper.pdf").read_bytes()
    tars = []
    for a in range(3):
        tars.append(tmp_path / f"arXiv_pdf_23{a:02d}_001.tar")
        with tarfile.open(tars[-1], "w") as tf:
            for i in range(40):  # distinct members of the sample article, both id schemes
                name = f"23{a:02d}.{i:05d}v1.pdf" if i % 2 else f"cond-mat0{a}{i:05d}v{1 + i % 3}.pdf"
                add(tf, f"23{a:02d}/{name}", sample + f"%{a} {i}\n".encode())
    run = [sys.executable, "-m", "benchmint.cli", "harvest", *map(str, tars), "--workers", "2", "--out"]
    killed = tmp_path / "killed"
    kill_once_recorded([*run, str(killed)], killed / "ledger.sqlite", 3)  # some members, long before the end
    with sqlite3.connect(killed / "ledger.sqlite") as db:
        assert 3 <= db.execute("SELECT COUNT(*) FROM units").fetchone()[0] < 120
    assert subprocess.run([*run, str(killed)], capture_output=True).returncode == 0
    clean = tmp_path / "clean"
    assert subprocess.run([*run, str(clean)], capture_output=True).returncode == 0
    names = ("pages.jsonl", "figures.jsonl", "errors.jsonl", "documents.jsonl", "dropped.jsonl")
    for name in names:
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name
    assert sorted(p.name for p in (killed / "thumbs").iterdir()) == sorted(p.name for p in (clean / "thumbs").iterdir())
    assert len(read(clean / "documents.jsonl")) == 120
    # Every member's bytes overwritten in place: a rerun keys members by their headers, so it reads none of them.
    want = {name: (clean / name).read_bytes() for name in names}
    for tar in tars:
        data = bytearray(tar.read_bytes())
        for m in list_members(tar, ".pdf")[0]:
            data[m.offset:m.offset + m.size] = bytes(m.size)
        tar.write_bytes(bytes(data))
    again = subprocess.run([*run, str(clean)], capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.startswith("120 PDFs (120 already done)"), again.stdout
    assert {name: (clean / name).read_bytes() for name in names} == want


def test_xrd_build_reads_a_cod_tree_and_its_archives_to_the_same_items(tmp_path):
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    from benchmint.xrd.build import BuildConfig, build

    salts = {"1000000": ("Na", 5.64), "1000001": ("K", 6.29), "2000002": ("Rb", 6.59), "9000003": ("Li", 4.07)}
    tree = tmp_path / "cod" / "cif"
    for number, (metal, a) in salts.items():
        s = Structure.from_spacegroup("Fm-3m", Lattice.cubic(a), [metal, "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
        path = tree / number[0] / number[1:3] / number[3:5] / f"{number}.cif"  # the COD's N/NN/NN/NNNNNNN.cif
        path.parent.mkdir(parents=True, exist_ok=True)
        CifWriter(s).write_file(path)
    cifs = sorted(tree.rglob("*.cif"))
    with zipfile.ZipFile(tmp_path / "cod.zip", "w") as zf:  # stored: a member's bytes can be damaged in place
        for p in cifs:
            zf.write(p, p.relative_to(tmp_path / "cod").as_posix())
    with tarfile.open(tmp_path / "cod.tar.gz", "w:gz") as tf:
        for p in cifs:
            tf.add(p, p.relative_to(tmp_path / "cod").as_posix())

    def items(src, out):
        res = build([src], tmp_path / out, BuildConfig(per_db=2), workers=2)
        return res, {r["id"]: (r["formula"], r["two_theta_star"], r["answer"], r["spacegroup_number"], r["cif"],
                               r.get("member")) for r in read(tmp_path / out / "items.jsonl")}

    _, want = items(tree, "tree")
    assert sorted(want) == sorted(salts)  # ids as the database calls them
    assert want["1000000"][:4] == ("NaCl", 31.72, [[2, 0, 0]], 225)  # rock salt's (2 0 0), as in test_xrd_build
    for archive in ("cod.zip", "cod.tar.gz"):
        res, got = items(tmp_path / archive, archive + ".out")
        assert res.errors == []
        assert {k: v[:4] for k, v in got.items()} == {k: v[:4] for k, v in want.items()}, archive
        assert got["2000002"][4:] == (f"../{archive}/cif/2/00/00/2000002.cif", "cif/2/00/00/2000002.cif")
        assert all(r["cif_text"].startswith("# generated using pymatgen") for r in read(tmp_path / (archive + ".out")
                                                                                       / "items.jsonl"))
    # A member whose bytes no longer match their CRC-32: an error row naming the archive and member; the rest built.
    data = bytearray((tmp_path / "cod.zip").read_bytes())
    at = data.index(b"_cell_length_a", zipfile.ZipFile(tmp_path / "cod.zip").getinfo("cif/1/00/00/1000001.cif")
                    .header_offset)
    data[at] ^= 0x20
    (tmp_path / "bad.zip").write_bytes(bytes(data))
    res, got = items(tmp_path / "bad.zip", "bad")
    assert sorted(got) == ["1000000", "2000002", "9000003"]
    assert [(e["archive"], e["member"]) for e in res.errors] == [(str(tmp_path / "bad.zip"), "cif/1/00/00/1000001.cif")]
    assert res.errors[0]["error"] == (f"MemberError: cannot read member cif/1/00/00/1000001.cif of {tmp_path / 'bad.zip'}:"
                                      " BadZipFile: Bad CRC-32 for file 'cif/1/00/00/1000001.cif'")


def whose(member, key, out):
    import os
    import time

    time.sleep(0.2)  # long enough that the other worker takes the next member meanwhile
    return {"pid": os.getpid(), "bytes": len(read_member(member))}


def test_one_archive_is_shared_among_the_workers_member_by_member(tmp_path):
    from benchmint.run import run_files

    with tarfile.open(tmp_path / "one.tar", "w") as tf:
        for i in range(8):
            add(tf, f"m{i}.cif", b"x" * (i + 1))
    _, rows, _ = run_files([tmp_path / "one.tar"], ".cif", tmp_path / "out", "t", whose, lambda p: (),
                           lambda p: {}, workers=2)
    assert [r["bytes"] for _, _, r in rows] == list(range(1, 9))
    assert len({r["pid"] for _, _, r in rows}) == 2


def test_a_rerun_lists_a_compressed_tar_from_its_kept_listing_without_decompressing_it(dump, tmp_path):
    import os
    import shutil

    tgz = tmp_path / "arXiv_pdf_2301_001.tar.gz"
    shutil.copy(dump / tgz.name, tgz)
    first = harvest([tgz], tmp_path / "out", HarvestConfig(triage_only=True), workers=1)
    want = {name: (tmp_path / "out" / name).read_bytes() for name in ("pages.jsonl", "documents.jsonl")}
    st = tgz.stat()
    tgz.write_bytes(bytes(st.st_size))  # no gzip stream left to decompress: same size and time
    os.utime(tgz, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = harvest([tgz], tmp_path / "out", HarvestConfig(triage_only=True), workers=1)
    assert (first.pdfs, first.skipped, again.pdfs, again.skipped, again.errors) == (7, 0, 7, 7, [])
    assert {name: (tmp_path / "out" / name).read_bytes() for name in want} == want
    os.utime(tgz, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a changed archive is listed again
    with pytest.raises(InputError, match="no .pdf files found"):  # zeros: a tar that ends at once
        harvest([tgz], tmp_path / "out", HarvestConfig(triage_only=True), workers=1)
