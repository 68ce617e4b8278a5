"""benchmint score: model predictions against gold answers -> scores, summary, errors."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from benchmint.io import InputError
    from benchmint.metrics.pipeline import ScoreConfig, score_files
    from benchmint.metrics.report import render

    try:
        cfg = ScoreConfig(task=args.task, sip_lambda=args.sip_lambda, sip_gamma=args.sip_gamma, by=tuple(args.by),
                          workers=args.workers, n_boot=args.bootstrap, seed=args.seed,
                          progress=not args.quiet and sys.stderr.isatty(), symmetry=args.symmetry)
        result = score_files(args.pred, args.gold, args.out, cfg)
    except (InputError, ValueError) as exc:
        print(f"benchmint score: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(render(result.summary))
        print(f"\nwrote {result.out_dir}/scores.jsonl, summary.json, errors.jsonl")
    return result.exit_code


def add_parser(sub) -> None:
    from benchmint import tasks

    score = sub.add_parser("score", help="score model predictions against gold answers",
                           description="Score PRED JSONL files against GOLD; writes scores.jsonl, summary.json and "
                                       "errors.jsonl to --out. Exit status: 0 clean, 1 some records had problems "
                                       "(all listed in errors.jsonl), 2 the run could not start.")
    score.add_argument("pred", nargs="+", help="prediction JSONL file(s): {id, output | answer, [model, confidence, difficulty, tokens]}")
    score.add_argument("--gold", required=True, help="gold JSONL: {id, answer, meta}")
    score.add_argument("--task", required=True, choices=tasks.names("set"),
                       help="answer kind: " + "; ".join(f"{n}: {tasks.get(n).description}" for n in tasks.names("set")))
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
    score.add_argument("--quiet", action="store_true", help="no table, no progress bar")
    score.set_defaults(func=run)
