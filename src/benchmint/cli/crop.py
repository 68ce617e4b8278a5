"""benchmint crop: a VLM box on a page thumbnail -> a 300-DPI clip of the page."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from benchmint.io import InputError, dumps
    from benchmint.pdf.crop import crop_figure
    from benchmint.pdf.geometry import BoxError

    try:
        record = crop_figure(args.pdf, args.page, args.box, args.out, units=args.units, label=args.label, dpi=args.dpi)
    except (InputError, BoxError, ValueError) as exc:
        print(f"benchmint crop: error: {exc}", file=sys.stderr)
        return 2
    print(dumps(record))
    return 0


def add_parser(sub) -> None:
    crop = sub.add_parser("crop", help="render the region of a VLM box on a page thumbnail at 300 DPI",
                          description="Map a box given on the page's thumbnail (longest side 1024 px) back to page "
                                      "points and render only that clip to PNG. Prints the crop record as JSON.")
    crop.add_argument("pdf", help="the PDF file")
    crop.add_argument("--page", type=int, required=True, help="1-based page number")
    crop.add_argument("--box", type=float, nargs=4, required=True, metavar=("X0", "Y0", "X1", "Y1"),
                      help="the VLM's box on the page's thumbnail, in --units")
    crop.add_argument("--units", choices=["norm1000", "pixels"], default="norm1000",
                      help="box normalised to [0, 1000] (default) or in thumbnail pixels (Qwen2.5-VL)")
    crop.add_argument("--label", help="the modality label the VLM gave (kept in the record; default: none)")
    crop.add_argument("--dpi", type=int, default=300, help="render resolution, 1-2400 (default 300)")
    crop.add_argument("--out", required=True, help="PNG path (named .png)")
    crop.set_defaults(func=run)
