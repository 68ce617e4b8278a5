"""summary.json of ``benchmint grade``: accuracies with bootstrap intervals, strata, settings gaps, difficulty tags.

Blocks, one per (model, setting):

- ``accuracy``: mean score over the graded answers, with a 95% percentile
  bootstrap interval; a gold item the model has no answer for is graded
  wrong (verdict "missing", counted in ``missing``), so the accuracy is out
  of the gold items; ``accuracy_undecided_as_wrong`` counts every answer
  that could not be decided as wrong too (a lower bound); ``undecided``,
  ``judge_failures`` and ``unparsed`` (nothing read: an empty reply, an
  option reply nothing or two options can be read from) are counts of their
  own. ``answers`` counts the answers given, ``items`` the gold items.
- ``by``: the same per value of each stratum (gold ``meta`` keys), values
  named as ``benchmint score`` names them (``metrics.pipeline.stratum_name``).

Across settings (SeePhys, seephys.txt Table 3): for a model graded in TV and
another setting X, the relative gap (TV − X) / TV on the items graded in both,
Δ1 for TC, Δ2 for TO, Δ3 for VO, with a paired bootstrap interval;
``vision_gain`` = TV − TO is how much the model gains from seeing. For any benchmark, a setting S graded beside
its blind run (``eval --blind``, setting ``S-blind``) gives ``vision_gain_S`` and ``relative_blind_gap_S``.

SeePhys levels (Tables 4 and 5): the eight knowledge levels grouped as theory
memorization (UG, SUG, MA, PhD) and problem solving (Mid, High, BO, AO); the
release stores levels as integers whose mapping it does not document, read
here as 1..8 in the paper's order Mid, High, BO, AO, UG, SUG, MA, PhD. The
difficulty tag of an item is the share of the evaluated models (TV, first
repeat) that solve it (Table 5 used five models: 100%, 80%, …, 0%).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmint.benchmarks.evaluate import BLIND_SUFFIX
from benchmint.metrics.aggregate import bootstrap_ci
from benchmint.metrics.behaviour import average_ranks
from benchmint.metrics.pipeline import MISSING_STRATUM, stratum_name
from benchmint.records import STAGES

LEVELS = ("Mid", "High", "BO", "AO", "UG", "SUG", "MA", "PhD")
THEORY = ("UG", "SUG", "MA", "PhD")
PROBLEM_SOLVING = ("Mid", "High", "BO", "AO")
GAPS = {"TC": "delta1", "TO": "delta2", "VO": "delta3"}


# benchmint eval numbers repeats from 1; a prediction line without "repeat" is the first. Grade rows carry
# "repeat" only when it is another one.
FIRST_REPEAT = 1
#: CSMBench open: the per-answer metrics kept beside the grade's score (BERTScore under the label of its model)
OPEN_METRICS = ("sts", "bertscore_f1", "bertscore_minilm_f1", "judge_score")


def stratum(meta: dict, key: str) -> str:
    """The item's stratum of ``key``, named as ``benchmint score`` names it (MISSING_STRATUM without the key)."""
    return stratum_name(meta[key])[0] if key in meta else MISSING_STRATUM


def repeat_of(grade) -> int:
    return grade.extra.get("repeat", FIRST_REPEAT)


def mean_ci(scores: Sequence[float], n_boot: int, rng: np.random.Generator) -> dict:
    """Mean and 95% bootstrap interval of per-answer scores (None when there are none)."""
    if not len(scores):
        return {"mean": None, "low": None, "high": None, "n": 0}
    values, counts = np.unique(np.asarray(scores, dtype=np.float64), return_counts=True)
    mean, low, high = bootstrap_ci(counts, values[:, None], n_boot, rng)
    return {"mean": float(mean[0]), "low": float(low[0]), "high": float(high[0]), "n": int(counts.sum())}


def level_name(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(LEVELS):
        return LEVELS[value - 1]
    if isinstance(value, str):
        for name in LEVELS:
            if value.strip().casefold() == name.casefold():
                return name
    return None


def _gap(tv: np.ndarray, other: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict:
    """(mean(tv) − mean(other)) / mean(tv) over paired items, with a paired bootstrap interval."""
    n = len(tv)
    base = tv.mean()
    if base == 0:
        return {"mean": None, "low": None, "high": None, "n": n, "note": "TV accuracy is 0: the gap is undefined"}
    idx = rng.integers(0, n, size=(n_boot, n))
    tv_b, other_b = tv[idx].mean(axis=1), other[idx].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = (tv_b - other_b) / tv_b
    boot = boot[np.isfinite(boot)]
    low, high = np.quantile(boot, [0.025, 0.975])
    return {"mean": float((base - other.mean()) / base), "low": float(low), "high": float(high), "n": n}


def parse_group(spec: str) -> tuple[str, str, tuple[str, ...]]:
    """``NAME=mean:A,B,C`` or ``NAME=union:A,B`` -> (name, rule, members); ValueError naming the spec."""
    name, sep, rest = spec.partition("=")
    rule, sep2, members = rest.partition(":")
    people = tuple(m.strip() for m in members.split(",") if m.strip())
    if not sep or not sep2 or not name.strip() or rule not in ("mean", "union") or not people:
        raise ValueError(f"--human-group takes NAME=mean:PERSON,PERSON,... or NAME=union:PERSON,...; got {spec!r}")
    return name.strip(), rule, people


def human_groups(groups: Sequence[tuple[str, str, tuple[str, ...]]], grades, items: dict, n_boot: int,
                 rng: np.random.Generator) -> dict:
    """Human baselines (seephys.txt §4.2): each person's answer sheet is graded like a model; a group's score on an
    item is the mean of its members' scores ("mean": the students of the lower levels) or the best of them
    ("union": an item counts as solved when any expert solved it). Items none of the members answered are left out.
    """
    out = {}
    for name, rule, members in groups:
        per_item: dict[str, list[float]] = defaultdict(list)
        for g in grades:
            if g.model in members and repeat_of(g) == FIRST_REPEAT and g.verdict != "missing":
                per_item[g.id].append(g.score)
        scores = {i: (max(v) if rule == "union" else float(np.mean(v))) for i, v in per_item.items()}
        levels: dict[str, list[float]] = defaultdict(list)
        for i, score in scores.items():
            level = level_name(items[i].meta.get("level"))
            if level is not None:
                levels[level].append(score)
        out[name] = {"rule": rule, "members": list(members),
                     "members_found": sorted({g.model for g in grades if g.model in members}),
                     "accuracy": mean_ci(list(scores.values()), n_boot, rng),
                     "levels": {k: mean_ci(v, n_boot, rng) for k, v in sorted(levels.items())}}
    return out


def build(benchmark: str, units, grades, items: dict, errors: list[dict], by: Sequence[str], n_boot: int,
          seed: int, humans: Sequence[tuple[str, str, tuple[str, ...]]] = ()) -> dict:
    rng = np.random.default_rng(seed)
    graded: dict[tuple, Any] = {(g.model, g.extra.get("setting", ""), repeat_of(g), g.id): g
                                for g in grades}
    undecided: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for e in errors:
        if e.get("kind") == "undecided":
            undecided[(e["model"], e.get("setting") or "")][e["cause"]] += 1
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for u in units:
        groups[(u.model, u.setting)].append(u)
    blocks = []
    for (model, setting), members in sorted(groups.items()):
        kept = [graded[u.key] for u in members if u.key in graded]
        # An answer the judge failed on keeps its similarity metrics (CSMBench open) but has no grade score
        got = [g for g in kept if not g.extra.get("judge_failed")]
        scores = [g.score for g in got]
        causes = undecided[(model, setting)]
        missing = sum(1 for g in got if g.verdict == "missing")
        block: dict[str, Any] = {
            "model": model, "setting": setting or None, "answers": len(members) - missing, "missing": missing,
            "items": len({u.pred.id for u in members}), "graded": len(got),
            "accuracy": mean_ci(scores, n_boot, rng),
            "accuracy_undecided_as_wrong": (sum(scores) / len(members)) if members else None,
            "undecided": sum(causes.values()), "judge_failures": causes.get("judge_failed", 0),
            "no_judge": causes.get("no_judge", 0),
            "unparsed": sum(1 for g in got if g.verdict == "unparsed"),
            "stages": {s: sum(1 for g in got if g.stage == s) for s in STAGES},
            "by": {},
        }
        for key in by:
            cells: dict[str, list[float]] = defaultdict(list)
            for g in got:
                cells[stratum(items[g.id].meta, key)].append(g.score)
            block["by"][key] = {v: mean_ci(s, n_boot, rng) for v, s in sorted(cells.items())}
        if benchmark == "seephys":
            block["levels"] = _levels(got, items, n_boot, rng)
        for metric in OPEN_METRICS:  # CSMBench open: the raw metrics beside the grade's score
            values = [g.extra[metric] for g in kept if g.extra.get(metric) is not None]
            if values:
                block[metric] = mean_ci(values, n_boot, rng)
                block[f"{metric}_by"] = {
                    key: {v: mean_ci(x, n_boot, rng) for v, x in sorted(_cells(kept, items, key, metric).items())}
                    for key in by}
        labelled = [g.extra["error_type"] for g in got if "error_type" in g.extra]
        if labelled:
            block["error_types"] = {c: labelled.count(c) for c in sorted(set(labelled))}
        blocks.append(block)
    out: dict[str, Any] = {
        "benchmark": benchmark,
        "counts": {"answers": sum(b["answers"] for b in blocks), "missing": sum(b["missing"] for b in blocks),
                   "graded": sum(not g.extra.get("judge_failed") for g in grades),
                   "undecided": sum(b["undecided"] for b in blocks),
                   "judge_failures": sum(b["judge_failures"] for b in blocks),
                   "no_judge": sum(b["no_judge"] for b in blocks), "unparsed": sum(b["unparsed"] for b in blocks),
                   "errors": len(errors)},
        "models": blocks,
        "settings_gaps": _gaps(graded, n_boot, rng),
    }
    if benchmark == "seephys":
        out["difficulty_tags"] = _difficulty(graded, items)
    if benchmark == "csmbench-open":
        out["correlations"] = correlations(grades, items)
    if humans:
        out["human_baselines"] = human_groups(humans, grades, items, n_boot, rng)
    return out


def _levels(got, items, n_boot, rng) -> dict:
    cells: dict[str, list[float]] = defaultdict(list)
    for g in got:
        name = level_name(items[g.id].meta.get("level"))
        if name is None:
            continue
        cells[name].append(g.score)
        cells["theory_memorization" if name in THEORY else "problem_solving"].append(g.score)
    return {k: mean_ci(v, n_boot, rng) for k, v in sorted(cells.items())}


def _gaps(graded: dict, n_boot: int, rng: np.random.Generator) -> dict:
    per: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for (model, setting, repeat, item_id), g in graded.items():
        if repeat == FIRST_REPEAT and setting:
            per[model][setting][item_id] = g.score
    out = {}
    for model, settings in sorted(per.items()):
        row: dict[str, Any] = {s: float(np.mean(list(v.values()))) for s, v in sorted(settings.items())}
        for setting in sorted(settings):
            # Any benchmark: a setting against its blind run (eval --blind): the gain from seeing.
            blind = settings.get(setting + BLIND_SUFFIX)
            if blind is not None:
                common = sorted(settings[setting].keys() & blind.keys())
                if common:
                    a = np.array([settings[setting][i] for i in common])
                    b = np.array([blind[i] for i in common])
                    row[f"vision_gain_{setting}"] = float(a.mean() - b.mean())
                    row[f"relative_blind_gap_{setting}"] = _gap(a, b, n_boot, rng)
        if "TV" not in settings:
            if any(k.startswith("vision_gain_") for k in row):
                out[model] = row
            continue
        tv = settings["TV"]
        for setting, name in GAPS.items():
            if setting in settings:
                common = sorted(tv.keys() & settings[setting].keys())
                if common:
                    a = np.array([tv[i] for i in common])
                    b = np.array([settings[setting][i] for i in common])
                    row[name] = _gap(a, b, n_boot, rng)
                    if setting == "TO":
                        row["vision_gain"] = float(a.mean() - b.mean())
        if len(row) > len(settings):
            out[model] = row
    return out


def _difficulty(graded: dict, items: dict) -> dict:
    """Table 5: each item tagged by the share of models (TV, first repeat) that solve it."""
    solved: dict[str, dict[str, float]] = defaultdict(dict)
    for (model, setting, repeat, item_id), g in graded.items():
        if repeat == FIRST_REPEAT and setting in ("TV", ""):
            solved[item_id][model] = g.score
    models = sorted({m for v in solved.values() for m in v})
    if len(models) < 2:
        return {"models": models, "note": "needs two or more models graded on the same items"}
    tags: dict[str, dict[str, Any]] = {}
    for item_id, scores in solved.items():
        if len(scores) != len(models):
            continue  # an item not graded for every model has no share
        tag = f"{round(100 * sum(scores.values()) / len(models))}%"
        cell = tags.setdefault(tag, {"items": 0, "level_counts": defaultdict(int), "solved": defaultdict(float)})
        cell["items"] += 1
        for model, score in scores.items():
            cell["solved"][model] += score
        name = level_name(items[item_id].meta.get("level"))
        if name is not None:
            cell["level_counts"][name] += 1
    for cell in tags.values():
        cell["level_counts"] = dict(sorted(cell["level_counts"].items()))
        cell["accuracy"] = {m: cell["solved"][m] / cell["items"] for m in models}
        del cell["solved"]
    return {"models": models, "tags": dict(sorted(tags.items(), key=lambda kv: -float(kv[0][:-1])))}


def _cells(got, items: dict, key: str, metric: str) -> dict[str, list[float]]:
    cells: dict[str, list[float]] = defaultdict(list)
    for g in got:
        if g.extra.get(metric) is not None:
            cells[stratum(items[g.id].meta, key)].append(g.extra[metric])
    return cells


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than 3 pairs or a constant side."""
    if len(x) < 3:
        return None
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    a, b = a - a.mean(), b - b.mean()
    den = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return None if den == 0 else float((a * b).sum() / den)


def correlations(grades, items: dict) -> dict:
    """csmbench.txt Fig. 2 and its metric comparison: Pearson's r of STS and the judge over answers; per model, its
    rank by each metric (``models_by_metric``); and, per metric, r between the scales over the models' mean scores
    (one point per model; three models at least)."""
    both = [(g.extra["sts"], g.extra["judge_score"]) for g in grades
            if g.extra.get("sts") is not None and g.extra.get("judge_score") is not None]
    out: dict[str, Any] = {"sts_vs_judge": {"answers": len(both),
                                            "r": pearson([p[0] for p in both], [p[1] for p in both])}}
    out["models_by_metric"] = _rank_shift(grades)
    for metric in ("sts", "judge_score"):
        means: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for g in grades:
            scale = items[g.id].meta.get("scale")
            if g.extra.get(metric) is not None and scale is not None:
                means[str(scale)][g.model].append(g.extra[metric])
        scales = sorted(means)
        models = sorted({m for s in scales for m in means[s]})
        table: dict[str, dict[str, float | None]] = {}
        for s1 in scales:
            table[s1] = {}
            for s2 in scales:
                common = [m for m in models if m in means[s1] and m in means[s2]]
                table[s1][s2] = pearson([float(np.mean(means[s1][m])) for m in common],
                                        [float(np.mean(means[s2][m])) for m in common])
        out[f"{metric}_across_scales"] = {"models": models, "r": table}
    return out


def ablation(grades, sets: Sequence[str], n_boot: int, seed: int) -> dict:
    """matvqa.txt §5.2, Table 3: each model's accuracy on the main item set and on each other set with the same ids
    (language- or caption-shortcut removed), each out of its own items (an item without an answer counts wrong),
    and the relative drop (main − set) / main over the items both sets hold (``shared``: how many, and both
    accuracies on them), with a paired bootstrap interval. The main set is every answer outside the named sets
    (first repeat)."""
    rng = np.random.default_rng(seed)
    per: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for g in grades:
        if repeat_of(g) == FIRST_REPEAT:
            setting = g.extra.get("setting", "")
            per[g.model]["main" if setting not in sets else setting][g.id] = g.score
    out = {}
    for model, by_set in sorted(per.items()):
        main = by_set.get("main", {})
        row: dict[str, Any] = {"main": {"accuracy": float(np.mean(list(main.values()))) if main else None,
                                        "items": len(main)}}
        for name in sets:
            answers = by_set.get(name, {})
            common = sorted(main.keys() & answers.keys())
            a, b = np.array([main[i] for i in common]), np.array([answers[i] for i in common])
            row[name] = {"accuracy": float(np.mean(list(answers.values()))) if answers else None,
                         "items": len(answers),
                         "shared": {"items": len(common), "main_accuracy": float(a.mean()) if common else None,
                                    "accuracy": float(b.mean()) if common else None},
                         "relative_drop": _gap(a, b, n_boot, rng) if common else None}
        out[model] = row
    return out


#: Model-name prefixes of the families a judge might favour (csmbench.txt: GPT-4o judging GPT models). A name
#: that matches none is a family of its own; ``--family MODEL=FAMILY`` overrides.
FAMILY_PREFIXES = (("gpt", "gpt"), ("chatgpt", "gpt"), ("o1", "gpt"), ("o3", "gpt"), ("o4", "gpt"),
                   ("claude", "claude"), ("gemini", "gemini"), ("gemma", "gemini"), ("qwen", "qwen"),
                   ("qvq", "qwen"), ("internvl", "internvl"), ("llama", "llama"), ("llava", "llava"),
                   ("deepseek", "deepseek"), ("mistral", "mistral"), ("pixtral", "mistral"), ("glm", "glm"),
                   ("phi", "phi"), ("smollm", "smollm"))


def family_of(model: str, overrides: dict[str, str] | None = None) -> str:
    if overrides and model in overrides:
        return overrides[model]
    name = model.lower().rsplit("/", 1)[-1]
    return next((family for prefix, family in FAMILY_PREFIXES if name.startswith(prefix)), name)


def families(models_by_metric: dict, judge_model: str | None, overrides: dict[str, str] | None = None) -> dict:
    """The judge's score against STS per model family: each family's models, mean STS, mean judge score and mean
    ``judge_lift``; ``judge_family_lift`` is the lift of the judge's own family (None when none of its models
    was graded), the number to read against the others for csmbench.txt's family-bias concern."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for model in models_by_metric:
        grouped[family_of(model, overrides)].append(model)
    by_family = {}
    for family, models in sorted(grouped.items()):
        rows = [models_by_metric[m] for m in models]
        by_family[family] = {"models": models, "sts": float(np.mean([r["sts"] for r in rows])),
                             "judge_score": float(np.mean([r["judge_score"] for r in rows])),
                             "mean_judge_lift": float(np.mean([r["judge_lift"] for r in rows]))}
    judge_family = family_of(judge_model, overrides) if judge_model is not None else None
    return {"judge": judge_model, "judge_family": judge_family, "by_family": by_family,
            "judge_family_lift": by_family[judge_family]["mean_judge_lift"] if judge_family in by_family else None}


def _rank_shift(grades) -> dict:
    """Each model's mean STS and judge score, its rank by each (1 = best) and ``judge_lift`` = STS rank − judge rank:
    a model the judge places well above where STS puts it (a large positive lift) is what csmbench.txt's concern
    about a judge favouring its own family would look like."""
    sts: dict[str, list[float]] = defaultdict(list)
    judge: dict[str, list[float]] = defaultdict(list)
    for g in grades:
        if g.extra.get("sts") is not None and g.extra.get("judge_score") is not None:
            sts[g.model].append(g.extra["sts"])
            judge[g.model].append(g.extra["judge_score"])
    models = sorted(sts)
    if not models:
        return {}
    s_mean = {m: float(np.mean(sts[m])) for m in models}
    j_mean = {m: float(np.mean(judge[m])) for m in models}
    s_rank = dict(zip(models, (len(models) + 1 - average_ranks(np.array([s_mean[m] for m in models]))).tolist()))
    j_rank = dict(zip(models, (len(models) + 1 - average_ranks(np.array([j_mean[m] for m in models]))).tolist()))
    return {m: {"sts": s_mean[m], "judge_score": j_mean[m], "sts_rank": s_rank[m], "judge_rank": j_rank[m],
                "judge_lift": s_rank[m] - j_rank[m]} for m in models}
