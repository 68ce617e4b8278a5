"""CSMBench's caption-matching items from a harvest (csmbench.txt §III-A, §III-B.2), with open items beside them.

For each figure record (a ``benchmint harvest`` folder's figures.jsonl, or a JSONL of own records with ``image``
and ``caption``):

1. **curation** (§III-A.3, local): a caption that describes a flowchart or schematic, or a purely statistical
   chart with no image of the material, drops the figure with that reason. The physical scale comes from the
   caption: a scale bar's length, else the characterization method's usual scale (techniques.json), else any
   length it names; lengths fall in ``SCALE_BINS``. A figure with no scale is rejected. ``hybrid`` marks a caption
   that joins images of the material with charts (the paper's "charted hybrid multi-pattern" figures).
2. **distractors** (§III-B.2): three wrong captions, each the true one changed along one axis: characterization
   method, material composition or numerical value. Locally (no model) the changes come from package tables
   (techniques.json, substitutions.json) and seeded factors; with ``--gen-model`` the model writes each one
   (distractor.txt, schema-checked), and ``check_distractor`` judges it: a reply that repeats the caption or an
   option, or changes nothing of its axis, or changes another axis too, is asked again with the reason, up to
   ``max_attempts`` replies per option. A caption that offers no item of an axis gives its slot to the axes it
   does offer (the shortfall is recorded); fewer than three usable distractors reject the figure.
3. **items**: the four captions shuffled by the seed, the answer letters balanced over blocks of four items
   (run.json ``answer_letters``), the axis of every option in ``meta``; ``open.jsonl`` holds the open item of each
   figure with a discussion paragraph (the reference answer).

The paper's design leaves a shortcut: along every axis the truth agrees with two of the three distractors, so a
reader who votes per axis over the options finds it without the figure (``majority_vote``; run.json
``shortcut`` measures it on the items made). ``design="balanced"`` closes it: from one change per axis, each
distractor joins two of them (``balance``), so every axis splits the four options two against two and all four
score alike; a figure whose changes cannot be joined keeps the paper's design (``meta.design_fallback``).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import os
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
    write_outputs,
)
from benchmint.io import InputError, iter_jsonl, write_jsonl
from benchmint.run import Ledger, SerialExecutor, Unit, content_key, run_units
from benchmint.run.runner import LEDGER_NAME

KINDS = ("method", "composition", "number")
KIND_NAMES = {"method": "characterization method", "composition": "material composition",
              "number": "numerical value"}
KIND_RULES = {
    "method": "Replace the characterization technique with a similar but wrong one (for example TEM with SEM, "
              "XRD with XPS).",
    "composition": "Replace a chemical formula with a plausible different one by substituting an element (for "
                   "example ZrB2 with TiB2, Al2O3 with Fe2O3); keep subscripts and charges as written.",
    "number": "Change one number with a unit (temperature, time, concentration, size, magnification, scale bar) "
              "to a plausible different value; keep the unit and the way it is written.",
}
LETTERS = "ABCD"
DESIGNS = ("paper", "balanced")
SCALES = ("AtomScale", "Microscale", "Mesoscale", "Macroscale")
# Upper bounds (metres) of a scale bar's or named length's scale: below 10 nm lattice fringes and atoms show.
SCALE_BINS = ((1e-8, "AtomScale"), (1e-6, "Microscale"), (1e-3, "Mesoscale"))
FIGURE_CODES = ("ITEM", "duplicate_figure", "schematic_or_flowchart", "statistical_chart", "no_scale", "too_few_perturbations",
                "vlm_dropped", "distractor_rejected", "generator_failed", "duplicate_option", "image_missing", "crop_failed",
                "call_failed")

# ---------------------------------------------------------------------------------------------------------------
# What a caption holds along each axis

_SUB = str.maketrans("₀₁₂₃₄₅₆₇₈₉", "0123456789")
# A formula: element symbols with optional (sub)script counts, two symbols at least or one with a count, then an
# optional charge ("Fe3+", "O2−"). Tokens of capitals only ("CO", "UV") are words more often than formulas.
_FORMULA = re.compile(r"(?<![A-Za-z0-9])((?:[A-Z][a-z]?(?:[0-9₀-₉]+(?:\.[0-9]+)?)?){1,8})"
                      r"([0-9]*[+\-−⁺⁻])?(?![A-Za-z0-9])")
_SYMBOL = re.compile(r"[A-Z][a-z]?")
UNITS = {"pm": 1e-12, "Å": 1e-10, "nm": 1e-9, "µm": 1e-6, "μm": 1e-6, "um": 1e-6, "mm": 1e-3, "cm": 1e-2,
         "m": 1.0}
_OTHER_UNITS = ("°C", "℃", "K", "h", "min", "s", "wt%", "wt.%", "at%", "at.%", "vol%", "%", "mol/L", "mM", "M",
                "GPa", "MPa", "kV", "keV", "eV", "mA", "V", "W", "Hz", "kHz", "cycles")
_UNIT_RE = "|".join(re.escape(u) for u in sorted([*UNITS, *_OTHER_UNITS], key=len, reverse=True))
# A thousands-grouped integer ("1,000") or a number with a decimal point or comma ("2.5", "2,5").
_NUM = r"\d{1,3}(?:,\d{3})+(?![\d.,])|\d+(?:[.,]\d+)?"
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+")
# A quantity: a number or a range ("200–400 °C", "2 to 4 h") with its unit, or a magnification ("×50k").
_QUANTITY = re.compile(
    rf"(?<![\w.])(?P<a>{_NUM})(?:(?P<sep>\s*(?:–|-|to)\s*)(?P<b>{_NUM}))?(?P<sp>\s?)(?P<unit>{_UNIT_RE})(?![A-Za-z])"
    rf"|(?P<x>[×x]\s?)(?P<m>{_NUM})(?P<k>k?)(?![A-Za-z0-9])")
_SCALE_BAR = re.compile(rf"scale\s*bars?\s*(?:is|are|=|:|of|represents?|indicates?)?\s*(?P<v>{_NUM})\s?"
                        rf"(?P<u>pm|Å|nm|µm|μm|um|mm|cm|m)(?![A-Za-z])"
                        rf"|(?P<v2>{_NUM})\s?(?P<u2>pm|Å|nm|µm|μm|um|mm|cm|m)\s+scale\s*bars?", re.I)
_LENGTH = re.compile(rf"(?<![\w.])(?P<v>{_NUM})\s?(?P<u>pm|Å|nm|µm|μm|um|mm|cm|m)(?![A-Za-z0-9/])")
_SCHEMATIC = re.compile(r"\b(flow\s?chart|flow diagram|workflow|schematic|schematics|illustration)\b", re.I)
_CHART = re.compile(r"\b(histograms?|bar charts?|pie charts?|statistics|statistical|distribution|plots?|curves?|"
                    r"spectr(?:um|a)|profiles?|patterns?|graphs?)\b", re.I)
_IMAGE = re.compile(r"\b(micrographs?|images?|maps?|mappings?|photographs?|morpholog\w*|fractograph\w*|"
                    r"topograph\w*|tomograph\w*|microstructures?)\b", re.I)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _value(text: str) -> float:
    return float(text.replace(",", "") if _GROUPED.fullmatch(text) else text.replace(",", "."))


class Tables:
    """The package's method table and element substitutions, with the matchers built from them."""

    def __init__(self, prompts: PromptSet) -> None:
        tech = prompts.data("techniques.json")
        subs = prompts.data("substitutions.json")
        self.partners: dict[str, list[str]] = {}
        for group in tech["groups"]:
            for name in group:
                self.partners.setdefault(name, []).extend(n for n in group if n != name
                                                          and n not in self.partners[name])
        self.scales: dict[str, str] = tech["scales"]
        bad = sorted(set(self.scales.values()) - set(SCALES))
        if bad:
            raise InputError(f"techniques.json: unknown scales {bad}; use {list(SCALES)}")
        self.subs: dict[str, list[str]] = {k: v for k, v in subs.items() if not k.startswith("_")}
        names = sorted({*self.partners, *self.scales}, key=len, reverse=True)
        # Acronyms match as written, names in any case; neither inside a longer word ("STEM" is not "TEM").
        parts = [re.escape(n) if n.isupper() or "-" in n else f"(?i:{re.escape(n)})" for n in names]
        self._method = re.compile(r"(?<![A-Za-z\-])(" + "|".join(parts) + r")(?![A-Za-z\-])")

    def methods(self, caption: str) -> list[tuple[int, int, str]]:
        return [(m.start(), m.end(), m.group(1)) for m in self._method.finditer(caption)]

    def canonical(self, name: str) -> str:
        for known in self.partners.keys() | self.scales.keys():
            if known.casefold() == name.casefold():
                return known
        return name

    def formulas(self, caption: str) -> list[tuple[int, int, str]]:
        from pymatgen.core import Composition, Element

        methods = {m[2] for m in self.methods(caption)}
        found = []
        for m in _FORMULA.finditer(caption):
            token = m.group(1)
            symbols = _SYMBOL.findall(token)
            plain = token.translate(_SUB)
            if token in methods or not any(c.islower() or c.isdigit() for c in plain):
                continue
            if len(symbols) < 2 and not any(c.isdigit() for c in plain):
                continue
            if not all(Element.is_valid_symbol(s) for s in symbols):
                continue
            try:
                Composition(plain)
            except Exception:  # noqa: BLE001 - pymatgen raises several types for what is not a formula
                continue
            found.append((m.start(), m.end(), m.group(0)))
        return found

    def signature(self, caption: str, kind: str) -> tuple:
        """What the caption holds along one axis, in order: methods, formulas, or quantities with their units."""
        if kind == "method":
            return tuple(self.canonical(m[2]) for m in self.methods(caption))
        if kind == "composition":
            return tuple(f[2].translate(_SUB) for f in self.formulas(caption))
        out: list[tuple] = []
        for m in _QUANTITY.finditer(caption):
            if m.group("x") is not None:
                out.append((_value(m.group("m")) * (1000 if m.group("k") else 1), "×"))
            else:
                b = m.group("b")
                out.append((_value(m.group("a")), _value(b) if b else None, m.group("unit").replace("℃", "°C")))
        return tuple(out)


def check_distractor(tables: Tables, truth: str, text: str, kind: str, others: list[str]) -> str | None:
    """Why a distractor of axis ``kind`` is not usable, or None: it must differ from the truth and from ``others``
    beyond whitespace and case, along ``kind``, and along no other axis."""
    if _norm(text) == _norm(truth):
        return "it repeats the true caption (up to whitespace and case)"
    for other in others:
        if _norm(text) == _norm(other):
            return "it repeats another option"
    if tables.signature(text, kind) == tables.signature(truth, kind):
        return f"it changes no {KIND_NAMES[kind]} of the caption"
    for other_kind in KINDS:
        if other_kind != kind and tables.signature(text, other_kind) != tables.signature(truth, other_kind):
            return f"it also changes the {KIND_NAMES[other_kind]}, not only the {KIND_NAMES[kind]}"
    return None


# ---------------------------------------------------------------------------------------------------------------
# Local perturbations


def _format_like(value: float, original: str) -> str:
    """``value`` written with the decimals and decimal mark (or thousands grouping) of ``original``."""
    if _GROUPED.fullmatch(original):
        return f"{round(value):,}"
    mark = "," if "," in original else "."
    decimals = len(original.replace(",", ".").split(".")[1]) if re.search(r"[.,]", original) else 0
    text = f"{value:.{decimals}f}"
    return text.replace(".", mark) if mark == "," else text


def _changes(value: float, unit: str, original: str) -> list[str]:
    """Plausible changed values, written like the original: temperatures by 100 degrees, the rest halved/doubled."""
    if unit in ("°C", "℃", "K"):
        cands = [value + 100, value - 100] if value - 100 > (0 if unit == "K" else -273) else [value + 100,
                                                                                              value + 200]
    elif unit.endswith("%"):
        cands = [value / 2, value * 2] if value * 2 <= 100 else [value / 2, value / 4]
    else:
        cands = [value * 2, value / 2]
    out = []
    for c in cands:
        text = _format_like(c, original)
        if _value(text) != _value(original) and _value(text) > 0 and text not in out:
            out.append(text)
    return out


def local_candidates(tables: Tables, caption: str) -> dict[str, list[str]]:
    """Every single-axis change the tables allow, per axis, in the caption's order (each a whole caption)."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    for name in dict.fromkeys(m[2] for m in tables.methods(caption)):
        for partner in tables.partners.get(tables.canonical(name), []):
            # Every mention of the method changes, so the caption stays consistent with itself.
            pattern = re.compile(r"(?<![A-Za-z\-])" + re.escape(name) + r"(?![A-Za-z\-])")
            out["method"].append(pattern.sub(partner, caption))
    for start, end, token in tables.formulas(caption):
        symbols = _SYMBOL.findall(token)
        # The formula's first element only (the cation as formulas are written: ZrB2 -> TiB2, Al2O3 -> Fe2O3);
        # swapping the anion gave implausible formulas (SiC -> SiB).
        sym = symbols[0]
        for sub in tables.subs.get(sym, []):
            if sub not in symbols:
                new = re.sub(rf"{sym}(?![a-z])", sub, token)
                out["composition"].append(caption.replace(token, new) if _FORMULA.fullmatch(token) else
                                          caption[:start] + new + caption[end:])
    for m in _QUANTITY.finditer(caption):
        if m.group("x") is not None:
            for v in _changes(_value(m.group("m")), "×", m.group("m")):
                out["number"].append(caption[:m.start("m")] + v + caption[m.end("m"):])
            continue
        a, b, unit = m.group("a"), m.group("b"), m.group("unit")
        changed_a = _changes(_value(a), unit, a)
        if b is None:
            for v in changed_a:
                out["number"].append(caption[:m.start("a")] + v + caption[m.end("a"):])
            continue
        # A range moves as a whole: both ends by the same change, in the same order.
        changed_b = _changes(_value(b), unit, b)
        for va, vb in zip(changed_a, changed_b):
            if _value(va) < _value(vb):
                out["number"].append(caption[:m.start("a")] + va + caption[m.end("a"):m.start("b")] + vb
                                     + caption[m.end("b"):])
    for kind in KINDS:
        out[kind] = [c for c in dict.fromkeys(out[kind]) if check_distractor(tables, caption, c, kind, []) is None]
    return out


def plan_slots(offered: dict[str, int]) -> list[str]:
    """The axes of the three distractors: one each where the caption offers it, the rest from the axes it offers
    (in KINDS order, as long as they have candidates left)."""
    slots = [k for k in KINDS if offered.get(k, 0) > 0]
    left = {k: offered.get(k, 0) - (1 if k in slots else 0) for k in KINDS}
    while len(slots) < 3 and any(left[k] > 0 for k in KINDS):
        for k in KINDS:
            if len(slots) < 3 and left[k] > 0:
                slots.append(k)
                left[k] -= 1
    return sorted(slots, key=KINDS.index)


def pick_local(tables: Tables, caption: str, rng: random.Random) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Three (axis, distractor) pairs drawn by ``rng`` from the local candidates, and the candidates per axis."""
    cands = local_candidates(tables, caption)
    offered = {k: len(v) for k, v in cands.items()}
    chosen: list[tuple[str, str]] = []
    for kind in plan_slots(offered):
        pool = [c for c in cands[kind] if all(_norm(c) != _norm(t) for _, t in chosen)]
        if pool:
            chosen.append((kind, rng.choice(pool)))
    return chosen, offered


# ---------------------------------------------------------------------------------------------------------------
# What a reader without the figure can find


def majority_vote(tables: Tables, options: list[str]) -> list[int]:
    """The options a reader who never sees the figure is left with after voting along each axis: every option
    scores, per axis, the other options that agree with it there; those with the best score remain.

    With the paper's design (each distractor the truth changed along one axis) the truth agrees with every
    distractor on two axes and scores 6, each distractor at most 5: the vote leaves the truth alone."""
    sigs = [[tables.signature(o, k) for k in KINDS] for o in options]
    scores = [sum(sigs[j][a] == sigs[i][a] for j in range(len(options)) if j != i for a in range(len(KINDS)))
              for i in range(len(options))]
    return [i for i, score in enumerate(scores) if score == max(scores)]


def compose(truth: str, first: str, second: str) -> str | None:
    """``truth`` with both the edits that made ``first`` from it and those that made ``second``, or None where
    the two touch the same characters (character-level diff, so a model's rewording composes too)."""
    edits = []
    for source, text in enumerate((first, second)):
        matcher = difflib.SequenceMatcher(None, truth, text, autojunk=False)
        edits += [(i1, i2, source, text[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    edits.sort()
    out, at, last = [], 0, None
    for i1, i2, source, new in edits:
        if i1 < at or (i1 == at and last is not None and last != source):
            return None
        out += [truth[at:i1], new]
        at, last = i2, source
    return "".join(out) + truth[at:]


def balance(tables: Tables, truth: str, distractors: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], str]:
    """The balanced design from three one-axis distractors (one per axis): each new distractor joins two of their
    changes, so along every axis two options hold the true value and two the changed one, and no axis votes for
    the truth. Returns (distractors, "") or ([], the reason it cannot be built)."""
    by_kind = dict(distractors)
    if sorted(by_kind) != sorted(KINDS) or len(distractors) != len(KINDS):
        return [], "the caption does not offer one change along each of the three axes"
    out: list[tuple[str, str]] = []
    for a, b in itertools.combinations(KINDS, 2):
        text = compose(truth, by_kind[a], by_kind[b])
        want = {k: tables.signature(by_kind[k] if k in (a, b) else truth, k) for k in KINDS}
        if text is None or any(tables.signature(text, k) != want[k] for k in KINDS):
            return [], f"the {KIND_NAMES[a]} and {KIND_NAMES[b]} changes do not join cleanly"
        if any(_norm(text) == _norm(t) for t in [truth, *(t for _, t in out)]):
            return [], "two joined changes give the same caption"
        out.append((f"{a}+{b}", text))
    return out, ""


# ---------------------------------------------------------------------------------------------------------------
# Curation


def scale_of(tables: Tables, caption: str) -> tuple[str | None, str | None, str | None]:
    """(scale, where it came from, the evidence): a scale bar's length, else the method, else a named length."""
    def binned(metres: float) -> str:
        return next((name for bound, name in SCALE_BINS if metres < bound), "Macroscale")

    bars = [(m.group("v") or m.group("v2"), m.group("u") or m.group("u2")) for m in _SCALE_BAR.finditer(caption)]
    if bars:
        v, u = min(bars, key=lambda vu: _value(vu[0]) * UNITS[vu[1]])
        return binned(_value(v) * UNITS[u]), "scale_bar", f"{v} {u}"
    for _, _, name in tables.methods(caption):
        scale = tables.scales.get(tables.canonical(name))
        if scale is not None:
            return scale, "method", name
    lengths = [(m.group("v"), m.group("u")) for m in _LENGTH.finditer(caption)]
    if lengths:
        v, u = min(lengths, key=lambda vu: _value(vu[0]) * UNITS[vu[1]])
        return binned(_value(v) * UNITS[u]), "length", f"{v} {u}"
    return None, None, None


def curate(tables: Tables, caption: str) -> dict:
    """The local verdict on a figure: kept or dropped (with the reason), its scale and the hybrid label."""
    has_image = bool(_IMAGE.search(caption)) or bool(tables.methods(caption))
    has_chart = bool(_CHART.search(caption))
    scale, source, evidence = scale_of(tables, caption)
    verdict = {"scale": scale, "scale_source": source, "scale_evidence": evidence,
               "hybrid": has_image and has_chart}
    if m := _SCHEMATIC.search(caption):
        return {**verdict, "keep": False, "reason": "schematic_or_flowchart", "detail": f"the caption says {m[0]!r}"}
    if has_chart and not has_image:
        return {**verdict, "keep": False, "reason": "statistical_chart",
                "detail": "the caption names charts and no image of the material"}
    if scale is None:
        return {**verdict, "keep": False, "reason": "no_scale",
                "detail": "no scale bar, known method or length in the caption"}
    return {**verdict, "keep": True}


def answer_letters(n: int, seed: int) -> list[str]:
    """The answer's letter for n items: each block of four holds A-D once, in an order drawn from the seed."""
    rng = random.Random(f"csmbench-answers-{seed}")
    out: list[str] = []
    while len(out) < n:
        block = list(LETTERS)
        rng.shuffle(block)
        out.extend(block)
    return out[:n]


# ---------------------------------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True)
class CSMConfig:
    gen_model: str | None = None  # None: the local distractors
    vlm_model: str | None = None  # None: curation by the caption alone
    image_max_side: int = 1024  # the figure's longest side as the VLM sees it
    max_attempts: int = 3  # replies per distractor the checks may refuse
    temperature: float | None = 0.0
    max_tokens: int | None = 1024
    seed: int = 0
    limit: int | None = None
    design: str = "paper"  # "balanced": each distractor changes two axes, so no axis votes for the answer
    progress: bool = False

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise ValueError(f"--distractor-design must be one of {list(DESIGNS)}, got {self.design!r}")
        if self.max_attempts < 1:
            raise ValueError("--max-attempts must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be at least 1, got {self.limit}")


CSMResult = GenerateResult  # the flow's one result shape


FIGURE_KINDS = ("micrograph", "photograph", "pattern_or_spectrum", "chart", "schematic", "flowchart")


def curate_schema() -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["kind", "keep", "hybrid", "reason"],
            "properties": {"kind": {"type": "string", "enum": list(FIGURE_KINDS)}, "keep": {"type": "boolean"},
                           "hybrid": {"type": "boolean"}, "reason": {"type": "string", "minLength": 1}}}


def vlm_verdict(local: dict, reply: dict) -> dict:
    """The VLM's keep/drop and hybrid label over the caption's; the scale stays the caption's."""
    verdict = {**local, "hybrid": reply["hybrid"], "curated_by": "vlm", "figure_kind": reply["kind"]}
    verdict.pop("detail", None)
    if not reply["keep"]:
        reason = {"chart": "statistical_chart", "schematic": "schematic_or_flowchart",
                  "flowchart": "schematic_or_flowchart"}.get(reply["kind"], "vlm_dropped")
        return {**verdict, "keep": False, "reason": reason, "detail": f"VLM: {reply['reason']}"}
    if local["scale"] is None:
        return {**verdict, "keep": False, "reason": "no_scale", "detail": local.get("detail", "")}
    verdict.pop("reason", None)
    return {**verdict, "keep": True}


def distractor_schema() -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["distractor"],
            "properties": {"distractor": {"type": "string", "minLength": 1}}}


class CSMGenerator:
    def __init__(self, source: str | os.PathLike, out_dir: str | os.PathLike, cfg: CSMConfig,
                 roles: dict[str, Role] | None = None, pdf_dir: str | os.PathLike | None = None,
                 prompts: str | os.PathLike | None = None) -> None:
        self.source = Path(source)
        self.records_file = self.source / "figures.jsonl" if self.source.is_dir() else self.source
        self.out = Path(out_dir)
        self.cfg = cfg
        self.pdfs = HarvestPDFs(self.records_file.parent, pdf_dir)
        self.pdf_dir = self.pdfs.folder
        self.prompts = PromptSet("csmbench", prompts)
        self.tables = Tables(self.prompts)
        self.t_distractor = self.prompts.template("distractor.txt", {"CAPTION", "KIND", "KIND_RULE", "OTHERS",
                                                                      "FEEDBACK"}, images=False)
        roles = roles or {}
        if cfg.gen_model is not None and "gen" not in roles:
            raise ValueError("--gen-model needs a server (--base-url)")
        if cfg.vlm_model is not None and "vlm" not in roles:
            raise ValueError("--vlm-model needs a server (--base-url)")
        self.t_curate = self.prompts.template("curate.txt", {"CAPTION"}) if cfg.vlm_model is not None else None
        self.roles: dict[str, Role] = {}
        if cfg.gen_model is not None:
            self.roles["gen"] = Role(roles["gen"].engine, "distractor", json_reply(distractor_schema()))
        if cfg.vlm_model is not None:
            self.roles["vlm"] = Role(roles["vlm"].engine, "curate", json_reply(curate_schema()))
        # One budget and one account for the run, whichever servers its roles call.
        accounting = next(iter(self.roles.values())).engine.accounting if self.roles else None
        for role in self.roles.values():
            role.engine.accounting = accounting
        self.errors: list[dict] = []
        self._truth: dict[str, str] = {}

    # ---- inputs
    def _figures(self) -> list[dict]:
        path = self.records_file
        if not path.is_file():
            raise InputError(f"{self.source}: no figure records (give a harvest folder or a figures JSONL file)")
        rows = []
        for line, row, problem in iter_jsonl(path, "figure records"):
            if problem is None and not (isinstance(row, dict) and isinstance(row.get("caption"), str)
                                        and row["caption"].strip()):
                problem = "a figure record needs a caption"
            if problem is None and "image" not in row and not all(k in row for k in ("pdf", "page", "body_box")):
                problem = "a figure record needs image, or pdf, page and body_box (a harvest record)"
            if problem is not None:
                self.errors.append({"kind": "bad_figure", "file": str(path), "line": line, "message": problem})
                continue
            rows.append({**row, "line": line})
            if self.cfg.limit is not None and len(rows) >= self.cfg.limit:
                break
        return rows

    def _pdf(self, name: str) -> Path:
        """A harvested PDF (as every generator finds it); a path that is no file when it is not found."""
        return self.pdfs.find(name) or self.pdfs.folder / name

    def _fid(self, fig: dict) -> str:
        who = [fig.get("pdf"), fig.get("page"), fig.get("label"), fig.get("image"), fig["caption"]]
        return "csm-" + hashlib.sha256(repr(who).encode("utf-8")).hexdigest()[:16]

    def _image(self, fig: dict) -> dict:
        """The figure as a file under out/crops/ (named by content): the record's image, or the harvest's body box
        rendered at 300 DPI from its PDF."""
        if "image" in fig:
            src = self.records_file.parent / fig["image"]
            if not src.is_file():
                return {"error": f"image not found: {src}", "reason": "image_missing"}
            data = src.read_bytes()
            suffix = src.suffix.lower() or ".png"
        else:
            from benchmint.pdf.crop import open_page
            from benchmint.pdf.geometry import render_crop

            pdf = self._pdf(fig["pdf"])
            if fig["body_box"] is None:
                return {"error": "the harvest found no figure body to crop", "reason": "crop_failed"}
            if not pdf.is_file():
                return {"error": f"{fig['pdf']} is not under {self.pdf_dir}", "reason": "image_missing"}
            try:
                doc, page = open_page(pdf, fig["page"])
                try:
                    data = render_crop(page, fig["body_box"]).tobytes("png")
                finally:
                    doc.close()
            except (InputError, ValueError) as exc:
                return {"error": str(exc), "reason": "crop_failed"}
            suffix = ".png"
        sha = hashlib.sha256(data).hexdigest()
        path = self.out / "crops" / f"{sha[:16]}{suffix}"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return {"image": f"crops/{path.name}", "sha256": sha}

    # ---- model distractors: a chain of units per figure, slot after slot, each asked again on a refused reply
    def _unit(self, fid: str, slots: list[str], slot: int, attempt: int, accepted: list[str],
              refused: list[dict]) -> Unit:
        from benchmint.models import ChatRequest, Message

        kind = slots[slot]
        others = ("The other options already written, which yours must not repeat:\n"
                  + "\n".join(f"- {t}" for t in accepted) + "\n") if accepted else ""
        feedback = "".join(f"An earlier reply was refused ({r['reason']}): {r['text']}\n" for r in refused)
        parts = self.t_distractor.render({"CAPTION": self._truth[fid], "KIND": KIND_NAMES[kind],
                                          "KIND_RULE": KIND_RULES[kind], "OTHERS": others, "FEEDBACK": feedback})
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        assert self.cfg.gen_model is not None  # model units exist only with a model
        request = ChatRequest(self.cfg.gen_model, (Message("user", text),), self.cfg.temperature,
                              max_tokens=self.cfg.max_tokens, seed=self.cfg.seed, schema=distractor_schema(),
                              schema_name="distractor")
        ctx = {"id": fid, "slots": slots, "slot": slot, "attempt": attempt, "accepted": accepted, "refused": refused}
        key = content_key(self.roles["gen"].engine.key(request).encode("ascii"),
                          {"id": fid, "slot": slot, "attempt": attempt})
        return Unit(key, ("gen", request, ctx), f"{fid} slot {slot} attempt {attempt}")

    def _curate_unit(self, fid: str, fig: dict, image: dict) -> Unit:
        from benchmint.benchmarks.base import ImagePart as TemplateImage
        from benchmint.models import ChatRequest, ImagePart, Message

        assert self.t_curate is not None and self.cfg.vlm_model is not None
        data = (self.out / image["image"]).read_bytes()
        mime = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
        parts = self.t_curate.render({"CAPTION": fig["caption"]}, [TemplateImage(data, mime)])
        content = tuple(p.text if isinstance(p, TextPart) else ImagePart(p.data, self.cfg.image_max_side)
                        for p in parts)
        request = ChatRequest(self.cfg.vlm_model, (Message("user", content),), self.cfg.temperature,
                              max_tokens=self.cfg.max_tokens, seed=self.cfg.seed, schema=curate_schema(),
                              schema_name="curation")
        key = content_key(self.roles["vlm"].engine.key(request).encode("ascii"), {"id": fid, "step": "curate"})
        return Unit(key, ("vlm", request, {"id": fid}), f"{fid} curate")

    def _curation(self, ledger: Ledger, figures: list[dict], images: list[dict]) -> dict[str, dict]:
        """Each figure's VLM reply (a unit result: value, or error and words), by figure id."""
        if "vlm" not in self.roles:
            return {}
        todo = {self._fid(f): (f, img) for f, img in zip(figures, images) if "error" not in img}
        fids = [fid for fid in dict.fromkeys(self._fid(f) for f in figures) if fid in todo]
        units = [self._curate_unit(fid, *todo[fid]) for fid in fids]
        results, _ = run_units(ledger, units, lambda outcome, ctx: call_result(outcome, **ctx),
                               RoleExecutor(self.roles), desc="generate csmbench: curation",
                               progress=self.cfg.progress)
        # A unit that raised has only its error: it is tried again by the next run, as a failed call is.
        return {fid: r if "value" in r or "words" in r or "retry" in r else {**r, "retry": True, "cause": "error"}
                for fid, r in zip(fids, results)}

    def _verdict(self, result: dict) -> str | None:
        kind = result["slots"][result["slot"]]
        return check_distractor(self.tables, self._truth[result["id"]], result["value"]["distractor"], kind,
                                result["accepted"])

    def _next(self, result: dict) -> list[Unit]:
        if "value" not in result:
            return []
        fid, slots, slot, attempt = result["id"], result["slots"], result["slot"], result["attempt"]
        reason = self._verdict(result)
        if reason is None:
            accepted = [*result["accepted"], result["value"]["distractor"]]
            return [self._unit(fid, slots, slot + 1, 0, accepted, [])] if slot + 1 < len(slots) else []
        if attempt + 1 >= self.cfg.max_attempts:
            return []
        refused = [*result["refused"], {"reason": reason, "text": result["value"]["distractor"]}]
        return [self._unit(fid, slots, slot, attempt + 1, result["accepted"], refused)]

    def _model_outcome(self, chain: list[dict]) -> dict:
        """The figure's distractors from its chain, or why there are none."""
        last = chain[-1] if chain else None
        if last is None or last.get("retry"):
            return {"code": "call_failed", "detail": last.get("error") if last else "not asked yet",
                    "cause": last.get("cause") if last else None}
        if "value" not in last:
            return {"code": "generator_failed", "detail": last.get("error"), "words": last.get("words")}
        reason = self._verdict(last)
        if reason is not None:
            return {"code": "distractor_rejected", "detail": f"{KIND_NAMES[last['slots'][last['slot']]]}: {reason} "
                    f"({self.cfg.max_attempts} replies refused, --max-attempts)",
                    "words": last["value"]["distractor"], "refused": last["refused"]}
        texts = [*last["accepted"], last["value"]["distractor"]]
        if len(texts) < len(last["slots"]):
            return {"code": "call_failed", "detail": "the chain has not finished"}
        return {"code": "ok", "distractors": list(zip(last["slots"], texts)),
                "attempts": [r["attempt"] + 1 for r in chain if "value" in r and self._verdict(r) is None]}

    def _select(self, fid: str, fig: dict, ref: dict, reply: dict | None, codes: dict, rejected: list) -> dict | None:
        """The figure's curation verdict if kept; else None, with its rejection or error recorded."""
        verdict = {**curate(self.tables, fig["caption"]), "curated_by": "caption"}
        if reply is not None and reply.get("retry"):
            codes[fid] = "call_failed"
            self.errors.append({"kind": "model_call", "stage": "curate", "id": fid, "figure": ref,
                                "cause": reply["cause"], "message": reply["error"]})
            return None
        if reply is not None and "value" in reply:
            verdict = vlm_verdict(verdict, reply["value"])
        elif reply is not None:  # unusable through its answer attempts: the caption's verdict stands
            verdict["vlm_error"] = reply["error"]
        if not verdict["keep"]:
            codes[fid] = verdict["reason"]
            rejected.append({"stage": "curate", "reason": verdict["reason"], "id": fid, "figure": ref,
                             "detail": verdict["detail"], "scale": verdict["scale"],
                             "curated_by": verdict["curated_by"]})
            return None
        return verdict

    def _item(self, fig: dict, fid: str, verdict: dict, image: dict, offered: dict, outcome: dict,
              letter: str) -> dict:
        """The MCQ item: the distractors shuffled by the seed around the truth, placed at ``letter``."""
        rng = random.Random(f"{self.cfg.seed}-{fid}-order")
        wrong = list(outcome["distractors"])
        rng.shuffle(wrong)
        at = LETTERS.index(letter)
        order = wrong[:at] + [("truth", fig["caption"])] + wrong[at:]
        meta = {"option_kinds": {LETTERS[i]: kind for i, (kind, _) in enumerate(order)},
                "shortfall": {k: 1 for k in KINDS if not offered[k]}, "offered": offered,
                "scale_source": verdict["scale_source"], "scale_evidence": verdict["scale_evidence"],
                "source": _ref(fig), "curated_by": verdict["curated_by"], "figure_kind": verdict.get("figure_kind"),
                "distractors_by": self.cfg.gen_model or "local", "design": outcome.get("design", "paper")}
        if "design_fallback" in outcome:
            meta["design_fallback"] = outcome["design_fallback"]
        if "vlm_error" in verdict:
            meta["vlm_error"] = verdict["vlm_error"]
        if "attempts" in outcome:
            meta["attempts"] = outcome["attempts"]
        return {"id": fid, "image": image["image"], "scale": verdict["scale"], "hybrid": verdict["hybrid"],
                "options": [{"label": LETTERS[i], "caption": text} for i, (_, text) in enumerate(order)],
                "answer": letter, "meta": meta}

    # ---- the whole run
    def run(self) -> CSMResult:
        self.out.mkdir(parents=True, exist_ok=True)
        figures = self._figures()
        rejected: list[dict] = []
        trace: list[dict] = []
        kept: list[tuple[dict, str, dict, dict, dict]] = []  # (figure, id, verdict, image, offered)
        codes: dict[str, str] = {}
        chosen: dict[str, Any] = {}
        with Ledger(self.out / LEDGER_NAME, "generate-csmbench") as ledger:
            images, _ = run_units(ledger, [Unit(content_key(repr(self._image_key(f)).encode("utf-8")), (f,),
                                                f"line {f['line']}") for f in figures],
                                  self._image, SerialExecutor(), desc="generate csmbench: images")
            vlm = self._curation(ledger, figures, images)
            firsts: list[Unit] = []
            seen: set[str] = set()
            for fig, image in zip(figures, images):
                fid = self._fid(fig)
                ref = _ref(fig)
                if fid in seen:  # the same figure and caption twice: one item, the repeat named
                    rejected.append({"stage": "input", "reason": "duplicate_figure", "id": fid, "figure": ref,
                                     "detail": f"line {fig['line']} repeats an earlier record"})
                    continue
                seen.add(fid)
                if "error" in image:  # a unit that raised has no reason of its own
                    codes[fid] = image.get("reason", "crop_failed")
                    rejected.append({"stage": "image", "reason": codes[fid], "id": fid, "figure": ref,
                                     "detail": image["error"]})
                    continue
                verdict = self._select(fid, fig, ref, vlm.get(fid), codes, rejected)
                if verdict is None:
                    continue
                rng = random.Random(f"{self.cfg.seed}-{fid}")
                local, offered = pick_local(self.tables, fig["caption"], rng)
                slots = plan_slots(offered)
                if len(slots) < 3 or ("gen" not in self.roles and len(local) < 3):
                    codes[fid] = "too_few_perturbations"
                    rejected.append({"stage": "distractors", "reason": "too_few_perturbations", "id": fid,
                                     "figure": ref, "offered": offered,
                                     "detail": f"the caption offers {len(slots)} usable perturbations, fewer than 3"})
                    continue
                self._truth[fid] = fig["caption"]
                kept.append((fig, fid, verdict, image, offered))
                if "gen" in self.roles:
                    firsts.append(self._unit(fid, slots, 0, 0, [], []))
                else:
                    chosen[fid] = {"code": "ok", "distractors": local}
            if "gen" in self.roles:
                run_units(ledger, firsts, lambda outcome, ctx: call_result(outcome, **ctx),
                          RoleExecutor(self.roles), desc="generate csmbench: distractors",
                          progress=self.cfg.progress, then=lambda unit, result: self._next(result))
                for (_fig, fid, *_rest), first in zip(kept, firsts):
                    chain = read_chain(ledger, first, self._next)
                    chosen[fid] = self._model_outcome(chain)
                    trace.append({"id": fid, "outcome": chosen[fid]["code"],
                                  "steps": [{k: v for k, v in r.items() if k != "cached"} for r in chain]})
        items: list[dict] = []
        opens: list[dict] = []
        self._balance(kept, chosen)
        good = [k for k in kept if chosen[k[1]]["code"] == "ok"]
        dupes = {k[1] for k in good
                 if len({_norm(t) for t in [k[0]["caption"], *(d for _, d in chosen[k[1]]["distractors"])]}) < 4}
        good = [k for k in good if k[1] not in dupes]
        letters = answer_letters(len(good), self.cfg.seed)
        for fig, fid, verdict, image, offered in kept:
            outcome = chosen[fid]
            ref = _ref(fig)
            if fid in dupes:
                outcome = {"code": "duplicate_option", "detail": "two options are the same"}
            if outcome["code"] != "ok":
                codes[fid] = outcome["code"]
                if outcome["code"] == "call_failed":
                    self.errors.append({"kind": "model_call", "id": fid, "cause": outcome.get("cause"),
                                        "message": outcome["detail"]})
                    continue
                rejected.append({"stage": "distractors", "reason": outcome["code"], "id": fid, "figure": ref,
                                 **{k: v for k, v in outcome.items() if k != "code"}})
                continue
            codes[fid] = "ITEM"
            item = self._item(fig, fid, verdict, image, offered, outcome, letters[len(items)])
            items.append(item)
            if isinstance(fig.get("discussion"), str) and fig["discussion"].strip():
                opens.append({**{k: item[k] for k in ("id", "image", "scale", "hybrid")}, "caption": fig["caption"],
                              "answer": fig["discussion"], "meta": {"source": ref}})
            else:
                rejected.append({"stage": "open", "reason": "no_discussion", "id": fid, "figure": ref,
                                 "detail": "no discussion paragraph: an MCQ item only"})
        figure_codes, counted = [], set()
        for f in figures:
            fid = self._fid(f)
            figure_codes.append(codes[fid] if fid not in counted else "duplicate_figure")
            counted.add(fid)
        return self._finish(figures, figure_codes, items, opens, rejected, trace)

    def _image_key(self, fig: dict) -> list:
        if "image" in fig:
            src = self.records_file.parent / fig["image"]
            return ["image", fig["image"], src.stat().st_size if src.is_file() else None]
        pdf = self._pdf(fig["pdf"])
        return ["crop", fig["pdf"], pdf.stat().st_size if pdf.is_file() else None, fig["page"], fig["body_box"]]

    def _balance(self, kept: list, chosen: dict[str, Any]) -> None:
        """With the balanced design, join each kept figure's one-axis distractors, or say why it keeps the paper's."""
        for fig, fid, *_rest in kept:
            if self.cfg.design == "balanced" and chosen[fid]["code"] == "ok":
                joined, why = balance(self.tables, fig["caption"], chosen[fid]["distractors"])
                chosen[fid] = ({**chosen[fid], "distractors": joined, "design": "balanced"} if joined else
                               {**chosen[fid], "design": "paper", "design_fallback": why})

    def _shortcut(self, items: list[dict]) -> dict:
        """What a per-axis majority vote over the options finds without the figure: the answers it leaves alone,
        and its expected accuracy when it guesses among the options it leaves (chance is 0.25)."""
        left = [majority_vote(self.tables, [o["caption"] for o in i["options"]]) for i in items]
        hits = [LETTERS.index(i["answer"]) in best for i, best in zip(items, left)]
        expected = sum(1 / len(best) for best, hit in zip(left, hits) if hit)
        return {"majority_vote": {"items": len(items),
                                  "answer_alone": sum(1 for best, hit in zip(left, hits) if hit and len(best) == 1),
                                  "expected_accuracy": round(expected / len(items), 4) if items else None}}

    def _finish(self, figures, figure_codes, items, opens, rejected, trace) -> CSMResult:
        engine = next(iter(self.roles.values())).engine if self.roles else None
        settings = asdict(self.cfg)
        del settings["progress"]
        letters = {letter: sum(1 for i in items if i["answer"] == letter) for letter in LETTERS}
        run = {"benchmark": "csmbench-mcq", "source": str(self.source), "settings": settings,
               "prompts": self.prompts.record(),
               "counts": {"figures": len(figures), "items": len(items), "open_items": len(opens),
                          "rejected": len(rejected), "errors": len(self.errors)},
               "figures": code_counts(figure_codes, FIGURE_CODES), "answer_letters": letters,
               "scales": {s: sum(1 for i in items if i["scale"] == s) for s in SCALES},
               "option_kinds": {k: sum(1 for i in items for v in i["meta"]["option_kinds"].values()
                                       if k in v.split("+")) for k in KINDS},
               "designs": {d: sum(1 for i in items if i["meta"]["design"] == d) for d in DESIGNS},
               "shortcut": self._shortcut(items),
               "calls": engine.accounting.summary() if engine is not None else None}
        write_jsonl(self.out / "open.jsonl", opens)
        write_outputs(self.out, items, rejected, trace, self.errors, run)
        return CSMResult(self.out, run, len(items), len(rejected), list(self.errors))


def _ref(fig: dict) -> dict:
    return {k: fig[k] for k in ("pdf", "page", "label", "image") if k in fig}


def generate(source, out_dir, cfg: CSMConfig, roles: dict[str, Role] | None = None, pdf_dir=None,
             prompts=None) -> CSMResult:
    """Run CSMBench's generation over a harvest folder or a figures JSONL; see the module docstring."""
    return CSMGenerator(source, out_dir, cfg, roles, pdf_dir, prompts).run()


__all__ = ["CSMConfig", "CSMResult", "Tables", "check_distractor", "curate", "generate", "local_candidates",
           "plan_slots", "scale_of", "answer_letters"]
