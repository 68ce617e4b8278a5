"""MatVQA's questions from a harvest (matvqa.txt §4, Algorithm 1 in A.1): MARxivAgent's two phases.

Phase 1, figures to raw questions (§4.1):

1. **Source selection** (local): a figure is kept when its caption and discussion name at least ``min_terms``
   terms of the materials vocabulary (``prompts/matvqa/vocabulary.txt`` or ``--keywords``) and, when a date
   window or categories are asked for, when its paper's metadata (the figure record's ``published`` and
   ``categories``, or a ``--metadata`` JSONL row for its PDF) falls inside them. Every figure left out is in
   rejected.jsonl with its reason.
2. **Reasoning path** (generator): ordered steps over Structure / Property / Performance / Processing /
   Environment from the caption and the discussion paragraphs; each step checked against that text: BM25
   (``generate.evidence``; with ``paper_text`` over the whole paper too) picks the sentences that match it best,
   a step with none is dropped, and the checker model says whether the sentences support each of the others; a
   path left with fewer than two supported steps rejects the figure (``PATH_UNSUPPORTED``).
   The evidence and verdicts are kept in trace.jsonl.
3. **MCQ** (generator, with the figure's 300-DPI crop): a causal, hypothetical, comparative or quantitative
   question with four numbered options, in the layout ``benchmint eval --benchmark matvqa`` reads.

Phase 2, both stages of Algorithm 1 (§4.2), each a loop of follow-up units:

    evaluate (no image; stage 2: the caption only) -> wrong: the stage ends
      right -> reflect (the strategy that answered) -> rewrite -> check (stage 1: the same meaning as the
      stage's first version; stage 2: the same reasoning path) -> consistent: evaluate the rewrite
                                                                 -> inconsistent: rewrite again, told why

The printed algorithm does not advance its counter after a failed rewrite, so a checker that keeps refusing
would loop for ever; here accepted rewrites are bounded by ``max_iterations`` (T) and refused ones by
``max_rewrite_failures`` (K), so a stage makes at most T + 1 evaluations, T reflections and T + K rewrites and
checks (``calls_bound``). The evaluator's answer is read with the ``option_number`` extractor, which also reads
"The answer is (2)". A stage ends with one of ``STAGE_CODES``; an unusable reply of a stage's model ends that
stage with its code and the version reached goes on. Three item sets with the same ids: ``items.raw.jsonl``,
``items.lanrem.jsonl`` (after stage 1) and ``items.caprem.jsonl`` (after stage 2, also ``items.jsonl``).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

from benchmint.benchmarks.base import ImagePart as TemplateImage
from benchmint.benchmarks.base import TextPart
from benchmint.generate.executor import Role, RoleExecutor
from benchmint.generate.flow import (
    GenerateResult,
    HarvestPDFs,
    PromptSet,
    call_result,
    code_counts,
    json_reply,
    read_chain,
    save_crop,
    write_outputs,
)
from benchmint.io import InputError, dumps, iter_jsonl, write_jsonl
from benchmint.run import Ledger, Unit, content_key, run_units
from benchmint.run.runner import LEDGER_NAME

COMPONENTS = ("S", "P", "Pe", "Pr", "E")
TASKS = ("causal", "hypothetical", "comparative", "quantitative")
N_OPTIONS = 4
# Phase 1 outcome per figure (run.json "figures").
RAW = "RAW"
GENERATOR_FAILED = "GENERATOR_FAILED"
CALL_FAILED = "CALL_FAILED"  # a call failed (HTTP, timeout, budget): not final, the next run asks again
PATH_UNSUPPORTED = "PATH_UNSUPPORTED"
EVIDENCE_FAILED = "EVIDENCE_FAILED"  # the checker's verdicts on the path unusable
FIGURE_CODES = (RAW, GENERATOR_FAILED, PATH_UNSUPPORTED, EVIDENCE_FAILED, CALL_FAILED, "no_terms", "no_metadata",
                "outside_dates", "other_category", "no_body", "pdf_not_found", "crop_failed")
# Stage outcome per question (run.json "stage1", "stage2"): the evaluator was wrong on the first version, or on a
# rewrite; still right after T accepted rewrites; K rewrites refused; a model's reply unusable.
NO_SHORTCUT = "NO_SHORTCUT"
REWRITTEN = "REWRITTEN"
FAIL_ITERATIONS = "FAIL_ITERATIONS"
FAIL_REWRITE = "FAIL_REWRITE"
STAGE_CODES = (NO_SHORTCUT, REWRITTEN, FAIL_ITERATIONS, FAIL_REWRITE, "EVALUATOR_FAILED", "REFLECTOR_FAILED",
               "REWRITER_FAILED", "CHECKER_FAILED")
STAGES = {1: "language", 2: "caption"}
SETS = {"raw": "items.raw.jsonl", "lanrem": "items.lanrem.jsonl", "caprem": "items.caprem.jsonl"}
# Each step's role: the generator writes paths, questions, reflections and rewrites; the evaluator answers; the
# checker judges a rewrite.
MIN_STEPS = 2
EVIDENCE_SENTENCES = 3  # per step, as the checker sees them
STEP_ROLE = {"path": "gen", "confirm": "checker", "mcq": "gen", "reflect": "gen", "rewrite": "gen", "evaluate": "eval", "check": "checker"}


@dataclass(frozen=True)
class MatVQAConfig:
    gen_model: str
    eval_model: str
    checker_model: str
    max_iterations: int = 3  # T: accepted rewrites per stage
    max_rewrite_failures: int = 3  # K: refused rewrites per stage
    min_terms: int = 1
    date_from: str | None = None  # YYYY-MM-DD, inclusive
    date_to: str | None = None
    categories: tuple[str, ...] = ()
    temperature: float | None = 0.0
    max_tokens: int | None = 4096
    crop_max_side: int = 2048
    text_only: bool = False  # the question writer gets no image (a text-only model)
    paper_text: bool = False  # check the path against the paper's whole text too (read from its PDF)
    seed: int | None = None
    limit: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        if self.max_iterations < 1 or self.max_rewrite_failures < 1:
            raise ValueError("--max-iterations and --max-rewrite-failures must be at least 1")
        if self.min_terms < 0:
            raise ValueError(f"--min-terms must be at least 0, got {self.min_terms}")
        for name, value in (("--from", self.date_from), ("--to", self.date_to)):
            if value is not None:
                _date(value, name)
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be at least 1, got {self.limit}")


def calls_bound(cfg: MatVQAConfig) -> int:
    """The most calls one figure can make: path, its evidence check, question, and per stage T + 1 evaluations,
    T reflections, T + K rewrites and as many checks."""
    t, k = cfg.max_iterations, cfg.max_rewrite_failures
    return 3 + 2 * ((t + 1) + t + 2 * (t + k))


MatVQAResult = GenerateResult  # the flow's one result shape


def _date(value: str, where: str) -> date:
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        raise ValueError(f"{where}: not a date YYYY-MM-DD: {value!r}") from None


# ---------------------------------------------------------------------------------------------------------------
# Schemas and their checks


def _text() -> dict:
    return {"type": "string", "minLength": 1}  # no maxLength: see spm._text


def confirm_schema(n: int | None = None) -> dict:
    """The checker's verdicts on the path's steps: ``n`` of them in the request; any number where it is read
    (the count is checked against the steps asked about)."""
    verdicts = {"type": "array", "items": {"type": "string", "enum": ["supported", "unsupported"]}, "minItems": 1}
    if n is not None:
        verdicts.update(minItems=n, maxItems=n)
    return {"type": "object", "additionalProperties": False, "required": ["verdicts"],
            "properties": {"verdicts": verdicts}}


def path_schema() -> dict:
    step = {"type": "object", "additionalProperties": False, "required": ["component", "statement"],
            "properties": {"component": {"type": "string", "enum": list(COMPONENTS)}, "statement": _text()}}
    return {"type": "object", "additionalProperties": False, "required": ["steps"],
            "properties": {"steps": {"type": "array", "items": step, "minItems": 2, "maxItems": 8}}}


def _options() -> dict:
    return {"type": "array", "items": _text(), "minItems": N_OPTIONS, "maxItems": N_OPTIONS}


def _number() -> dict:
    return {"type": "integer", "minimum": 1, "maximum": N_OPTIONS}


# Properties numbered in the order a reply is to be written (servers enforcing a schema write its sorted order):
# the question before its options, the correct number last.
MCQ_STEPS = ("step1_task", "step2_question", "step3_options", "step4_answer")
REWRITE_STEPS = ("step1_question", "step2_options", "step3_answer")


def mcq_schema() -> dict:
    steps = ({"type": "string", "enum": list(TASKS)}, _text(), _options(), _number())
    return {"type": "object", "additionalProperties": False, "required": list(MCQ_STEPS),
            "properties": dict(zip(MCQ_STEPS, steps))}


def rewrite_schema() -> dict:
    return {"type": "object", "additionalProperties": False, "required": list(REWRITE_STEPS),
            "properties": dict(zip(REWRITE_STEPS, (_text(), _options(), _number())))}


def reflect_schema() -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["strategy"],
            "properties": {"strategy": _text()}}


def check_schema() -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["step1_reason", "step2_verdict"],
            "properties": {"step1_reason": _text(),
                           "step2_verdict": {"type": "string", "enum": ["consistent", "inconsistent"]}}}


def check_options(options: list[str]) -> None:
    if len({o.strip().casefold() for o in options}) < len(options):
        raise ValueError("two options are the same")


def read_choice(text: str) -> dict:
    """The evaluator's reply: the option number it chose (the ``option_number`` extractor) and its words."""
    from benchmint.tasks.extract import extract_answer

    found = extract_answer(text, "option_number")
    if not found or len(found) != 1 or not 1 <= found[0] <= N_OPTIONS:
        raise ValueError(f"no single option number 1-{N_OPTIONS} can be read in the answer")
    return {"answer": found[0], "text": text}


def _parts(rendered, max_side: int | None) -> tuple:
    from benchmint.models import ImagePart

    return tuple(p.text if isinstance(p, TextPart) else ImagePart(p.data, max_side) for p in rendered)


def choices(options: list[str]) -> str:
    """Options as the benchmark's prompt numbers them."""
    return "\n".join(f"({k}): {text}" for k, text in enumerate(options, 1))


def path_text(steps: list[dict]) -> str:
    return " -> ".join(f"{s['statement']} ({s['component']})" for s in steps)


# ---------------------------------------------------------------------------------------------------------------
# The run


class MatVQAGenerator:
    """One ``generate matvqa`` run; ``roles`` maps "gen", "eval" and "checker" to a ``Role`` (engine)."""

    def __init__(self, harvest_dir: str | os.PathLike, out_dir: str | os.PathLike, cfg: MatVQAConfig,
                 roles: dict[str, Role], pdf_dir: str | os.PathLike | None = None,
                 prompts: str | os.PathLike | None = None, keywords: str | os.PathLike | None = None,
                 metadata: str | os.PathLike | None = None) -> None:
        self.harvest = Path(harvest_dir)
        self.out = Path(out_dir)
        self.cfg = cfg
        self.pdfs = HarvestPDFs(self.harvest, pdf_dir)
        self.pdf_dir = self.pdfs.folder
        self.prompts = PromptSet("matvqa", prompts)
        self.terms = self._terms(keywords)
        self.metadata = self._metadata(metadata) if metadata is not None else {}
        t = self.prompts.template
        self.t_path = t("path.txt", {"LABEL", "CAPTION", "CONTEXT", "TERMS"}, images=False)
        self.t_confirm = t("confirm.txt", {"CLAIMS"}, images=False)
        self.t_mcq = t("mcq.txt", {"LABEL", "CAPTION", "PATH"})
        self.t_eval = {1: t("evaluate_language.txt", {"QUESTION", "CHOICES"}, images=False),
                       2: t("evaluate_caption.txt", {"CAPTION", "QUESTION", "CHOICES"}, images=False)}
        self.t_reflect = t("reflect.txt", {"SEEN", "QUESTION", "CHOICES", "REASONING"}, images=False)
        self.t_rewrite = t("rewrite.txt", {"GOAL", "CAPTION", "PATH", "QUESTION", "CHOICES", "ANSWER", "STRATEGY",
                                           "REFUSED"}, images=False)
        self.t_check = {1: t("check_language.txt", {"ORIGINAL_QUESTION", "ORIGINAL_ANSWER", "QUESTION", "CHOICES",
                                                    "ANSWER"}, images=False),
                        2: t("check_caption.txt", {"PATH", "QUESTION", "CHOICES", "ANSWER"}, images=False)}
        self.schemas = {"path": path_schema(), "confirm": confirm_schema(), "mcq": mcq_schema(), "reflect": reflect_schema(),
                        "rewrite": rewrite_schema(), "check": check_schema()}
        self.roles = self._roles(roles)
        accounting = next(iter(self.roles.values())).engine.accounting if self.roles else None
        for role in self.roles.values():  # one budget and one account for the run, whichever servers it calls
            role.engine.accounting = accounting
        self.errors: list[dict] = []
        self._context: dict[str, dict] = {}  # question id -> what its prompts need
        self._papers: dict[str, str] = {}

    def _roles(self, roles: dict[str, Role]) -> dict[str, Role]:
        """One role per step (its stage name and reply parser), on the engine of the model that takes it."""
        parsers = {"path": json_reply(self.schemas["path"]), "confirm": json_reply(self.schemas["confirm"]),
                   "mcq": json_reply(self.schemas["mcq"], lambda v: check_options(v["step3_options"])),
                   "reflect": json_reply(self.schemas["reflect"]),
                   "rewrite": json_reply(self.schemas["rewrite"], lambda v: check_options(v["step2_options"])),
                   "check": json_reply(self.schemas["check"]), "evaluate": read_choice}
        return {step: Role(roles[model].engine, step, parsers[step]) for step, model in STEP_ROLE.items()
                if model in roles}

    # ---- inputs
    def _terms(self, keywords) -> list[str]:
        if keywords is None:
            terms = self.prompts.terms("vocabulary.txt")
        else:
            try:
                lines = Path(keywords).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"--keywords: cannot read {keywords}: {exc}") from None
            terms = [s for s in (line.strip() for line in lines) if s and not s.startswith("#")]
            if not terms:
                raise InputError(f"--keywords: {keywords} holds no terms")
        return terms

    def _metadata(self, path) -> dict[str, dict]:
        rows: dict[str, dict] = {}
        for line, row, problem in iter_jsonl(Path(path), "paper metadata"):
            if problem is None and not (isinstance(row, dict) and isinstance(row.get("pdf"), str)):
                problem = "a metadata row needs pdf (the file name), with published and categories"
            if problem is not None:
                raise InputError(f"{path}:{line}: {problem}")
            rows[row["pdf"]] = row
        return rows

    def _figures(self) -> list[dict]:
        path = self.harvest / "figures.jsonl"
        if not path.is_file():
            raise InputError(f"{self.harvest} holds no figures.jsonl: give the output folder of benchmint harvest")
        rows = []
        for line, row, problem in iter_jsonl(path, "figure records"):
            if problem is None and not (isinstance(row, dict) and all(k in row for k in
                                                                       ("pdf", "page", "label", "caption"))):
                problem = "a figure record needs pdf, page, label and caption"
            if problem is not None:
                self.errors.append({"kind": "bad_figure", "file": str(path), "line": line, "message": problem})
                continue
            rows.append({**row, "line": line})
            if self.cfg.limit is not None and len(rows) >= self.cfg.limit:
                break
        return rows

    def found_terms(self, text: str) -> list[str]:
        """The vocabulary's terms in ``text``, as whole words, case-insensitively, in the vocabulary's order."""
        return [t for t in self.terms if re.search(r"(?<!\w)" + re.escape(t) + r"(?!\w)", text, re.I)]

    def select(self, fig: dict) -> tuple[str | None, str, list[str]]:
        """(reason it is left out or None, detail, the terms found)."""
        terms = self.found_terms(f"{fig['caption']}\n{fig.get('discussion') or ''}")
        if len(terms) < self.cfg.min_terms:
            return "no_terms", f"{len(terms)} vocabulary terms, fewer than --min-terms {self.cfg.min_terms}", terms
        cfg = self.cfg
        if cfg.date_from or cfg.date_to or cfg.categories:
            # a metadata row names its PDF by the path the harvest was given or by file name
            known = self.metadata.get(fig["pdf"]) or self.metadata.get(Path(fig["pdf"]).name, {})
            meta = {**known, **{k: fig[k] for k in ("published", "categories")
                                                              if k in fig}}
            if "published" not in meta and (cfg.date_from or cfg.date_to) or \
                    "categories" not in meta and cfg.categories:
                return "no_metadata", f"no published date or categories for {fig['pdf']}", terms
            if cfg.date_from or cfg.date_to:
                try:
                    day = _date(meta["published"], f"published date of {fig['pdf']}")
                except ValueError as exc:  # one paper's bad date leaves its figures out, not the run
                    return "no_metadata", str(exc), terms
                if (cfg.date_from and day < _date(cfg.date_from, "--from")) or \
                        (cfg.date_to and day > _date(cfg.date_to, "--to")):
                    return "outside_dates", f"published {day}, outside {cfg.date_from} .. {cfg.date_to}", terms
            if cfg.categories:
                cats = meta["categories"] if isinstance(meta["categories"], list) else [meta["categories"]]
                if not set(cats) & set(cfg.categories):
                    return "other_category", f"categories {cats}, none of {list(cfg.categories)}", terms
        return None, "", terms

    def _pdf(self, name: str) -> Path | None:
        return self.pdfs.find(name)

    def _crop(self, pdf: str, page_number: int, box: list[float]) -> dict:
        return save_crop(self.out, pdf, page_number, box)

    def evidence(self, qid: str, steps: list[dict]) -> list[list[dict]]:
        """Per step, the context's sentences that match it best (BM25 over caption and discussion, and the
        paper's whole text with ``paper_text``)."""
        from benchmint.generate.evidence import BM25, sentences

        c = self._context[qid]
        paper = self._paper(c["pdf"]) if self.cfg.paper_text else None
        index = BM25(sentences(c["caption"], c["discussion"], paper))
        return [[{"sentence": s, "score": score} for s, score in index.top(step["statement"], EVIDENCE_SENTENCES)]
                for step in steps]

    def _crops(self, ledger: Ledger, candidates: list[tuple[dict, Path, list[str]]]) -> list[dict]:
        """Each figure body's 300-DPI crop, as ledger units: a rerun renders none again."""
        from benchmint.run import SerialExecutor

        units = []
        for fig, pdf, _ in candidates:
            box = [round(float(v), 3) for v in fig["body_box"]]
            key = content_key(dumps(["crop", fig["pdf"], os.path.getsize(pdf), fig["page"], box]).encode("utf-8"))
            units.append(Unit(key, (str(pdf), fig["page"], box), f"{fig['pdf']} p{fig['page']} {fig['label']}"))
        results, _ = run_units(ledger, units, self._crop, SerialExecutor(), desc="generate matvqa: crops")
        return results

    def _paper(self, pdf: str) -> str:
        """A PDF's text, page by page (one reading per paper and run)."""
        if pdf not in self._papers:
            from benchmint.pdf.crop import open_page

            doc, _ = open_page(pdf, 1)
            try:
                self._papers[pdf] = "\n".join(page.get_text() for page in doc)
            finally:
                doc.close()
        return self._papers[pdf]

    # ---- requests
    def _request(self, step: str, template, values: dict, image: bytes | None = None, schema=None):
        from benchmint.models import ChatRequest, Message

        images = [TemplateImage(image, "image/png")] if image is not None else []
        parts = _parts(template.render(values, images), self.cfg.crop_max_side)
        model = {"gen": self.cfg.gen_model, "eval": self.cfg.eval_model,
                 "checker": self.cfg.checker_model}[STEP_ROLE[step]]
        content = "".join(parts) if all(isinstance(p, str) for p in parts) else parts
        return ChatRequest(model, (Message("user", content),), self.cfg.temperature, max_tokens=self.cfg.max_tokens,
                           seed=self.cfg.seed, schema=schema or self.schemas.get(step), schema_name=step)

    def _unit(self, step: str, request, ctx: dict) -> Unit:
        where = {k: ctx.get(k) for k in ("id", "stage", "t", "f")}
        key = content_key(self.roles[step].engine.key(request).encode("ascii"), {"step": step, **where})
        return Unit(key, (step, request, {**ctx, "step": step}),
                    f"{ctx['id']} {step} stage {ctx.get('stage', 0)} t{ctx.get('t', 0)} f{ctx.get('f', 0)}")

    def _path_unit(self, qid: str) -> Unit:
        c = self._context[qid]
        values = {"LABEL": c["label"], "CAPTION": c["caption"], "CONTEXT": c["discussion"] or "(none found)",
                  "TERMS": ", ".join(c["terms"]) or "(none)"}
        return self._unit("path", self._request("path", self.t_path, values), {"id": qid})

    def _evaluate(self, base: dict, stage: int, version: dict, first: dict, t: int, f: int) -> Unit:
        values = {"QUESTION": version["question"], "CHOICES": choices(version["options"]),
                  "CAPTION": self._context[base["id"]]["caption"]}
        if stage == 1:
            del values["CAPTION"]
        ctx = {"id": base["id"], "path": base["path"], "stage": stage, "t": t, "f": f, "version": version,
               "first": first}
        return self._unit("evaluate", self._request("evaluate", self.t_eval[stage], values), ctx)

    def _rewrite(self, ctx: dict, strategy: str, refused: dict | None) -> Unit:
        qid, stage, version = ctx["id"], ctx["stage"], ctx["version"]
        goal = ("Keep its meaning and its correct answer: only the wording and the distractors may change."
                if stage == 1 else "It may change a great deal, but it must test the same reasoning path, and its "
                                   "answer must need the figure itself, not its caption.")
        note = ""
        if refused is not None:  # the refusal makes the request, and so the reply, differ from the refused one's
            note = (f"\nA rewrite was refused: {refused['reason']}\nThe refused rewrite: "
                    f"{refused['question']} {choices(refused['options'])} (correct: {refused['answer']})\n")
        values = {"GOAL": goal, "CAPTION": self._context[qid]["caption"], "PATH": ctx["path"],
                  "QUESTION": version["question"], "CHOICES": choices(version["options"]),
                  "ANSWER": str(version["answer"]), "STRATEGY": strategy, "REFUSED": note}
        return self._unit("rewrite", self._request("rewrite", self.t_rewrite, values),
                          {**_carry(ctx), "strategy": strategy})

    def ends_stage(self, result: dict) -> bool:
        """Whether a final result of a stage's step is the stage's last: an unusable reply, an evaluation that
        is wrong or at the bound of accepted rewrites, or the refusal that reaches the bound of refused ones."""
        if result.get("stage") not in STAGES or result.get("retry"):
            return False
        if "value" not in result:
            return True
        if result["step"] == "evaluate":
            return (result["value"]["answer"] != result["version"]["answer"]
                    or result["t"] >= self.cfg.max_iterations)
        if result["step"] == "check":
            return (result["value"]["step2_verdict"] == "inconsistent"
                    and result["f"] + 1 >= self.cfg.max_rewrite_failures)
        return False

    def _next(self, result: dict) -> list[Unit]:
        """The unit a step's result calls for (Algorithm 1, bounded), or none; see the module docstring."""
        step, qid = result["step"], result["id"]
        if result.get("retry"):
            return []  # the call failed: the next run asks it again
        if self.ends_stage(result):  # stage 2 starts from the version stage 1 reached
            version = result["version"]
            return [self._evaluate(result, 2, version, version, 0, 0)] if result["stage"] == 1 else []
        if "value" not in result:
            return []  # the path or the question is unusable: the figure is rejected
        value = result["value"]
        if step == "path":
            c = self._context[qid]
            evidence = self.evidence(qid, value["steps"])
            asked = [i for i, e in enumerate(evidence) if e]
            if len(asked) < MIN_STEPS:
                return []  # too few steps the text matches at all: the figure is rejected
            claims = "\n\n".join(f"Claim {n}: {value['steps'][i]['statement']}\n"
                                  + "\n".join(f"- {e['sentence']}" for e in evidence[i])
                                  for n, i in enumerate(asked, 1))
            request = self._request("confirm", self.t_confirm, {"CLAIMS": claims}, schema=confirm_schema(len(asked)))
            return [self._unit("confirm", request, {"id": qid, "steps": value["steps"], "evidence": evidence,
                                                    "asked": asked})]
        if step == "confirm":
            kept = supported_steps(result)
            if kept is None or len(kept) < MIN_STEPS:
                return []
            c = self._context[qid]
            path = path_text(kept)
            values = {"LABEL": c["label"], "CAPTION": c["caption"], "PATH": path}
            image = None if self.cfg.text_only else (self.out / c["png"]).read_bytes()
            return [self._unit("mcq", self._request("mcq", self.t_mcq, values, image), {"id": qid, "path": path})]
        if step == "mcq":
            version = {"question": value["step2_question"].strip(),
                       "options": [o.strip() for o in value["step3_options"]], "answer": value["step4_answer"]}
            return [self._evaluate(result, 1, version, version, 0, 0)]
        if step == "evaluate":  # right, below the bound: reflect on how
            version = result["version"]
            seen = "" if result["stage"] == 1 else ", from its caption alone"
            values = {"SEEN": seen, "QUESTION": version["question"], "CHOICES": choices(version["options"]),
                      "REASONING": value["text"]}
            return [self._unit("reflect", self._request("reflect", self.t_reflect, values), _carry(result))]
        if step == "reflect":
            return [self._rewrite(result, value["strategy"], None)]
        if step == "rewrite":
            new = {"question": value["step1_question"].strip(),
                   "options": [o.strip() for o in value["step2_options"]], "answer": value["step3_answer"]}
            first = result["first"]
            if result["stage"] == 1:  # the same meaning as the stage's first version
                values = {"ORIGINAL_QUESTION": f"{first['question']}\n{choices(first['options'])}",
                          "ORIGINAL_ANSWER": f"({first['answer']}) {first['options'][first['answer'] - 1]}"}
            else:  # the same reasoning path
                values = {"PATH": result["path"]}
            values.update(QUESTION=new["question"], CHOICES=choices(new["options"]),
                          ANSWER=f"({new['answer']}) {new['options'][new['answer'] - 1]}")
            ctx = {**_carry(result), "strategy": result["strategy"], "new": new}
            return [self._unit("check", self._request("check", self.t_check[result["stage"]], values), ctx)]
        # check, below the bound of refusals
        if value["step2_verdict"] == "consistent":
            return [self._evaluate(result, result["stage"], result["new"], result["first"], result["t"] + 1,
                                   result["f"])]
        refused = {**result["new"], "reason": value["step1_reason"]}
        return [self._rewrite({**result, "f": result["f"] + 1}, result["strategy"], refused)]

    # ---- reading a question's chain back
    def outcome(self, chain: list[dict]) -> dict:
        """The raw version and each stage's code and final version; ``complete`` when both stages ended."""
        out: dict[str, Any] = {"complete": False}
        last = chain[-1] if chain else None
        if last is None or last.get("retry"):
            out["code"] = CALL_FAILED
            return out
        steps = {r["step"]: r for r in chain if r["step"] in ("path", "confirm", "mcq")}
        if "value" not in steps["path"]:
            out["code"] = GENERATOR_FAILED
            return out
        if "confirm" not in steps:  # too few of the path's steps match the text, or the check was not asked yet
            out["code"] = CALL_FAILED if self._next(steps["path"]) else PATH_UNSUPPORTED
            return out
        kept = supported_steps(steps["confirm"])
        if kept is None:
            out["code"] = EVIDENCE_FAILED
            return out
        if len(kept) < MIN_STEPS:
            out["code"] = PATH_UNSUPPORTED
            return out
        if "mcq" not in steps:
            out["code"] = CALL_FAILED
            return out
        if "value" not in steps["mcq"]:
            out["code"] = GENERATOR_FAILED
            return out
        out.update(code=RAW, task=steps["mcq"]["value"]["step1_task"], path=kept)
        out["raw"] = next((r["version"] for r in chain if r.get("stage") == 1), None)
        for stage in STAGES:
            rows = [r for r in chain if r.get("stage") == stage]
            if not rows or not self.ends_stage(rows[-1]):
                return out  # not finished: the next run goes on
            end = rows[-1]
            refused = end["f"] + (1 if end["step"] == "check" and "value" in end else 0)
            out[f"stage{stage}"] = {"code": _stage_code(end), "version": end["version"], "rewrites": end["t"],
                                    "refused": refused,
                                    "evaluations": sum(1 for r in rows if r["step"] == "evaluate")}
        out["complete"] = True
        return out

    # ---- the whole run
    def run(self) -> MatVQAResult:
        self.out.mkdir(parents=True, exist_ok=True)
        figures = self._figures()
        rejected: list[dict] = []
        figure_codes: list[str] = []
        records: list[dict] = []
        kept: list[tuple[str, dict]] = []
        candidates: list[tuple[dict, Path, list[str]]] = []
        for fig in figures:
            ref = {"pdf": fig["pdf"], "page": fig["page"], "label": fig["label"]}
            reason, detail, terms = self.select(fig)
            if reason is None and not fig.get("body_box"):
                reason, detail = "no_body", "the harvest found no figure body to crop"
            pdf = self._pdf(fig["pdf"]) if reason is None else None
            if reason is None and pdf is None:
                reason, detail = "pdf_not_found", f"{fig['pdf']} is not under {self.pdf_dir}"
            if reason is not None or pdf is None:
                rejected.append({"stage": "select", "reason": reason, "figure": ref, "detail": detail})
                figure_codes.append(str(reason))
                records.append({"line": fig["line"], **ref, "status": "rejected", "reason": reason, "terms": terms})
                continue
            candidates.append((fig, pdf, terms))
        with Ledger(self.out / LEDGER_NAME, "generate-matvqa") as ledger:
            for (fig, pdf, terms), crop in zip(candidates, self._crops(ledger, candidates)):
                ref = {"pdf": fig["pdf"], "page": fig["page"], "label": fig["label"]}
                if "error" in crop:
                    rejected.append({"stage": "crop", "reason": "crop_failed", "figure": ref, "detail": crop["error"]})
                    figure_codes.append("crop_failed")
                    records.append({"line": fig["line"], **ref, "status": "rejected", "reason": "crop_failed",
                                    "terms": terms})
                    continue
                qid = "matvqa-" + hashlib.sha256(dumps([fig["pdf"], fig["page"], fig["label"]]).encode()).hexdigest()[:16]
                self._context[qid] = {"label": fig["label"], "caption": fig["caption"],
                                      "discussion": fig.get("discussion"), "terms": terms, "png": crop["png"],
                                      "ref": ref, "pdf": str(pdf)}
                kept.append((qid, fig))
                records.append({"line": fig["line"], **ref, "status": "question", "id": qid, "terms": terms,
                                "crop": crop["png"]})
            firsts = [self._path_unit(qid) for qid, _ in kept]
            run_units(ledger, firsts, lambda outcome, ctx: call_result(outcome, **ctx), RoleExecutor(self.roles),
                      desc="generate matvqa", progress=self.cfg.progress,
                      then=lambda unit, result: self._next(result))
            sets, trace, codes = self._collect(ledger, firsts, rejected, figure_codes)
        return self._finish(figures, records, sets, rejected, trace, codes, figure_codes)

    def _collect(self, ledger: Ledger, firsts: list[Unit], rejected: list[dict],
                 figure_codes: list[str]) -> tuple[dict[str, list[dict]], list[dict], dict[int, list[str]]]:
        sets: dict[str, list[dict]] = {name: [] for name in SETS}
        trace: list[dict] = []
        codes: dict[int, list[str]] = {1: [], 2: []}
        for unit in firsts:
            qid = unit.args[2]["id"]
            ctx = self._context[qid]
            chain = read_chain(ledger, unit, self._next)
            out = self.outcome(chain)
            trace.append({"id": qid, "figure": ctx["ref"], "outcome": {k: v for k, v in out.items()
                                                                      if k in ("code", "complete")},
                          "steps": [{k: v for k, v in r.items() if k != "cached"} for r in chain]})
            last = chain[-1] if chain else {}
            if out["complete"]:
                figure_codes.append(RAW)
                for stage in (1, 2):
                    codes[stage].append(out[f"stage{stage}"]["code"])
                for name, version in (("raw", out["raw"]), ("lanrem", out["stage1"]["version"]),
                                      ("caprem", out["stage2"]["version"])):
                    sets[name].append(self._item(qid, version, out))
            elif out["code"] in (GENERATOR_FAILED, EVIDENCE_FAILED, PATH_UNSUPPORTED):
                figure_codes.append(out["code"])
                row = {"stage": last.get("step"), "reason": out["code"].lower(), "id": qid, "figure": ctx["ref"]}
                if out["code"] == PATH_UNSUPPORTED:
                    row["detail"] = f"fewer than {MIN_STEPS} steps of the reasoning path are supported by the text"
                elif "value" in last:
                    row["detail"] = "the verdicts do not match the steps asked about"
                else:
                    row.update(detail=last.get("error"), words=last.get("words"))
                rejected.append(row)
            else:
                figure_codes.append(CALL_FAILED)
                self.errors.append({"kind": "model_call", "id": qid, "stage": last.get("step", "path"),
                                    "cause": last.get("cause"), "message": last.get("error", "not asked yet")})
        return sets, trace, codes

    def _item(self, qid: str, version: dict, out: dict) -> dict:
        ctx = self._context[qid]
        meta = {"reasoning_path": out["path"], "terms": ctx["terms"],
                "source": {**ctx["ref"], "caption": ctx["caption"]},
                "stage1": {k: v for k, v in out["stage1"].items() if k != "version"},
                "stage2": {k: v for k, v in out["stage2"].items() if k != "version"},
                "models": {"gen": self.cfg.gen_model, "eval": self.cfg.eval_model, "checker": self.cfg.checker_model}}
        return {"id": qid, "question": version["question"], "options": list(version["options"]),
                "answer": version["answer"], "image": ctx["png"], "task": out["task"], "meta": meta}

    def _finish(self, figures, records, sets, rejected, trace, codes, figure_codes) -> MatVQAResult:
        engines: dict[str, tuple[Any, list[str]]] = {}
        for name, role in sorted(self.roles.items()):
            engines.setdefault(role.engine.endpoint.base_url, (role.engine, []))[1].append(name)
        first_engine = next(iter(engines.values()))[0] if engines else None
        settings = asdict(self.cfg)
        del settings["progress"]
        run = {
            "benchmark": "matvqa", "harvest": str(self.harvest), "pdfs": str(self.pdf_dir),
            "settings": settings, "calls_bound_per_figure": calls_bound(self.cfg), "prompts": self.prompts.record(),
            "vocabulary": {"terms": len(self.terms)},
            "counts": {"figures": len(figures), "items": len(sets["caprem"]), "rejected": len(rejected),
                       "errors": len(self.errors)},
            "figures": code_counts(figure_codes, FIGURE_CODES),
            "stage1": code_counts(codes[1], STAGE_CODES), "stage2": code_counts(codes[2], STAGE_CODES),
            "calls": first_engine.accounting.summary() if first_engine is not None else None,
            "endpoints": [{"base_url": url, "roles": names, "cache": e.cache.stats(),
                           "structured_modes": e.summary()["structured_modes"]}
                          for url, (e, names) in sorted(engines.items())],
        }
        write_jsonl(self.out / "figures.jsonl", sorted(records, key=lambda r: r["line"]))
        for name, file in SETS.items():
            write_jsonl(self.out / file, sets[name])
        write_outputs(self.out, sets["caprem"], rejected, trace, self.errors, run)
        return MatVQAResult(self.out, run, len(sets["caprem"]), len(rejected), list(self.errors))


def supported_steps(confirm: dict) -> list[dict] | None:
    """The path's steps the checker found supported (a step without evidence is not); None when its reply is
    unusable or does not give one verdict per step asked about."""
    if "value" not in confirm or len(confirm["value"]["verdicts"]) != len(confirm["asked"]):
        return None
    verdicts = dict(zip(confirm["asked"], confirm["value"]["verdicts"]))
    return [s for i, s in enumerate(confirm["steps"]) if verdicts.get(i) == "supported"]


def _carry(ctx: dict) -> dict:
    """What every unit of a stage passes on: the question, its path, the stage, its counters and versions."""
    return {k: ctx[k] for k in ("id", "path", "stage", "t", "f", "version", "first")}


def _stage_code(end: dict) -> str:
    """The code of a stage whose last result is ``end``."""
    step = end["step"]
    if "value" not in end:
        return {"evaluate": "EVALUATOR_FAILED", "reflect": "REFLECTOR_FAILED", "rewrite": "REWRITER_FAILED",
                "check": "CHECKER_FAILED"}[step]
    if step == "check":
        return FAIL_REWRITE
    # an evaluation ends the stage: wrong (no shortcut left), or right at the bound of accepted rewrites
    if end["value"]["answer"] != end["version"]["answer"]:
        return NO_SHORTCUT if end["t"] == 0 else REWRITTEN
    return FAIL_ITERATIONS


def generate(harvest_dir, out_dir, cfg: MatVQAConfig, roles: dict[str, Role], pdf_dir=None, prompts=None,
             keywords=None, metadata=None) -> MatVQAResult:
    """Run MatVQA's generation over a harvest folder; see the module docstring."""
    return MatVQAGenerator(harvest_dir, out_dir, cfg, roles, pdf_dir, prompts, keywords, metadata).run()
