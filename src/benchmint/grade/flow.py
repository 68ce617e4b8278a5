"""``benchmint grade``: model answers against a benchmark's items -> grades.jsonl, summary.json, errors.jsonl.

One answer is one unit, keyed by (model, setting, repeat, item id). How a unit
is decided depends on the benchmark's answer kind (``benchmint.tasks``):

``quantity`` (SeePhys)
    seephys.txt §3 "Composite judgment strategy" and D.4: the final answer by
    rules (``benchmint.tasks.quantity``), by the extraction model when no rule
    matches; then the symbolic screen (``benchmint.grade.screen``), which
    decides only what it is sure of; then the 0/1 judge of Figure 14 for
    everything else, the screen's definite differences included (the paper
    sends every answer that does not pass the screen to the judge). With
    ``screen_rejects`` (beyond the paper) the screen's sure differences are
    graded wrong without a judge call; the summary counts the calls saved.
a set kind: ``option_number`` (MatVQA), ``mcq`` (CSMBench caption matching)
    the option read by the answer kind's rules (MatVQA: the A.2 statement
    with its parenthesis fixed and the other ways models state one option,
    ``benchmint.tasks.option_numbers``); an answer nothing can be read from,
    or a hedge between options, is wrong and counted as unparsed.
``free_text`` (CSMBench open descriptions)
    csmbench.txt §IV-A.2: STS, the cosine of the all-MiniLM-L6-v2 sentence
    embeddings of description and reference paragraph
    (``benchmint.grade.sts``), and the judge's score on its declared scale
    (0-10 as the released scorer asks, the default; 1-10 as the paper's text
    says). The grade's ``score`` is the judge's score over 10 (STS, clipped
    at 0, without a judge); both raw values are kept. STS and BERTScore do
    not depend on the judge: an answer the judge failed on keeps them in
    grades.jsonl (``judge_failed``, no judge score, no grade score counted)
    and is listed and counted as a judge failure.

An answer that no stage could decide (the judge failed after its bounded
attempts, or no judge was given) gets no grade: it is a row of errors.jsonl and
a count of its own in the summary, never a wrong answer. What is counted wrong
by rule, never sent to a judge: a gold item a model has no answer for (graded
as an empty answer, verdict ``missing``, listed in errors.jsonl: an accuracy
is out of the gold items), an empty or whitespace-only reply (``unparsed``),
an option reply nothing can be read from or that names two options
(``unparsed``). Every judge call is in the engine's request cache, so a rerun
pays for nothing it already asked. Outputs are in unit order (model, setting,
repeat, the items' order); summary.json is the same for the same inputs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmint import benchmarks, tasks
from benchmint.grade import audit
from benchmint.grade import summary as summaries
from benchmint.grade.judge import CSMBENCH_JUDGE, ERROR_TYPES, SEEPHYS_EXTRACT, SEEPHYS_JUDGE, Judge
from benchmint.io import InputError, atomic_write, write_jsonl
from benchmint.records import ABSENT, Grade, Prediction, RecordError, error_row, read_predictions
from benchmint.tasks.quantity import Extraction, extract_final, strip_reasoning

GRADED = tuple(benchmarks.graded())
JUDGE_REPLY_CHARS = 6000  # the judge sees the end of a reply that stated no clean final answer


@dataclass(frozen=True)
class GradeConfig:
    benchmark: str
    by: tuple[str, ...] | None = None  # None: the benchmark's strata that the items have
    n_boot: int = 1000
    seed: int = 0
    rtol: float = 1e-3
    symbolic_timeout_s: float = 5.0
    workers: int = -1
    progress: bool = False
    audit_sample: int | None = None  # write audit.csv: this many judge decisions for a person to check
    audit_labels: str | None = None  # a filled audit sheet: the judge's error rate against the person
    human_groups: tuple[str, ...] = ()  # NAME=mean|union:PERSON,... (benchmint.grade.summary.parse_group)
    error_types: bool = False  # label each wrong answer with the paper's error taxonomy (a judge pass)
    judge_scale: str = "0-10"  # CSMBench's judge: the released scorer's 0-10, or the paper's 1-10
    ablation: tuple[tuple[str, str, str], ...] = ()  # (set name, its items, its predictions): relative drops
    sts: bool = True  # CSMBench open: the STS metric (needs the MiniLM weights package)
    bertscore: str | None = None  # CSMBench open: BERTScore F1 from a model directory, or "minilm" (labelled apart)
    bertscore_layers: int | None = None  # its layer (default: bert_score's tuned layer for a model it lists)
    families: tuple[tuple[str, str], ...] = ()  # (model, family) where the name does not tell (summary.family_of)
    screen_rejects: bool = False  # SeePhys: the screen's sure differences graded wrong without the judge
    allow_paths_outside: tuple[str, ...] = ()  # folders outside the items file's whose files items may name

    def __post_init__(self) -> None:
        if self.benchmark not in GRADED:
            raise ValueError(f"grade takes --benchmark {', '.join(GRADED)}; got {self.benchmark!r}"
                             + (" (option and HKL sets are scored by benchmint score)"
                                if self.benchmark in ("spm", "crystalxrd") else ""))
        if self.n_boot < 1000:
            raise ValueError(f"--bootstrap must be >= 1000 for stable 95% intervals, got {self.n_boot}")
        if not self.rtol >= 0:
            raise ValueError(f"--rtol must be >= 0, got {self.rtol}")
        if not self.symbolic_timeout_s > 0:
            raise ValueError(f"--symbolic-timeout must be > 0, got {self.symbolic_timeout_s}")
        if self.judge_scale not in CSMBENCH_JUDGE:
            raise ValueError(f"--judge-scale must be one of {', '.join(CSMBENCH_JUDGE)}, got {self.judge_scale!r}")
        if self.error_types and self.benchmark not in ERROR_TYPES:
            raise ValueError(f"--error-types has a taxonomy for {' and '.join(ERROR_TYPES)} only")
        names = [a[0] for a in self.ablation]
        if len(set(names)) != len(names) or any(not n for n in names):
            raise ValueError(f"--ablation set names must be distinct and non-empty, got {names}")
        for spec in self.human_groups:
            summaries.parse_group(spec)


@dataclass(frozen=True)
class Unit:
    """One answer to grade: its key fields, the prediction and where it was read."""

    model: str
    setting: str
    repeat: int
    pred: Prediction
    file: str
    line: int | None  # None: a gold item without an answer (``file`` is then the gold file)

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.model, self.setting, self.repeat, self.pred.id)


@dataclass
class GradeResult:
    out_dir: Path
    grades: list[Grade] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


# ---------------------------------------------------------------------------------------------- reading

def _read_gold(bench, path, errors: list[dict], allowed: tuple[str, ...] = ()) -> dict:
    items: dict[str, Any] = {}
    for location, got in bench.read_items(path, check=False, allowed=allowed):
        if isinstance(got, benchmarks.ItemError):
            errors.append({"kind": "bad_item", "message": got.message, "location": location, "field": got.field})
        else:
            items[got.id] = got
    if not items:
        first = f"; the first: {errors[0]['location']}: {errors[0]['message']}" if errors else ""
        raise InputError(f"{path}: no usable items ({len(errors)} unusable{first})")
    return items


def _read_units(paths: Sequence[str], items: dict, errors: list[dict], setting: str | None = None) -> list[Unit]:
    """The predictions as units, in unit order; ``setting`` replaces the lines' own (an ablation's item set)."""
    forced = setting
    seen: dict[tuple, str] = {}
    units = []
    for path in paths:
        for line, got in read_predictions(path):
            if isinstance(got, RecordError):
                errors.append(got.row())
                continue
            for problem in got.problems:
                errors.append(problem.row())
            setting = got.extra.get("setting")
            repeat = got.extra.get("repeat", summaries.FIRST_REPEAT)
            if not isinstance(setting, (str, type(None))) or isinstance(repeat, bool) or not isinstance(repeat, int):
                errors.append(error_row("bad_field", '"setting" must be text and "repeat" an integer', str(path),
                                        line, id=got.id, model=got.model))
                continue
            unit = Unit(got.model, forced if forced is not None else (setting or ""), repeat, got, str(path), line)
            where = f"{path}:{line}"
            if got.id not in items:
                errors.append(error_row("unknown_id", f"no item {got.id!r} in the gold items", str(path), line,
                                        id=got.id, model=got.model))
            elif unit.key in seen:
                errors.append(error_row("duplicate", f"a second answer for item {got.id!r} of model {got.model!r}"
                                        f"{f' in setting {setting}' if setting else ''} (first at {seen[unit.key]}); "
                                        "ignored", str(path), line, id=got.id, model=got.model))
            else:
                seen[unit.key] = where
                units.append(unit)
    order = {item_id: i for i, item_id in enumerate(items)}
    units.sort(key=lambda u: (u.model, u.setting, u.repeat, order[u.pred.id]))
    return units


# ---------------------------------------------------------------------------------------------- deciding

def _grade(unit: Unit, answer: Any, stage: str, score: float, verdict: str | None, **extra) -> Grade:
    extra = {k: v for k, v in extra.items() if v is not None}
    if unit.setting:
        extra["setting"] = unit.setting
    if unit.repeat != summaries.FIRST_REPEAT:
        extra["repeat"] = unit.repeat
    return Grade(unit.pred.id, unit.model, answer, stage, score, verdict, extra.pop("judge_reply", None),
                 extra.pop("attempts", 0), extra)


def _missing(units: list[Unit], items: dict, gold_path: str, errors: list[dict]) -> list[Unit]:
    """The gold items a model has no answer for, in each (model, setting, repeat) it answered in, as units with an
    empty answer; each is a row of errors.jsonl. They are graded as an empty answer is (wrong by rule, no judge
    asked) with the verdict "missing", so an accuracy is out of the gold items."""
    answered: dict[tuple[str, str, int], set[str]] = {}
    for u in units:
        answered.setdefault((u.model, u.setting, u.repeat), set()).add(u.pred.id)
    absent = []
    for (model, setting, repeat), ids in sorted(answered.items()):
        for item_id in items:
            if item_id in ids:
                continue
            u = Unit(model, setting, repeat, Prediction(item_id, model), gold_path, None)
            where = f" in setting {setting}" if setting else ""
            errors.append(error_row("missing_prediction", f"model {model!r} has no answer for item {item_id!r}{where}; "
                                    "counted wrong", gold_path, None, id=item_id, model=model, setting=setting or None))
            absent.append(u)
    return absent


def _undecided(unit: Unit, cause: str, message: str, **extra) -> dict:
    return error_row("undecided", message, unit.file, unit.line, id=unit.pred.id, model=unit.model,
                     setting=unit.setting or None, cause=cause, **extra)


def _choice_grades(bench, units: list[Unit], items: dict, errors: list[dict]) -> list[Grade]:
    kind = tasks.get(bench.answer_kind)
    grades = []
    for u in units:
        gold = kind.normalize(items[u.pred.id].answer)
        read: tuple | None = None
        how: str | None = None
        try:
            if _given(u.pred):
                read, how = kind.normalize(u.pred.answer), "given"
            else:
                found = kind.extract(u.pred.output or "")
                if found is not None:
                    read, how = kind.normalize(found), "rule"
        except tasks.AnswerError as exc:
            errors.append(error_row("bad_answer", str(exc), u.file, u.line, id=u.pred.id, model=u.model))
        if read is None:
            grades.append(_grade(u, None, "rule", 0.0, "unparsed"))
        else:
            ok = read == gold
            grades.append(_grade(u, list(read), "rule", 1.0 if ok else 0.0, "correct" if ok else "wrong", read_by=how))
    return grades


def _quantity_grades(units: list[Unit], items: dict, cfg: GradeConfig, judge: Judge | None,
                    errors: list[dict], shown: dict, second: Judge | None = None,
                    paired: list | None = None, screen_counts: dict | None = None, screen=None) -> list[Grade]:
    """The three stages; ``shown`` gets, per unit key, the answer as the judge saw it (for the audit sheet);
    ``screen_counts["sure_differences"]`` adds up the screen's sure differences; ``screen``: an open Screen to
    use (a caller grading one answer at a time keeps its workers), else one is opened for the call.

    With a ``second`` judge, it judges the same stage-3 answers and ``paired`` gets (unit key, first verdict,
    second verdict) for the agreement report; the first judge's verdicts are the grades.
    """
    from benchmint.grade.screen import Screen

    # An empty reply states nothing: wrong by rule and unparsed, never sent to a screen or a (paid) judge.
    done = [_grade(u, None, "rule", 0.0, "unparsed", extraction="empty") for u in units if _is_empty(u.pred)]
    units = [u for u in units if not _is_empty(u.pred)]
    if not units:
        return done
    extracted = _extract(units, items, judge, errors)
    # Stage 2: the symbolic screen.
    with (nullcontext(screen) if screen is not None
          else Screen(rtol=cfg.rtol, timeout_s=cfg.symbolic_timeout_s, workers=cfg.workers)) as screen:
        screened = screen.check_many((items[u.pred.id].answer, e, items[u.pred.id].fields.get("sig_figs"))
                                     for u, e in zip(units, extracted))
    grades: list[Grade | None] = [None] * len(units)
    to_judge = []
    if screen_counts is not None:
        screen_counts["sure_differences"] = screen_counts.get("sure_differences", 0) + sum(s.different
                                                                                           for s in screened)
    for i, (u, e, s) in enumerate(zip(units, extracted, screened)):
        if s.equivalent:
            grades[i] = _grade(u, list(e.answers), "rule" if s.reason == "text" else "symbolic", 1.0, s.reason,
                               extraction=e.rule, screen=s.reason)
        elif s.different and cfg.screen_rejects:
            grades[i] = _grade(u, list(e.answers), "symbolic", 0.0, s.reason, extraction=e.rule, screen=s.reason,
                               screen_rejected=True)
        else:
            to_judge.append(i)
    # Stage 3: the judge.
    if judge is None:
        for i in to_judge:
            errors.append(_undecided(units[i], "no_judge", f"the screen could not decide ({screened[i].reason}) and "
                                     "no judge was given (--judge-model)", screen=screened[i].reason))
        return done + [g for g in grades if g is not None]
    jobs = []
    for i in to_judge:
        u, e = units[i], extracted[i]
        seen = "; ".join(e.answers) if e.answers and not e.conflict else _tail(u.pred.output or "")
        shown[u.key] = seen
        jobs.append((i, {"question": _question(items[u.pred.id]), "gold": str(items[u.pred.id].answer),
                         "answer": seen}))
    for i, judged in judge.run(SEEPHYS_JUDGE, jobs):
        u, e = units[i], extracted[i]
        if judged.failure is not None:
            errors.append(_undecided(u, "judge_failed", judged.failure["detail"], screen=screened[i].reason,
                                     judge=_call(judged.failure)))
            continue
        grades[i] = _grade(u, list(e.answers) or None, "judge", float(judged.value), str(judged.value),
                           judge_reply=judged.reply, attempts=judged.attempts, cached=judged.cached,
                           extraction=e.rule, screen=screened[i].reason)
    if second is not None and paired is not None:
        for i, judged in second.run(SEEPHYS_JUDGE, jobs):
            u, first = units[i], grades[i]
            if judged.failure is not None:
                errors.append(error_row("second_judge_failed", judged.failure["detail"], u.file, u.line,
                                        id=u.pred.id, model=u.model, judge=_call(judged.failure)))
            elif first is not None:
                paired.append((u.key, int(first.score), judged.value))
    return done + [g for g in grades if g is not None]


def _given(pred: Prediction) -> bool:
    """Whether the line gives a structured answer (a null "answer" beside an output is no answer: the output is read)."""
    return pred.answer is not ABSENT and pred.answer is not None


def _is_empty(pred: Prediction) -> bool:
    """A reply that states nothing: empty or whitespace output (after its reasoning block), or an empty answer."""
    if _given(pred):
        given = pred.answer
        parts = [given] if isinstance(given, str) else given if isinstance(given, list) else [given]
        return not any(not isinstance(p, str) or p.strip() for p in parts)
    return not strip_reasoning(pred.output or "").strip()


def _extract(units: list[Unit], items: dict, judge: Judge | None, errors: list[dict]) -> list[Extraction]:
    """Stage 1: the final answers by rules, then by the extraction model where no rule matched."""
    extracted: list[Extraction] = []
    for u in units:
        if _given(u.pred):
            given = u.pred.answer
            parts = [given] if isinstance(given, str) else [str(p) for p in given] if isinstance(given, list) else []
            extracted.append(Extraction(tuple(p for p in parts if p.strip()), "given"))
        else:
            extracted.append(extract_final(u.pred.output or ""))
    if judge is None:
        return extracted
    need = [i for i, e in enumerate(extracted) if e.rule is None and (units[i].pred.output or "").strip()]
    jobs = [(i, {"question": _question(items[units[i].pred.id]), "reply": _tail(units[i].pred.output)})
            for i in need]
    for i, judged in judge.run(SEEPHYS_EXTRACT, jobs):
        if judged.failure is not None:
            u = units[i]
            errors.append(error_row("extraction_failed", judged.failure["detail"], u.file, u.line, id=u.pred.id,
                                    model=u.model, setting=u.setting or None, judge=_call(judged.failure)))
        elif judged.value is not None:
            extracted[i] = Extraction((judged.value,), "model")
    return extracted


def _open_grades(units: list[Unit], items: dict, cfg: GradeConfig, judge: Judge | None,
                 errors: list[dict]) -> list[Grade]:
    """CSMBench open descriptions: STS and the judge's score, per answer."""
    texts = []
    for u in units:
        text = u.pred.output if u.pred.answer is ABSENT else u.pred.answer
        texts.append(strip_reasoning(text).strip() if isinstance(text, str) else "")
    keep = [i for i, t in enumerate(texts) if t.strip()]  # an empty answer is scored 0 below, not embedded
    sts: list[float | None] = [None] * len(units)
    if cfg.sts:
        from benchmint.grade.sts import default_model

        model = default_model()
        sims = model.similarity([texts[i] for i in keep], [str(items[units[i].pred.id].answer) for i in keep])
        for i, value in zip(keep, sims):
            sts[i] = float(value)
    bert: dict[int, float] = {}
    bert_key = None
    if cfg.bertscore is not None:
        from benchmint.grade.bertscore import BertScorer

        scorer = BertScorer(cfg.bertscore, cfg.bertscore_layers, workers=cfg.workers)
        bert_key = scorer.label + "_f1"
        got = scorer.score([texts[i] for i in keep], [str(items[units[i].pred.id].answer) for i in keep])
        bert = {i: float(value) for i, value in zip(keep, got.f1)}
    if judge is None and not cfg.sts:
        raise ValueError("csmbench-open needs a judge (--judge-model) or the STS metric")
    judged: dict[int, Any] = {}
    if judge is not None:
        spec = CSMBENCH_JUDGE[cfg.judge_scale]
        jobs = [(i, {"gold": str(items[u.pred.id].answer), "answer": texts[i]})
                for i, u in enumerate(units) if texts[i].strip()]
        judged = dict(judge.run(spec, jobs))
    grades = []
    for i, u in enumerate(units):
        metrics = {bert_key: bert.get(i, 0.0)} if bert_key is not None else {}  # an empty answer scores 0
        if not texts[i].strip():
            grades.append(_grade(u, None, "rule", 0.0, "empty", sts=0.0 if cfg.sts else None,
                                 judge_score=CSMBENCH_JUDGE[cfg.judge_scale].low if judge else None, **metrics))
            continue
        j = judged.get(i)
        if j is not None and j.failure is not None:
            errors.append(_undecided(u, "judge_failed", j.failure["detail"], judge=_call(j.failure), sts=sts[i],
                                     **metrics))
            similarity = sts[i] if sts[i] is not None else next(iter(metrics.values()), None)
            if similarity is not None:  # the similarity metrics stand without the judge; only its score is missing
                grades.append(_grade(u, None, "similarity", min(1.0, max(0.0, similarity)), None, sts=sts[i],
                                     judge_failed=True, **metrics))
            continue
        if j is not None:
            grades.append(_grade(u, None, "judge", j.value / 10, str(j.value), sts=sts[i], judge_score=j.value,
                                 judge_scale=cfg.judge_scale, judge_reply=j.reply, attempts=j.attempts,
                                 cached=j.cached, **metrics))
        else:
            value = sts[i]
            assert value is not None  # no judge: STS is on (checked above)
            grades.append(_grade(u, None, "similarity", min(1.0, max(0.0, value)), None, sts=value, **metrics))
    return grades


def _error_types(benchmark: str, units: list[Unit], grades: list[Grade], items: dict, judge: Judge,
                 errors: list[dict]) -> list[Grade]:
    """The wrong answers labelled with the paper's error taxonomy (``error_type`` in their grade rows)."""
    by_key = {u.key: u for u in units}
    wrong = [i for i, g in enumerate(grades) if g.score == 0 and g.verdict not in ("missing", "unparsed")]
    jobs = []
    for i in wrong:
        g = grades[i]
        u = by_key[(g.model, g.extra.get("setting", ""), summaries.repeat_of(g), g.id)]
        item = items[g.id]
        question = _question(item)
        options = item.fields.get("options")
        if options:
            question += "\n" + "\n".join(f"({k}) {text}" if isinstance(k, int) else f"{k}. {text}"
                                          for k, text in _numbered(options))
        gold = ", ".join(map(str, item.answer)) if isinstance(item.answer, list) else str(item.answer)
        jobs.append((i, {"question": question, "gold": gold, "reply": _tail(u.pred.output or "")
                         or json.dumps(u.pred.answer, ensure_ascii=False)}))
    out = list(grades)
    for i, judged in judge.run(ERROR_TYPES[benchmark], jobs):
        g = grades[i]
        if judged.failure is not None:
            errors.append(error_row("error_type_failed", judged.failure["detail"], "", None, id=g.id, model=g.model,
                                    judge=_call(judged.failure)))
        else:
            out[i] = Grade(g.id, g.model, g.answer, g.stage, g.score, g.verdict, g.judge_reply, g.attempts,
                           {**g.extra, "error_type": judged.value})
    return out


def _numbered(options) -> list[tuple]:
    """Options as (number or letter, text) pairs, whatever form the benchmark keeps them in."""
    if isinstance(options, dict):
        return list(options.items())
    pairs = []
    for k, o in enumerate(options, 1):
        if isinstance(o, (tuple, list)) and len(o) == 2:
            pairs.append((o[0], o[1]))
        else:
            pairs.append((k, o))
    return pairs


def _call(failure: dict) -> dict:
    """A failed judge call as its errors.jsonl row shows it (the unit's own id and model are the row's)."""
    return {k: v for k, v in failure.items() if k != "id"}


def _question(item) -> str:
    q = (item.fields.get("question") or "").strip()
    return q if q else "(the question is given in an image)"


def _tail(text: str | None) -> str:
    body = strip_reasoning(text or "").strip()
    return body if len(body) <= JUDGE_REPLY_CHARS else "…" + body[-JUDGE_REPLY_CHARS:]


# ---------------------------------------------------------------------------------------------- the run

def _check_weights(bench, cfg: GradeConfig) -> None:
    """The MiniLM weights, before any work, where the run needs them (InputError naming the install command)."""
    if tasks.get(bench.answer_kind).name != "free_text" or not (cfg.sts or cfg.bertscore == "minilm"):
        return
    from benchmint.grade.sts import model_dir

    try:
        model_dir()
    except RuntimeError as exc:
        raise InputError(str(exc)) from None


def _judge_summary(summary: dict, judge: Judge | None, cfg: GradeConfig) -> None:
    if judge is not None:
        summary["judge"] = {"model": judge.model, **judge.engine.summary()}
        if "correlations" in summary:
            summary["correlations"]["families"] = summaries.families(
                summary["correlations"]["models_by_metric"], judge.model, dict(cfg.families))


def _screen_summary(grades: list[Grade], sure_differences: int, cfg: GradeConfig) -> dict:
    """What the screen decided: answers proved equivalent, sure differences, and the judge calls that
    --screen-rejects saved (each rejected answer would otherwise have gone to the judge)."""
    rejected = sum(1 for g in grades if g.extra.get("screen_rejected"))
    return {"rejects": cfg.screen_rejects, "sure_differences": sure_differences,
            "equivalent": sum(1 for g in grades if g.stage in ("rule", "symbolic") and g.score == 1),
            "rejected": rejected, "judge_calls_saved_by_rejects": rejected}

def _audit(result: GradeResult, cfg: GradeConfig, items: dict, shown: dict, out: Path) -> None:
    """The judge audit (seephys.txt D.4): write the sheet for a person, or read a filled one back."""
    if cfg.audit_sample is not None:
        sample = audit.stratified_sample(result.grades, cfg.audit_sample, cfg.seed)
        audit.write_sheet(out / "audit.csv", sample, items, shown)
        result.summary["audit_sheet"] = {"path": "audit.csv", "rows": len(sample),  # in the output folder
                                         "judge_decisions": sum(g.stage == "judge" for g in result.grades)}
    if cfg.audit_labels is not None:
        labels, bad = audit.read_labels(cfg.audit_labels)
        labels, unmatched = audit.check_labels(labels, result.grades, cfg.audit_labels)
        result.errors.extend(bad + unmatched)
        result.summary["audit"] = {"labels": str(cfg.audit_labels), **audit.report(labels)}
        result.summary["counts"]["errors"] = len(result.errors)


def _ablation_set(bench, name: str, items_path: str, preds_path: str, items: dict, grade,
                  errors: list[dict], allowed: tuple[str, ...] = ()) -> tuple[list[Unit], list[Grade]]:
    """Another item set with the same ids (e.g. MatVQA's shortcut-removed questions): graded against its own items,
    its answers in a setting of their own; its items outside the main ones are left out (the drop pairs items)."""
    variant_items = _read_gold(bench, items_path, errors, allowed)
    variant_units = _read_units([preds_path], variant_items, errors, setting=name)
    for u in variant_units:
        if u.pred.id not in items:
            errors.append(error_row("unknown_id", f"item {u.pred.id!r} of set {name!r} is not in the main "
                                    "items (--gold)", u.file, u.line, id=u.pred.id, model=u.model))
    variant_units = [u for u in variant_units if u.pred.id in items]
    shared = {k: v for k, v in variant_items.items() if k in items}
    variant_grades, absent = grade(variant_units, shared, str(items_path))
    return variant_units + absent, variant_grades


def grade_files(pred_paths: Iterable[str | Path], gold_path: str | Path, out_dir: str | Path, cfg: GradeConfig,
                judge: Judge | None = None, second_judge: Judge | None = None,
                items: dict[str, benchmarks.EvalItem] | None = None) -> GradeResult:
    """Grade every prediction of ``pred_paths`` against the items of ``gold_path``; write the outputs.

    ``second_judge`` judges what the first judges, for Cohen's kappa between the two (summary ``judge_agreement``).
    ``items``: the gold items already read, by id in the items' order (``score_table`` reads a table's rows once);
    ``gold_path`` then only names them.
    """
    t0 = time.perf_counter()
    bench = benchmarks.get(cfg.benchmark)
    _check_weights(bench, cfg)
    out = Path(out_dir)
    result = GradeResult(out)
    paths = [str(p) for p in pred_paths]
    if items is None:
        items = _read_gold(bench, gold_path, result.errors, cfg.allow_paths_outside)
    units = _read_units(paths, items, result.errors)
    shown: dict = {}
    paired: list = []
    screen_counts: dict = {}
    if second_judge is not None and judge is None:
        raise ValueError("a second judge needs a first one (--judge-model)")

    kind = tasks.get(bench.answer_kind)

    def decide(units: list[Unit], items: dict) -> list[Grade]:
        # The answer kind picks the path: quantities and expressions, free text, or one option of a set kind.
        if kind.name == "quantity":
            return _quantity_grades(units, items, cfg, judge, result.errors, shown, second_judge, paired,
                                    screen_counts)
        if kind.name == "free_text":
            return _open_grades(units, items, cfg, judge, result.errors)
        if kind.scoring == "set":
            return _choice_grades(bench, units, items, result.errors)
        raise ValueError(f"benchmint grade has no path for answer kind {kind.name!r}")

    def grade(units: list[Unit], items: dict, gold: str) -> tuple[list[Grade], list[Unit]]:
        """The answers' grades and those of the gold items without an answer (with their units), in unit order."""
        absent = _missing(units, items, gold, result.errors)
        missing = [replace(g, verdict="missing") for g in decide(absent, items)] if absent else []
        order = {item_id: i for i, item_id in enumerate(items)}
        got = sorted(decide(units, items) + missing,
                     key=lambda g: (g.model, g.extra.get("setting", ""), summaries.repeat_of(g), order[g.id]))
        return got, absent

    result.grades, absent = grade(units, items, str(gold_path))
    units = units + absent
    ablation_sets = []
    for name, items_path, preds_path in cfg.ablation:
        variant_units, variant_grades = _ablation_set(bench, name, items_path, preds_path, items, grade, result.errors,
                                                          cfg.allow_paths_outside)
        units = units + variant_units
        result.grades += variant_grades
        ablation_sets.append(name)
    if cfg.error_types:
        if judge is None:
            raise ValueError("--error-types needs a judge (--judge-model)")
        result.grades = _error_types(cfg.benchmark, units, result.grades, items, judge, result.errors)
    by = cfg.by if cfg.by is not None else tuple(k for k in bench.strata
                                                 if any(k in it.meta for it in items.values()))
    result.summary = summaries.build(cfg.benchmark, units, result.grades, items, result.errors, by,
                                     cfg.n_boot, cfg.seed, [summaries.parse_group(g) for g in cfg.human_groups])
    if kind.name == "quantity":
        result.summary["screen"] = _screen_summary(result.grades, screen_counts.get("sure_differences", 0), cfg)
    result.summary["inputs"] = {"predictions": paths, "gold": str(gold_path),
                                "ablation": [list(map(str, a)) for a in cfg.ablation]}
    if ablation_sets:
        result.summary["ablation"] = summaries.ablation(result.grades, ablation_sets, cfg.n_boot, cfg.seed)
    _judge_summary(result.summary, judge, cfg)
    if cfg.bertscore is not None and kind.name == "free_text":
        from benchmint.grade.bertscore import describe

        result.summary["bertscore"] = describe(cfg.bertscore, cfg.bertscore_layers)
    if second_judge is not None and judge is not None:
        result.summary["judge_agreement"] = {"judges": [judge.model, second_judge.model], **audit.agreement(paired)}
    out.mkdir(parents=True, exist_ok=True)
    _audit(result, cfg, items, shown, out)
    _write(result, time.perf_counter() - t0)
    return result


def _write(result: GradeResult, seconds: float) -> None:
    """The output files. summary.json is the same for the same inputs; what depends on the machine or the run (wall
    time, the judge cache's place, rate-limit waits) goes to run.json."""
    run: dict[str, Any] = {"seconds": round(seconds, 3)}
    if "judge" in result.summary:
        engine = result.summary["judge"]
        run["judge"] = {"cache": engine["cache"].pop("path"), "rate_limit_wait_s": engine.pop("rate_limit_wait_s")}
    out = result.out_dir
    write_jsonl(out / "grades.jsonl", (g.to_json() for g in result.grades))
    write_jsonl(out / "errors.jsonl", result.errors)
    for name, data in (("summary.json", result.summary), ("run.json", run)):
        with atomic_write(out / name) as f:
            json.dump(data, f, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
