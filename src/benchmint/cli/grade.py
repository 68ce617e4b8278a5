"""benchmint grade: open answers (and single-answer options) against a benchmark's items -> grades, summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CACHE_NAME = "requests.sqlite"


def _pct(block: dict | None) -> str:
    if not block or block.get("mean") is None:
        return "-"
    return f"{100 * block['mean']:.1f} [{100 * block['low']:.1f}, {100 * block['high']:.1f}]"


def _num(block: dict | None) -> str:
    if not block or block.get("mean") is None:
        return "-"
    return f"{block['mean']:.4f} [{block['low']:.4f}, {block['high']:.4f}]"


def render(summary: dict, errors_file: str = "errors.jsonl") -> str:
    """The printed table: one row per model and setting, then the settings gaps; ``errors_file`` as it is named."""
    open_task = summary["benchmark"] == "csmbench-open"
    bert = summary.get("bertscore", {}).get("metric")  # bertscore, or bertscore_minilm (not comparable)
    rows = [["model", "setting", "answers", "graded",
             "STS [95% CI]" if open_task else "accuracy % [95% CI]",
             *([f"{bert} F1 [95% CI]"] if open_task and bert else []),
             "judge score [95% CI]" if open_task else "rule/symbolic/judge", "undecided", "judge failed"]]
    for b in summary["models"]:
        st = b["stages"]
        if open_task:
            cells = [_num(b.get("sts")), *([_num(b.get(f"{bert}_f1"))] if bert else []), _num(b.get("judge_score"))]
        else:
            cells = [_pct(b["accuracy"]), f"{st['rule']}/{st['symbolic']}/{st['judge']}"]
        rows.append([b["model"], b["setting"] or "-", str(b["answers"]), str(b["graded"]), *cells,
                     str(b["undecided"]), str(b["judge_failures"])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for model, gaps in summary.get("settings_gaps", {}).items():
        parts = [f"{name} {_pct(gaps[name])}" for name in ("delta1", "delta2", "delta3") if name in gaps]
        if "vision_gain" in gaps:
            parts.append(f"vision gain {100 * gaps['vision_gain']:+.1f} points")
        parts += [f"vision gain in {k[len('vision_gain_'):]} {100 * v:+.1f} points (against its blind run)"
                  for k, v in gaps.items() if k.startswith("vision_gain_")]
        lines.append(f"{model}: " + ", ".join(parts))
    if "audit" in summary:
        a = summary["audit"]
        if a["labelled"]:
            lines.append(f"judge audit: {a['disagreements']} of {a['labelled']} labelled decisions differ from the "
                         f"person: error rate {100 * a['error_rate']:.1f}% [{100 * a['low']:.1f}, "
                         f"{100 * a['high']:.1f}]")
    if "judge_agreement" in summary:
        ag = summary["judge_agreement"]
        kappa = "undefined" if ag["kappa"] is None else f"{ag['kappa']:.3f}"
        lines.append(f"judges {' and '.join(ag['judges'])}: agree on {ag['agree']} of {ag['answers']} answers, "
                     f"Cohen's kappa {kappa}")
    if "audit_sheet" in summary:
        lines.append(f"audit sheet: {summary['audit_sheet']['rows']} decisions -> {summary['audit_sheet']['path']}")
    for model, row in summary.get("ablation", {}).items():
        parts = [f"{name} {100 * v['accuracy']:.1f}% (drop {_pct(v['relative_drop'])} over the "
                 f"{v['shared']['items']} items both sets hold: {100 * v['shared']['main_accuracy']:.1f}% -> "
                 f"{100 * v['shared']['accuracy']:.1f}%)" if v["shared"]["items"] else f"{name} "
                 f"{100 * v['accuracy']:.1f}% (no item in common with the main set)"
                 for name, v in row.items() if name != "main" and v["accuracy"] is not None]
        main = row["main"]["accuracy"]
        lines.append(f"{model}: main set {'-' if main is None else f'{100 * main:.1f}%'}; " + "; ".join(parts))
    for name, h in summary.get("human_baselines", {}).items():
        lines.append(f"human baseline {name} ({h['rule']} of {len(h['members_found'])} of {len(h['members'])} "
                     f"people): accuracy % {_pct(h['accuracy'])}")
    if "screen" in summary:
        sc = summary["screen"]
        saved = (f"{sc['judge_calls_saved_by_rejects']} judge calls saved by --screen-rejects" if sc["rejects"]
                 else f"{sc['sure_differences']} sure differences sent to the judge (--screen-rejects would save "
                      "those calls)")
        lines.append(f"screen: {sc['equivalent']} answers proved equivalent; {saved}")
    c = summary["counts"]
    lines.append(f"{c['answers']} answers, {c['missing']} gold items without an answer (counted wrong), "
                 f"{c['graded']} graded, {c['undecided']} undecided "
                 f"({c['judge_failures']} judge failures, {c['no_judge']} without a judge), {c['unparsed']} unparsed, "
                 f"{c['errors']} rows in {errors_file}")
    return "\n".join(lines)


def judge_from_arguments(args: argparse.Namespace, out: Path):
    """The judge the options describe, or None without --judge-model."""
    if not args.judge_model:
        return None
    from benchmint.grade.judge import Judge
    from benchmint.models.options import engine_from_arguments

    if not args.judge_base_url:
        raise ValueError("--judge-model needs --judge-base-url (the judge server's OpenAI-compatible base URL)")
    judge_args = argparse.Namespace(**{**vars(args), "base_url": args.judge_base_url})
    return Judge(engine_from_arguments(judge_args, out / CACHE_NAME, seed=args.seed), args.judge_model,
                 progress=not args.quiet)


def second_judge_from_arguments(args: argparse.Namespace, out: Path):
    """The second judge (for agreement), or None without --second-judge-model."""
    if not getattr(args, "second_judge_model", None):
        return None
    from benchmint.grade.judge import Judge
    from benchmint.models.options import engine_from_arguments

    url = args.second_judge_base_url or args.judge_base_url
    judge_args = argparse.Namespace(**{**vars(args), "base_url": url})
    return Judge(engine_from_arguments(judge_args, out / CACHE_NAME, seed=args.seed), args.second_judge_model,
                 progress=not args.quiet)


def _family(text: str) -> tuple[str, str]:
    model, sep, family = text.partition("=")
    if not sep or not model or not family:
        raise ValueError(f"--family takes MODEL=FAMILY, got {text!r}")
    return model, family


def run(args: argparse.Namespace) -> int:
    from benchmint.grade.flow import GradeConfig, grade_files
    from benchmint.io import InputError

    out = Path(args.out)
    judge = second = None
    try:
        cfg = GradeConfig(benchmark=args.benchmark, by=tuple(args.by) if args.by is not None else None,
                          n_boot=args.bootstrap, seed=args.seed, rtol=args.rtol,
                          symbolic_timeout_s=args.symbolic_timeout, workers=args.workers,
                          progress=not args.quiet, audit_sample=args.audit_sample,
                          audit_labels=args.audit_labels, human_groups=tuple(args.human_group or ()),
                          error_types=args.error_types, judge_scale=args.judge_scale, sts=not args.no_sts,
                          bertscore=args.bertscore, bertscore_layers=args.bertscore_layers,
                          families=tuple(_family(f) for f in args.family or ()),
                          screen_rejects=args.screen_rejects,
                          ablation=tuple(tuple(a) for a in args.ablation or ()),
                          allow_paths_outside=tuple(args.allow_paths_outside or ()))
        judge = judge_from_arguments(args, out)
        second = second_judge_from_arguments(args, out)
        result = grade_files(args.pred, args.gold, out, cfg, judge, second)
    except (InputError, ValueError, OSError) as exc:
        print(f"benchmint grade: error: {exc}", file=sys.stderr)
        return 2
    finally:
        for j in (judge, second):
            if j is not None:
                j.engine.close()
    if not args.quiet:
        print(render(result.summary, str(out / "errors.jsonl")))
        print(f"wrote {out / 'grades.jsonl'}, summary.json, errors.jsonl, run.json")
    return result.exit_code


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("the judge (stage 3: what rules and the symbolic screen cannot decide)")
    g.add_argument("--judge-model", metavar="NAME", help="the judge model's name on its server (default: no judge)")
    g.add_argument("--judge-base-url", metavar="URL", help="the judge server's OpenAI-compatible base URL (no default)")
    g.add_argument("--second-judge-model", metavar="NAME",
                   help="a second judge for the same answers: Cohen's kappa and the answers the judges differ on "
                        "(default: none)")
    g.add_argument("--second-judge-base-url", metavar="URL", help="its server (default: --judge-base-url)")


def add_parser(sub) -> None:
    from benchmint.cli import add_strata_option, run_on_engine
    from benchmint.grade.flow import GRADED
    from benchmint.models.options import add_arguments

    p = sub.add_parser("grade", help="grade open answers: rules, symbolic screen, judge",
                       description="Grade model answers against a benchmark's items as its paper does (SeePhys: "
                                   "final answer by rules, symbolic screen, 0/1 judge; MatVQA and CSMBench MCQ: the "
                                   "option read by rules). Writes grades.jsonl, summary.json and errors.jsonl to "
                                   "--out. An answer nothing could decide (judge failure, no judge) is listed and "
                                   "counted, never graded wrong. Exit status: 0 clean, 1 some answers or records "
                                   "had problems (all in errors.jsonl), 2 the run could not start.")
    p.add_argument("pred", nargs="+", help="predictions JSONL ({id, model, output | answer, [setting, repeat]}), "
                                           "e.g. benchmint eval's predictions.jsonl")
    p.add_argument("--gold", required=True, help="the benchmark's items, in any layout benchmint eval reads")
    p.add_argument("--benchmark", required=True, choices=GRADED, help="the benchmark the items belong to")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    add_strata_option(p, help="strata: a gold meta key; repeat the option or separate keys by commas (--by task "
                              "--by level, or --by task,level); default: the benchmark's own strata (--by '': none)")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance of numbers without significant "
                                                            "figures (default 1e-3)")
    p.add_argument("--symbolic-timeout", type=float, default=5.0, metavar="S",
                   help="time limit of one symbolic check; its worker is killed (default 5)")
    p.add_argument("--workers", type=int, default=-1, help="symbolic-check processes: -1 all cores (default)")
    p.add_argument("--screen-rejects", action="store_true",
                   help="SeePhys, beyond the paper: an answer the screen is sure is wrong (another dimension, a value "
                        "far off at the gold's precision, other option letters) is graded wrong without a judge "
                        "call; the summary counts the calls saved (default: the paper's protocol, every answer "
                        "the screen does not prove goes to the judge)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for 95%% CIs, >= 1000 (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the audit sample (default 0)")
    p.add_argument("--audit-sample", type=int, metavar="N",
                   help="write audit.csv: N of the judge's decisions, stratified by model and verdict, for a person "
                        "to label (column person: 0 or 1; default: no sheet)")
    p.add_argument("--audit-labels", metavar="CSV", help="a filled audit sheet: the judge's error rate against the "
                                                         "person, with a 95%% interval, and the rows they differ on (default: none)")
    p.add_argument("--human-group", action="append", metavar="NAME=mean|union:PERSON,...",
                   help="a human baseline row from people's answer sheets (graded like models, one model name per "
                        "person): mean of the members per item (students) or union (an item solved by any expert); "
                        "may be repeated (default: none)")
    p.add_argument("--error-types", action="store_true",
                   help="a judge pass labelling each wrong answer with the paper's error taxonomy (SeePhys: nine "
                        "codes of its Table 6; MatVQA: its three types), counted per model")
    p.add_argument("--ablation", nargs=3, action="append", metavar=("NAME", "ITEMS", "PREDICTIONS"),
                   help="another item set with the same ids and the answers to it (MatVQA §5.2: "
                        "language_removed, caption_removed): its accuracy and the relative drop from the main "
                        "set per model; may be repeated (default: none)")
    p.add_argument("--judge-scale", choices=("0-10", "1-10"), default="0-10",
                   help="CSMBench open: the judge's scale, 0-10 as the released scorer asks (default: its numbers "
                        "are the published ones) or 1-10 as the paper's text says")
    p.add_argument("--no-sts", action="store_true", help="CSMBench open: skip the STS metric")
    p.add_argument("--bertscore", metavar="MODEL_DIR|minilm",
                   help="CSMBench open: BERTScore F1 from a local BERT/RoBERTa model directory (config.json, "
                        "model.safetensors, tokenizer.json; roberta-large at layer 17 gives the published numbers), "
                        "or 'minilm': all-MiniLM-L6-v2's tokens, labelled bertscore_minilm, not comparable to "
                        "published BERTScore (default: no BERTScore)")
    p.add_argument("--allow-paths-outside", action="append", metavar="DIR",
                   help="files the items name must lie in the items file's folder; this allows those under DIR too "
                        "(repeatable; default: none)")
    p.add_argument("--family", action="append", metavar="MODEL=FAMILY",
                   help="CSMBench open: the family of a model whose name does not tell (the judge's score against "
                        "STS is reported per family); may be repeated (default: read from the model's name)")
    p.add_argument("--bertscore-layers", type=int, metavar="N",
                   help="the layer BERTScore reads (default: bert_score's tuned layer for the models it lists; "
                        "all layers for minilm)")
    p.add_argument("--quiet", action="store_true", help="no table")
    add_judge_arguments(p)
    add_arguments(p)
    run_on_engine(p, run, "grade")
