"""Runs over files: files found twice or unreadable, hashing in blocks, stages with limits of their own."""

import hashlib
import os
import time
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmint.run import Ledger, ProcessExecutor, Unit, content_key, hash_file, run_files, run_units, stage


def size_of(path, key, out):
    return {"size": os.path.getsize(path), "key": key}


def test_files_are_hashed_in_blocks(tmp_path):
    """A 48 MB file costs the run's process a block of memory, not its size; the key is content_key's."""
    big = tmp_path / "in" / "big.cif"
    big.parent.mkdir()
    block = hashlib.sha256(b"seed").digest() * 4096  # 128 KiB that do not compress into anything smaller
    with open(big, "wb") as fh:
        for _ in range(384):
            fh.write(block)
    data = big.read_bytes()
    want = content_key(data, {"db": "x"})
    assert hash_file(big, {"db": "x"}) == (want, hashlib.sha256(data).hexdigest())
    del data
    tracemalloc.start()
    try:
        _, rows, _ = run_files([big.parent], ".cif", tmp_path / "out", "t", size_of, lambda p: (),
                               lambda p: {"db": "x"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(f.path, key, r) for f, key, r in rows] == [(big, want, {"size": 384 * 128 * 1024, "key": want})]
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB"


def open_then_page(open_s, page_s):
    stage("open", 10.0)  # a limit of its own: longer than the executor's stage limit
    time.sleep(open_s)
    stage("page 1 text")
    time.sleep(page_s)
    return {"done": True}


def test_a_stage_with_its_own_limit_is_held_to_it_and_the_next_to_the_executors(tmp_path):
    units = [Unit("slow-open", (0.8, 0.0), "a"), Unit("slow-page", (0.0, 3.0), "b")]
    with Ledger(tmp_path / "l.sqlite", "t") as ledger:
        results, _ = run_units(ledger, units, open_then_page, ProcessExecutor(1, stage_seconds=0.4))
    assert results[0] == {"done": True}
    assert results[1]["time_limit"] == {"limit": "stage", "seconds": 0.4, "stage": "page 1 text"}


def read_it(path, key, out):
    with open(path, "rb") as fh:
        return {"bytes": len(fh.read())}


def test_files_that_vanish_are_rows_and_the_run_goes_on(tmp_path):
    """One file gone between the listing and its hashing, one between its hashing and its worker's reading
    (the run's own callbacks remove them at those moments): each is an error row, the third file runs."""
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.cif", "b.cif", "c.cif"):
        (src / name).write_text(name)

    def settings_of(p):  # called just before the file is hashed
        if p.name == "a.cif":
            p.unlink()
        return {}

    def args_of(p):  # called once the file is hashed, before any worker reads it
        if p.name == "b.cif":
            p.unlink()
        return ()

    _, rows, _ = run_files([src], ".cif", tmp_path / "out", "t", read_it, args_of, settings_of, workers=1)
    assert [(f.path.name, r) for f, _, r in rows] == [
        ("a.cif", {"error": "cannot be read: FileNotFoundError: No such file or directory", "kind": "unreadable"}),
        ("b.cif", {"error": f"FileNotFoundError: [Errno 2] No such file or directory: '{src / 'b.cif'}'"}),
        ("c.cif", {"bytes": 5})]


class _Marked(str):
    """Text that reads otherwise once unpickled: where a result's JSON was encoded shows in the ledger."""

    def __reduce__(self):
        return (str, ("unpickled in the driver",))


def marked(path, key, out):
    return {"where": _Marked("encoded in the worker")}


def test_results_are_encoded_in_the_workers(tmp_path):
    """The worker that computed a file's result encodes its JSON; the driver only inserts the text."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.cif").write_text("a")
    _, rows, _ = run_files([tmp_path / "in"], ".cif", tmp_path / "out", "t", marked, lambda p: (), lambda p: {},
                           workers=1)
    assert [r for _, _, r in rows] == [{"where": "encoded in the worker"}]


def varied(i):
    if i == 3:
        raise ValueError("no structure")
    deep: list = []
    for _ in range(600 if i == 2 else 0):
        deep = [deep]
    return [{"i": 0, "t": "\ud800 lone"}, {"error": "unreadable", "kind": "x"}, {"v": deep},
            None, {"error": "call failed", "retry": True}, {"i": 5}][i]


def test_encoded_results_are_recorded_as_the_driver_records_them(tmp_path):
    """Plain, failed, unstorable, raising and retried units: the same ledger rows (state, text) and the same
    results handed to on_recorded and then, whether the driver encodes the results or their workers do; an
    encoded result reaches them as the ledger stored it (the unstorable one as its error)."""
    import functools
    import sqlite3

    from benchmint.run import SerialExecutor
    from benchmint.run.runner import encoded, filed

    units = [Unit(f"k{i}", (i,), str(i)) for i in range(6)]
    seen: dict[str, list] = {"plain": [], "encoded": [], "filed": []}
    folder = str(tmp_path / "filed.results")
    for name, work in (("plain", varied), ("encoded", functools.partial(encoded, varied)),
                       ("filed", functools.partial(filed, folder, varied))):
        with Ledger(tmp_path / f"{name}.sqlite", "t") as ledger:
            run_units(ledger, units, work, SerialExecutor(), on_recorded=lambda u, r, n=name: seen[n].append(r),
                      then=lambda u, r, n=name: seen[n].append(("then", u.key)) or [])
    rows = {name: sqlite3.connect(tmp_path / f"{name}.sqlite").execute(
        "SELECT key, ok, result FROM units ORDER BY key").fetchall() for name in seen}
    assert rows["encoded"] == rows["plain"]
    # filed: the same states, the rows' texts in the result files (the raising unit's error stays inline)
    assert [(k, ok) for k, ok, _ in rows["filed"]] == [(k, ok) for k, ok, _ in rows["plain"]]
    with Ledger(tmp_path / "filed.sqlite", "t") as filed_ledger, Ledger(tmp_path / "plain.sqlite", "t") as plain:
        assert list(filed_ledger.results()) == list(plain.results())
    assert seen["filed"] == seen["encoded"]
    assert [state for _, state, _ in rows["plain"]] == [1, 0, 0, 0, -1, 1]
    stored_error = {"error": "result not storable as JSON: malformed JSON (nested deeper than 512 levels at column 518)"}
    assert seen["encoded"][4] == stored_error and seen["plain"][4] == varied(2)
    del seen["encoded"][4], seen["plain"][4]
    assert seen["encoded"] == seen["plain"] and ("then", "k4") not in seen["plain"]


def log_name(source, key, out, log):
    name = os.path.basename(source if isinstance(source, str) else source.name)
    with open(log, "a") as fh:
        fh.write(name + "\n")
    return {"name": name}


def test_the_largest_files_and_members_are_handed_out_first(tmp_path):
    """A file's size (a member's, from its archive's listing) is its unit's cost; the one worker starts them in
    that order, and the rows stay in input order."""
    import tarfile

    src = tmp_path / "in"
    src.mkdir()
    for name, size in (("a.cif", 10), ("b.cif", 500), ("c.cif", 100)):
        (src / name).write_bytes(b"x" * size)
    (tmp_path / "d.cif").write_bytes(b"y" * 300)
    with tarfile.open(src / "e.tar", "w") as tar:
        tar.add(tmp_path / "d.cif", arcname="d.cif")
    log = tmp_path / "started.log"
    _, rows, _ = run_files([src], ".cif", tmp_path / "out", "t", log_name, lambda p: (str(log),), lambda p: {},
                           workers=1)
    assert log.read_text().split() == ["b.cif", "d.cif", "c.cif", "a.cif"]
    assert [r["name"] for _, _, r in rows] == ["a.cif", "b.cif", "c.cif", "d.cif"]


def test_hash_files_keys_are_hash_files_in_input_order_on_the_pool(tmp_path):
    """Past the pool's threshold, on several threads: every file's key, SHA-256 and size in input order as
    content_key and hashlib give them from the whole bytes; a file gone before it is read is its OSError in
    its place; the settings objects each file was given (two shared by many, some of their own) key it."""
    from benchmint.run import Hashed, hash_files
    from benchmint.run.runner import HASH_CHUNK, HASH_POOL_MIN_FILES

    n = HASH_POOL_MIN_FILES + HASH_CHUNK + 7
    shared = [{"db": "a"}, {"db": "b", "n": [1, 2]}]
    paths, given_settings, datas = [], [], []
    for i in range(n):
        p = tmp_path / f"f{i:04d}.cif"
        datas.append(hashlib.sha256(str(i).encode()).digest() * (1 + i % 97))
        p.write_bytes(datas[-1])
        paths.append(p)
        given_settings.append(shared[i % 2] if i % 3 else {"db": "own", "i": i})
    gone = n // 2
    paths[gone].unlink()
    got = hash_files(paths, given_settings, threads=4)
    assert len(got) == n
    for i, (data, s, h) in enumerate(zip(datas, given_settings, got)):
        if i == gone:
            assert isinstance(h, FileNotFoundError) and h.filename == str(paths[gone])
        else:
            assert h == Hashed(content_key(data, s), hashlib.sha256(data).hexdigest(), len(data)), i


def test_an_unreadable_file_among_many_is_its_row_in_place_and_a_rerun_skips_the_rest(tmp_path):
    """A run over more files than the pool's threshold, two workers: the file gone before it is hashed is an
    error row in its place, every other row carries content_key of its bytes; a rerun with the missing file
    back runs that file alone (the keys hashed on the pool are those of the first run)."""
    from benchmint.run.runner import HASH_POOL_MIN_FILES

    src = tmp_path / "in"
    src.mkdir()
    n = HASH_POOL_MIN_FILES + 44
    for i in range(n):
        (src / f"c{i:04d}.cif").write_text(f"data_{i}\n" * (1 + i % 7))
    gone = src / f"c{n // 3:04d}.cif"
    kept_bytes = gone.read_bytes()

    def settings_of(p):  # called before the files are hashed
        if p == gone and p.exists():
            p.unlink()
        return {"db": "x"}

    log = tmp_path / "ran.log"
    _, rows, skipped = run_files([src], ".cif", tmp_path / "out", "t", log_name, lambda p: (str(log),), settings_of,
                                 workers=2)
    assert skipped == 0 and len(rows) == n
    assert [f.path.name for f, _, _ in rows] == [f"c{i:04d}.cif" for i in range(n)]
    for f, key, r in rows:
        if f.path == gone:
            assert (key, r) == (None, {"error": "cannot be read: FileNotFoundError: No such file or directory",
                                       "kind": "unreadable"})
        else:
            assert (key, r) == (content_key(f.path.read_bytes(), {"db": "x"}), {"name": f.path.name})
    assert len(log.read_text().split()) == n - 1

    gone.write_bytes(kept_bytes)
    log.unlink()
    _, again, skipped = run_files([src], ".cif", tmp_path / "out", "t", log_name, lambda p: (str(log),),
                                  lambda p: {"db": "x"}, workers=2)
    assert skipped == n - 1 and log.read_text().split() == [gone.name]
    assert [(f.path, r) for f, _, r in again] == [(f.path, {"name": f.path.name}) for f, _, _ in rows]


_BLOCK = 1 << 20  # hash_file's read block


@given(files=st.lists(st.tuples(st.sampled_from([0, 1, 2047, 2048, _BLOCK - 1, _BLOCK, _BLOCK + 1, 2 * _BLOCK + 5]),
                                st.integers(-3, 3), st.integers(0, 2**32 - 1),
                                st.dictionaries(st.sampled_from(["db", "name", "pages", "x"]),
                                                st.one_of(st.integers(), st.text(max_size=5),
                                                          st.lists(st.integers(), max_size=3)), max_size=3)),
                      min_size=1, max_size=4))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hash_files_keys_equal_hash_file_and_content_key_around_the_block(files):
    """Contents of sizes around the 1 MiB read block, settings of any shape: hash_files on the pool and alone
    gives each file hash_file's key and SHA-256 and content_key of the whole bytes."""
    import random
    import tempfile

    from benchmint.run import hash_files
    from benchmint.run.runner import HASH_POOL_MIN_FILES

    with tempfile.TemporaryDirectory() as d:
        paths, settings_, datas = [], [], []
        for i, (size, delta, seed, s) in enumerate(files):
            data = random.Random(seed).randbytes(max(0, size + delta))
            p = os.path.join(d, f"{i}.bin")
            with open(p, "wb") as fh:
                fh.write(data)
            paths.append(p)
            settings_.append(s or None)
            datas.append(data)
        tiny = os.path.join(d, "tiny.bin")
        with open(tiny, "wb") as fh:
            fh.write(b"t")
        pad = HASH_POOL_MIN_FILES  # enough files for the pool
        pooled = hash_files(paths + [tiny] * pad, settings_ + [None] * pad, threads=3)[:len(paths)]
        alone = hash_files(paths, settings_, threads=1)
        for p, s, data, a, b in zip(paths, settings_, datas, pooled, alone):
            want = (content_key(data, s), hashlib.sha256(data).hexdigest())
            assert hash_file(p, s) == want
            assert (a.key, a.sha256, a.size) == (b.key, b.sha256, b.size) == (*want, len(data))


def test_folders_are_listed_as_sorted_rglob_lists_them(tmp_path):
    """The listing by os.scandir finds the files, in the order, that ``sorted(folder.rglob("*"))`` filtered by
    the suffix gives (a path's parts sort, not its text: "a/z.cif" before "a-b.cif"); a link to a folder is not
    followed, a folder named like a CIF is no file, and each file knows whether it is itself a link."""
    from benchmint.run.archives import is_archive
    from benchmint.run.runner import find_files

    root = tmp_path / "in"
    for rel in ("a/z.cif", "a-b.cif", "a.b/c.CIF", ".hidden.cif", "B.cif", "b.cif", "x.cif.", ".cif",
                "deep/er/still/y.Cif", "notes.txt", "pack.tar.gz", "a/ü.cif"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(rel.encode())
    (root / "folder.cif").mkdir()
    (root / "linked").symlink_to(root / "a", target_is_directory=True)  # not followed: its files are a/'s
    (root / "link.cif").symlink_to(root / "b.cif")
    (root / "loop.cif").symlink_to(root / "loop.cif")
    want = [q for q in sorted(root.rglob("*")) if q.suffix.lower() == ".cif" or is_archive(q)]
    got = find_files([root], ".cif")
    assert [f.path for f in got] == [q for q in want if not q.is_dir()]
    assert [f.path.relative_to(root).as_posix() for f in got][:4] == [".hidden.cif", "B.cif", "a/z.cif", "a/ü.cif"]
    by_name = {f.path.name: f for f in got}
    assert by_name["link.cif"].link is True and by_name["link.cif"].same_as == root / "b.cif"
    assert by_name["b.cif"].link is False and by_name["loop.cif"].problem.startswith("cannot be read: a loop")
    assert find_files([root / "b.cif"], ".cif")[0].link is None  # named, not listed: not known
