"""One long unit among many short ones, 2 workers: the run's wall time in input order and costliest first.

    python benches/uneven_units.py --cifs corpus/files/cif --pdfs corpus/files/pdf [--engine ray] [--repeats 2]
        [--synthetic] [--chunk-pages 8 16 32 64]

CIFs: every CIF found under --cifs, plus a supercell of 7,344 sites written by pymatgen (``--supercell``), named
so that it comes last in input order. PDFs: every PDF under --pdfs of at most --small-pages pages, plus the
longest one, named to come last. Each set runs as a whole command (``benchmint xrd build``, ``benchmint
harvest``) with --workers 1 once, which gives each unit's time (the gaps between the ledger's records), then with
--workers 2 under ``BENCHMINT_DISPATCH=input`` and ``longest-first``, best of --repeats, a fresh output folder
each time, the two orders in turn. The ideal of the units' phase at 2 workers is max(sum of unit times / 2, the longest unit); the
units' phase is the time from the run's start to its last ledger record, less the 1-worker run's time to its
first record (imports and hashing: the same in every run). ``--synthetic``: the dispatch alone, on units that
sleep; ``--chunk-pages``: the PDF set harvested with page ranges of other sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _records(ledger: Path) -> list[float]:
    with sqlite3.connect(ledger) as db:
        return sorted(t for (t,) in db.execute("SELECT recorded FROM units"))


def _run(cmd: list[str], out: Path, dispatch: str, engine: str) -> tuple[float, float, float]:
    """(wall seconds, seconds from the start to the last ledger record, CPU seconds of the command and its
    worker processes: those of a Ray cluster are not counted)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "BENCHMINT_DISPATCH": dispatch}
    extra = ["--engine", "ray"] if engine == "ray" else []
    cpu = _children_cpu()
    start = time.time()
    subprocess.run([sys.executable, "-m", "benchmint.cli", *cmd, "--out", str(out), *extra],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # exit 1: some inputs failed
    wall = time.time() - start
    return wall, _records(out / "ledger.sqlite")[-1] - start, _children_cpu() - cpu


def _chunks(pdf_dir: Path, tmp: Path, sizes: list[int], repeats: int) -> dict:
    """Harvest's units phase and wall at 2 workers for each page-range size (the module's ``CHUNK_PAGES``, set
    in the command's process before it starts: the driver cuts the ranges), costliest first, best of
    ``repeats``, the sizes in turn."""
    got: dict[int, list] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            out = tmp / f"chunk{n}"
            shutil.rmtree(out, ignore_errors=True)
            code = ("import sys, benchmint.pdf.harvest as h; from benchmint.cli import main; "
                    f"h.CHUNK_PAGES = {n}; sys.exit(main(sys.argv[1:]))")
            start = time.time()
            subprocess.run([sys.executable, "-c", code, "harvest", str(pdf_dir), "--out", str(out), "--workers", "2"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rec = _records(out / "ledger.sqlite")
            got[n].append((time.time() - start, rec[-1] - start, len(rec)))
    return {n: {"wall": round(min(r[0] for r in runs), 2), "to_last_record": round(min(r[1] for r in runs), 2),
                "units": runs[0][2], "walls": [round(r[0], 2) for r in runs]} for n, runs in got.items()}


def _sleep(seconds: float) -> dict:
    time.sleep(seconds)
    return {"slept": seconds}


def _synthetic(tmp: Path, repeats: int) -> dict:
    """The dispatch alone, free of the machine's load: 40 units that sleep 50 ms and one that sleeps 1 s, given
    last, on ProcessExecutor(2); each unit's cost is its sleep. Ideal: max(3.0 s / 2, 1 s) = 1.5 s; input order
    can do no better than 2 s / 2 + 1 s = 2 s."""
    from benchmint.run import Ledger, ProcessExecutor, Unit, run_units

    units = [Unit(f"s{i}", (0.05,), f"short {i}", 0.05) for i in range(40)] + [Unit("long", (1.0,), "long", 1.0)]
    got: dict[str, list[float]] = {"input": [], "longest-first": []}
    for r in range(repeats):
        for dispatch, walls in got.items():
            os.environ["BENCHMINT_DISPATCH"] = dispatch
            executor = ProcessExecutor(2)
            executor.start()
            with Ledger(tmp / f"sleep-{dispatch}-{r}.sqlite", "t") as ledger:
                start = time.perf_counter()
                run_units(ledger, units, _sleep, executor)
                walls.append(time.perf_counter() - start)
    os.environ.pop("BENCHMINT_DISPATCH")
    return {d: {"best": round(min(w), 3), "walls": [round(x, 3) for x in w]} for d, w in got.items()}


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _measure(name: str, cmd: list[str], tmp: Path, engine: str, repeats: int) -> dict:
    out = tmp / f"{name}-serial"
    shutil.rmtree(out, ignore_errors=True)
    start = time.time()
    subprocess.run([sys.executable, "-m", "benchmint.cli", *cmd, "--out", str(out), "--workers", "1"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    serial_wall = time.time() - start
    rec = _records(out / "ledger.sqlite")
    gaps = [b - a for a, b in zip(rec, rec[1:])]  # each unit after the first: the time it took alone
    before = rec[0] - start - (sum(gaps) / len(gaps))  # the run's start to its first unit's start, about
    total, longest = sum(gaps) + sum(gaps) / len(gaps), max(gaps)
    row = {"flow": name, "units": len(rec), "serial_wall": round(serial_wall, 2), "sum_units": round(total, 2),
           "longest_unit": round(longest, 2), "ideal_units_2": round(max(total / 2, longest), 2)}
    runs: dict[str, list] = {"input": [], "longest-first": []}
    for _ in range(repeats):  # the two orders taken in turn, so that a change of the machine's load hits both
        for dispatch, got in runs.items():
            got.append(_run([*cmd, "--workers", "2"], tmp / f"{name}-{dispatch}", dispatch, engine))
    for dispatch, got in runs.items():
        best = min(got, key=lambda r: r[0])
        row[dispatch] = {"wall": round(best[0], 2), "units_phase": round(best[1] - before, 2),
                         "cpu": round(best[2], 2), "walls": [round(r[0], 2) for r in got],
                         "load": os.getloadavg()[0]}
    return row


def _cif_set(cifs: Path, tmp: Path, reps: tuple[int, int, int]) -> Path:
    import warnings

    from pymatgen.core import Structure
    from pymatgen.io.cif import CifWriter

    root = tmp / "cifs"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    found = sorted(cifs.rglob("*.cif"))
    for i, p in enumerate(found):
        (root / f"a{i:05d}_{p.name}").symlink_to(p.resolve())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = Structure.from_file(next(p for p in found if "2002169" in p.name))  # 68 sites, SG 159
        CifWriter(base * reps).write_file(root / "zz_supercell.cif")
    return root


def _pdf_set(pdfs: Path, tmp: Path, small_pages: int) -> Path:
    import pymupdf

    root = tmp / "pdfs"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    counted = []
    for p in sorted(pdfs.rglob("*.pdf")):
        try:
            with pymupdf.open(p) as doc:
                counted.append((doc.page_count, p))
        except Exception:  # noqa: BLE001 - a damaged file is not part of this measurement
            continue
    longest = max(counted, key=lambda c: c[0])
    for i, (n, p) in enumerate(counted):
        if n <= small_pages and p != longest[1]:
            (root / f"a{i:03d}_{p.name}").symlink_to(p.resolve())
    (root / f"zz_{longest[1].name}").symlink_to(longest[1].resolve())
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cifs", type=Path)
    ap.add_argument("--pdfs", type=Path)
    ap.add_argument("--supercell", type=int, nargs=3, default=(6, 6, 3))
    ap.add_argument("--small-pages", type=int, default=12)
    ap.add_argument("--engine", choices=("local", "ray"), default="local")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--chunk-pages", type=int, nargs="*", default=[],
                    help="with --pdfs: also harvest the set with page ranges of these sizes")
    ap.add_argument("--synthetic", action="store_true", help="also the dispatch alone, on units that sleep")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="uneven-"))
    rows = []
    try:
        if a.synthetic:
            rows.append({"flow": "sleeping units", **_synthetic(tmp, a.repeats)})
            print(json.dumps(rows[-1]), flush=True)
        if a.cifs:
            rows.append(_measure("xrd build", ["xrd", "build", str(_cif_set(a.cifs, tmp, tuple(a.supercell)))],
                                 tmp, a.engine, a.repeats))
            print(json.dumps(rows[-1]), flush=True)
        if a.pdfs:
            pdf_dir = _pdf_set(a.pdfs, tmp, a.small_pages)
            rows.append(_measure("harvest", ["harvest", str(pdf_dir)], tmp, a.engine, a.repeats))
            print(json.dumps(rows[-1]), flush=True)
            if a.chunk_pages:
                rows.append({"flow": "harvest by range size", **_chunks(pdf_dir, tmp, a.chunk_pages, a.repeats)})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
