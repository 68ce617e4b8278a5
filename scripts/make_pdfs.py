"""Make a dump-sized folder of distinct PDFs from a few: copies whose bytes differ and whose pages do not.

    python scripts/make_pdfs.py /dev/shm/pdf2k --copies 2000 [--from corpus/files/pdf] [--check 20]

Copy ``i`` is the ``i % n``-th source PDF (sorted by path) with the line ``%copy i`` appended after its last
byte: a PDF comment after ``%%EOF``, which MuPDF skips, so each copy has a SHA-256 (a key) of its own and the
same pages. Each copy keeps its source's base name (the arXiv id a name gives, hence the labels, stay) in a
folder of its own, ``c000123/``. ``--check K``: triage K copies and their sources in this process and stop
with an error unless every page row is the same but for the file's name.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def make(out: Path, copies: int, source: Path) -> list[tuple[Path, Path]]:
    """``copies`` PDFs under ``out``; returns (copy, its source) for each."""
    pdfs = sorted(source.rglob("*.pdf"))
    if not pdfs:
        raise SystemExit(f"no .pdf files under {source}")
    datas = [p.read_bytes() for p in pdfs]
    made = []
    for i in range(copies):
        folder = out / f"c{i:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        src = pdfs[i % len(pdfs)]
        data = datas[i % len(pdfs)]
        copy = folder / src.name
        copy.write_bytes(data + (b"" if data.endswith(b"\n") else b"\n") + b"%%copy %d\n" % i)
        made.append((copy, src))
    return made


def page_rows(path: Path) -> list[dict] | str:
    """The triage's page rows of one PDF without its name, or the reason it cannot be opened."""
    from benchmint.pdf.harvest import HarvestConfig, _harvest_range

    cfg = HarvestConfig(triage_only=True)
    got = _harvest_range(str(path), "x", "/nonexistent", cfg, 1, cfg.max_pages, None)
    if "error" in got:
        return got["error"].replace(str(path), path.name)
    return [{k: v for k, v in row.items() if k != "pdf"} for row in got["pages"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--copies", type=int, default=1000)
    ap.add_argument("--from", dest="source", default=str(Path(__file__).resolve().parents[1] / "corpus" / "files"
                                                          / "pdf"))
    ap.add_argument("--check", type=int, default=0, help="triage this many copies against their sources")
    args = ap.parse_args()
    made = make(Path(args.out), args.copies, Path(args.source))
    print(f"{len(made)} PDFs under {args.out}")
    step = max(1, len(made) // max(1, args.check))
    for copy, src in made[::step][:args.check]:
        if page_rows(copy) != page_rows(src):
            raise SystemExit(f"{copy} does not triage as {src} does")
    if args.check:
        print(f"{min(args.check, len(made))} copies triage as their sources do")


if __name__ == "__main__":
    main()
