"""`xrd build` finishes each CIF's result in input order while the others run: the read-back streamed
(``run_units``' ``in_order``), the same files whatever order the results arrive in, memory that follows the
number of items and not their size; rows made by the workers, joined by the driver without decoding the item,
the same as the rows it encoded from results recorded before."""

import json
import os
import shutil
import tracemalloc

from test_xrd_build import salt_cif

from benchmint.run import Ledger, ProcessExecutor, Unit, run_units
from benchmint.xrd.build import BuildConfig, build

OUTPUTS = ("items.jsonl", "errors.jsonl", "selection.jsonl")


def echo(x):
    return {"x": x}


def test_results_go_out_in_unit_order_as_soon_as_the_units_before_them_are_recorded(tmp_path):
    # Costs 3, 1, 2 on one worker: run as a, c, b. a goes out when recorded; c waits for b; then b and c.
    units = [Unit("a", (0,), "a", 3.0), Unit("b", (1,), "b", 1.0), Unit("c", (2,), "c", 2.0)]
    log: list[tuple] = []
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        got, skipped = run_units(ledger, units, echo, ProcessExecutor(1),
                                 on_recorded=lambda u, r: log.append(("recorded", u.key)),
                                 in_order=lambda i, r: log.append(("out", i, r)))
    assert (got, skipped) == ([], 0)
    assert log == [("recorded", "a"), ("out", 0, {"x": 0}), ("recorded", "c"), ("recorded", "b"),
                   ("out", 1, {"x": 1}), ("out", 2, {"x": 2})]


def test_units_an_earlier_run_recorded_go_out_before_the_first_one_to_do(tmp_path):
    units = [Unit("a", (0,), "a"), Unit("b", (1,), "b"), Unit("c", (2,), "c"), Unit("a", (0,), "a again")]
    log: list[tuple] = []
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        run_units(ledger, units[:2], echo, ProcessExecutor(1))
        _, skipped = run_units(ledger, units, echo, ProcessExecutor(1),
                               on_recorded=lambda u, r: log.append(("recorded", u.key)),
                               in_order=lambda i, r: log.append(("out", i, r)))
    assert skipped == 2
    assert log == [("out", 0, {"x": 0}), ("out", 1, {"x": 1}), ("recorded", "c"), ("out", 2, {"x": 2}),
                   ("out", 3, {"x": 0})]


def padded(text: str, kib: int) -> str:
    """``text`` with ``kib`` KiB of comment lines in its block: the item's cif_text carries them."""
    head, rest = text.split("\n", 1)
    return head + "\n" + ("# " + "x" * 1021 + "\n") * kib + rest


def cif_set(root, big_kib=0, padded_from=9):
    """Ten salts, a copy of one (duplicate content), a broken file; those from ``padded_from`` on padded."""
    root.mkdir()
    for i in range(10):
        text = salt_cif(f"s{i}", a=4.0 + 0.2 * i, metal=("Na", "K", "Li")[i % 3])
        (root / f"s{i:02d}.cif").write_text(padded(text, big_kib) if i >= padded_from else text)
    shutil.copy(root / "s03.cif", root / "s03copy.cif")
    (root / "s05broken.cif").write_text("not a CIF\n")


def outputs(out):
    return {name: (out / name).read_bytes() for name in OUTPUTS}


def test_results_arriving_out_of_input_order_and_a_resumed_run_give_the_files_of_an_in_order_run(tmp_path,
                                                                                                  monkeypatch):
    cif_set(tmp_path / "cif", big_kib=256)  # the last file is the largest: run first, recorded first
    monkeypatch.chdir(tmp_path)  # relative paths, so the outputs compare byte for byte
    cfg = BuildConfig(per_db=3)
    monkeypatch.setenv("BENCHMINT_DISPATCH", "input")
    build(["cif"], "in-order", cfg)
    monkeypatch.setenv("BENCHMINT_DISPATCH", "longest-first")
    for workers in (1, 2):
        got = build(["cif"], f"any-order-{workers}", cfg, workers=workers)
        assert (got.cifs, got.items, len(got.errors)) == (12, 10, 2)
        assert outputs(tmp_path / f"any-order-{workers}") == outputs(tmp_path / "in-order"), workers
    # A run that stopped after the first half of the files, resumed with all of them.
    (tmp_path / "half").mkdir()
    for p in sorted((tmp_path / "cif").iterdir())[:6]:
        shutil.copy(p, tmp_path / "half" / p.name)
    build(["half"], "resumed", cfg)
    assert build(["cif"], "resumed", cfg, workers=2).skipped == 6 - 1  # s03copy shares s03's key
    assert outputs(tmp_path / "resumed") == outputs(tmp_path / "in-order")
    assert sorted(os.listdir(tmp_path / "resumed")) == sorted(os.listdir(tmp_path / "in-order"))


def test_the_drivers_memory_follows_the_items_count_not_their_size(tmp_path, monkeypatch):
    """Ten items of 1 MiB each (their CIF text): the driver holds one at a time, and of each item the fields the
    selection reads. Holding every result until the last CIF, as the read-back after the run did, peaked at
    13.2 MiB; finishing them in order as they arrive, at 4.2 MiB: a few copies of the one result in hand (the
    text from the worker, the ledger's, the decoded item, its line of JSON)."""
    cif_set(tmp_path / "cif", big_kib=1024, padded_from=0)
    monkeypatch.chdir(tmp_path)
    tracemalloc.start()
    try:
        got = build(["cif"], "out", BuildConfig(per_db=3))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.items == 10 and len((tmp_path / "out" / "items.jsonl").read_bytes()) > 10 * 2**20
    assert peak < 6 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_a_killed_run_leaves_no_half_items_file_and_its_rerun_writes_a_clean_runs_files(tmp_path):
    """Rows are written while the CIFs run (a megabyte at a time), to a temporary name: a run killed half way
    leaves no items.jsonl (a reader never sees part of one), and its rerun, resumed from the ledger, writes the
    files of a clean run."""
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    (tmp_path / "cif").mkdir()
    for i in range(40):
        (tmp_path / "cif" / f"s{i:02d}.cif").write_text(salt_cif(f"s{i}", a=4.0 + 0.05 * i,
                                                                 metal=("Na", "K", "Li")[i % 3]))
    run = [sys.executable, "-m", "benchmint.cli", "xrd", "build", "cif", "--per-db", "3", "--out"]
    env = {**os.environ, "BENCHMINT_DISPATCH": "input"}  # results in input order: rows go out as they come
    proc = subprocess.Popen([*run, "killed"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    from benchmint.run.ledger import read_frames, results_folder

    partial = tmp_path / "killed" / ".items.jsonl.tmp"
    results = results_folder(tmp_path / "killed" / "ledger.sqlite")

    def filed() -> set[str]:  # the results the workers filed so far
        return {key for path in (results.iterdir() if results.is_dir() else ())
                for key, *_ in read_frames(path.read_bytes())}

    deadline = time.time() + 120
    while time.time() < deadline:  # kill it once some rows are being written, long before the end
        if partial.exists() and len(filed()) >= 3:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(tmp_path / "killed" / "ledger.sqlite") as db:
        recorded = db.execute("SELECT COUNT(*) FROM units").fetchone()[0]
        # filed by the workers: the rows point into result files, which the rerun reads back
        assert db.execute("SELECT COUNT(file) FROM units").fetchone()[0] == recorded
    assert not (tmp_path / "killed" / "items.jsonl").exists()
    # done: the committed rows and the results filed whose rows the kill left uncommitted (found in the files)
    done = filed()
    assert recorded <= len(done) < 40
    rerun = subprocess.run([*run, "killed"], cwd=tmp_path, capture_output=True, text=True)
    assert rerun.returncode == 0 and f"({len(done)} already done)" in rerun.stdout, rerun.stdout
    assert subprocess.run([*run, "clean"], cwd=tmp_path, capture_output=True).returncode == 0
    assert outputs(tmp_path / "killed") == outputs(tmp_path / "clean")
    assert not partial.exists()


def rows_set(root):
    """``cif_set`` (its last file padded by 64 KiB), a CIF of two structure blocks, and three CIFs in a tar
    archive (items that carry the archive's and the member's fields)."""
    import tarfile

    cif_set(root, big_kib=64)
    (root / "two_blocks.cif").write_text(salt_cif("b1", a=5.1) + salt_cif("b2", a=5.9, metal="K"))
    packed = root.parent / "packed"
    packed.mkdir()
    for i in range(3):
        (packed / f"t{i}.cif").write_text(salt_cif(f"t{i}", a=4.3 + 0.3 * i, metal="Li"))
    with tarfile.open(root / "more.tar", "w") as tar:
        for i in range(3):
            tar.add(packed / f"t{i}.cif", arcname=f"t{i}.cif")


def as_recorded_before(result, where):
    """The result of a structure as the code before rows were encoded in the workers recorded it: the item."""
    return result


def stored_forms(out):
    """How many structures the ledger holds as items ("answer" in them) and as rows."""
    forms = {"item": 0, "row": 0}
    with Ledger(out / "ledger.sqlite", "xrd-build") as ledger:
        for _, _, r in ledger.results():
            if "head" in r:  # rows framed for the driver: the head, the rows apart
                forms["row"] += len(r["items"])
                continue
            for b in r.get("blocks", [r]):
                forms["item"] += "answer" in b
    return forms


def test_rows_encoded_by_the_workers_are_the_rows_the_driver_encoded_and_old_ledgers_resume_to_them(tmp_path,
                                                                                                    monkeypatch):
    """The same files from results recorded as items (a ledger written before the workers encoded the rows, read
    the old way), as rows, and from a ledger holding both (a run of the code before resumed by this one), at 1
    and 2 workers; with a CIF of two blocks and archive members, whose fields the driver joins in."""
    import benchmint.xrd.build as xb

    rows_set(tmp_path / "cif")
    monkeypatch.chdir(tmp_path)
    cfg = BuildConfig(per_db=3)
    with monkeypatch.context() as m:  # the workers fork from here: they make results the way the code before did
        m.setattr(xb, "_as_row", as_recorded_before)
        old = build(["cif"], "old", cfg)
        build(["cif/s00.cif", "cif/two_blocks.cif", "cif/more.tar"], "mixed", cfg, workers=2)
    assert (old.cifs, old.items, len(old.errors)) == (16, 15, 2)
    assert stored_forms(tmp_path / "old") == {"item": 15, "row": 0}
    for workers in (1, 2):
        build(["cif"], f"new-{workers}", cfg, workers=workers)
        assert stored_forms(tmp_path / f"new-{workers}") == {"item": 0, "row": 15}
        assert outputs(tmp_path / f"new-{workers}") == outputs(tmp_path / "old"), workers
    items = [json.loads(line) for line in (tmp_path / "old" / "items.jsonl").read_text().splitlines()]
    assert {it["id"] for it in items if "archive" in it} == {"t0", "t1", "t2"}
    assert {it["id"] for it in items if it["id"].startswith("two_blocks")} == {"two_blocks#b1", "two_blocks#b2"}
    # The old ledger read again by this code, and the mixed one resumed with every file.
    assert build(["cif"], "old", cfg, workers=2).skipped == 15
    assert build(["cif"], "mixed", cfg).skipped == 5
    assert stored_forms(tmp_path / "mixed") == {"item": 6, "row": 9}
    for name in ("old", "mixed"):
        assert outputs(tmp_path / name) == outputs(tmp_path / "new-1"), name


def test_the_driver_decodes_no_item_whatever_its_size(tmp_path, monkeypatch):
    """The driver reads each result back from the ledger and writes its row without decoding the item: what
    the JSON decoder builds in the driver is a few values a structure (the result's head), however many
    reflections, rotations and lines of CIF the item holds, and ``json.dumps`` encodes no item there. The code
    before decoded every item (hundreds of values each here) and encoded it again."""
    import benchmint.xrd.build  # noqa: F401  (imported before json is watched)

    rows_set(tmp_path / "cif")
    monkeypatch.chdir(tmp_path)
    built = {"values": 0, "items_decoded": 0, "items_encoded": 0}

    def values(x):
        if isinstance(x, dict):
            built["items_decoded"] += "answer" in x
            return 1 + sum(values(v) for v in x.values())
        if isinstance(x, list):
            return 1 + sum(values(v) for v in x)
        return 1

    loads, dumps = json.loads, json.dumps

    def counted_loads(*a, **k):
        got = loads(*a, **k)
        built["values"] += values(got)
        return got

    def counted_dumps(obj, *a, **k):
        built["items_encoded"] += isinstance(obj, dict) and "answer" in obj
        return dumps(obj, *a, **k)

    raw_decode = json.JSONDecoder.raw_decode

    def counted_raw_decode(self, *a, **k):
        got = raw_decode(self, *a, **k)
        built["values"] += values(got[0])
        return got

    monkeypatch.setattr(json, "loads", counted_loads)
    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counted_raw_decode)
    monkeypatch.setattr(json, "dumps", counted_dumps)
    got = build(["cif"], "out", BuildConfig(per_db=3), workers=1)
    monkeypatch.undo()
    driver = dict(built)
    assert got.items == 15
    items = [loads(line) for line in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    in_items = sum(values(it) for it in items)
    assert in_items > 15 * 100  # the items are large enough for the bound below to tell
    assert driver["items_decoded"] == 0 and driver["items_encoded"] == 0, driver
    assert driver["values"] <= 30 * got.cifs, driver  # {row: [3 to 5 spans and names], select: {7}, cif_symmetry}


def test_a_framed_result_reads_back_as_its_rows_and_one_whose_head_does_not_fit_is_an_error():
    from benchmint.xrd.build import _as_row, _framed, _read_rows

    item = {"answer": [[1, 1, 1]], "cif_symmetry": "operations", "db": "d", "two_theta_star": 27.4,
            "peak_intensity": 100.0, "n_peaks": 9, "union_size": 1, "crystal_system": "cubic",
            "spacegroup_number": 225, "formula": 'Na"Cl\n'}
    row = _as_row({**item, "cif_text": "data_x\n"}, ("archive", "member"))
    assert row["row"][1::2] == ["archive", "cif", "id", "member"]
    text = _framed({"blocks": [{"block": "a", "error": "unreadable"}, {"block": "b", **row}]}).text
    stored = json.loads(text)  # the ledger's own reader sees a JSON object: the head and the rows, marks and all
    assert stored["items"][0]["cif"] == "\0cif\0" and stored["items"][0]["formula"] == 'Na"Cl\n'
    as_bytes = {**row, "row": [p.encode() if i % 2 == 0 else p for i, p in enumerate(row["row"])]}
    for form in (text, framed_in_characters({"blocks": [{"block": "a", "error": "unreadable"},
                                                        {"block": "b", **row}]}).text):  # now and before
        got = _read_rows(form.encode())
        for b in got["blocks"]:
            if "row" in b:
                b["row"] = [bytes(p) if i % 2 == 0 else p for i, p in enumerate(b["row"])]
        assert got == {"blocks": [{"block": "a", "error": "unreadable"}, {"block": "b", **as_bytes}]}
    assert _read_rows(b'{"error":"x"}') is None  # another form: decoded by the ledger
    cut = text[:text.index(',"items":[') + 40] + "]}"
    assert "stored result unreadable" in _read_rows(cut.encode())["error"]
    assert "stored result unreadable" in _read_rows(b'{"head":{"row":[[0,5]]')["error"]
    assert "stored result unreadable" in _read_rows(b'{"head_bytes":14,"head":{"row":[[0,5]]')["error"]
    head = '{"row":[[10,13]],"x":"é"}'  # 25 characters, 26 bytes
    for length in (25, 27, "x", ""):  # a head's length that is not where its head ends
        bad = f'{{"head_bytes":{length},"head":{head},"items":["a"]}}'.encode()
        assert "stored result unreadable" in _read_rows(bad)["error"], length
    good = _read_rows(f'{{"head_bytes":26,"head":{head},"items":["a"]}}'.encode())
    assert bytes(good["row"][0]) == b'"a"' and good["x"] == "é"


def framed_in_characters(result):
    """A result with rows as the workers stored it before the rows' places were byte spans: {"head": ...} in
    UTF-8, each piece's span counted in characters (which differ from bytes past any non-ASCII character)."""
    from benchmint.io import dumps, field_mark
    from benchmint.run.ledger import encode_text

    blocks = result.get("blocks", [result])
    if not any("row" in b for b in blocks):
        return result
    rows, heads, at = [], [], len(',"items":[')
    for b in blocks:
        if "row" not in b:
            heads.append(b)
            continue
        place = []
        for i, piece in enumerate(b["row"]):
            size = len(field_mark(piece) if i % 2 else piece)
            place.append(piece if i % 2 else [at, at + size])
            at += size
        rows.append("".join(p if i % 2 == 0 else field_mark(p) for i, p in enumerate(b["row"])))
        at += 1
        heads.append({**b, "row": place})
    head = {"blocks": heads} if "blocks" in result else heads[0]
    return encode_text('{"head":' + dumps(head) + ',"items":[' + ",".join(rows) + "]}")


def test_rows_in_byte_spans_give_the_files_of_rows_in_character_spans_past_non_ascii_text(tmp_path, monkeypatch):
    """Rows framed as the workers store them now (pieces at byte offsets, handed to items.jsonl as slices of the
    bytes read back) and as they stored them before (offsets in characters, decoded and encoded again) give the
    same files, alone and mixed in one ledger, with non-ASCII text in the CIFs, their names (ids, paths) and a
    block's name, where the two kinds of offset part."""
    import benchmint.xrd.build as xb

    root = tmp_path / "cif"
    root.mkdir()
    for i in range(6):
        text = salt_cif(f"s{i}", a=4.0 + 0.2 * i, metal=("Na", "K", "Li")[i % 3])
        (root / f"s{i}-{'é' * i}.cif").write_text(text.replace("\n", f"\n# Å={4.0 + 0.2 * i} 測定\n", 1))
    (root / "zwei_blöcke.cif").write_text(salt_cif("b1é", a=5.1) + salt_cif("b2ü", a=5.9, metal="K"))
    monkeypatch.chdir(tmp_path)
    cfg = BuildConfig(per_db=2)
    with monkeypatch.context() as m:  # the workers fork from here: they frame rows the way the code before did
        m.setattr(xb, "_framed", framed_in_characters)
        chars = build(["cif"], "chars", cfg)
        build([f"cif/{n}" for n in ("s1-é.cif", "zwei_blöcke.cif")], "mixed", cfg, workers=2)
    assert (chars.items, len(chars.errors)) == (8, 0)
    with Ledger(tmp_path / "chars" / "ledger.sqlite", "xrd-build") as ledger:
        assert all("head" in r and "head_bytes" not in r for _, _, r in ledger.results())
    got = build(["cif"], "bytes", cfg, workers=2)
    with Ledger(tmp_path / "bytes" / "ledger.sqlite", "xrd-build") as ledger:
        assert all("head_bytes" in r for _, _, r in ledger.results())
    assert outputs(tmp_path / "bytes") == outputs(tmp_path / "chars")
    assert build(["cif"], "mixed", cfg).skipped == 2 and got.skipped == 0
    assert outputs(tmp_path / "mixed") == outputs(tmp_path / "chars")
    lines = (tmp_path / "bytes" / "items.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["id"] for line in lines} >= {"s2-éé", "zwei_blöcke#b1é", "zwei_blöcke#b2ü"}


def test_a_rows_pieces_are_slices_of_the_bytes_read_back_not_copies():
    """What the driver writes of a framed row is the bytes the ledger read, sliced in place: no decode, no
    encode, no copy before the one write (the code before decoded the result and sliced text out of it)."""
    from benchmint.xrd.build import _as_row, _framed, _read_rows

    item = {"answer": [[1, 1, 1]], "cif_symmetry": "operations", "db": "d", "two_theta_star": 27.4,
            "peak_intensity": 100.0, "n_peaks": 9, "union_size": 1, "crystal_system": "cubic",
            "spacegroup_number": 225, "formula": "NaCl ☃"}
    row = _as_row({**item, "cif_text": "data_x\n# Å 測定\n"}, ())
    stored = _framed({"blocks": [{"block": "ä", **row}]}).text.encode("utf-8")
    got = _read_rows(stored)["blocks"][0]["row"]
    assert [bytes(p) for p in got[::2]] == [p.encode("utf-8") for p in row["row"][::2]]
    assert all(isinstance(p, memoryview) and p.obj is stored for p in got[::2])
    assert stored.startswith(b'{"head_bytes":')


def test_a_row_made_for_other_fields_is_that_items_error_and_the_run_goes_on(tmp_path):
    """A plain file's result whose row waits for an archive's fields (never made so: a member's key is not a
    file's) is listed as that item's error; the next result is written."""
    from pathlib import Path

    from benchmint.run.runner import FoundFile
    from benchmint.xrd.build import _as_row, _Finish, _framed, _read_rows

    item = {"answer": [[1, 1, 1]], "cif_symmetry": "operations", "db": "d", "two_theta_star": 27.4,
            "peak_intensity": 100.0, "n_peaks": 9, "union_size": 1, "crystal_system": "cubic",
            "spacegroup_number": 225}

    def stored(text, where):  # as the driver reads it back
        return _read_rows(_framed(_as_row({**item, "cif_text": text}, where)).text.encode("utf-8"))

    finish = _Finish(tmp_path)
    try:
        finish.add(FoundFile(Path("a.cif")), "k1", stored("data_a\n", ("archive", "member")))
        finish.add(FoundFile(Path("b.cif")), "k2", stored("data_b\n", ()))
        assert [e["cif"] for e in finish.errors] == ["a.cif"]
        assert "stored result unreadable" in finish.errors[0]["error"]
        assert [ids for ids, _ in finish.selection_input.dbs.values()] == [["b"]]
    finally:
        finish.abandon()


def test_a_fresh_run_reads_each_result_once_from_where_it_was_filed_without_querying_the_ledger(tmp_path,
                                                                                                 monkeypatch):
    """Each CIF's result goes out in input order read from its result file at the place the driver recorded for
    it: one read a result, no query of the ledger (the code before selected each row back by its key first).
    A rerun, whose results an earlier run recorded, reads them through the ledger."""
    from benchmint.run.ledger import Ledger as L

    cif_set(tmp_path / "cif")
    monkeypatch.chdir(tmp_path)
    calls = {"get": 0, "read_filed": 0, "pread": 0}
    get, read_filed, pread = L.get, getattr(L, "read_filed", None), os.pread

    def counted(name, fn):
        def call(*a, **k):
            calls[name] += 1
            return fn(*a, **k)
        return call

    monkeypatch.setattr(L, "get", counted("get", get))
    monkeypatch.setattr(L, "read_filed", counted("read_filed", read_filed), raising=False)
    monkeypatch.setattr(os, "pread", counted("pread", pread))
    got = build(["cif"], "out", BuildConfig(per_db=3), workers=2)
    assert (got.cifs, got.skipped) == (12, 0)
    # 11 contents (10 salts, a broken file), each read once; the copy of s03 is read again by its key
    assert calls == {"get": 1, "read_filed": 11, "pread": 12}, calls
    calls.update(get=0, read_filed=0, pread=0)
    assert build(["cif"], "out", BuildConfig(per_db=3), workers=2).skipped == 11
    assert calls == {"get": 12, "read_filed": 0, "pread": 24}, calls  # each of 12 files checked done, then read


def test_an_items_cif_path_from_the_listings_link_flag_is_the_one_an_lstat_gives(tmp_path):
    """The listing tells each file whether it is itself a link (``FoundFile.link``), and the item's path relative
    to the output folder taken with it equals the one found by asking the file system (an lstat a file), for
    plain files, links, chains of links and files reached through a linked folder."""
    from benchmint.run.runner import find_files
    from benchmint.xrd.build import _Relative

    real, out = tmp_path / "data" / "real", tmp_path / "runs" / "out"
    (real / "sub").mkdir(parents=True)
    out.mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (real / "a.cif").write_text("a")
    (real / "sub" / "s.cif").write_text("s")
    (tmp_path / "other" / "b.cif").write_text("b")
    (real / "link.cif").symlink_to(tmp_path / "other" / "b.cif")
    (real / "sub" / "chain.cif").symlink_to(os.path.join("..", "link.cif"))
    (tmp_path / "via").symlink_to(real, target_is_directory=True)
    found = find_files([tmp_path / "via"], ".cif")
    assert [(f.path.relative_to(tmp_path / "via").as_posix(), f.link) for f in found] == [
        ("a.cif", False), ("link.cif", True), ("sub/chain.cif", True), ("sub/s.cif", False)]
    told, asked = _Relative(out), _Relative(out)
    assert [told(f.path, f.link) for f in found] == [asked(f.path) for f in found] == [
        "../../data/real/a.cif", "../../other/b.cif", "../../other/b.cif", "../../data/real/sub/s.cif"]
