"""CSMBench's figures and tables (csmbench.txt) from ``benchmint grade --benchmark csmbench-open|csmbench-mcq``.

Tables I and II (each model's accuracy, or its open-answer metrics: STS, BERTScore, judge score); each metric by
scale; the correlation heatmaps of Fig. 2 (each metric between the scales over the models' means, and STS against
the judge); the items by scale and hybrid label (Fig. 3) from the gold items.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from benchmint.grade.summary import OPEN_METRICS, pearson
from benchmint.report import plots
from benchmint.report.discover import Run, grade_ci, read_jsonl
from benchmint.report.grading import accuracy_table, by_stratum
from benchmint.report.style import COLUMN, PAGE, Sink, colour, figure, legend_below

SECTION = "CSMBench"
LABELS = {"sts": "STS", "bertscore_f1": "BERTScore F1", "bertscore_minilm_f1": "BERTScore F1 (MiniLM tokens)",
          "judge_score": "judge score"}


def draw(run: Run, sink: Sink) -> None:
    s, tag = run.summary, run.label
    src = [str(run.file("summary.json"))]
    blocks = s["models"]
    if s["benchmark"] == "csmbench-mcq":
        accuracy_table(run, sink, SECTION, "csmbench-mcq", "Table I: multiple-choice accuracy")
        by_stratum(run, sink, SECTION, "csmbench-mcq", "scale", "scale")
        by_stratum(run, sink, SECTION, "csmbench-mcq", "hybrid", "hybrid label")
        _dataset(run, sink)
        return
    metrics = [m for m in OPEN_METRICS if any(m in b for b in blocks)]
    rows: list[list] = [["model", "setting", "items"] + [c for m in metrics for c in (m, f"{m}_low", f"{m}_high")]]
    rows += [[b["model"], b.get("setting"), b.get("items"), *(x for m in metrics for x in grade_ci(b.get(m)))]
             for b in blocks]
    sink.table(rows, f"csmbench-open-{tag}", SECTION, "Table II: open-answer metrics per model",
               "Means with 95% bootstrap intervals; BERTScore on MiniLM tokens is not comparable to published "
               "BERTScore.", src)
    for m in metrics:
        judge = m == "judge_score"  # on the judge's own scale (0-10 or 1-10), not 0-1
        by_stratum(run, sink, SECTION, "csmbench", "scale", "scale", key=f"{m}_by", metric=m,
                   metric_label=LABELS[m] + (" (judge's scale)" if judge else ""), ylim=(0, 10) if judge else (0, 1))
    corr = s.get("correlations") or {}
    panels = [(m, corr[f"{m}_across_scales"]) for m in ("sts", "judge_score") if f"{m}_across_scales" in corr]
    panels = [(m, p) for m, p in panels if p.get("r") and any(v is not None for row in p["r"].values()
                                                                   for v in row.values())]
    if panels:
        fig, axes = figure(PAGE if len(panels) > 1 else COLUMN + 0.6, 2.8, ncols=len(panels), squeeze=False)
        for ax, (m, p) in zip(axes[0], panels):
            scales = list(p["r"])
            mat = np.array([[np.nan if p["r"][a][b] is None else p["r"][a][b] for b in scales] for a in scales])
            im = plots.heatmap(ax, mat, scales, scales, vmin=-1, vmax=1, cmap="PuOr")
            ax.set_title(f"{LABELS[m]} ({len(p['models'])} models)", fontsize=8)
            ax.set_xlabel("scale")
            ax.set_ylabel("scale")
            ax.set_xticks(ax.get_xticks(), ax.get_xticklabels(), rotation=30, ha="right", rotation_mode="anchor")
        fig.colorbar(im, ax=axes, shrink=0.8, label="Pearson r")
        sts_judge = corr.get("sts_vs_judge") or {}
        note = (f" STS against the judge over {sts_judge['answers']} answers: r = {sts_judge['r']:.3f}."
                if sts_judge.get("r") is not None else "")
        sink.figure(fig, f"csmbench-correlations-{tag}", SECTION, "Correlation between scales",
                    "Pearson r between two scales of the models' mean scores (Fig. 2); grey where fewer than three "
                    "models share both." + note, src)
    elif corr:
        sink.note(f"{run.path}: the scale correlations need three or more models graded on two scales")
    if len(metrics) >= 2:
        _between_metrics(run, sink, metrics)
    shift = corr.get("models_by_metric") or {}
    if shift:
        rows = [["model", "sts", "judge_score", "sts_rank", "judge_rank", "judge_lift"]]
        rows += [[m, v["sts"], v["judge_score"], v["sts_rank"], v["judge_rank"], v["judge_lift"]]
                 for m, v in shift.items()]
        sink.table(rows, f"csmbench-judge-lift-{tag}", SECTION, "Ranks by STS and by the judge",
                   "judge_lift = STS rank − judge rank: how far the judge places a model above STS.", src)
    _dataset(run, sink)


def _dataset(run: Run, sink: Sink) -> None:
    """Fig. 3: items by scale and hybrid label, read from the graded rows' gold (grades carry no meta)."""
    gold = run.input_path((run.summary.get("inputs") or {}).get("gold"))
    meta_file = None
    if gold is not None:
        meta_file = gold / "metadata.jsonl" if gold.is_dir() else gold
    if meta_file is None or not meta_file.is_file():
        sink.problem(f"{run.path}: gold items not found: no dataset breakdown")
        return
    items = read_jsonl(meta_file)
    pairs = Counter((str(it.get("scale") or "(none)"), str(it.get("hybrid") or "(none)")) for it in items)
    scales = sorted({a for a, _ in pairs})
    hybrids = sorted({b for _, b in pairs})
    fig, ax = figure(COLUMN, 2.4)
    bottom = np.zeros(len(scales))
    for i, h in enumerate(hybrids):
        vals = np.array([pairs[(sc, h)] for sc in scales])
        ax.bar(scales, vals, bottom=bottom, color=colour(i), label=f"hybrid: {h}")
        bottom += vals
    ax.set_xlabel("scale")
    ax.set_ylabel("items")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(axis="x", rotation=20)
    legend_below(fig, ax, len(hybrids))
    sink.figure(fig, f"csmbench-dataset-{run.label}", SECTION, "Items by scale and hybrid label",
                f"The {len(items)} gold items (Fig. 3).", [str(meta_file)])


def _between_metrics(run: Run, sink: Sink, metrics: list[str]) -> None:
    """Fig. 2's other half: Pearson r between each two metrics over the answers that have both (grades.jsonl)."""
    rows = read_jsonl(run.file("grades.jsonl"))
    mat = np.full((len(metrics), len(metrics)), np.nan)
    counts = np.zeros((len(metrics), len(metrics)), dtype=int)
    for i, a in enumerate(metrics):
        for j, b in enumerate(metrics):
            pairs = [(r[a], r[b]) for r in rows if r.get(a) is not None and r.get(b) is not None]
            counts[i, j] = len(pairs)
            r = pearson([p[0] for p in pairs], [p[1] for p in pairs])
            mat[i, j] = np.nan if r is None else r
    labels = [LABELS[m] for m in metrics]
    fig, ax = figure(COLUMN + 0.6, 2.9)
    im = plots.heatmap(ax, mat, labels, labels, vmin=-1, vmax=1, cmap="PuOr")
    ax.set_xticks(ax.get_xticks(), ax.get_xticklabels(), rotation=30, ha="right", rotation_mode="anchor")
    fig.colorbar(im, ax=ax, shrink=0.8, label="Pearson r")
    sink.figure(fig, f"csmbench-metric-correlations-{run.label}", SECTION, "Correlation between metrics",
                f"Pearson r between two metrics over the answers that have both ({int(counts.min())} to "
                f"{int(counts.max())} answers; grey: fewer than three, or a constant metric).",
                [str(run.file("grades.jsonl"))])
    table = [["metric", *metrics]] + [[m, *(None if np.isnan(v) else float(v) for v in mat[i])]
                                      for i, m in enumerate(metrics)]
    sink.table(table, f"csmbench-metric-correlations-{run.label}", SECTION, "Correlation between metrics",
               "The values of the heatmap.", [str(run.file("grades.jsonl"))])
