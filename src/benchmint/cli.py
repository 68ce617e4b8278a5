"""The ``benchmint`` command."""

from __future__ import annotations

import argparse
import os
import sys

# benchmint does no large matrix products; idle BLAS worker threads would only
# compete with its own threads for the cores. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _score(args: argparse.Namespace) -> int:
    from benchmint.io import InputError
    from benchmint.metrics.pipeline import ScoreConfig, score_files
    from benchmint.metrics.report import render

    try:
        cfg = ScoreConfig(task=args.task, sip_lambda=args.sip_lambda, sip_gamma=args.sip_gamma, by=tuple(args.by),
                          workers=args.workers, n_boot=args.bootstrap, seed=args.seed,
                          progress=not args.quiet and sys.stderr.isatty())
        result = score_files(args.pred, args.gold, args.out, cfg)
    except (InputError, ValueError) as exc:
        print(f"benchmint score: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(render(result.summary))
        print(f"\nwrote {result.out_dir}/scores.jsonl, summary.json, errors.jsonl")
    return result.exit_code


def _demo(args: argparse.Namespace) -> int:
    """Every capability on the bundled samples: multi-select and HKL scoring with strata."""
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
                                workers=args.workers, bootstrap=1000, seed=0, quiet=False)
        status = max(status, _score(ns))
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
    score.add_argument("--quiet", action="store_true", help="no table, no progress bar")
    score.set_defaults(func=_score)

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
