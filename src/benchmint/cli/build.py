"""benchmint build: a benchmark's items built from raw material. ``build seephys`` is ``generate seephys``: one
parser and one run, under the name the SeePhys construction is asked for by."""

from __future__ import annotations


def add_parser(sub) -> None:
    from benchmint.cli.generate import _add_seephys

    build = sub.add_parser("build", help="build benchmark items from raw material (SeePhys from physics problems)",
                           description="Build benchmark items from raw material: outputs items.jsonl (the layout "
                                       "benchmint eval reads), rejected.jsonl, trace.jsonl, errors.jsonl, "
                                       "run.json. build seephys is the same command as generate seephys.")
    kinds = build.add_subparsers(dest="generator", required=True)
    _add_seephys(kinds)
