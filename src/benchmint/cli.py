"""The ``benchmint`` command."""

from __future__ import annotations

import argparse
import os
import sys

# benchmint does no large matrix products; idle BLAS worker threads would only
# compete with its own threads for the cores. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _user_metrics(specs: list[str]) -> tuple:
    """--metric NAME=MODULE:FUNCTION options -> compiled user metrics (a function that cannot compile stops the run)."""
    if not specs:
        return ()
    from benchmint import _dispatch
    from benchmint.metrics.user import load_metric

    try:
        metrics = tuple(load_metric(spec) for spec in specs)
        if not _dispatch.use_reference():
            for m in metrics:
                m.compile()
    except TypeError as exc:  # not a function of four counts, not compilable, or not returning a number
        raise ValueError(str(exc)) from exc
    return metrics


def _score(args: argparse.Namespace) -> int:
    from benchmint.io import InputError
    from benchmint.metrics.pipeline import ScoreConfig, score_files
    from benchmint.metrics.report import render

    try:
        user_metrics = _user_metrics(getattr(args, "metric", None) or [])
        cfg = ScoreConfig(task=args.task, sip_lambda=args.sip_lambda, sip_gamma=args.sip_gamma, by=tuple(args.by),
                          workers=args.workers, n_boot=args.bootstrap, seed=args.seed,
                          progress=not args.quiet and sys.stderr.isatty(), symmetry=args.symmetry,
                          user_metrics=user_metrics)
        result = score_files(args.pred, args.gold, args.out, cfg)
    except (InputError, ValueError) as exc:
        print(f"benchmint score: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(render(result.summary))
        print(f"\nwrote {result.out_dir}/scores.jsonl, summary.json, errors.jsonl")
    return result.exit_code


def _harvest(args: argparse.Namespace) -> int:
    from benchmint.io import InputError
    from benchmint.pdf.harvest import HarvestConfig, harvest

    try:
        cfg = HarvestConfig(min_paths=args.min_paths, min_panels=args.min_panels, triage_only=args.triage_only,
                            max_pages=args.max_pages)
        res = harvest(args.inputs, args.out, cfg, workers=args.workers, progress=sys.stderr.isatty())
    except (InputError, ValueError) as exc:
        print(f"benchmint harvest: error: {exc}", file=sys.stderr)
        return 2
    print(f"{res.pdfs} PDFs ({res.skipped} already done), {res.pages} pages, {res.candidates} candidate pages, "
          f"{res.figures} figures, {len(res.errors)} unreadable files -> {args.out}/pages.jsonl, figures.jsonl, "
          f"errors.jsonl, thumbs/")
    for e in res.errors[:10]:
        print(f"  {e['pdf']}: {e['error']}")
    return 1 if res.errors else 0


def _xrd_build(args: argparse.Namespace) -> int:
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


def _crop(args: argparse.Namespace) -> int:
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


def _demo_xrd(root, workers: int) -> int:
    """Write CIFs of 36 AFLOW prototypes in three "databases", build the benchmark, score simulated models on it."""
    from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
    from pymatgen.io.cif import CifWriter

    from benchmint.io import dumps
    from benchmint.metrics.synthetic import hkl_predictions

    cifs = root / "cifs"
    for i, entry in enumerate(AFLOW_PROTOTYPE_LIBRARY[:36]):
        db = cifs / ("ICSD-like", "MP-like", "OQMD-like")[i % 3]
        db.mkdir(parents=True, exist_ok=True)
        CifWriter(entry["snl"].structure).write_file(db / f"aflow-{i:03d}.cif")
    bench = root / "bench"
    paper = {"fwhm": 0.15, "eta": 0.4, "caglioti": None, "window_fwhms": None}
    status = _xrd_build(argparse.Namespace(inputs=[str(cifs)], out=str(bench), db_from_dirname=True, per_db=6,
                                           workers=workers, **paper))
    import json

    def answers(path):
        return {r["id"]: r["answer"] for r in map(json.loads, (path / "items.jsonl").read_text("utf-8").splitlines())}

    print("\n=== benchmint xrd build --caglioti 0.05 -0.002 0.02 --window-fwhms 2: widths growing with angle, "
          "adaptive ground-truth window")
    wide = root / "bench-caglioti"
    status = max(status, _xrd_build(argparse.Namespace(
        inputs=[str(cifs)], out=str(wide), db_from_dirname=True, per_db=6, workers=workers,
        **{**paper, "caglioti": [0.05, -0.002, 0.02], "window_fwhms": 2.0})))
    fixed, adaptive = answers(bench), answers(wide)
    changed = sorted(k for k in fixed if k in adaptive and fixed[k] != adaptive[k])
    print(f"{len(changed)} of {len(fixed)} ground-truth sets differ from the paper's fixed settings"
          + (f", e.g. {changed[0]}: {fixed[changed[0]]} -> {adaptive[changed[0]]}" if changed else ""))

    items = [json.loads(line) for line in (bench / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    pred = root / "predictions.jsonl"
    pred.write_text("".join(dumps(r) + "\n" for r in hkl_predictions(items, ["wise-model", "bold-model"], seed=5)),
                    encoding="utf-8")
    for symmetry in (False, True):
        print(f"\n=== benchmint score --task hkl{' --symmetry' if symmetry else ''} on the built items")
        ns = argparse.Namespace(pred=[str(pred)], gold=str(bench / "items.jsonl"), task="hkl",
                                out=str(root / ("scores-symmetry" if symmetry else "scores")),
                                by=["db", "union_size", "angle_range"], sip_lambda=0.6, sip_gamma=6.0,
                                workers=workers, bootstrap=1000, seed=0, quiet=False, symmetry=symmetry)
        status = max(status, _score(ns))
    return status


def _demo(args: argparse.Namespace) -> int:
    """Every capability on the bundled samples: multi-select and HKL scoring with strata, figure harvest, a crop."""
    from importlib.resources import files
    from pathlib import Path

    samples = files("benchmint") / "samples"
    out = Path(args.out)
    runs = [
        ("mcq", "multi-select questions (SPM-Bench style), four simulated models", ["domain", "level"]),
        ("hkl", "HKL sets of the strongest XRD peak (CrystalXRD-Bench style)", ["db", "union_size", "angle_range"]),
    ]
    status = 0
    for task, title, by in runs:
        print(f"\n=== benchmint score --task {task}: {title}")
        ns = argparse.Namespace(pred=[str(samples / f"{task}_pred.jsonl")], gold=str(samples / f"{task}_gold.jsonl"),
                                task=task, out=str(out / f"score-{task}"), by=by, sip_lambda=0.6, sip_gamma=6.0,
                                workers=args.workers, bootstrap=1000, seed=0, quiet=False, symmetry=False)
        status = max(status, _score(ns))

    import json

    print("\n=== benchmint xrd build: CrystalXRD items from pymatgen's AFLOW prototype structures")
    status = max(status, _demo_xrd(out / "xrd", args.workers))

    print("\n=== benchmint harvest: page triage and figure records from the bundled sample article")
    ns = argparse.Namespace(inputs=[str(samples / "sample_paper.pdf")], out=str(out / "harvest"), workers=1,
                            min_paths=12, min_panels=1, triage_only=False, max_pages=5000)
    status = max(status, _harvest(ns))

    box = json.loads((samples / "sample_vlm_box.json").read_text(encoding="utf-8"))
    print(f"\n=== benchmint crop: {box['label']} on page {box['page']} of the sample article, from a VLM box "
          f"({box['units']}) to a 300-DPI PNG")
    ns = argparse.Namespace(pdf=str(samples / box["pdf"]), page=box["page"], box=box["box"], units=box["units"],
                            label=box["label"], dpi=300, out=str(out / "crops" / "figure1.png"))
    status = max(status, _crop(ns))
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmint", description="Build and score scientific multimodal benchmarks.")
    sub = parser.add_subparsers(dest="command", required=True)

    score = sub.add_parser("score", help="score model predictions against gold answers",
                           description="Score PRED JSONL files against GOLD; writes scores.jsonl, summary.json and "
                                       "errors.jsonl to --out. Exit status: 0 clean, 1 some records had problems "
                                       "(all listed in errors.jsonl), 2 the run could not start.")
    score.add_argument("pred", nargs="+", help="prediction JSONL file(s): {id, output | answer, [model, confidence, difficulty, tokens]}")
    score.add_argument("--gold", required=True, help="gold JSONL: {id, answer, meta}")
    score.add_argument("--task", required=True, choices=["mcq", "hkl"], help="option letters or Miller indices")
    score.add_argument("--out", required=True, help="output directory")
    score.add_argument("--by", nargs="+", default=[], metavar="FIELD",
                       help="strata: keys of the gold meta (each model always gets its own block, so 'model' adds nothing)")
    score.add_argument("--sip-lambda", type=float, default=0.6, help="SIP-F1 cutoff λ in [0, 1] (default 0.6)")
    score.add_argument("--sip-gamma", type=float, default=6.0, help="SIP-F1 false-positive weight Γ >= 1 (default 6)")
    score.add_argument("--workers", type=int, default=-1, help="threads: -1 all cores (default), 1 serial")
    score.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for 95%% CIs (>= 1000)")
    score.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    score.add_argument("--symmetry", action="store_true",
                       help="hkl: symmetry-equivalent reflections (the item's Laue group) and 3-/4-index forms of a "
                            "plane count as the same; needs items from benchmint xrd build (their laue_rotations)")
    score.add_argument("--metric", action="append", metavar="NAME=MODULE:FUNCTION",
                       help="a user-defined metric f(tp, fp, fn, g) -> number, compiled with Numba: a column NAME in "
                            "scores.jsonl and its means in summary.json; MODULE is an importable module or a .py file; "
                            "may be repeated")
    score.add_argument("--quiet", action="store_true", help="no table, no progress bar")
    score.set_defaults(func=_score)

    harvest = sub.add_parser("harvest", help="triage PDF pages and collect captioned figures",
                             description="Anchor-Gated Sieve over PDFs: per-page counts of placed images and painted "
                                         "paths plus figure-caption anchors (pages.jsonl); on candidate pages, caption-"
                                         "body pairs, panel counts, discussion paragraphs (figures.jsonl) and 1024-px "
                                         "thumbnails (thumbs/). Resumable: finished PDFs are kept in DIR/ledger.sqlite.")
    harvest.add_argument("inputs", nargs="+", metavar="PDF_OR_DIR")
    harvest.add_argument("--out", required=True, metavar="DIR")
    harvest.add_argument("--workers", type=int, default=-1, help="processes: -1 all cores (default)")
    harvest.add_argument("--min-paths", type=int, default=12, help="vector paths that make a page graphic (default 12)")
    harvest.add_argument("--min-panels", type=int, default=1, help="keep figures with at least this many panels")
    harvest.add_argument("--max-pages", type=int, default=5000, help="refuse documents longer than this")
    harvest.add_argument("--triage-only", action="store_true", help="only pages.jsonl: the fast first pass")
    harvest.set_defaults(func=_harvest)

    xrd = sub.add_parser("xrd", help="CrystalXRD-Bench: build XRD items from CIFs")
    xrd_sub = xrd.add_subparsers(dest="xrd_command", required=True)
    xbuild = xrd_sub.add_parser("build", help="CIFs -> items.jsonl (2θ*, HKL ground truth, strata), images, KMeans selection",
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
    xbuild.set_defaults(func=_xrd_build)

    crop = sub.add_parser("crop", help="render the region of a VLM box on a page thumbnail at 300 DPI",
                          description="Map a box given on the page's thumbnail (longest side 1024 px) back to page "
                                      "points and render only that clip to PNG. Prints the crop record as JSON.")
    crop.add_argument("pdf")
    crop.add_argument("--page", type=int, required=True, help="1-based page number")
    crop.add_argument("--box", type=float, nargs=4, required=True, metavar=("X0", "Y0", "X1", "Y1"))
    crop.add_argument("--units", choices=["norm1000", "pixels"], default="norm1000",
                      help="box normalised to [0, 1000] (default) or in thumbnail pixels (Qwen2.5-VL)")
    crop.add_argument("--label", help="the modality label the VLM gave (kept in the record)")
    crop.add_argument("--dpi", type=int, default=300)
    crop.add_argument("--out", required=True, help="PNG path")
    crop.set_defaults(func=_crop)

    demo = sub.add_parser("demo", help="run the main job on the bundled sample data")
    demo.add_argument("--out", default="demo-out", help="output directory (default demo-out)")
    demo.add_argument("--workers", type=int, default=-1)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
