"""Figure bodies found by ``benchmint harvest`` against the hand labels of the real PDF corpus.

    .venv/bin/python scripts/fetch_corpus.py                 # the PDFs, once
    .venv/bin/python scripts/eval_figures.py                 # harvest the labelled PDFs and compare
    .venv/bin/python scripts/eval_figures.py --figures DIR/figures.jsonl   # compare an existing run
    .venv/bin/python scripts/eval_figures.py --worst 20      # also list the 20 worst-placed figures
    .venv/bin/python scripts/eval_figures.py --sieve paper   # spm-bench's sieve alone, without the second look
    .venv/bin/python scripts/eval_figures.py --labels corpus/figure_labels_heldout.jsonl     # held out
    .venv/bin/python scripts/eval_figures.py --labels corpus/figure_labels_heldout2.jsonl \
        --pdfs corpus/files/pdf-heldout                      # the second held-out set, on other packages
    .venv/bin/python scripts/eval_figures.py --labels corpus/figure_labels_arxivstyle.jsonl \
        --pdfs corpus/files/pdf-arxivstyle                   # physics preprints' layouts (its held-out file waits)

corpus/figure_labels.jsonl holds the labels: one figure per line, its page counted from 0, its body box in page
points (the visible ink of the figure without its caption), its panel count. They were made by looking at
rendered pages, not from any detector.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import benchmint.cli  # noqa: F401 - first: PyMuPDF then reads and renders pages as the benchmint command does
from benchmint.io import InputError, iter_jsonl
from benchmint.pdf.evaluate import compare
from benchmint.pdf.harvest import HarvestConfig, harvest

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "corpus" / "figure_labels.jsonl"
PDFS = ROOT / "corpus" / "files" / "pdf"


def rows(path: Path, what: str) -> list[dict]:
    out = []
    for line_no, obj, err in iter_jsonl(path, what):
        if err is not None:
            raise InputError(f"{path} line {line_no}: {err}")
        out.append(obj)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, help="figures.jsonl of a finished harvest (default: harvest now)")
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--pdfs", type=Path, default=PDFS, help="the folder the labels' PDF paths are in")
    parser.add_argument("--worst", type=int, default=0, help="list this many labels with the lowest IoU")
    parser.add_argument("--workers", type=int, default=-1)
    parser.add_argument("--min-paths", type=int, default=HarvestConfig.min_paths,
                        help="the sieve's path threshold (spm-bench: 12; lower shows what it alone drops)")
    parser.add_argument("--sieve", default=HarvestConfig.sieve,
                        help="second_look (default) or paper: the harvest's --sieve (paper: spm-bench's sieve alone)")
    args = parser.parse_args()
    labels = rows(args.labels, "labels")
    if args.figures is None:
        missing = sorted({lab["pdf"] for lab in labels if not (args.pdfs / lab["pdf"]).is_file()})
        if missing:
            print(f"{len(missing)} labelled PDFs are absent ({missing[0]}, ...): run scripts/fetch_corpus.py",
                  file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as tmp:
            pdfs = sorted({args.pdfs / lab["pdf"] for lab in labels})
            harvest(pdfs, tmp, HarvestConfig(min_paths=args.min_paths, sieve=args.sieve), workers=args.workers)
            records = rows(Path(tmp) / "figures.jsonl", "figure records")
    else:
        records = rows(args.figures, "figure records")
    report = compare(records, labels)
    print(json.dumps(report.summary(), indent=1))
    for r in sorted(report.results, key=lambda r: r.iou)[: args.worst]:
        print(f"  {r.pdf} page {r.page} Figure {r.label}: IoU {r.iou:.2f}"
              f"{'' if r.found else ' (no record)'}, panels {r.panels_found} of {r.panels}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
