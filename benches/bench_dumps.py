"""Dumps as they ship: `harvest` over a tar of the corpus's PDFs against the same files unpacked, the metadata
join's share of a triage run, and the memory of indexing metadata snapshots of growing size. Whole processes.

extra_info has the times (best of the rounds), the ratios and the peak RSS. Skipped when the corpus is absent.
Run: .venv/bin/python scripts/fetch_corpus.py && .venv/bin/python -m pytest benches/bench_dumps.py --benchmark-only
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "files" / "pdf"
HARVEST = [sys.executable, "-m", "benchmint.cli", "harvest"]


def _timed(runs: dict, rounds: int, folder: Path, prepare=None) -> dict[str, float]:
    """Each command (``runs[name](out_dir)`` gives its argv) in turn, ``rounds`` times; the best time of each.
    ``prepare(name, out)`` runs before each command, untimed."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, argv_for in runs.items():
            out = folder / name
            shutil.rmtree(out, ignore_errors=True)
            if prepare is not None:
                prepare(name, out)
            t = time.perf_counter()
            subprocess.run(argv_for(out), check=True, capture_output=True)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t)
    return best


def _pdfs() -> list[Path]:
    if not CORPUS.is_dir():
        pytest.skip("corpus absent: python scripts/fetch_corpus.py")
    return sorted(CORPUS.glob("*/*.pdf"))


def _tar(path: Path, members: list[tuple[str, Path]]) -> Path:
    with tarfile.open(path, "w") as tf:
        for name, src in members:
            tf.add(src, name)
    return path


def _rows(out: Path, name: str) -> list[dict]:
    """Rows without the document's path, which differs between a folder and a tar."""
    return [{k: v for k, v in json.loads(line).items() if k not in ("pdf", "archive", "member", "thumb")}
            for line in (out / name).open()]


@pytest.mark.real
def test_a_tar_of_the_corpus_against_the_unpacked_files(benchmark, tmp_path):
    pdfs = _pdfs()
    loose = tmp_path / "loose"
    for p in pdfs:  # unpacked as the tar holds them: one folder, names in the tar's order
        loose.mkdir(exist_ok=True)
        shutil.copy(p, loose / f"{p.parent.name}-{p.name}")
    tar = _tar(tmp_path / "corpus.tar", [(f"pdf/{p.name}", p) for p in sorted(loose.iterdir())])
    runs = {f"{mode}_{src}": (lambda out, s=where, m=flags: [*HARVEST, str(s), "--workers", "2", *m, "--out", str(out)])
            for mode, flags in (("triage", ["--triage-only"]), ("full", [])) for src, where in (("loose", loose),
                                                                                              ("tar", tar))}
    best: dict[str, float] = {}
    benchmark.group = "harvest-tar-vs-loose-whole-process"
    benchmark.pedantic(lambda: best.update(_timed(runs, 4, tmp_path)), rounds=1, iterations=1)
    for mode in ("triage", "full"):
        for name in ("pages.jsonl", "figures.jsonl"):
            assert _rows(tmp_path / f"{mode}_tar", name) == _rows(tmp_path / f"{mode}_loose", name), (mode, name)
    info = benchmark.extra_info
    info.update({f"{k}_s": round(v, 3) for k, v in best.items()})
    info["pdfs"], info["tar_bytes"] = len(pdfs), tar.stat().st_size
    for mode in ("triage", "full"):
        info[f"{mode}_tar_vs_loose"] = round(best[f"{mode}_tar"] / best[f"{mode}_loose"], 3)


def _snapshot_line(i: int, ident: str | None = None) -> str:
    return json.dumps({"id": ident or f"{1001 + i // 100_000}.{i % 100_000:05d}",
                       "submitter": "A. Person", "authors": "A. Person and B. Person",
                       "title": f"A paper\n  numbered {i}", "comments": "10 pages", "journal-ref": None,
                       "doi": f"10.5555/{i}", "report-no": None, "categories": "cond-mat.mtrl-sci physics.app-ph",
                       "license": None, "abstract": "Words of an abstract. " * 40,
                       "versions": [{"version": "v1", "created": "Mon, 2 Jan 2023 10:00:00 GMT"}],
                       "update_date": "2023-01-02", "authors_parsed": [["Person", "A.", ""], ["Person", "B.", ""]]})


def _write_snapshot(path: Path, n: int, ids: list[str] = ()) -> None:
    """``n`` records shaped as arXiv's; the first ``len(ids)`` carry those ids."""
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(_snapshot_line(i, ids[i] if i < len(ids) else None) + "\n")


@pytest.mark.real
def test_the_metadata_joins_share_of_a_triage_run(benchmark, tmp_path):
    """Triage-only over a tar of the corpus named as arXiv names it, without --metadata and with it (a 100,000-record
    snapshot, its index built by an earlier run: the join alone), and the index's build once."""
    pdfs = _pdfs()
    ids = [f"2301.{i:05d}" for i in range(len(pdfs))]
    tar = _tar(tmp_path / "arXiv_pdf_2301_001.tar", [(f"2301/{i}v1.pdf", p) for i, p in zip(ids, pdfs)])
    snapshot = tmp_path / "snapshot.jsonl"
    _write_snapshot(snapshot, 100_000, ids)
    base = [*HARVEST, str(tar), "--triage-only", "--workers", "2"]
    built = tmp_path / "built"
    t = time.perf_counter()
    subprocess.run([*base, "--metadata", str(snapshot), "--out", str(built)], check=True, capture_output=True)
    first = time.perf_counter() - t
    runs = {"without": lambda out: [*base, "--out", str(out)],
            "with_metadata": lambda out: [*base, "--metadata", str(snapshot), "--out", str(out)]}

    def prepare(name, out):
        if name == "with_metadata":  # the index a first run built: the run joins, it does not index
            out.mkdir()
            shutil.copy(built / "metadata.sqlite", out / "metadata.sqlite")

    best: dict[str, float] = {}
    benchmark.group = "harvest-metadata-join-whole-process"
    benchmark.pedantic(lambda: best.update(_timed(runs, 5, tmp_path, prepare)), rounds=1, iterations=1)
    docs = [json.loads(line) for line in (tmp_path / "with_metadata" / "documents.jsonl").open()]
    assert len(docs) == len(pdfs) and all(d["in_metadata"] and d["created"] == "2023-01-02" for d in docs)
    info = benchmark.extra_info
    info.update({f"{k}_s": round(v, 3) for k, v in best.items()})
    info["first_run_with_index_build_s"] = round(first, 3)
    info["join_share"] = round((best["with_metadata"] - best["without"]) / best["without"], 4)
    info["snapshot_bytes"] = snapshot.stat().st_size


_INDEX_RSS = """
import resource, sys
from benchmint.arxiv import MetadataIndex
index = MetadataIndex.open(sys.argv[1], sys.argv[2])
print(len(index), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_indexing_memory_stays_flat_in_the_snapshots_size(benchmark, tmp_path):
    """Peak RSS of a process that indexes a snapshot of 10,000, 100,000 and 400,000 records."""
    sizes = (10_000, 100_000, 400_000)
    peaks: dict[int, tuple[int, float]] = {}

    def run():
        for n in sizes:
            snapshot = tmp_path / f"s{n}.jsonl"
            if not snapshot.exists():
                _write_snapshot(snapshot, n)
            (tmp_path / f"i{n}.sqlite").unlink(missing_ok=True)
            t = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _INDEX_RSS, str(snapshot), str(tmp_path / f"i{n}.sqlite")],
                                 check=True, capture_output=True, text=True).stdout.split()
            assert int(out[0]) == n
            peaks[n] = (int(out[1]), time.perf_counter() - t)

    benchmark.group = "metadata-index-memory"
    benchmark.pedantic(run, rounds=1, iterations=1)
    info = benchmark.extra_info
    for n, (kib, seconds) in peaks.items():
        info[f"records_{n}_peak_rss_mib"] = round(kib / 1024, 1)
        info[f"records_{n}_seconds"] = round(seconds, 2)
        info[f"records_{n}_snapshot_mib"] = round((tmp_path / f"s{n}.jsonl").stat().st_size / 2**20, 1)
    # flat: 40 times the records cost under 8 MiB more
    assert peaks[sizes[-1]][0] - peaks[sizes[0]][0] < 8 * 1024, peaks
