"""benchmint score-table: a result table another evaluator wrote (VLMEvalKit's xlsx/tsv) -> per-row scores, summary."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from benchmint.cli.grade import judge_from_arguments
    from benchmint.integrations.tables import read_table, score_table
    from benchmint.io import InputError, atomic_write, write_jsonl

    out = Path(args.out)
    judge = None
    try:
        table = read_table(args.table)
        options: dict = {"workers": args.workers, "n_boot": args.bootstrap, "seed": args.seed}
        if args.by is not None:
            options["by"] = tuple(args.by)
        from benchmint import benchmarks

        if benchmarks.get(args.benchmark).graded:
            judge = judge_from_arguments(args, out)
        elif args.judge_model:
            raise ValueError(f"{args.benchmark} is scored as option or HKL sets; it takes no judge")
        result = score_table(table, args.benchmark, model=args.model, prediction=args.prediction,
                             name=str(args.table), out=out, judge=judge, **options)
    except (InputError, ValueError, OSError) as exc:
        print(f"benchmint score-table: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if judge is not None:
            judge.engine.close()
    write_jsonl(out / "rows.jsonl", result.rows)
    write_jsonl(out / "errors.jsonl", result.errors)
    with atomic_write(out / "summary.json") as fh:
        json.dump(result.summary, fh, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    if not args.quiet:
        if result.columns == ("score", "verdict", "stage"):
            from benchmint.cli.grade import render as render_grades

            print(render_grades(result.summary, str(out / "errors.jsonl")))
        else:
            from benchmint.metrics.report import render as render_scores

            print(render_scores(result.summary))
        print(f"wrote {out}/rows.jsonl (one row per table row), summary.json, errors.jsonl")
    return 1 if result.errors else 0


def add_parser(sub) -> None:
    from benchmint import benchmarks
    from benchmint.cli import add_strata_option
    from benchmint.cli.grade import add_judge_arguments
    from benchmint.models.options import add_arguments

    p = sub.add_parser("score-table", help="score a result table (VLMEvalKit's xlsx/tsv) in one call",
                       description="Score the rows of a result table, a prediction column beside the release's gold "
                                   "columns (VLMEvalKit's <model>_<dataset>.xlsx or .tsv), as benchmint grade or "
                                   "score would. Writes rows.jsonl (one per table row, in order), summary.json and "
                                   "errors.jsonl (rows named by their number) to --out. Exit status: 0 clean, 1 some "
                                   "rows had problems, 2 the run could not start.")
    p.add_argument("table", help="the table: .tsv, .csv, .xlsx (needs openpyxl), .parquet or .jsonl")
    p.add_argument("--benchmark", required=True, choices=benchmarks.names(), help="the benchmark the rows belong to")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (scores or grades, summary)")
    p.add_argument("--model", help="the model's name when the table has no model column (default: model)")
    p.add_argument("--prediction", default="prediction", metavar="COLUMN", help="the column of model replies (default prediction)")
    add_strata_option(p, help="strata (columns): repeat the option or separate them by commas; default: the "
                           "benchmark's")
    p.add_argument("--workers", type=int, default=-1, help="-1 all cores (default), 1 serial")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for 95%% CIs (>= 1000; default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--quiet", action="store_true", help="no table")
    add_judge_arguments(p)
    add_arguments(p)
    p.set_defaults(func=run)
