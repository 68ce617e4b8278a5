"""benchmint report: the papers' tables and figures from score, grade, eval and xrd build outputs, and one HTML page."""

from __future__ import annotations

import argparse
import shlex
import sys


def command_line(argv: list[str]) -> str:
    """The command as a user would type it again."""
    return "benchmint " + " ".join(shlex.quote(a) for a in argv)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from benchmint.report import build

    argv = ["report", *args.runs, "--out", args.out]
    result = build([Path(p) for p in args.runs], Path(args.out), command_line(argv))
    figures = sum(1 for o in result.outputs if "png" in o.files)
    tables = sum(1 for o in result.outputs if "csv" in o.files)
    if not result.runs:
        for p in result.problems:
            print(f"benchmint report: error: {p}", file=sys.stderr)
        return 2
    print(f"{len(result.runs)} runs read; {figures} figures (PNG, SVG) and {tables} tables (CSV) in {args.out}; "
          f"open {result.page}")
    for n in result.notes:
        print(f"not drawn: {n}")
    for p in result.problems:
        print(f"not drawn: {p}", file=sys.stderr)
    return 1 if result.problems else 0


def add_parser(sub) -> None:
    report = sub.add_parser("report", help="draw the papers' figures and tables from benchmint's outputs",
                            description="Find the outputs of score, grade, eval and xrd build under each RUN_DIR "
                                        "(subfolders included) and write figures (PNG, SVG), tables (CSV) and one "
                                        "self-contained index.html to --out. Exit status: 0 everything the runs hold "
                                        "drawn, 1 some run or input could not be read (each listed), 2 no run found.")
    report.add_argument("runs", nargs="+", metavar="RUN_DIR", help="folders holding benchmint outputs")
    report.add_argument("--out", required=True, help="output folder")
    report.set_defaults(func=run)
