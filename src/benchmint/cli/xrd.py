"""benchmint xrd build: CIFs -> CrystalXRD items, pattern images, KMeans selection."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from benchmint.cli import engine_session, engine_unavailable

    if engine_unavailable(args, "xrd build"):
        return 2
    from benchmint.io import InputError
    from benchmint.xrd.build import BuildConfig, build

    try:
        from benchmint.xrd.profile import ProfileParams
        from benchmint.xrd.realism import Realism

        profile = ProfileParams(fwhm=args.fwhm, eta=args.eta, caglioti=args.caglioti, window_fwhms=args.window_fwhms)
        po = None
        if args.preferred_orientation is not None:
            h, k, ell, r = args.preferred_orientation
            if not all(float(v).is_integer() for v in (h, k, ell)):
                raise ValueError(f"--preferred-orientation takes whole Miller indices, got {h:g} {k:g} {ell:g}")
            po = ((int(h), int(k), int(ell)), r)
        realism = Realism(fwhm_range=tuple(args.fwhm_range) if args.fwhm_range else None, preferred_orientation=po,
                          background=tuple(args.background) if args.background else None,
                          noise_counts=args.noise_counts, seed=args.realism_seed)
        cfg = BuildConfig(per_db=args.per_db, db_from_dirname=args.db_from_dirname, profile=profile, realism=realism,
                          cif_seconds=args.cif_seconds)
        with engine_session(args):
            res = build(args.inputs, args.out, cfg, workers=args.workers, progress=True, engine=args.engine)
    except (InputError, ValueError) as exc:
        print(f"benchmint xrd build: error: {exc}", file=sys.stderr)
        return 2
    sil = ", ".join(f"{db} {v:.3f}" if v is not None else f"{db} -" for db, v in res.silhouettes.items())
    print(f"{res.cifs} CIFs ({res.skipped} already done): {res.items} items, {res.selected} selected by KMeans "
          f"(silhouette: {sil}), {len(res.errors)} failed, {len(res.warnings)} kept with a warning -> "
          f"{args.out}/items.jsonl, selection.jsonl, errors.jsonl, images/")
    for e in (res.errors + res.warnings)[:10]:
        where = f"{e['cif']} block {e['block']}" if "block" in e else e["cif"]
        print(f"  {where}: {e['error'] if 'error' in e else 'warning: ' + e['warning']}")
    return 1 if res.errors else 0


def add_parser(sub) -> None:
    from benchmint.cli import add_engine_option

    xrd = sub.add_parser("xrd", help="CrystalXRD-Bench: build XRD items from CIFs")
    xrd_sub = xrd.add_subparsers(dest="xrd_command", required=True)
    xbuild = xrd_sub.add_parser("build",
                                help="CIFs -> items.jsonl (2θ*, HKL ground truth, strata), images, KMeans selection",
                                description="Simulate the Cu Kα1/Kα2 powder pattern of every CIF, take the strongest "
                                            "peak and the HKLs under it, draw the pattern, and select k items per "
                                            "database by KMeans. items.jsonl works as --gold of benchmint score "
                                            "--task hkl. Resumable: finished CIFs are kept in DIR/ledger.sqlite.")
    xbuild.add_argument("inputs", nargs="+", metavar="CIF_OR_DIR", help="CIF files, or folders searched for *.cif")
    xbuild.add_argument("--out", required=True, metavar="DIR", help="output directory")
    xbuild.add_argument("--db-from-dirname", action="store_true", help="source database = the CIF's parent folder name")
    xbuild.add_argument("--per-db", type=int, default=25, help="KMeans clusters (selected items) per database (default 25)")
    xbuild.add_argument("--workers", type=int, default=-1,
                        help="processes of the local engine: -1 all cores (default)")
    add_engine_option(xbuild)
    xbuild.add_argument("--fwhm", type=float, default=0.15, help="pseudo-Voigt FWHM in degrees 2θ (default 0.15)")
    xbuild.add_argument("--eta", type=float, default=0.4, help="Lorentzian fraction of the pseudo-Voigt (default 0.4)")
    xbuild.add_argument("--caglioti", type=float, nargs=3, metavar=("U", "V", "W"), default=None,
                        help="angle-dependent width FWHM(θ) = sqrt(U·tan²θ + V·tanθ + W) instead of --fwhm (default: the fixed --fwhm)")
    xbuild.add_argument("--window-fwhms", type=float, default=None, metavar="K",
                        help="adaptive ground-truth window: K FWHMs of the profile at 2θ* (default: fixed 0.30°)")
    xbuild.add_argument("--cif-seconds", type=float, default=300.0,
                        help="time limit of one CIF; a CIF past it is stopped and listed in errors.jsonl (default 300)")
    real = xbuild.add_argument_group("patterns as instruments measure them (each item records what was applied and "
                                     "how far its strongest peak moved; the ground truth is the clean pattern's at "
                                     "the item's width)")
    real.add_argument("--fwhm-range", type=float, nargs=2, metavar=("LOW", "HIGH"),
                      help="each item's FWHM drawn uniformly from [LOW, HIGH] degrees: its clean pattern, 2θ* and "
                           "ground truth use it, so 2θ* may move; the options below change the image only (default: --fwhm for all)")
    real.add_argument("--preferred-orientation", type=float, nargs=4, metavar=("H", "K", "L", "R"),
                      help="March-Dollase texture along the normal of plane (H K L) with ratio R (< 1: platelets; default: none)")
    real.add_argument("--background", type=float, nargs="+", metavar="C",
                      help="smooth background: Chebyshev coefficients over the 2θ range, in units of the peak height (default: none)")
    real.add_argument("--noise-counts", type=float, metavar="N",
                      help="Poisson counting noise with N counts at the strongest point (default: no noise)")
    real.add_argument("--realism-seed", type=int, default=0, help="seed of the drawn widths and the noise (default 0)")
    xbuild.set_defaults(func=run)
