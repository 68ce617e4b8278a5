"""benchmint generate: benchmark items made from harvested figures by model stages (flow 3)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _engines(args: argparse.Namespace, cache: Path, models: dict | None = None) -> dict:
    """One engine per distinct base URL (the roles' own, else --base-url), shared by the roles that name it.

    ``models`` maps each role to its model name (default: SPM-Bench's vlm, gen and advisor)."""
    from benchmint.generate.executor import Role
    from benchmint.models.options import engine_from_arguments

    if models is None:
        models = {"vlm": args.vlm_model, "gen": args.gen_model, "advisor": args.advisor_model or args.gen_model}
    by_url: dict[str, object] = {}
    roles = {}
    for role in models:
        if not models[role]:
            continue
        url = getattr(args, f"{role}_base_url") or args.base_url
        if not url:
            raise ValueError(f"--{role}-model needs --{role}-base-url or --base-url")
        if url not in by_url:
            by_url[url] = engine_from_arguments(argparse.Namespace(**{**vars(args), "base_url": url}), cache,
                                                seed=args.seed or 0)
        roles[role] = Role(by_url[url], role)
    return roles


def _close(roles: dict) -> None:
    """Close each engine once: roles on one server share it."""
    for engine in {id(r.engine): r.engine for r in roles.values()}.values():
        engine.close()


def _listed_errors(result) -> int:
    """The first error rows under the summary; the generator's exit status."""
    for e in result.errors[:10]:
        print(f"  error: {e.get('id') or e.get('line')}: {e.get('cause') or e['kind']}: {e.get('message', '')}")
    return result.exit_code


def run_spm(args: argparse.Namespace) -> int:
    from benchmint.benchmarks.base import PromptError
    from benchmint.generate.spm import CODES, SPMConfig, generate
    from benchmint.io import InputError
    from benchmint.pdf.geometry import BoxError

    roles: dict = {}
    try:
        if not args.gen_model:
            raise ValueError("--gen-model is required (the model that writes the questions)")
        cfg = SPMConfig(gen_model=args.gen_model, advisor_model=args.advisor_model or args.gen_model,
                        vlm_model=args.vlm_model, box_format=args.box_format, min_panels=args.min_panels,
                        min_iou=args.min_iou, max_rounds=args.max_rounds, max_repairs=args.max_repairs,
                        temperature=args.temperature, max_tokens=args.reply_tokens,
                        vlm_max_tokens=args.vlm_reply_tokens, gen_max_tokens=args.gen_reply_tokens,
                        advisor_max_tokens=args.advisor_reply_tokens, context_tokens=args.context_tokens,
                        pass_score=args.pass_score,
                        crop_max_side=args.crop_max_side, text_only=args.text_only, seed=args.seed,
                        limit=args.limit, progress=True)
        roles = _engines(args, Path(args.out) / "requests.sqlite")
        result = generate(args.harvest, args.out, cfg, roles, pdf_dir=args.pdfs, prompts=args.prompts)
    except (InputError, PromptError, BoxError, ValueError, OSError) as exc:
        print(f"benchmint generate spm: error: {exc}", file=sys.stderr)
        return 2
    finally:
        _close(roles)
    run = result.run
    c = run["counts"]
    print(f"spm: {c['figures']} figures -> {c['items']} items, {c['rejected']} rejected, {c['errors']} errors "
          f"-> {args.out}/items.jsonl, rejected.jsonl, trace.jsonl, figures.jsonl, errors.jsonl, run.json")
    figures = {k: v["count"] for k, v in run["figures"]["codes"].items() if v["count"]}
    print("  figures: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    q = run["questions"]
    if q["total"]:
        print("  questions: " + ", ".join(f"{k} {q['codes'][k]['count']} ({q['codes'][k]['share']:.0%})"
                                          for k in CODES if q["codes"][k]["count"]))
    calls = run["calls"]
    if calls:
        for row in calls["by_stage_model"]:
            print(f"  {row['stage']:>7} {row['model']}: {row['requests']} requests, {row['cached']} from the cache, "
                  f"{row['failed']} failed; tokens {row['prompt_tokens']} in / {row['completion_tokens']} out"
                  + (f"; ${row['cost_usd']:.4f}" if row["cost_usd"] is not None else ""))
        if calls["stop_reason"]:
            print(f"  stopped by the budget ({calls['stop_reason']})")
    for e in result.errors[:10]:
        print(f"  error: {e.get('id') or e.get('figure') or e.get('line')}: {e.get('cause') or e['kind']}: "
              f"{e.get('message', '')}")
    return result.exit_code


def _add_spm(sub) -> None:
    from benchmint.cli import run_on_engine
    from benchmint.generate.spm import BOX_FORMATS
    from benchmint.models.options import _positive_int, add_arguments

    p = sub.add_parser("spm", help="SPM-Bench questions from a harvest (llbox, Q&A, advisory loop)",
                       description="Turn the figures of a benchmint harvest into SPM-Bench items: the VLM boxes "
                                   "each figure's panels on the page thumbnail, the crop is rendered at 300 DPI, the "
                                   "generator writes a six-option multi-select question with its reasoning path, "
                                   "rubric and labels, and the advisor audits it on six dimensions until it passes "
                                   "or --max-rounds is reached. Resumable: rerun with the same --out and nothing "
                                   "answered is asked again. Exit status: 0 clean, 1 some calls or inputs failed "
                                   "(errors.jsonl), 2 the run could not start.")
    p.add_argument("harvest", help="the output folder of benchmint harvest (figures.jsonl, thumbs/)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory; rerunning into it resumes the run")
    p.add_argument("--pdfs", metavar="DIR", help="where the harvested PDFs are (searched by name; default: HARVEST)")
    for role, what in (("vlm", "boxes the figures on page thumbnails (none: the harvest's own boxes)"),
                       ("gen", "writes and revises the questions"),
                       ("advisor", "audits each question (default: --gen-model)")):
        p.add_argument(f"--{role}-model", metavar="NAME", help=f"the model that {what}" + ("" if "default" in what else " (default: none)"))
        p.add_argument(f"--{role}-base-url", metavar="URL", help=f"the {role} model's server (default: --base-url)")
    p.add_argument("--box-format", choices=BOX_FORMATS, default="norm1000",
                   help="the VLM's boxes: [x0,y0,x1,y1] in [0,1000] (default), thumbnail pixels (Qwen2.5-VL), or "
                        "[ymin,xmin,ymax,xmax] in [0,1000] (Gemini)")
    p.add_argument("--min-panels", type=_positive_int, default=4,
                   help="reject figures with fewer panels (default 4, as the paper selects)")
    p.add_argument("--min-iou", type=float, default=0.5,
                   help="flag a VLM box whose IoU with the harvest's figure body is below this (default 0.5)")
    p.add_argument("--max-rounds", type=_positive_int, default=3, help="advisor audits per question at most (default 3)")
    p.add_argument("--pass-score", type=int, metavar="N",
                   help="the advisor passes a question when its verdict is pass and every dimension scores at least "
                        "N (default: critique.json's pass_score, 4 of 5); run.json records it")
    p.add_argument("--max-repairs", type=int, default=2, metavar="N",
                   help="a question refused by the checks (two options the same, a letter given twice) is asked "
                        "again with the reason, N times at most (default 2)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature of every call (default 0)")
    p.add_argument("--reply-tokens", type=_positive_int, default=4096, metavar="N", help="max tokens per reply (default 4096)")
    for role in ("vlm", "gen", "advisor"):
        p.add_argument(f"--{role}-reply-tokens", type=_positive_int, metavar="N",
                       help=f"max tokens per reply of the {role} model (default: --reply-tokens)")
    p.add_argument("--context-tokens", type=_positive_int, metavar="N",
                   help="cut the discussion each prompt carries to N tokens (words and punctuation, as harvest "
                        "counts them), the sentences citing the figure and closest to its caption first; for small "
                        "models with short contexts (default: the discussion whole)")
    p.add_argument("--crop-max-side", type=_positive_int, default=2048, metavar="PX",
                   help="longest side of the crop as the generator and advisor see it (default 2048)")
    p.add_argument("--text-only", action="store_true",
                   help="send the generator and advisor no image, only caption and discussion (text-only models)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed sent with every call (default: none sent)")
    p.add_argument("--limit", type=_positive_int, help="the first N figure records only (default: all)")
    p.add_argument("--prompts", metavar="DIR", help="files replacing the package's (spm/<file>: prompts, term lists, "
                                                    "taxonomy.json, critique.json; default: the package's)")
    add_arguments(p)
    run_on_engine(p, run_spm, "generate spm")


def run_csmbench(args: argparse.Namespace) -> int:
    from benchmint.benchmarks.base import PromptError
    from benchmint.generate.csmbench import CSMConfig, generate
    from benchmint.io import InputError

    roles: dict = {}
    try:
        cfg = CSMConfig(gen_model=args.gen_model, vlm_model=args.vlm_model, max_attempts=args.max_attempts,
                        temperature=args.temperature, max_tokens=args.reply_tokens, seed=args.seed or 0,
                        limit=args.limit, design=args.distractor_design, progress=True)
        if args.gen_model or args.vlm_model:
            args.advisor_model = None
            roles = _engines(args, Path(args.out) / "requests.sqlite")
        result = generate(args.figures, args.out, cfg, roles, pdf_dir=args.pdfs, prompts=args.prompts)
    except (InputError, PromptError, ValueError, OSError) as exc:
        print(f"benchmint generate csmbench-mcq: error: {exc}", file=sys.stderr)
        return 2
    finally:
        _close(roles)
    run = result.run
    c = run["counts"]
    print(f"csmbench-mcq: {c['figures']} figures -> {c['items']} items ({c['open_items']} open), {c['rejected']} "
          f"rejected, {c['errors']} errors -> {args.out}/items.jsonl, open.jsonl, rejected.jsonl, run.json")
    print("  figures: " + ", ".join(f"{k} {v['count']}" for k, v in run["figures"]["codes"].items() if v["count"]))
    print("  answer letters: " + ", ".join(f"{k} {v}" for k, v in run["answer_letters"].items()))
    print("  scales: " + ", ".join(f"{k} {v}" for k, v in run["scales"].items()))
    vote = run["shortcut"]["majority_vote"]
    if vote["items"]:
        print(f"  without the figure, a per-axis majority vote over the options leaves the answer alone in "
              f"{vote['answer_alone']} of {vote['items']} items (expected accuracy {vote['expected_accuracy']:.2f}; "
              f"chance 0.25{'; --distractor-design balanced removes it' if args.distractor_design == 'paper' else ''})")
    return _listed_errors(result)


def _add_csmbench(sub) -> None:
    from benchmint.cli import run_on_engine
    from benchmint.models.options import _positive_int, add_arguments

    p = sub.add_parser("csmbench-mcq", help="CSMBench caption-matching items (and open items) from figures",
                       description="Turn harvested figures into CSMBench items: figures whose captions describe "
                                   "flowcharts, schematics or bare statistics are dropped, each kept figure gets its "
                                   "physical scale and hybrid label, and three distractor captions, each the true "
                                   "caption changed in its characterization method, composition or a number "
                                   "(locally from package tables, or written by --gen-model and checked). "
                                   "items.jsonl is read by eval --benchmark csmbench-mcq, open.jsonl by "
                                   "csmbench-open. Exit status: 0 clean, 1 some calls or inputs failed, 2 no run.")
    p.add_argument("figures", help="a benchmint harvest folder (figures.jsonl) or a JSONL of figure records "
                                   "(caption, image, optional discussion)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory; rerunning into it resumes the run")
    p.add_argument("--pdfs", metavar="DIR", help="where the harvested PDFs are (default: beside figures.jsonl)")
    p.add_argument("--gen-model", metavar="NAME", help="the model that writes the distractors (default: none, local tables)")
    p.add_argument("--gen-base-url", metavar="URL", help="its server (default: --base-url)")
    p.add_argument("--vlm-model", metavar="NAME",
                   help="the model that keeps or drops each figure from its image and caption (none: the caption's "
                        "words decide; default: none)")
    p.add_argument("--vlm-base-url", metavar="URL", help="its server (default: --base-url)")
    p.add_argument("--max-attempts", type=_positive_int, default=3,
                   help="replies per distractor before the figure is rejected (default 3)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature of every call (default 0)")
    p.add_argument("--reply-tokens", type=_positive_int, default=1024, metavar="N", help="max tokens per reply (default 1024)")
    p.add_argument("--seed", type=int, default=0, help="the shuffles' and local choices' seed, sent with calls (default 0)")
    p.add_argument("--limit", type=_positive_int, help="the first N figure records only (default: all)")
    p.add_argument("--distractor-design", choices=("paper", "balanced"), default="paper",
                   help="paper: each distractor changes one axis, as CSMBench does (a per-axis majority vote then "
                        "finds the answer without the figure); balanced: each changes two of the three axes, so "
                        "every axis splits the options two against two (default paper)")
    p.add_argument("--prompts", metavar="DIR", help="files replacing the package's (csmbench/<file>; default: the package's)")
    add_arguments(p)
    run_on_engine(p, run_csmbench, "generate csmbench-mcq", advisor_model=None, advisor_base_url=None)


def run_matvqa(args: argparse.Namespace) -> int:
    from benchmint.benchmarks.base import PromptError
    from benchmint.generate.matvqa import SETS, STAGE_CODES, MatVQAConfig, generate
    from benchmint.io import InputError

    roles: dict = {}
    try:
        if not args.gen_model or not args.eval_model:
            raise ValueError("--gen-model (writes and rewrites the questions) and --eval-model (answers them "
                             "without the figure) are required")
        cfg = MatVQAConfig(gen_model=args.gen_model, eval_model=args.eval_model,
                           checker_model=args.checker_model or args.gen_model, max_iterations=args.max_iterations,
                           max_rewrite_failures=args.max_rewrite_failures, min_terms=args.min_terms,
                           date_from=args.date_from, date_to=args.date_to, categories=tuple(args.category or ()),
                           temperature=args.temperature, max_tokens=args.reply_tokens,
                           crop_max_side=args.crop_max_side, text_only=args.text_only,
                           paper_text=args.paper_text, seed=args.seed, limit=args.limit,
                           progress=True)
        models = {"gen": cfg.gen_model, "eval": cfg.eval_model, "checker": cfg.checker_model}
        roles = _engines(args, Path(args.out) / "requests.sqlite", models)
        result = generate(args.harvest, args.out, cfg, roles, pdf_dir=args.pdfs, prompts=args.prompts,
                          keywords=args.keywords, metadata=args.metadata)
    except (InputError, PromptError, ValueError, OSError) as exc:
        print(f"benchmint generate matvqa: error: {exc}", file=sys.stderr)
        return 2
    finally:
        _close(roles)
    run = result.run
    c = run["counts"]
    print(f"matvqa: {c['figures']} figures -> {c['items']} questions, {c['rejected']} rejected, {c['errors']} "
          f"errors -> {args.out}/{', '.join(SETS.values())}, items.jsonl, rejected.jsonl, trace.jsonl, run.json")
    figures = {k: v["count"] for k, v in run["figures"]["codes"].items() if v["count"]}
    print("  figures: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    for stage, name in (("stage1", "language shortcuts"), ("stage2", "caption shortcuts")):
        q = run[stage]
        if q["total"]:
            print(f"  {name}: " + ", ".join(f"{k} {q['codes'][k]['count']} ({q['codes'][k]['share']:.0%})"
                                             for k in STAGE_CODES if q["codes"][k]["count"]))
    calls = run["calls"]
    if calls:
        for row in calls["by_stage_model"]:
            print(f"  {row['stage']:>8} {row['model']}: {row['requests']} requests, {row['cached']} from the cache, "
                  f"{row['failed']} failed")
        if calls["stop_reason"]:
            print(f"  stopped by the budget ({calls['stop_reason']})")
    return _listed_errors(result)


def _add_matvqa(sub) -> None:
    from benchmint.cli import run_on_engine
    from benchmint.models.options import _positive_int, add_arguments

    p = sub.add_parser("matvqa", help="MatVQA questions from a harvest (reasoning path, MCQ, shortcut removal)",
                       description="Turn the figures of a benchmint harvest into MatVQA items (MARxivAgent): figures "
                                   "selected by a materials vocabulary and paper metadata, a reasoning path over "
                                   "structure, property, performance, processing and environment, a four-option "
                                   "question, then language shortcuts (the evaluator answers without the figure) "
                                   "and caption shortcuts (from the caption alone) removed by reflect, rewrite and "
                                   "check rounds, at most --max-iterations accepted and --max-rewrite-failures "
                                   "refused rewrites per stage. Writes the three item sets with the same ids. "
                                   "Resumable. Exit status: 0 clean, 1 some calls or inputs failed, 2 the run "
                                   "could not start.")
    p.add_argument("harvest", help="the output folder of benchmint harvest (figures.jsonl)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory; rerunning into it resumes the run")
    p.add_argument("--pdfs", metavar="DIR", help="where the harvested PDFs are (searched by name; default: HARVEST)")
    for role, what in (("gen", "writes the reasoning paths and questions, reflects and rewrites"),
                       ("eval", "answers the questions without the figure"),
                       ("checker", "checks each rewrite (default: --gen-model)")):
        p.add_argument(f"--{role}-model", metavar="NAME",
                       help=f"the model that {what}" + ("" if "default" in what else " (required; no default)"))
        p.add_argument(f"--{role}-base-url", metavar="URL", help=f"the {role} model's server (default: --base-url)")
    p.add_argument("--max-iterations", type=_positive_int, default=3, metavar="T",
                   help="accepted rewrites per stage at most (Algorithm 1's T; default 3)")
    p.add_argument("--max-rewrite-failures", type=_positive_int, default=3, metavar="K",
                   help="rewrites the checker refuses per stage before it ends with FAIL_REWRITE (default 3)")
    p.add_argument("--keywords", metavar="FILE", help="the vocabulary for source selection, one term a line "
                                                      "(default: the package's matvqa/vocabulary.txt)")
    p.add_argument("--min-terms", type=int, default=1, metavar="N",
                   help="vocabulary terms a figure's caption and discussion must name (default 1)")
    p.add_argument("--metadata", metavar="JSONL", help="paper metadata: rows {pdf, published, categories} (default: none)")
    p.add_argument("--from", dest="date_from", metavar="DATE", help="papers published on or after (YYYY-MM-DD; default: no bound)")
    p.add_argument("--to", dest="date_to", metavar="DATE", help="papers published on or before (YYYY-MM-DD; default: no bound)")
    p.add_argument("--category", action="append", metavar="CAT", help="keep papers of this category "
                                                                      "(e.g. cond-mat.mtrl-sci); may be repeated (default: all)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature of every call (default 0)")
    p.add_argument("--reply-tokens", type=_positive_int, default=4096, metavar="N", help="max tokens per reply (default 4096)")
    p.add_argument("--crop-max-side", type=_positive_int, default=2048, metavar="PX",
                   help="longest side of the figure as the question writer sees it (default 2048)")
    p.add_argument("--text-only", action="store_true", help="send the question writer no image")
    p.add_argument("--paper-text", action="store_true",
                   help="check the reasoning path against the paper's whole text (read from its PDF), not only the "
                        "caption and the discussion paragraphs")
    p.add_argument("--seed", type=int, default=None, help="sampling seed sent with every call (default: none sent)")
    p.add_argument("--limit", type=_positive_int, help="the first N figure records only (default: all)")
    p.add_argument("--prompts", metavar="DIR", help="files replacing the package's (matvqa/<file>; default: the package's)")
    add_arguments(p)
    run_on_engine(p, run_matvqa, "generate matvqa")


def run_seephys(args: argparse.Namespace) -> int:
    from benchmint.benchmarks.base import PromptError
    from benchmint.generate.seephys import CODES, SeePhysConfig, build
    from benchmint.io import InputError

    roles: dict = {}
    try:
        cfg = SeePhysConfig(model=args.model, repair=not args.no_repair, caption=not args.no_caption,
                            labels=not args.no_labels, text_only=args.text_only,
                            max_attempts=args.max_attempts, max_side=args.max_side, temperature=args.temperature,
                            max_tokens=args.reply_tokens, seed=args.seed, limit=args.limit, font=args.font,
                            progress=True)
        if args.model:
            roles = _engines(args, Path(args.out) / "requests.sqlite", {"gen": args.model})
        result = build(args.problems, args.out, cfg, roles, prompts=args.prompts, leak_grades=args.leak_grades)
    except (InputError, PromptError, ValueError, OSError) as exc:
        print(f"benchmint {args.command} seephys: error: {exc}", file=sys.stderr)
        return 2
    finally:
        _close(roles)
    run = result.run
    c = run["counts"]
    print(f"seephys: {c['problems']} problems -> {c['items']} items ({c['composites']} with a VO composite, "
          f"{c['captions']} with a caption), {c['rejected']} rejected, {c['flagged']} flagged, {c['errors']} errors "
          f"-> {args.out}/items.jsonl, vo/, rejected.jsonl, flagged.jsonl, trace.jsonl, run.json")
    q = run["problems"]
    print("  problems: " + ", ".join(f"{k} {q['codes'][k]['count']}" for k in CODES if q["codes"][k]["count"]))
    if run["flags"]:
        print("  flagged: " + ", ".join(f"{k} {v}" for k, v in run["flags"].items()))
    calls = run["calls"]
    if calls:
        for row in calls["by_stage_model"]:
            print(f"  {row['stage']:>7} {row['model']}: {row['requests']} requests, {row['cached']} from the cache, "
                  f"{row['failed']} failed")
    for e in result.errors[:10]:
        print(f"  error: {e.get('id')}: {e.get('cause') or e['kind']}: {e.get('message', '')}")
    return result.exit_code


def _add_seephys(sub) -> None:
    from benchmint.cli import run_on_engine
    from benchmint.models.options import _positive_int, add_arguments

    p = sub.add_parser("seephys", help="SeePhys items in all four settings from raw physics problems",
                       description="Turn physics problems (text, diagram files, reference answer) into SeePhys "
                                   "items that eval --benchmark seephys reads in TV, TC, TO and VO: answers longer "
                                   "than three sentences dropped, sig_figs from decimal answers, a VO composite of "
                                   "text and diagrams per problem; with --model, the OCR text repaired (a repair "
                                   "that changes a number is refused) and captions written for problems without "
                                   "one (a caption that states the answer is refused), multiple-choice stems "
                                   "rewritten as open questions and multi_part problems split into sub-questions, "
                                   "each checked. Resumable. benchmint build seephys and benchmint generate "
                                   "seephys are the same command. Exit status: 0 clean, 1 some calls failed "
                                   "(errors.jsonl), 2 the run could not start.")
    p.add_argument("problems", help="a JSONL of problems {question, answer, images, optional id, language, subject, "
                                    "level, img_category, vision_relevance, caption, sig_figs}")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory; rerunning into it resumes the run")
    p.add_argument("--model", metavar="NAME", help="the model that repairs OCR text, rewrites and splits "
                                                   "problems, writes captions and labels (default: none, no model "
                                                   "stage)")
    p.add_argument("--gen-base-url", metavar="URL", help="its server (default: --base-url)")
    p.add_argument("--no-repair", action="store_true", help="skip the OCR repair (default: repaired with --model)")
    p.add_argument("--no-caption", action="store_true",
                   help="write no captions (default: written with --model for problems that have none)")
    p.add_argument("--no-labels", action="store_true",
                   help="ask no labels (default: with --model, the subject, level, diagram type, vision relevance "
                        "and language a problem lacks are asked, each checked against its taxonomy)")
    p.add_argument("--text-only", action="store_true",
                   help="send the labelling model no diagram, only the text and any caption (text-only models; "
                        "needs --no-caption; default: the diagrams are sent)")
    p.add_argument("--max-attempts", type=_positive_int, default=3,
                   help="replies per stage the checks may refuse before the problem is rejected (default 3)")
    p.add_argument("--max-side", type=_positive_int, default=4096, metavar="PX",
                   help="the VO composite's bound on each side (default 4096, as the paper)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature of every call (default 0)")
    p.add_argument("--reply-tokens", type=_positive_int, default=2048, metavar="N", help="max tokens per reply (default 2048)")
    p.add_argument("--seed", type=int, default=0, help="the composites' fonts and sizes, sent with calls (default 0)")
    p.add_argument("--font", metavar="FILE",
                   help="a TTF, OTF or TTC font with CJK glyphs for Chinese text in the composites (default: the "
                        "first such font installed, e.g. WenQuanYi Micro Hei from fonts-wqy-microhei; none: "
                        "Chinese questions get no composite and are flagged no_composite)")
    p.add_argument("--limit", type=_positive_int, help="the first N problem records only (default: all)")
    p.add_argument("--prompts", metavar="DIR", help="files replacing the package's (seephys/<file>; default: the package's)")
    p.add_argument("--leak-grades", metavar="JSONL",
                   help="grades.jsonl of a leak check (eval --setting TO by a search-enabled model, then grade): items "
                        "it solved are flagged solved_without_diagram, not dropped (default: no leak check)")
    add_arguments(p)
    run_on_engine(p, run_seephys, "generate seephys")


def run_review(args: argparse.Namespace) -> int:
    from benchmint.generate import review
    from benchmint.io import InputError

    try:
        if args.action == "export":
            record = review.export(args.items, args.out, args.benchmark, args.sample, args.reviewers, args.overlap,
                                   args.seed)
            print(f"{record['sample']} items, {len(record['overlap'])} on every sheet -> "
                  + ", ".join(f"{args.out}/{name}.csv ({len(ids)})" for name, ids in record["sheets"].items()))
            return 0
        summary = review.import_sheets(args.sheets, args.items, args.out, args.benchmark)
    except (InputError, ValueError, OSError) as exc:
        print(f"benchmint generate review {args.action}: error: {exc}", file=sys.stderr)
        return 2
    print(f"{summary['reviewed']} items reviewed by {len(summary['reviewers'])}: {summary['rejected']} rejected, "
          f"{summary['kept']} of {summary['items']} kept -> {args.out}/items.jsonl, rejected.jsonl, "
          "review_summary.json")
    for criterion, a in summary["agreement"].items():
        pairs = a["pairs"]
        shown = (f"{a['mean_agreement']:.0%} agreement, kappa {a['mean_kappa']}" if a["mean_agreement"] is not None
                 else "no overlap")
        print(f"  {criterion}: {shown} ({len(pairs)} pair{'s' if len(pairs) != 1 else ''} of reviewers)")
    return 0


def _add_review(sub) -> None:
    from benchmint.generate.review import CRITERIA
    from benchmint.models.options import _positive_int

    p = sub.add_parser("review", help="review sheets for people: export a sample, import the verdicts",
                       description="export: a CSV sheet per reviewer with the benchmark's criteria (answerability, "
                                   "correctness, distractor quality), an overlap every reviewer sees; import: the "
                                   "items reviewers reject leave items.jsonl (with the reason in rejected.jsonl), "
                                   "agreement per criterion as % agreement and Cohen's kappa on the overlap.")
    actions = p.add_subparsers(dest="action", required=True)
    ex = actions.add_parser("export", help="write the sheets")
    ex.add_argument("items", help="a generated items.jsonl")
    ex.add_argument("--out", required=True, metavar="DIR", help="where the sheets are written")
    ex.add_argument("--benchmark", choices=sorted(CRITERIA), default="spm",
                    help="whose review criteria the sheets hold (default spm)")
    ex.add_argument("--sample", type=_positive_int, required=True, metavar="N", help="items to review")
    ex.add_argument("--reviewers", type=_positive_int, default=2, metavar="K", help="sheets, one per reviewer (default 2)")
    ex.add_argument("--overlap", type=float, default=0.2, metavar="F",
                    help="share of the sample every reviewer sees, for agreement (default 0.2)")
    ex.add_argument("--seed", type=int, default=0, help="seed of the sample and its split (default 0)")
    ex.set_defaults(func=run_review)
    im = actions.add_parser("import", help="read the filled sheets")
    im.add_argument("sheets", nargs="+", help="the filled CSV sheets (the reviewer is the file's name)")
    im.add_argument("--items", required=True, help="the items.jsonl the sheets were drawn from")
    im.add_argument("--out", required=True, metavar="DIR",
                    help="where the kept items, the rejected ones and the agreement are written")
    im.add_argument("--benchmark", choices=sorted(CRITERIA), default="spm",
                    help="whose review criteria the sheets hold (default spm)")
    im.set_defaults(func=run_review)


def add_parser(sub) -> None:
    gen = sub.add_parser("generate", help="make benchmark items from harvested figures with model stages",
                         description="Generate benchmark items from a harvest: outputs items.jsonl (the layout "
                                     "benchmint eval reads), rejected.jsonl, trace.jsonl, errors.jsonl, run.json.")
    kinds = gen.add_subparsers(dest="generator", required=True)
    _add_spm(kinds)
    _add_csmbench(kinds)
    _add_matvqa(kinds)
    _add_seephys(kinds)
    _add_review(kinds)
