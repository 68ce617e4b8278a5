"""benchmint eval: a benchmark's items through a model (or the benchmark's own baseline) -> predictions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from benchmint import benchmarks
    from benchmint.benchmarks.evaluate import CACHE_NAME, EvalConfig, evaluate
    from benchmint.io import InputError

    try:
        bench = benchmarks.get(args.benchmark, prompts=args.prompts, protocol=args.protocol)
        system = Path(args.system).read_text(encoding="utf-8") if args.system else None
        cfg = EvalConfig(model=args.model or "", setting=args.setting, limit=args.limit, repeats=args.repeats,
                         seed=args.seed, system=system, progress=True, blind=args.blind,
                         allow_paths_outside=tuple(args.allow_paths_outside or ()))
        engine = None
        if not args.baseline:
            from benchmint.models.accounting import ACCOUNTS_NAME
            from benchmint.models.options import check_budget, engine_from_arguments

            if not args.model:
                raise ValueError("--model is required (or --baseline for the benchmark's own deterministic answers)")
            if not args.blind and bench.sends_images(args.setting):
                from benchmint.models.local import check_takes_images

                setting = bench.check_setting(args.setting)
                check_takes_images(args.model, f"{bench.name}'s setting {setting}",
                                   ", ".join(s for s in bench.settings if not bench.sends_images(s)))
            check_budget(args, args.model, bench.protocol.max_tokens, f"{bench.name}'s protocol",
                         ' (--protocol FILE holding {"max_tokens": N})')
            # The accounting kept in --out: run.json and the budget cover every invocation into it.
            engine = engine_from_arguments(args, Path(args.out) / CACHE_NAME, seed=args.seed or 0,
                                           accounts=Path(args.out) / ACCOUNTS_NAME)
            if args.answer_attempts is None:  # the paper's protocol: e.g. no retry at all for CrystalXRD
                engine.answer_attempts = bench.protocol.answer_retries + 1
        try:
            result = evaluate(args.items, args.out, bench, cfg, engine)
        finally:
            if engine is not None:
                engine.close()
    except (InputError, ValueError, OSError) as exc:
        print(f"benchmint eval: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # while the items were read or the outputs written: the ledger keeps what was done
        print("benchmint eval: interrupted; rerun the same command to resume (nothing answered is asked again)",
              file=sys.stderr)
        return 130
    counts = result.run["counts"]
    out = Path(args.out)
    print(f"{bench.name} ({result.run['setting']}), model {result.run['model']}: {counts['items']} items, "
          f"{counts['predictions']} predictions ({counts['already_done']} already done) -> "
          f"{out / 'predictions.jsonl'}, gold.jsonl, run.json; {counts['errors']} errors in {out / 'errors.jsonl'}")
    if result.run.get("engine"):
        from benchmint.models.accounting import describe

        print(f"  {describe(result.run['engine'])}")
    for e in result.errors[:10]:
        print(f"  {e.get('id', e.get('location', ''))}: {_said(e)}")
    if len(result.errors) > 10:
        print(f"  ... and {len(result.errors) - 10} more in {out / 'errors.jsonl'}")
    if result.interrupted:
        print(f"benchmint eval: interrupted; {counts['predictions']} predictions and {len(result.errors)} error rows "
              f"written, {counts['not_done']} units not done: rerun the same command to resume", file=sys.stderr)
        return 130
    status = result.exit_code
    if args.score:
        status = max(status, _score(args, bench, result))
    if args.grade:
        status = max(status, _grade(args, bench, result))
    if args.report:
        from benchmint.cli import main

        print("\n=== benchmint report on the run")
        status = max(status, main(["report", str(args.out), "--out", str(Path(args.out) / "report")]))
    return status


def _said(error: dict) -> str:
    """An error row as a printed line: a failed call's cause in words, else the row's kind and message."""
    from benchmint.models.call import say_failure

    if "cause" in error:
        return say_failure(error["cause"], error.get("message", ""))
    return f"{error.get('kind')}: {error.get('message', '')}"


def _cannot_chain(option: str, applies: bool, why_not: str, result) -> int | None:
    """The exit status when a chained command cannot run (0: not this benchmark's, 1: nothing to take), or None."""
    if not applies:
        print(f"{option}: {why_not}", file=sys.stderr)
        return 0
    if not result.predictions:
        print(f"{option}: no predictions to take", file=sys.stderr)
        return 1
    return None


def _grade(args: argparse.Namespace, bench, result) -> int:
    """``benchmint grade`` on the run's predictions, through its real parser; the judge's calls share the cache."""
    from benchmint.benchmarks.evaluate import CACHE_NAME
    from benchmint.cli import main
    from benchmint.grade.flow import GRADED

    skip = _cannot_chain("--grade", bench.name in GRADED, f"{bench.name} is scored as sets (--score), not graded",
                         result)
    if skip is not None:
        return skip
    out = Path(args.out)
    argv = ["grade", str(out / "predictions.jsonl"), "--gold", str(args.items), "--benchmark", bench.name,
            "--out", str(out / "grades"), "--seed", str(args.seed or 0), "--cache", str(out / CACHE_NAME)]
    for folder in args.allow_paths_outside or ():
        argv += ["--allow-paths-outside", folder]
    judge_url = args.judge_base_url or args.base_url
    if args.judge_model and judge_url:
        argv += ["--judge-model", args.judge_model, "--judge-base-url", judge_url]
        for flag, value in (("--api-key-env", args.api_key_env), ("--timeout", args.timeout),
                            ("--concurrency", args.concurrency), ("--retries", args.retries),
                            ("--retry-delay", args.retry_delay), ("--prices", args.prices)):
            if value is not None:
                argv += [flag, str(value)]
    print(f"\n=== benchmint grade --benchmark {bench.name} on the predictions")
    return main(argv)


def _score(args: argparse.Namespace, bench, result) -> int:
    from benchmint import tasks
    from benchmint.cli import main

    skip = _cannot_chain("--score", tasks.get(bench.answer_kind).scoring == "set",
                         f"{bench.name} answers are open and graded (--grade), not scored as sets", result)
    if skip is not None:
        return skip
    out = Path(args.out)
    argv = ["score", str(out / "predictions.jsonl"), "--gold", str(out / "gold.jsonl"), "--task", bench.answer_kind,
            "--out", str(out / "scores"), "--seed", str(args.seed or 0)]
    if bench.strata:
        argv += ["--by", ",".join(bench.strata)]
    print(f"\n=== benchmint score --task {bench.answer_kind} on the predictions")
    status = main(argv)
    if args.repeats > 1 and (out / "scores" / "summary.json").is_file():
        _repeat_spread(out / "scores", result.run["model"], args.repeats)
    return status


def _repeat_spread(scores: Path, model: str, repeats: int) -> None:
    """The mean and spread across repeats of each metric: the repeats are scored as models "<model>@<r>"; the
    spread says how much a model's score moves from one sampling of its answers to the next."""
    import json
    import statistics

    from benchmint.io import atomic_write

    summary = json.loads((scores / "summary.json").read_text(encoding="utf-8"))
    runs = [summary["models"].get(f"{model}@{r}") for r in range(1, repeats + 1)]
    runs = [m for m in runs if m is not None]
    if len(runs) < 2:
        return
    spread = {}
    for metric in runs[0]["metrics"]:
        values = [m["metrics"][metric]["mean"] for m in runs if metric in m["metrics"]]
        values = [v for v in values if v is not None]
        if len(values) >= 2:
            spread[metric] = {"mean": statistics.fmean(values), "sd": statistics.stdev(values),
                              "min": min(values), "max": max(values), "repeats": len(values)}
    out = {"model": model, "repeats": len(runs), "metrics": spread}
    with atomic_write(scores / "repeats.json") as fh:
        json.dump(out, fh, indent=2, sort_keys=True)
        fh.write("\n")
    shown = ", ".join(f"{k} {v['mean']:.4f} ± {v['sd']:.4f}" for k, v in sorted(spread.items())
                      if k in ("sip_f1", "jaccard", "em", "f1"))
    print(f"  across {len(runs)} repeats of {model} (mean ± sd): {shown} -> {scores}/repeats.json")


def add_parser(sub) -> None:
    from benchmint import benchmarks
    from benchmint.cli import run_on_engine
    from benchmint.cli.grade import add_judge_arguments
    from benchmint.models.options import add_arguments

    ev = sub.add_parser("eval", help="run a model over a benchmark's items",
                        usage="benchmint eval ITEMS --benchmark NAME --out DIR (--model NAME --base-url URL | "
                              "--baseline) [options]",
                        description="Ask a model (any OpenAI-compatible chat server) every item of a benchmark, as "
                                    "its paper did; writes predictions.jsonl (the format benchmint score reads), "
                                    "gold.jsonl, errors.jsonl and run.json to --out. Resumable: rerun with the same "
                                    "--out and nothing answered is asked again. Exit status: 0 clean, 1 some items "
                                    "failed (all listed in errors.jsonl), 2 the run could not start.")
    ev.add_argument("items", help="items: benchmint's JSONL, or a release as it ships (parquet, TSV, JSON rows, "
                                  "an ImageFolder directory)")
    ev.add_argument("--benchmark", required=True, choices=benchmarks.names(),
                    help="the benchmark the items belong to (its prompts, protocol and answer kind)")
    # Either a model (on --base-url) or the benchmark's own baseline: argparse enforces the pair, the usage says it.
    who = ev.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", metavar="NAME", help="the model name the server knows (with --base-url; no default)")
    ev.add_argument("--out", required=True, metavar="DIR",
                    help="output directory; rerunning into it resumes the run")
    ev.add_argument("--setting", help="the benchmark's setting (SeePhys: TV, TC, TO, VO; CrystalXRD: full, "
                                      "image_only, cif_only, release; MatVQA: default, full_context); default: "
                                      "SeePhys TV, CrystalXRD full, the others their only one")
    ev.add_argument("--limit", type=int, help="the first N items only (default: all)")
    ev.add_argument("--repeats", type=int, default=1, help="ask each item N times (seeds seed..seed+N-1; default 1)")
    ev.add_argument("--seed", type=int, default=None,
                    help="sent with every request (and part of its cache key); repeat r is sent seed + r "
                         "(0 + r with several repeats and no seed); default: none sent")
    ev.add_argument("--system", metavar="PROMPT_FILE", help="a system prompt for every call (default: none)")
    ev.add_argument("--allow-paths-outside", action="append", metavar="DIR",
                    help="files the items name (images, context files, CIFs) must lie in the items file's folder; "
                         "this allows those under DIR too (repeatable; default: none)")
    ev.add_argument("--prompts", metavar="DIR", help="prompt files replacing the package's (<benchmark>/<file>.txt; "
                                                        "default: the package's)")
    ev.add_argument("--protocol", metavar="JSON", help="protocol keys replacing the package's (temperature, ...; "
                                                          "default: the package's)")
    ev.add_argument("--blind", action="store_true",
                    help="send no image (the setting's text alone): any benchmark's blind baseline, or a text-only "
                         "model; predictions carry the setting as <setting>-blind, and grade reports the vision gain")
    who.add_argument("--baseline", action="store_true",
                    help="no model: the benchmark's deterministic baseline (CrystalXRD: the answer simulated from "
                         "the CIF)")
    ev.add_argument("--score", action="store_true", help="score the predictions in the same run (option and HKL sets)")
    ev.add_argument("--grade", action="store_true",
                    help="grade the predictions in the same run (seephys, matvqa, csmbench-mcq) into --out/grades; "
                         "the judge is --judge-model on --judge-base-url (default: --base-url)")
    ev.add_argument("--report", action="store_true",
                    help="then benchmint report on --out (after --score or --grade): figures, tables and "
                         "index.html in --out/report")
    add_judge_arguments(ev)
    add_arguments(ev)
    run_on_engine(ev, run, "eval")
