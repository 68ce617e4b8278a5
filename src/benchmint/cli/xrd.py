"""benchmint xrd build: CIFs -> CrystalXRD items, pattern images, KMeans selection."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from benchmint.io import InputError
    from benchmint.xrd.build import BuildConfig, build

    try:
        from benchmint.xrd.profile import ProfileParams

        profile = ProfileParams(fwhm=args.fwhm, eta=args.eta, caglioti=args.caglioti, window_fwhms=args.window_fwhms)
        cfg = BuildConfig(per_db=args.per_db, db_from_dirname=args.db_from_dirname, profile=profile)
        res = build(args.inputs, args.out, cfg, workers=args.workers, progress=sys.stderr.isatty())
    except (InputError, ValueError) as exc:
        print(f"benchmint xrd build: error: {exc}", file=sys.stderr)
        return 2
    sil = ", ".join(f"{db} {v:.3f}" if v is not None else f"{db} -" for db, v in res.silhouettes.items())
    print(f"{res.cifs} CIFs ({res.skipped} already done): {res.items} items, {res.selected} selected by KMeans "
          f"(silhouette: {sil}), {len(res.errors)} failed -> {args.out}/items.jsonl, selection.jsonl, errors.jsonl, "
          f"images/")
    for e in res.errors[:10]:
        print(f"  {e['cif']}: {e['error']}")
    return 1 if res.errors else 0


def add_parser(sub) -> None:
    xrd = sub.add_parser("xrd", help="CrystalXRD-Bench: build XRD items from CIFs")
    xrd_sub = xrd.add_subparsers(dest="xrd_command", required=True)
    xbuild = xrd_sub.add_parser("build",
                                help="CIFs -> items.jsonl (2θ*, HKL ground truth, strata), images, KMeans selection",
                                description="Simulate the Cu Kα1/Kα2 powder pattern of every CIF, take the strongest "
                                            "peak and the HKLs under it, draw the pattern, and select k items per "
                                            "database by KMeans. items.jsonl works as --gold of benchmint score "
                                            "--task hkl. Resumable: finished CIFs are kept in DIR/ledger.sqlite.")
    xbuild.add_argument("inputs", nargs="+", metavar="CIF_OR_DIR")
    xbuild.add_argument("--out", required=True, metavar="DIR")
    xbuild.add_argument("--db-from-dirname", action="store_true", help="source database = the CIF's parent folder name")
    xbuild.add_argument("--per-db", type=int, default=25, help="KMeans clusters (selected items) per database")
    xbuild.add_argument("--workers", type=int, default=-1, help="processes: -1 all cores (default)")
    xbuild.add_argument("--fwhm", type=float, default=0.15, help="pseudo-Voigt FWHM in degrees 2θ (default 0.15)")
    xbuild.add_argument("--eta", type=float, default=0.4, help="Lorentzian fraction of the pseudo-Voigt (default 0.4)")
    xbuild.add_argument("--caglioti", type=float, nargs=3, metavar=("U", "V", "W"), default=None,
                        help="angle-dependent width FWHM(θ) = sqrt(U·tan²θ + V·tanθ + W) instead of --fwhm")
    xbuild.add_argument("--window-fwhms", type=float, default=None, metavar="K",
                        help="adaptive ground-truth window: K FWHMs of the profile at 2θ* (default: fixed 0.30°)")
    xbuild.set_defaults(func=run)
