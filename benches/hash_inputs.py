"""The hashing of a run's inputs alone: the loop the runner had (one file after another, ``hash_file`` and a
``stat``, the settings encoded for every file) against ``hash_files`` on 1 to 8 threads.

    python benches/hash_inputs.py FOLDER [FOLDER ...] [--suffix .cif] [--threads 1 2 4 8] [--repeats 3] [--cold]
    python benches/hash_inputs.py --make DIR --copies 20000 --from corpus/files/cif   # the synthetic folder

Every file found (``find_files``) is keyed with the settings of ``xrd build`` (one settings object a
database, as the build gives them now; the loop before built and encoded one a file). ``--cold``: before each
timing, every file is written out and dropped from the page cache (fsync, then POSIX_FADV_DONTNEED on that file
alone), so its bytes come from the disk (a tmpfs keeps them in memory whatever is asked). Prints one JSON line a
timing: wall seconds and the process's CPU seconds, the best of ``--repeats``; the keys of every timing are
checked equal.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def make(out: Path, copies: int, source: Path) -> None:
    """``copies`` CIFs under ``out`` (1,000 a folder), each a corpus CIF with a comment line of its own first."""
    cifs = sorted(source.rglob("*.cif"))
    if not cifs:
        raise SystemExit(f"no .cif files under {source}")
    datas = [p.read_bytes() for p in cifs]
    for i in range(copies):
        folder = out / f"d{i // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"c{i:06d}.cif").write_bytes(b"# copy %d\n" % i + datas[i % len(datas)])


def evict(paths: list[Path]) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*")
    ap.add_argument("--suffix", default=".cif")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--make")
    ap.add_argument("--copies", type=int, default=20000)
    ap.add_argument("--from", dest="source", default="corpus/files/cif")
    args = ap.parse_args()
    if args.make:
        make(Path(args.make), args.copies, Path(args.source))
        return

    from benchmint.run.runner import find_files, hash_file, hash_files
    from benchmint.xrd.build import BuildConfig

    paths = [f.path for f in find_files(args.folders, args.suffix) if f.error_row() is None and f.member is None]
    shared = BuildConfig().key_settings()
    per_db: dict[str, dict] = {}

    def before() -> list:
        out = []
        for p in paths:
            key, _ = hash_file(p, {**shared, "db": p.parent.name})
            out.append((key, os.stat(p).st_size))
        return out

    def after(threads: int) -> list:
        settings = [per_db.setdefault(p.parent.name, {**shared, "db": p.parent.name}) for p in paths]
        return [(h.key, h.size) for h in hash_files(paths, settings, threads)]

    runs = [("before: one file after another", before)] + [
        (f"hash_files, {n} threads", lambda n=n: after(n)) for n in args.threads]
    size = sum(p.stat().st_size for p in paths)
    want = None
    for name, fn in runs:
        best = None
        for _ in range(args.repeats):
            if args.cold:
                evict(paths)
            t, c = time.perf_counter(), cpu()
            got = fn()
            took = (time.perf_counter() - t, cpu() - c)
            want = want or got
            if got != want:
                raise SystemExit(f"{name}: keys differ from the first timing's")
            best = took if best is None or took[0] < best[0] else best
        print(json.dumps({"timing": name, "files": len(paths), "mb": round(size / 1e6, 1), "cold": args.cold,
                          "wall_s": round(best[0], 3), "cpu_s": round(best[1], 3),
                          "us_per_file": round(best[0] / len(paths) * 1e6, 1)}), flush=True)
    print(f"load average: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
