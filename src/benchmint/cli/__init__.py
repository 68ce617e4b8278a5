"""The ``benchmint`` command: one module per subcommand (its parser and its ``run``), the demo apart."""

from __future__ import annotations

import argparse
import os

# benchmint does no large matrix products; idle BLAS worker threads would only
# compete with its own threads for the cores. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def build_parser() -> argparse.ArgumentParser:
    from benchmint.cli import crop, demo, grade, harvest, score, serve_local, xrd
    from benchmint.cli import eval as eval_command

    parser = argparse.ArgumentParser(prog="benchmint", description="Build and score scientific multimodal benchmarks.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (score, eval_command, grade, harvest, xrd, crop, serve_local, demo):
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
