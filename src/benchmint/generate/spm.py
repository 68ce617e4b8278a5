"""SPM-Bench's questions from a harvest (spm-bench.txt §2.2-2.4): llbox, Q&A and the advisory loop.

Stages, each a set of keyed units in the run's ledger (``out/ledger.sqlite``):

1. **llbox** (VLM, one call per candidate page): the harvest's 1024-px page thumbnail and the page's captions go to
   the VLM, which returns for each figure one box around its visual panels, the panels' boxes and a modality
   label (schema-checked JSON). Boxes are read in the convention ``box_format`` names: ``norm1000``
   (``[x0, y0, x1, y1]`` in [0, 1000], the paper's), ``pixels`` (thumbnail pixels, Qwen2.5-VL's) or ``gemini``
   (``[ymin, xmin, ymax, xmax]`` in [0, 1000]). The harvest's own caption-body pairing is the fallback (no VLM,
   a failed reply, a figure the VLM missed, a box that does not map) and the cross-check: a VLM box whose IoU with
   the harvest's body is below ``min_iou`` keeps ``low_iou: true`` in its record. A figure with fewer panels
   than ``min_panels`` (the VLM's panel boxes, else the harvest's count) is rejected with that reason.
2. **crop** (local): the box mapped to the page and rendered at 300 DPI (``benchmint.pdf.geometry``); the PNG is
   named by its content hash, so identical crops are one file and one question, and every figure that gave it
   keeps its record (``figures.jsonl``).
3. **Q&A and the advisory loop**: the generator gets the crop, the caption, the discussion and the TECH-LIB and
   ANALYSIS-LIB term lists, and returns a hidden reasoning path, a stem with six options A-F, the correct set, a
   rubric and the item's labels (taxonomy.json); the advisor scores the draft on six dimensions (critique.json)
   and passes it or asks for a revision; the generator revises, until a pass or ``max_rounds`` audits. Each call
   is a unit; a round's next call is the follow-up unit of its result, so a killed loop resumes at the round it
   reached. Outcome codes per question: ``CODES``.

   A question the checks refuse though it has the schema's shape (two options the same, a letter given twice in
   the correct set: ``qa_problem``) is not asked again as it was, which at temperature 0 brings the same reply
   back: the generator is asked to repair it, with the reason and the refused JSON in the prompt (``repair.txt``)
   and its own seed, ``max_repairs`` times at most (stage ``repair`` in run.json); still refused, the question is
   ``GENERATOR_FAILED`` with the reason. The schema itself holds every rule it can express, so servers that
   enforce it by grammar cannot break those: six options, letters A-F, a non-empty correct set, and each label
   from its list (the Bloom level and the advisor's scores as enums of integers, which grammars enforce where
   ``minimum``/``maximum`` are not).

With ``context_tokens`` the discussion a prompt carries is cut to that many tokens, the sentences most relevant
to the figure first (``evidence.bounded_discussion``); by default it goes whole, as harvest bounded it. Replies
are bounded per role (``vlm_max_tokens``, ``gen_max_tokens``, ``advisor_max_tokens``; each defaults to
``max_tokens``).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
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
from benchmint.io import InputError, dumps, iter_jsonl
from benchmint.run import Ledger, SerialExecutor, Unit, content_key, run_units
from benchmint.run.runner import LEDGER_NAME

BOX_FORMATS = ("norm1000", "pixels", "gemini")
LETTERS = "ABCDEF"
# Question outcomes (run.json "questions"): passed at the first audit, passed after k revisions, still failing at
# the --max-rounds bound, the generator's or the advisor's reply unusable through its answer attempts.
PASSED_FIRST = "PASSED_FIRST"
PASSED_REVISED = "PASSED_REVISED"
REJECTED_AT_BOUND = "REJECTED_AT_BOUND"
GENERATOR_FAILED = "GENERATOR_FAILED"
ADVISOR_FAILED = "ADVISOR_FAILED"
CALL_FAILED = "CALL_FAILED"  # a call failed (HTTP, timeout, budget): not final, the next run asks again
CODES = (PASSED_FIRST, PASSED_REVISED, REJECTED_AT_BOUND, GENERATOR_FAILED, ADVISOR_FAILED, CALL_FAILED)
GEN_STEPS = ("draft", "revise", "repair")  # the generator's steps: each reply is checked before its audit
# Figure outcomes (run.json "figures").
FIGURE_CODES = ("QUESTION", "DUPLICATE_CROP", "too_few_panels", "no_box", "pdf_not_found", "crop_failed",
                "llbox_call_failed")


@dataclass(frozen=True)
class SPMConfig:
    gen_model: str
    advisor_model: str
    vlm_model: str | None = None  # None: the harvest's boxes only
    box_format: str = "norm1000"
    min_panels: int = 4  # spm-bench §2.2: figures of at least four panels
    min_iou: float = 0.5
    max_rounds: int = 3
    max_repairs: int = 2  # repairs of a question the checks refuse, each asked with the reason
    temperature: float | None = 0.0
    max_tokens: int | None = 4096
    vlm_max_tokens: int | None = None  # None: max_tokens
    gen_max_tokens: int | None = None
    advisor_max_tokens: int | None = None
    context_tokens: int | None = None  # None: the discussion whole
    pass_score: int | None = None  # None: critique.json's
    crop_max_side: int = 2048  # the crop's longest side as the generator and advisor see it
    text_only: bool = False  # the generator and advisor get no image (a text-only model): caption and discussion
    seed: int | None = None
    limit: int | None = None
    progress: bool = False

    def reply_tokens(self, role: str) -> int | None:
        own = {"vlm": self.vlm_max_tokens, "gen": self.gen_max_tokens, "advisor": self.advisor_max_tokens}[role]
        return own if own is not None else self.max_tokens

    def __post_init__(self) -> None:
        if self.box_format not in BOX_FORMATS:
            raise ValueError(f"--box-format must be one of {', '.join(BOX_FORMATS)}, got {self.box_format!r}")
        if self.min_panels < 1 or self.max_rounds < 1:
            raise ValueError("--min-panels and --max-rounds must be at least 1")
        if self.max_repairs < 0:
            raise ValueError(f"--max-repairs must be at least 0, got {self.max_repairs}")
        if self.context_tokens is not None and self.context_tokens < 1:
            raise ValueError(f"--context-tokens must be at least 1, got {self.context_tokens}")
        if not 0.0 <= self.min_iou <= 1.0:
            raise ValueError(f"--min-iou must lie in [0, 1], got {self.min_iou}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be at least 1, got {self.limit}")


SPMResult = GenerateResult  # the flow's one result shape


# ---------------------------------------------------------------------------------------------------------------
# Schemas and their checks


def _box_schema() -> dict:
    return {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4}


def llbox_schema(modalities: list[str]) -> dict:
    figure = {"type": "object", "additionalProperties": False, "required": ["label", "box", "panels", "modality"],
              "properties": {"label": _text(), "box": _box_schema(),
                             "panels": {"type": "array", "items": _box_schema()},
                             "modality": {"type": "string", "enum": modalities}}}
    return {"type": "object", "additionalProperties": False, "required": ["figures"],
            "properties": {"figures": {"type": "array", "items": figure}}}


def _integers(values: list[int]) -> dict:
    # An enum, not minimum/maximum: llama.cpp's schema-to-grammar turns a bounded integer into any integer, and an
    # enum into exactly these.
    return {"type": "integer", "enum": list(values)}


def _text() -> dict:
    # No maxLength: llama.cpp turns it into a grammar nested as deep as the bound, which its parser cannot read
    # for a few hundred characters (and its server dies); the reply-token bound limits the length instead.
    return {"type": "string", "minLength": 1}


# The generator's reply, in the order it is to be written. Requests hold their schema with sorted keys, and
# servers that enforce a schema write the properties in the schema's order, so the names are numbered: the
# hidden reasoning path first (spm-bench §2.3: it anchors the stem), the correct set only after the options.
QA_STEPS = ("step1_reasoning", "step2_question", "step3_options", "step4_answer", "step5_rubric", "step6_labels")
LABELS = ("domain", "bloom_level", "question_type", "level", "discipline", "technique", "topic")


def qa_schema(tax: dict) -> dict:
    rubric = {"type": "object", "additionalProperties": False, "required": ["competency", "criterion"],
              "properties": {"competency": _text(), "criterion": _text()}}
    labels = {"type": "object", "additionalProperties": False, "required": list(LABELS),
              "properties": {"domain": {"type": "string", "enum": tax["domains"]},
                             "bloom_level": _integers(sorted(int(k) for k in tax["bloom_levels"])),
                             "question_type": {"type": "string", "enum": sorted(tax["question_types"])},
                             "level": {"type": "string", "enum": tax["levels"]},
                             "discipline": {"type": "string", "enum": tax["disciplines"]},
                             "technique": {"type": "string", "enum": tax["techniques"]},
                             "topic": _text()}}
    steps = (_text(), _text(), {"type": "array", "items": _text(), "minItems": 6, "maxItems": 6},
             {"type": "array", "items": {"type": "string", "enum": list(LETTERS)}, "minItems": 1, "maxItems": 6},
             {"type": "array", "items": rubric, "minItems": 1, "maxItems": 5}, labels)
    return {"type": "object", "additionalProperties": False, "required": list(QA_STEPS),
            "properties": dict(zip(QA_STEPS, steps))}


def question_fields(value: dict) -> dict:
    """A generator's reply with plain names: reasoning, question, options, answer, rubric and the labels."""
    plain = {step.split("_", 1)[1]: value[step] for step in QA_STEPS[:5]}
    return {**plain, **value["step6_labels"]}


def critique_schema(crit: dict) -> dict:
    low, high = crit["scale"]
    names = [d["name"] for d in crit["dimensions"]]
    score = _integers(list(range(low, high + 1)))
    return {"type": "object", "additionalProperties": False, "required": ["scores", "critiques", "verdict"],
            "properties": {
                "scores": {"type": "object", "additionalProperties": False, "required": names,
                           "properties": dict.fromkeys(names, score)},
                "critiques": {"type": "object", "additionalProperties": False, "required": names,
                              "properties": {n: {"type": "string"} for n in names}},
                "verdict": {"type": "string", "enum": ["pass", "revise"]}}}


def check_llbox(value: dict) -> None:
    for i, fig in enumerate(value["figures"]):
        for j, box in enumerate([fig["box"], *fig["panels"]]):
            where = f"figures[{i}].box" if j == 0 else f"figures[{i}].panels[{j - 1}]"
            if any(v < 0 for v in box) or box[2] <= box[0] or box[3] <= box[1]:
                raise ValueError(f"{where} {box} is not an ordered box of non-negative coordinates")


def qa_problem(value: dict) -> str | None:
    """Why a schema-valid question cannot be used, in words the generator is shown when asked to repair it, or
    None. (Six options, letters A-F and a non-empty correct set are the schema's.)"""
    seen: dict[str, str] = {}
    for letter, option in zip(LETTERS, value["step3_options"]):
        text = " ".join(option.split()).casefold()
        if text in seen:
            return f"options {seen[text]} and {letter} are the same ({option.strip()!r}); all six must differ"
        seen[text] = letter
    answer = value["step4_answer"]
    repeated = sorted({a for a in answer if answer.count(a) > 1})
    if repeated:
        return f"the correct set names {', '.join(repeated)} more than once; name each correct letter once"
    return None


# ---------------------------------------------------------------------------------------------------------------
# Boxes


def figure_key(label: str) -> str:
    """A caption label reduced to its number ("Figure 2", "FIG. 2:", "Fig 2" -> "2"; "Figure S1" -> "s1")."""
    text = re.sub(r"^\s*(extended\s+data\s+)?(figure|fig\.?)\s*", "", label.strip(), flags=re.I)
    return re.sub(r"[\s.:]+$", "", text).casefold()


def to_thumbnail_box(box: list[float], box_format: str) -> tuple[list[float], str]:
    """A VLM box as ``benchmint.pdf.geometry`` takes it: (x0, y0, x1, y1) and its units."""
    if box_format == "gemini":
        ymin, xmin, ymax, xmax = box
        return [xmin, ymin, xmax, ymax], "norm1000"
    return list(box), box_format


def iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


# ---------------------------------------------------------------------------------------------------------------
# The run


def _parts(rendered, max_side: int | None) -> tuple:
    """Template parts as message parts (images by content, sent at ``max_side``)."""
    from benchmint.models import ImagePart

    return tuple(p.text if isinstance(p, TextPart) else ImagePart(p.data, max_side) for p in rendered)


def _mime(data: bytes) -> str:
    return "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"


class SPMGenerator:
    """One ``generate spm`` run over a harvest folder; ``roles`` maps "vlm", "gen", "advisor" to their ``Role``."""

    def __init__(self, harvest_dir: str | os.PathLike, out_dir: str | os.PathLike, cfg: SPMConfig,
                 roles: dict[str, Role], pdf_dir: str | os.PathLike | None = None,
                 prompts: str | os.PathLike | None = None) -> None:
        self.harvest = Path(harvest_dir)
        self.out = Path(out_dir)
        self.cfg = cfg
        self.pdfs = HarvestPDFs(self.harvest, pdf_dir)
        self.pdf_dir = self.pdfs.folder
        self.prompts = PromptSet("spm", prompts)
        self.tax = self.prompts.data("taxonomy.json")
        self.crit = self.prompts.data("critique.json")
        self.tech_lib = ", ".join(self.prompts.terms("tech_lib.txt"))
        self.analysis_lib = ", ".join(self.prompts.terms("analysis_lib.txt"))
        self.t_llbox = self.prompts.template("llbox.txt", {"WIDTH", "HEIGHT", "CAPTIONS", "BOX_RULE", "MODALITIES"})
        self.t_qa = self.prompts.template("qa.txt", {"LABEL", "CAPTION", "DISCUSSION", "TECH_LIB", "ANALYSIS_LIB",
                                                     "DOMAINS", "BLOOM", "QUESTION_TYPES", "LEVELS", "DISCIPLINES",
                                                     "TECHNIQUES"})
        self.t_revise = self.prompts.template("revise.txt", {"LABEL", "CAPTION", "DISCUSSION", "DRAFT", "CRITIQUE"})
        self.t_repair = self.prompts.template("repair.txt", {"LABEL", "CAPTION", "DISCUSSION", "DRAFT", "REASON"})
        self.t_advise = self.prompts.template("advise.txt", {"LABEL", "CAPTION", "DISCUSSION", "DRAFT", "DIMENSIONS"})
        self.s_llbox = llbox_schema(self.tax["modalities"])
        self.s_qa = qa_schema(self.tax)
        self.s_crit = critique_schema(self.crit)
        self.dimensions = [d["name"] for d in self.crit["dimensions"]]
        low, high = self.crit["scale"]
        if cfg.pass_score is not None and not low <= cfg.pass_score <= high:
            raise ValueError(f"--pass-score must lie on critique.json's scale {low}-{high}, got {cfg.pass_score}")
        self.roles = self._with_parsers(roles)
        # One budget and one account for the run, whichever servers its roles call.
        accounting = next(iter(self.roles.values())).engine.accounting if self.roles else None
        for role in self.roles.values():
            role.engine.accounting = accounting
        self.errors: list[dict] = []
        self.repairs = {"questions": 0, "requests": 0, "fixed": 0}  # for run.json
        self._context: dict[str, dict] = {}  # question id -> what its prompts need

    def _with_parsers(self, roles: dict[str, Role]) -> dict[str, Role]:
        parsers = {"vlm": json_reply(self.s_llbox, check_llbox), "gen": json_reply(self.s_qa),
                   "advisor": json_reply(self.s_crit)}
        stages = {"vlm": "llbox", "gen": "qa", "advisor": "advise"}
        out = {name: Role(r.engine, stages[name], parsers[name]) for name, r in roles.items()}
        if "gen" in out:  # the generator's repairs, counted apart in run.json
            out["repair"] = Role(out["gen"].engine, "repair", parsers["gen"])
        return out

    # ---- inputs
    def _figures(self) -> list[dict]:
        path = self.harvest / "figures.jsonl"
        if not path.is_file():
            raise InputError(f"{self.harvest} holds no figures.jsonl: give the output folder of benchmint harvest")
        rows = []
        for line, row, problem in iter_jsonl(path, "figure records"):
            if problem is None and not (isinstance(row, dict) and all(k in row for k in
                                                                       ("pdf", "page", "label", "caption", "thumb"))):
                problem = "a figure record needs pdf, page, label, caption and thumb"
            if problem is not None:
                self.errors.append({"kind": "bad_figure", "file": str(path), "line": line, "message": problem})
                continue
            rows.append({**row, "line": line})
            if self.cfg.limit is not None and len(rows) >= self.cfg.limit:
                break
        return rows

    def _pdf(self, name: str) -> Path | None:
        return self.pdfs.find(name)

    # ---- stage 1: llbox
    def _llbox_request(self, page_figs: list[dict]):
        from benchmint.models import ChatRequest, Message
        from benchmint.models.images import inspect

        thumb = (self.harvest / page_figs[0]["thumb"]).read_bytes()
        _, w, h = inspect(thumb)
        rules = {"norm1000": "Boxes are [x0, y0, x1, y1], normalised so that the page runs from 0 to 1000 each way.",
                 "pixels": f"Boxes are [x0, y0, x1, y1] in pixels of this {w} x {h} image.",
                 "gemini": "Boxes are [ymin, xmin, ymax, xmax], normalised so that the page runs from 0 to 1000 "
                           "each way."}
        captions = "\n".join(f"- {f['label']}: {f['caption'][:300]}" for f in page_figs)
        parts = self.t_llbox.render({"WIDTH": str(w), "HEIGHT": str(h), "CAPTIONS": captions,
                                     "BOX_RULE": rules[self.cfg.box_format],
                                     "MODALITIES": ", ".join(self.tax["modalities"])},
                                    [TemplateImage(thumb, _mime(thumb))])
        assert self.cfg.vlm_model is not None  # the stage runs only with a VLM
        return ChatRequest(self.cfg.vlm_model, (Message("user", _parts(parts, None)),), self.cfg.temperature,
                           max_tokens=self.cfg.reply_tokens("vlm"), seed=self.cfg.seed, schema=self.s_llbox,
                           schema_name="llbox")

    def _llbox(self, ledger: Ledger, pages: dict[tuple, list[dict]]) -> dict[tuple, dict]:
        if self.cfg.vlm_model is None or "vlm" not in self.roles:
            return {}
        role = self.roles["vlm"]
        units = []
        for where, figs in pages.items():
            request = self._llbox_request(figs)
            key = content_key(role.engine.key(request).encode("ascii"), {"stage": "llbox", "format":
                                                                          self.cfg.box_format})
            units.append(Unit(key, ("vlm", request, {"pdf": where[0], "page": where[1]}), f"{where[0]} p{where[1]}"))
        results, _ = run_units(ledger, units, lambda outcome, ctx: call_result(outcome, **ctx),
                               RoleExecutor(self.roles), desc="generate spm: llbox", progress=self.cfg.progress)
        return dict(zip(pages, results))

    def _place(self, fig: dict, vlm: dict | None, frame) -> dict:
        """The box a figure is cropped from (page points) and where it came from, with the cross-check."""
        from benchmint.pdf.geometry import BoxError, thumbnail_to_page

        body = fig.get("body_box")
        placed: dict[str, Any] = {"box_source": "harvest", "panels": fig.get("panels")}
        if vlm is None:
            placed["note"] = "no VLM" if self.cfg.vlm_model is None else "the VLM's reply was unusable"
        else:
            found = [f for f in vlm.get("figures", []) if figure_key(f["label"]) == figure_key(fig["label"])]
            if not found:
                placed["note"] = "the VLM gave no box for this figure"
            else:
                got = found[0]
                thumb_box, units = to_thumbnail_box(got["box"], self.cfg.box_format)
                try:
                    page_box = [float(v) for v in thumbnail_to_page(thumb_box, frame, units=units)[0]]
                except (BoxError, ValueError) as exc:
                    placed["note"] = f"the VLM's box does not map to the page: {exc}"
                else:
                    placed = {"box_source": "vlm", "vlm_box": got["box"], "modality": got["modality"],
                              "panels": len(got["panels"]) or fig.get("panels"), "page_box": page_box}
                    if body:
                        overlap = iou(page_box, body)
                        placed["iou_with_harvest"] = round(overlap, 4)
                        placed["low_iou"] = overlap < self.cfg.min_iou
                    return placed
        if body:
            placed["page_box"] = [float(v) for v in body]
        return placed

    # ---- stage 2: crops
    def _crop(self, pdf: str, page_number: int, page_box: list[float]) -> dict:
        return save_crop(self.out, pdf, page_number, page_box)

    def _frames(self, pages: dict[tuple, list[dict]]) -> dict[tuple, Any]:
        from benchmint.pdf.crop import open_page
        from benchmint.pdf.geometry import PageFrame

        frames: dict[tuple, Any] = {}
        for pdf_name, number in pages:
            path = self._pdf(pdf_name)
            if path is None:
                continue
            try:
                doc, page = open_page(path, number)
            except InputError as exc:
                self.errors.append({"kind": "bad_pdf", "pdf": pdf_name, "page": number, "message": str(exc)})
                continue
            frames[(pdf_name, number)] = PageFrame.from_page(page)
            doc.close()
        return frames

    # ---- stage 3: Q&A and the advisory loop
    def _context_values(self, qid: str) -> dict[str, str]:
        c = self._context[qid]
        return {"LABEL": c["label"], "CAPTION": c["caption"], "DISCUSSION": c["discussion"] or "(none found)"}

    def _discussion(self, fig: dict) -> tuple[str | None, dict | None]:
        """The discussion the prompts carry, and how it was cut (None: whole)."""
        from benchmint.generate.evidence import bounded_discussion

        text = fig.get("discussion")
        if not text or self.cfg.context_tokens is None:
            return text, None
        kept, used, whole = bounded_discussion(text, figure_key(fig["label"]), fig["caption"],
                                               self.cfg.context_tokens)
        return kept, ({"tokens": used, "of": whole} if kept != text else None)

    def _image(self, qid: str):
        if self.cfg.text_only:
            return []
        data = (self.out / self._context[qid]["png"]).read_bytes()
        return [TemplateImage(data, "image/png")]

    def _request(self, role: str, template, values: dict, qid: str, seed: int | None = None):
        from benchmint.models import ChatRequest, Message

        parts = _parts(template.render(values, self._image(qid)), self.cfg.crop_max_side)
        text_only = all(isinstance(p, str) for p in parts)
        schema, name = (self.s_crit, "critique") if role == "advisor" else (self.s_qa, "question")
        model = self.cfg.advisor_model if role == "advisor" else self.cfg.gen_model
        message = Message("user", "".join(parts) if text_only else parts)
        return ChatRequest(model, (message,), self.cfg.temperature,
                           max_tokens=self.cfg.reply_tokens("advisor" if role == "advisor" else "gen"),
                           seed=self.cfg.seed if seed is None else seed, schema=schema, schema_name=name)

    def _draft_unit(self, qid: str) -> Unit:
        tax = self.tax
        values = {**self._context_values(qid), "TECH_LIB": self.tech_lib, "ANALYSIS_LIB": self.analysis_lib,
                  "DOMAINS": "; ".join(tax["domains"]),
                  "BLOOM": "; ".join(f"{k} {v}" for k, v in sorted(tax["bloom_levels"].items())),
                  "QUESTION_TYPES": "; ".join(f"{k} ({v})" for k, v in sorted(tax["question_types"].items())),
                  "LEVELS": ", ".join(tax["levels"]), "DISCIPLINES": "; ".join(tax["disciplines"]),
                  "TECHNIQUES": ", ".join(tax["techniques"])}
        request = self._request("gen", self.t_qa, values, qid)
        return self._unit("gen", request, {"id": qid, "step": "draft", "round": 0})

    def _unit(self, role: str, request, ctx: dict) -> Unit:
        where = {"id": ctx["id"], "step": ctx["step"], "round": ctx["round"]}
        if ctx["step"] == "repair":
            where["repair"] = ctx["repair"]
        key = content_key(self.roles[role].engine.key(request).encode("ascii"), where)
        label = f"{ctx['id']} {ctx['step']} {ctx['round']}" + (f".{ctx['repair']}" if "repair" in where else "")
        return Unit(key, (role, request, ctx), label)

    def passes(self, critique: dict) -> bool:
        bar = self.cfg.pass_score if self.cfg.pass_score is not None else self.crit["pass_score"]
        return critique["verdict"] == "pass" and min(critique["scores"].values()) >= bar

    def _next(self, result: dict) -> list[Unit]:
        """The unit a round's result calls for: the repair of a refused question, the audit of a draft, the
        revision of a failed audit, or none."""
        if "value" not in result:
            return []
        qid, step, rnd = result["id"], result["step"], result["round"]
        if step in GEN_STEPS:
            problem = qa_problem(result["value"])
            if problem is not None:
                done = result.get("repair", 0)
                if done >= self.cfg.max_repairs:
                    return []
                values = {**self._context_values(qid), "DRAFT": dumps(result["value"]), "REASON": problem}
                # Its own seed too: a server that samples may otherwise give the same words back.
                request = self._request("gen", self.t_repair, values, qid, seed=(self.cfg.seed or 0) + done + 1)
                return [self._unit("repair", request, {"id": qid, "step": "repair", "round": rnd,
                                                        "repair": done + 1, "reason": problem})]
            dims = "\n".join(f"- {d['name']}: {d['question']}" for d in self.crit["dimensions"])
            values = {**self._context_values(qid), "DRAFT": dumps(result["value"]), "DIMENSIONS": dims}
            request = self._request("advisor", self.t_advise, values, qid)
            return [self._unit("advisor", request, {"id": qid, "step": "advise", "round": rnd + 1,
                                                    "draft": result["value"]})]
        if self.passes(result["value"]) or rnd >= self.cfg.max_rounds:
            return []
        crit = result["value"]
        # In the order of critique.json: the ledger stores results with sorted keys, and the prompt (and so the
        # unit's key) must be the same whether the result was just received or read back by a resumed run.
        text = "\n".join(f"- {n}: {crit['scores'][n]}. {crit['critiques'][n]}" for n in self.dimensions)
        values = {**self._context_values(qid), "DRAFT": dumps(result["draft"]), "CRITIQUE": text}
        request = self._request("gen", self.t_revise, values, qid)
        return [self._unit("gen", request, {"id": qid, "step": "revise", "round": rnd})]

    def _outcome(self, chain: list[dict]) -> tuple[str, dict | None, int]:
        """(code, the passed version or None, audits made)."""
        audits = [r for r in chain if r["step"] == "advise" and "value" in r]
        last = chain[-1] if chain else None
        if last is None or last.get("retry"):
            return CALL_FAILED, None, len(audits)
        if "value" not in last:
            return (ADVISOR_FAILED if last["step"] == "advise" else GENERATOR_FAILED), None, len(audits)
        if last["step"] != "advise":
            if qa_problem(last["value"]) is not None:  # refused, and repaired --max-repairs times
                return GENERATOR_FAILED, None, len(audits)
            return CALL_FAILED, None, len(audits)  # the audit it calls for has not run
        if self.passes(last["value"]):
            return (PASSED_FIRST if len(audits) == 1 else PASSED_REVISED), last["draft"], len(audits)
        return REJECTED_AT_BOUND, None, len(audits)

    # ---- the whole run
    def run(self) -> SPMResult:
        self.out.mkdir(parents=True, exist_ok=True)
        figures = self._figures()
        rejected: list[dict] = []
        records: list[dict] = []
        figure_codes: list[str] = []
        pages: dict[tuple, list[dict]] = {}
        for fig in figures:
            pages.setdefault((fig["pdf"], fig["page"]), []).append(fig)
        with Ledger(self.out / LEDGER_NAME, "generate-spm") as ledger:
            usable = {where: figs for where, figs in pages.items() if self._pdf(where[0]) is not None}
            llbox = self._llbox(ledger, usable)
            frames = self._frames(usable)
            placements: list[tuple[dict, dict]] = []
            for fig in figures:
                ref = {"pdf": fig["pdf"], "page": fig["page"], "label": fig["label"]}
                where = (fig["pdf"], fig["page"])
                base = {"line": fig["line"], **ref}
                reply = llbox.get(where)
                if where not in frames:
                    reason = "pdf_not_found" if self._pdf(fig["pdf"]) is None else "crop_failed"
                    rejected.append({"stage": "llbox", "reason": reason, "figure": ref,
                                     "detail": f"{fig['pdf']} is not under {self.pdf_dir}" if reason == "pdf_not_found"
                                     else "the page could not be opened"})
                    figure_codes.append(reason)
                    records.append({**base, "status": "rejected", "reason": reason})
                    continue
                if reply is not None and reply.get("retry"):
                    self.errors.append({"kind": "model_call", "stage": "llbox", "figure": ref,
                                        "cause": reply["cause"], "message": reply["error"]})
                    figure_codes.append("llbox_call_failed")
                    records.append({**base, "status": "error", "reason": "llbox_call_failed"})
                    continue
                vlm = reply.get("value") if reply is not None else None
                placed = self._place(fig, vlm, frames[where])
                if reply is not None and "value" not in reply:
                    placed["vlm_error"] = reply["error"]
                    placed["vlm_words"] = reply.get("words")
                record = {**base, "caption": fig["caption"], **placed}
                if "page_box" not in placed:
                    rejected.append({"stage": "llbox", "reason": "no_box", "figure": ref,
                                     "detail": placed.get("note", ""), "words": placed.get("vlm_words")})
                    figure_codes.append("no_box")
                    records.append({**record, "status": "rejected", "reason": "no_box"})
                    continue
                panels = placed.get("panels") or 0
                if panels < self.cfg.min_panels:
                    rejected.append({"stage": "llbox", "reason": "too_few_panels", "figure": ref,
                                     "detail": f"{panels} panels, fewer than --min-panels {self.cfg.min_panels}"})
                    figure_codes.append("too_few_panels")
                    records.append({**record, "status": "rejected", "reason": "too_few_panels"})
                    continue
                placements.append((fig, record))
            crops = self._crops(ledger, placements)
            questions: dict[str, list[dict]] = {}
            for (fig, record), crop in zip(placements, crops):
                ref = {"pdf": fig["pdf"], "page": fig["page"], "label": fig["label"]}
                if "error" in crop:
                    rejected.append({"stage": "crop", "reason": "crop_failed", "figure": ref, "detail": crop["error"]})
                    figure_codes.append("crop_failed")
                    records.append({**record, "status": "rejected", "reason": "crop_failed"})
                    continue
                qid = f"spm-{crop['sha256'][:16]}"
                first = qid not in questions
                questions.setdefault(qid, []).append({**record, "crop": crop["png"]})
                if first:
                    text, cut = self._discussion(fig)
                    self._context[qid] = {"label": fig["label"], "caption": fig["caption"], "discussion": text,
                                          "cut": cut, "png": crop["png"]}
                figure_codes.append("QUESTION" if first else "DUPLICATE_CROP")
                records.append({**record, "status": "question" if first else "duplicate_crop", "id": qid,
                                "crop": crop["png"], "crop_sha256": crop["sha256"]})
            drafts = [self._draft_unit(qid) for qid in questions]
            run_units(ledger, drafts, lambda outcome, ctx: call_result(outcome, **ctx), RoleExecutor(self.roles),
                      desc="generate spm: questions", progress=self.cfg.progress,
                      then=lambda unit, result: self._next(result))
            items, trace, codes = self._collect(ledger, drafts, questions, rejected)
        return self._finish(figures, records, items, rejected, trace, codes, figure_codes)

    def _crops(self, ledger: Ledger, placements: list[tuple[dict, dict]]) -> list[dict]:
        units = []
        for fig, record in placements:
            pdf = str(self._pdf(fig["pdf"]))
            box = [round(v, 3) for v in record["page_box"]]
            key = content_key(dumps(["crop", fig["pdf"], os.path.getsize(pdf), fig["page"], box]).encode("utf-8"))
            units.append(Unit(key, (pdf, fig["page"], box), f"{fig['pdf']} p{fig['page']} {fig['label']}"))
        results, _ = run_units(ledger, units, self._crop, SerialExecutor(), desc="generate spm: crops")
        return results

    def _collect(self, ledger: Ledger, drafts: list[Unit], questions: dict[str, list[dict]],
                 rejected: list[dict]) -> tuple[list[dict], list[dict], list[str]]:
        items, trace, codes = [], [], []
        for unit, (qid, figs) in zip(drafts, questions.items()):
            chain = read_chain(ledger, unit, self._next)
            code, passed, audits = self._outcome(chain)
            codes.append(code)
            refs = [{k: f[k] for k in ("pdf", "page", "label")} for f in figs]
            steps = []
            for r in chain:
                step = {k: v for k, v in r.items() if k not in ("cached",)}
                if r["step"] in GEN_STEPS and "value" in r and (problem := qa_problem(r["value"])) is not None:
                    step["refused"] = problem
                steps.append(step)
            repaired = [s for s in steps if s["step"] == "repair"]
            if repaired:
                self.repairs["questions"] += 1
                self.repairs["requests"] += len(repaired)
                self.repairs["fixed"] += any("value" in s and "refused" not in s for s in repaired)
            entry = {"id": qid, "figures": refs, "outcome": code, "audits": audits, "repairs": len(repaired),
                     "steps": steps}
            if self._context[qid]["cut"] is not None:
                entry["discussion_cut"] = self._context[qid]["cut"]
            trace.append(entry)
            last = chain[-1] if chain else {}
            if code == CALL_FAILED:
                self.errors.append({"kind": "model_call", "id": qid, "stage": last.get("step", "draft"),
                                    "cause": last.get("cause"), "message": last.get("error", "not asked yet")})
            elif passed is not None:
                items.append(self._item(qid, passed, figs, code, audits, len(repaired)))
            else:
                reason = code.lower()
                row: dict[str, Any] = {"stage": "advise" if code in (REJECTED_AT_BOUND, ADVISOR_FAILED) else "qa", "reason": reason,
                       "id": qid, "figures": refs}
                if code == REJECTED_AT_BOUND:
                    row.update(detail=f"not passed after {audits} audits (--max-rounds {self.cfg.max_rounds})",
                               scores=last["value"]["scores"], critiques=last["value"]["critiques"])
                elif "value" in last:  # refused by the checks through every repair
                    row.update(detail=f"{steps[-1]['refused']} (still so after {len(repaired)} repairs, "
                                      f"--max-repairs {self.cfg.max_repairs})", words=dumps(last["value"]))
                else:
                    row.update(detail=last.get("error"), words=last.get("words"))
                rejected.append(row)
        return items, trace, codes

    def _item(self, qid: str, reply: dict, figs: list[dict], code: str, audits: int, repairs: int) -> dict:
        first = figs[0]
        q = question_fields(reply)
        meta = {"topic": q["topic"], "rubric": q["rubric"], "reasoning": q["reasoning"], "outcome": code,
                "audits": audits, "repairs": repairs, "source": {"pdf": first["pdf"], "page": first["page"], "label": first["label"],
                                             "caption": first["caption"]},
                "figures": [{k: f[k] for k in ("pdf", "page", "label")} for f in figs],
                "box_source": first["box_source"], "modality": first.get("modality"),
                "low_iou": first.get("low_iou"),
                "models": {"vlm": self.cfg.vlm_model, "gen": self.cfg.gen_model, "advisor": self.cfg.advisor_model}}
        return {"id": qid, "question": q["question"].strip(), "options": [o.strip() for o in q["options"]],
                "answer": ", ".join(sorted(set(q["answer"]))), "image": first["crop"], "domain": q["domain"],
                "bloom_level": q["bloom_level"], "question_type": q["question_type"], "level": q["level"],
                "discipline": q["discipline"], "technique": q["technique"], "meta": meta}

    def _finish(self, figures, records, items, rejected, trace, codes, figure_codes) -> SPMResult:
        from benchmint.io import write_jsonl

        engines: dict[str, tuple[Any, list[str]]] = {}
        for name, role in sorted(self.roles.items()):
            engines.setdefault(role.engine.endpoint.base_url, (role.engine, []))[1].append(name)
        first_engine = next(iter(engines.values()))[0] if engines else None
        settings = asdict(self.cfg)
        del settings["progress"]
        run = {
            "benchmark": "spm", "harvest": str(self.harvest), "pdfs": str(self.pdf_dir),
            "settings": settings, "prompts": self.prompts.record(),
            "counts": {"figures": len(figures), "items": len(items), "rejected": len(rejected),
                       "errors": len(self.errors)},
            "figures": code_counts(figure_codes, FIGURE_CODES), "questions": code_counts(codes, CODES),
            "repairs": self.repairs,
            "calls": first_engine.accounting.summary() if first_engine is not None else None,
            "endpoints": [{"base_url": url, "roles": names, "cache": e.cache.stats(),
                           "structured_modes": e.summary()["structured_modes"]}
                          for url, (e, names) in sorted(engines.items())],
        }
        write_jsonl(self.out / "figures.jsonl", sorted(records, key=lambda r: r["line"]))
        write_outputs(self.out, items, rejected, trace, self.errors, run)
        return SPMResult(self.out, run, len(items), len(rejected), list(self.errors))


def generate(harvest_dir, out_dir, cfg: SPMConfig, roles: dict[str, Role], pdf_dir=None, prompts=None) -> SPMResult:
    """Run SPM-Bench's generation over a harvest folder; see the module docstring."""
    return SPMGenerator(harvest_dir, out_dir, cfg, roles, pdf_dir, prompts).run()

