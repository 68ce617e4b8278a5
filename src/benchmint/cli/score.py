"""benchmint score: model predictions against gold answers -> scores, summary, errors."""

from __future__ import annotations

import argparse
import sys


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


def _rows_per_file(text: str) -> int:
    """--rows-per-file K: a whole number of rows >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of rows >= 1, not {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from benchmint.cli import engine_session, engine_unavailable, hold_until_exit
    from benchmint.io import InputError
    from benchmint.metrics.pipeline import ScoreConfig, score_files

    if engine_unavailable(args, "score"):
        return 2
    held: list = []
    try:
        user_metrics = _user_metrics(getattr(args, "metric", None) or [])
        cfg = ScoreConfig(task=args.task, sip_lambda=args.sip_lambda, sip_gamma=args.sip_gamma, by=tuple(args.by or ()),
                          workers=args.workers, n_boot=args.bootstrap, seed=args.seed,
                          progress=not args.quiet, symmetry=args.symmetry,
                          user_metrics=user_metrics, engine=args.engine, rows_per_file=args.rows_per_file)
        with engine_session(args):
            result = score_files(args.pred, args.gold, args.out, cfg, keep=held)
    except (InputError, ValueError) as exc:
        print(f"benchmint score: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        from benchmint.metrics.report import render  # the table alone needs it: --quiet goes without

        print(render(result.summary))
        rows = "scores/ (parts and manifest.json)" if args.rows_per_file else "scores.jsonl"
        print(f"\nwrote {result.out_dir}/{rows}, summary.json, errors.jsonl")
    hold_until_exit(held, result)  # every file is written and closed: the columns go with the process
    return result.exit_code


def add_parser(sub) -> None:
    from benchmint import tasks
    from benchmint.cli import add_engine_option, add_strata_option

    score = sub.add_parser("score", help="score model predictions against gold answers",
                           description="Score PRED JSONL files against GOLD; writes scores.jsonl, summary.json and "
                                       "errors.jsonl to --out. Exit status: 0 clean, 1 some records had problems "
                                       "(all listed in errors.jsonl), 2 the run could not start.")
    score.add_argument("pred", nargs="+",
                       help="prediction JSONL file(s): {id, output | answer, [model, confidence, difficulty, tokens]}")
    score.add_argument("--gold", required=True, help="gold JSONL: {id, answer, meta}")
    score.add_argument("--task", required=True, choices=tasks.names("set"),
                       help="answer kind: " + "; ".join(f"{n}: {tasks.get(n).description}" for n in tasks.names("set")))
    score.add_argument("--out", required=True, help="output directory")
    add_strata_option(score, help="strata: a key of the gold meta; repeat the option or separate keys by commas "
                                  "(--by domain --by level, or --by domain,level); default: none (each model always "
                                  "gets its own block, so 'model' adds nothing)")
    score.add_argument("--sip-lambda", type=float, default=0.6, help="SIP-F1 cutoff λ in [0, 1] (default 0.6)")
    score.add_argument("--sip-gamma", type=float, default=6.0, help="SIP-F1 false-positive weight Γ >= 1 (default 6)")
    score.add_argument("--workers", type=int, default=-1,
                       help="threads of the local engine: -1 all cores (default), 1 serial")
    add_engine_option(score)
    score.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for 95%% CIs, >= 1000 (default 1000)")
    score.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    score.add_argument("--symmetry", action="store_true",
                       help="hkl: symmetry-equivalent reflections (the item's Laue group) and 3-/4-index forms of a "
                            "plane count as the same; needs items from benchmint xrd build (their laue_rotations)")
    score.add_argument("--metric", action="append", metavar="NAME=MODULE:FUNCTION",
                       help="a user-defined metric f(tp, fp, fn, g) -> number, compiled with Numba: a column NAME in "
                            "scores.jsonl and its means in summary.json; MODULE is an importable module or a .py file; "
                            "may be repeated (default: none)")
    score.add_argument("--rows-per-file", type=_rows_per_file, default=0, metavar="K",
                       help="write the rows as parts of K rows, scores/part-00000.jsonl, ... with scores/manifest.json "
                            "(their concatenation in name order is the scores.jsonl written without this option), "
                            "several parts written at once; default: one scores.jsonl")
    score.add_argument("--quiet", action="store_true", help="no table, no progress")
    score.set_defaults(func=run)
