"""Beyond the papers: paired comparisons on the same items.

- Does seeing help: per model, accuracy with the image (TV, or a setting S) minus without it (TO, or S-blind) on
  the items graded in both, with a paired bootstrap interval (grade's summary gives the relative gaps; the absolute
  one needs the per-item grades).
- Model against model: the mean per-item difference of two models on the items both answered (score's primary
  metric, or grade's score), a paired bootstrap interval and a two-sided bootstrap p-value.
- Judges: agreement between two judges (Cohen's kappa) and the audit's judge error rate, as grade's summary holds them.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

import numpy as np

from benchmint import tasks
from benchmint.benchmarks.evaluate import BLIND_SUFFIX
from benchmint.grade.summary import FIRST_REPEAT
from benchmint.metrics.rowfiles import read_score_rows, score_rows_source
from benchmint.report import plots
from benchmint.report.discover import Run, read_jsonl
from benchmint.report.style import Sink

SECTION = "Paired comparisons"
N_BOOT = 2000
SEED = 0


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """Mean of a − b over paired items, its 95% percentile interval from resampling items, and a two-sided p-value
    (twice the share of resampled means on the far side of 0, at most 1)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = len(d)
    if n == 0:
        return {"n": 0, "mean": None, "low": None, "high": None, "p": None}
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
    low, high = np.quantile(boot, [0.025, 0.975])
    mean = float(d.mean())
    if mean == 0:
        p = 1.0
    else:
        p = min(1.0, 2.0 * float(np.mean(boot <= 0) if mean > 0 else np.mean(boot >= 0)))
    return {"n": n, "mean": mean, "low": float(low), "high": float(high), "p": p}


def _grade_scores(run: Run) -> dict[tuple[str, str], dict[str, float]]:
    """(model, setting) -> item -> score, first repeat."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for g in read_jsonl(run.file("grades.jsonl")):
        if g.get("repeat", FIRST_REPEAT) == FIRST_REPEAT:
            out[(g["model"], g.get("setting") or "")][g["id"]] = float(g["score"])
    return out


def _compare(x: dict[str, float], y: dict[str, float]) -> dict:
    common = sorted(x.keys() & y.keys())
    return paired_bootstrap(np.array([x[i] for i in common]), np.array([y[i] for i in common]))


def draw_grade(run: Run, sink: Sink) -> None:
    scores = _grade_scores(run)
    tag = run.label
    src = [str(run.file("grades.jsonl"))]
    rows: list[list] = [["model", "with", "without", "items", "gain", "low", "high", "p"]]
    for (model, setting), got in sorted(scores.items()):
        other = "TO" if setting == "TV" else setting + BLIND_SUFFIX
        if setting.endswith(BLIND_SUFFIX) or (model, other) not in scores:
            continue
        r = _compare(got, scores[(model, other)])
        if r["n"]:
            rows.append([model, setting, other, r["n"], r["mean"], r["low"], r["high"], r["p"]])
    if len(rows) > 1:
        sink.table(rows, f"vision-gain-{tag}", SECTION, "Does seeing help",
                   "Accuracy with the image minus without it on the items graded in both, paired bootstrap 95% "
                   "interval and p-value.", src)
        fig, ax = plots.dumbbell([f"{r[0]}: {r[1]} − {r[2]}" for r in rows[1:]],
                                 {"gain": [(r[4], r[5], r[6]) for r in rows[1:]]},
                                 "accuracy difference (with − without image)", xlim=(-1, 1))
        ax.axvline(0, color="0.3", linewidth=0.6)
        sink.figure(fig, f"vision-gain-{tag}", SECTION, "Does seeing help",
                    "Per model, accuracy with the image minus without it (TV − TO, or a setting against its blind "
                    "run), with paired bootstrap 95% intervals.", src)
    _judges(run, sink)


def _judges(run: Run, sink: Sink) -> None:
    s = run.summary
    rows: list[list] = [["check", "judges_or_labels", "n", "value", "low", "high"]]
    agree = s.get("judge_agreement")
    if agree:
        rows.append(["Cohen's kappa", " vs ".join(agree.get("judges", [])), agree.get("answers"),
                     agree.get("kappa"), None, None])
    audit = s.get("audit")
    if audit:
        rows.append(["judge error rate (audit)", audit.get("labels"), audit.get("labelled"), audit.get("error_rate"),
                     audit.get("low"), audit.get("high")])
    if len(rows) > 1:
        sink.table(rows, f"judges-{run.label}", SECTION, "Judge agreement and audit",
                   "Kappa between two judges on the same answers; the judge's error rate against a person's labels "
                   "with a Wilson 95% interval.", [str(run.file("summary.json"))])


def _score_items(run: Run) -> tuple[str, dict[tuple[str, str], dict[str, float]]]:
    metric = tasks.get(run.summary["task"]).primary_metric
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in read_score_rows(run.path):
        out[(r["model"], "")][r["id"]] = float(r[metric])
    return metric, out


def draw_pairs(runs: list[Run], sink: Sink) -> None:
    """Every pair of models in one run, on the items both answered in the same setting."""
    for run in runs:
        if run.kind not in ("score", "grade"):
            continue
        try:
            metric, per = _score_items(run) if run.kind == "score" else ("accuracy", _grade_scores(run))
        except (KeyError, ValueError, OSError) as exc:
            sink.problem(f"{run.path}: no paired comparison ({type(exc).__name__}: {exc})")
            continue
        rows: list[list] = [["model_a", "model_b", "setting", "metric", "items", "a_minus_b", "low", "high", "p"]]
        for (ma, sa), (mb, sb) in combinations(sorted(per), 2):
            if sa != sb or sa.endswith(BLIND_SUFFIX):
                continue
            r = _compare(per[(ma, sa)], per[(mb, sb)])
            if r["n"]:
                rows.append([ma, mb, sa or None, metric, r["n"], r["mean"], r["low"], r["high"], r["p"]])
        if len(rows) < 2:
            continue
        src = [str(score_rows_source(run.path) if run.kind == "score" else run.file("grades.jsonl"))]
        sink.table(rows, f"pairs-{run.label}", SECTION, f"Model against model ({run.label})",
                   f"Mean per-item difference in {metric} on the items both models have, paired bootstrap 95% "
                   f"interval and two-sided p-value ({N_BOOT} resamples, seed {SEED}).", src)
        fig, ax = plots.dumbbell([f"{r[0]} − {r[1]}" + (f" ({r[2]})" if r[2] else "") for r in rows[1:]],
                                 {"difference": [(r[5], r[6], r[7]) for r in rows[1:]]},
                                 f"difference in mean {metric}", xlim=(-1, 1))
        ax.axvline(0, color="0.3", linewidth=0.6)
        sink.figure(fig, f"pairs-{run.label}", SECTION, f"Model against model ({run.label})",
                    "Paired differences with 95% bootstrap intervals; an interval off 0 is a difference the items "
                    "support.", src)


# A set-scored benchmark's setting with its image against the same without it: a setting against its blind run
# (``eval --blind``), and CrystalXRD-Bench's "full" (figure and CIF) against "cif_only" (the CIF alone).
WITHOUT_IMAGE = {"full": "cif_only"}
METRIC_NAMES = {"sip_f1": "SIP-F1", "jaccard": "Jaccard"}


def _prediction_settings(run: Run) -> dict[str, str]:
    """model -> the setting its predictions carry (eval writes it on every line; "" where none is given)."""
    out: dict[str, str] = {}
    for recorded in run.summary.get("predictions") or ():
        path = run.input_path(recorded)
        if path is None:
            continue
        for row in read_jsonl(path):
            model = row.get("model") or "default"
            if model not in out:
                out[model] = row.get("setting") or ""
    return out


def draw_score_gaps(runs: list[Run], sink: Sink) -> None:
    """Does seeing help, for SPM-Bench (SIP-F1) and CrystalXRD-Bench (Jaccard): per model, the primary metric with
    the image minus without it on the items scored in both, across score runs (each setting is its own run)."""
    per: dict[tuple[str, str, str], dict[str, float]] = {}
    where: dict[tuple[str, str, str], str] = {}
    for run in runs:
        if run.kind != "score":
            continue
        try:
            metric, scores = _score_items(run)
            settings = _prediction_settings(run)
        except (KeyError, ValueError, OSError) as exc:
            sink.problem(f"{run.path}: no with/without-image comparison ({type(exc).__name__}: {exc})")
            continue
        for (model, _), got in scores.items():
            key = (run.summary["task"], model, settings.get(model, ""))
            if key[2] and key not in per:  # a run without a setting cannot be paired; the first run of a key counts
                per[key], where[key] = got, str(score_rows_source(run.path))
    rows: list[list] = [["task", "metric", "model", "with", "without", "items", "gain", "low", "high", "p"]]
    src: list[str] = []
    for (task, model, setting), got in sorted(per.items()):
        if setting.endswith(BLIND_SUFFIX):
            continue
        for other in (setting + BLIND_SUFFIX, WITHOUT_IMAGE.get(setting)):
            if other is None or (task, model, other) not in per:
                continue
            r = _compare(got, per[(task, model, other)])
            if r["n"]:
                rows.append([task, tasks.get(task).primary_metric, model, setting, other, r["n"], r["mean"],
                             r["low"], r["high"], r["p"]])
                src += [where[(task, model, setting)], where[(task, model, other)]]
    if len(rows) < 2:
        return
    src = sorted(set(src))
    sink.table(rows, "vision-gain-scores", SECTION, "Does seeing help (set-scored benchmarks)",
               "Per model, the benchmark's primary metric (SPM-Bench SIP-F1, CrystalXRD-Bench Jaccard) with the image "
               "minus without it, on the items scored in both runs; paired bootstrap 95% interval and p-value "
               f"({N_BOOT} resamples, seed {SEED}).", src)
    fig, ax = plots.dumbbell([f"{r[2]} ({METRIC_NAMES.get(r[1], r[1])}): {r[3]} − {r[4]}" for r in rows[1:]],
                             {"gain": [(r[6], r[7], r[8]) for r in rows[1:]]},
                             "gain (with − without the image)", xlim=(-1, 1))
    ax.axvline(0, color="0.3", linewidth=0.6)
    sink.figure(fig, "vision-gain-scores", SECTION, "Does seeing help (SIP-F1, Jaccard)",
                "Per model, SPM-Bench SIP-F1 or CrystalXRD-Bench Jaccard with the image minus without it (a setting "
                "against its blind run; CrystalXRD full against cif_only), with paired bootstrap 95% intervals.", src)
