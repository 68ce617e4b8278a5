"""benchmint harvest: PDFs -> page verdicts, figure records, thumbnails."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from benchmint.cli import engine_session, engine_unavailable

    if engine_unavailable(args, "harvest"):
        return 2
    from benchmint.arxiv import Filters
    from benchmint.io import InputError
    from benchmint.pdf.harvest import HarvestConfig, harvest

    try:
        cfg = HarvestConfig(min_paths=args.min_paths, sieve=args.sieve, min_panels=args.min_panels,
                            triage_only=args.triage_only,
                            max_pages=args.max_pages, page_seconds=args.page_seconds,
                            document_seconds=args.document_seconds, range_seconds=args.range_seconds)
        filters = Filters(categories=tuple(c.strip() for c in (args.categories or "").split(",") if c.strip()),
                          date_from=args.date_from, date_to=args.date_to, latest_version=args.latest_version)
        with engine_session(args):
            res = harvest(args.inputs, args.out, cfg, workers=args.workers, progress=True,
                          metadata=args.metadata, filters=filters, engine=args.engine)
    except (InputError, ValueError) as exc:
        print(f"benchmint harvest: error: {exc}", file=sys.stderr)
        return 2
    left_out = f", {res.left_out} left out: found twice or unreadable" if res.left_out else ""
    second = f" (+{res.second_look} by the second look)" if res.second_look else ""
    print(f"{res.pdfs} PDFs ({res.skipped} already done{left_out}), {res.pages} pages, {res.candidates} candidate pages"
          f"{second}, {res.figures} figures, {len(res.errors)} errors (files or pages) -> {args.out}/pages.jsonl, figures.jsonl, "
          f"errors.jsonl, documents.jsonl, thumbs/")
    if res.dropped:
        print(f"{sum(res.dropped.values())} PDFs left out by the filters (dropped.jsonl): "
              + ", ".join(f"{n} {reason}" for reason, n in res.dropped.items()))
    for e in res.errors[:10]:
        where = (f"{e['metadata']} line {e['line']}" if "metadata" in e
                 else f"{e['pdf']} page {e['page']}" if "page" in e else e["pdf"])
        print(f"  {where}: {e['error']}")
    return 1 if res.errors else 0


def add_parser(sub) -> None:
    from benchmint.cli import add_engine_option

    harvest = sub.add_parser("harvest", help="triage PDF pages and collect captioned figures",
                             description="Anchor-Gated Sieve over PDFs: per-page counts of placed images and painted "
                                         "paths plus figure-caption anchors (pages.jsonl); on candidate pages, caption-"
                                         "body pairs, panel counts, discussion paragraphs (figures.jsonl) and 1024-px "
                                         "thumbnails (thumbs/). Resumable: finished PDFs are kept in "
                                         "DIR/ledger.sqlite.")
    harvest.add_argument("inputs", nargs="+", metavar="PDF_DIR_OR_ARCHIVE",
                         help="PDFs, folders searched for PDFs, and tar, tar.gz or zip archives read member by member")
    harvest.add_argument("--out", required=True, metavar="DIR", help="output directory")
    harvest.add_argument("--workers", type=int, default=-1,
                         help="processes of the local engine: -1 all cores (default)")
    add_engine_option(harvest)
    harvest.add_argument("--min-paths", type=int, default=12, help="vector paths that make a page graphic (default 12)")
    # Checked by HarvestConfig (its SIEVES), which the parser does not import: PyMuPDF and the run modules come with it.
    harvest.add_argument("--sieve", default="second_look", metavar="second_look|paper",
                         help="second_look (default): also read pages under --min-paths that have a path and no image, "
                              "and record their captions whose body the drawings give (\"sieve\": \"second_look\" "
                              "in figures.jsonl; the pages' verdicts stay the sieve's); paper: spm-bench's sieve alone")
    harvest.add_argument("--min-panels", type=int, default=1, help="keep figures with at least this many panels (default 1)")
    harvest.add_argument("--max-pages", type=int, default=5000, help="refuse documents longer than this (default 5000)")
    harvest.add_argument("--page-seconds", type=float, default=60.0,
                         help="time limit of one page's text reading, rendering or figure pairing; a page past it is "
                              "skipped and listed in errors.jsonl (default 60)")
    harvest.add_argument("--document-seconds", type=float, default=900.0,
                         help="time limit of one unit of work: a document's page range (default 900)")
    harvest.add_argument("--range-seconds", type=float, default=300.0,
                         help="time limit of opening a document and of each stage over a whole page range (counting "
                              "images and paths, the figure-word check); past it the range is listed in errors.jsonl "
                              "(default 300)")
    harvest.add_argument("--triage-only", action="store_true", help="only pages.jsonl: the fast first pass")
    arxiv = harvest.add_argument_group("arXiv dumps (files named by arXiv id and version, 2301.05883v1.pdf or "
                                       "cond-mat0102536v1.pdf)")
    arxiv.add_argument("--metadata", metavar="SNAPSHOT.jsonl",
                       help="arXiv's metadata snapshot (JSON lines), indexed once into DIR/metadata.sqlite: records "
                            "carry their paper's categories, dates, title and DOI (default: none)")
    arxiv.add_argument("--categories", metavar="CAT,CAT",
                       help="keep papers with one of these categories (cond-mat: any cond-mat.*); needs --metadata "
                            "(default: every category)")
    arxiv.add_argument("--from", dest="date_from", metavar="YYYY-MM-DD",
                       help="keep files whose version is dated on or after this day; needs --metadata (default: no "
                            "lower bound)")
    arxiv.add_argument("--to", dest="date_to", metavar="YYYY-MM-DD",
                       help="keep files whose version is dated on or before this day; needs --metadata (default: no "
                            "upper bound)")
    arxiv.add_argument("--latest-version", action="store_true",
                       help="of the versions of a paper in the inputs, keep the highest")
    harvest.set_defaults(func=run)
