"""CrystalXRD-Bench's figures and tables (crystalxrd-bench.txt) from ``score --task hkl`` and ``xrd build`` runs.

Table 1 (items per database: union sizes, 3- vs 4-index labels, mean |G|) from the built items; Table 2 (each model's
metrics) and the recall/precision ratio; Jaccard against J_pen with the drop the penalty makes (Fig. 5); Jaccard by
union size, by 2θ range and by database (Fig. 7); the six-axis radar with parse success and 1 − over-prediction
(Fig. 9); precision against recall with iso-F1 curves. Every number is read from score's summary.json.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from benchmint.metrics.rowfiles import read_score_rows, score_rows_source
from benchmint.report import plots
from benchmint.report.discover import Run, read_jsonl, score_ci, stratum_order
from benchmint.report.style import COLUMN, Sink, colour, figure, is_number, legend_below, marker

SECTION = "CrystalXRD-Bench"
TABLE2 = ("jaccard", "precision", "recall", "f1", "em", "j_pen", "f1_pen")
STRATA = (("union_size", "ground-truth union size"), ("angle_range", "2θ* range"), ("db", "database"))
UNION_ORDER = ("Single", "Double", "Triple+")


def _order(field: str, values) -> list[str]:
    if field == "union_size":
        return [v for v in UNION_ORDER if v in values] + stratum_order(set(values) - set(UNION_ORDER))
    return stratum_order(values)


def draw_scores(run: Run, sink: Sink) -> None:
    s, tag = run.summary, run.label
    blocks = s["models"]
    models = list(blocks)
    if not models:
        sink.problem(f"{run.path}: the score run holds no model")
        return
    src = [str(run.file("summary.json"))]
    header = ["model", "n"]
    for key in TABLE2:
        header += [key, f"{key}_low", f"{key}_high"]
    header += ["recall_over_precision", "parse_success_rate", "over_prediction_rate", "mean_pred_size"]
    rows: list[list] = [header]
    for m in models:
        b = blocks[m]
        row: list = [m, b["n"]]
        for key in TABLE2:
            row += list(score_ci(b["metrics"][key]))
        p, r = b["metrics"]["precision"]["mean"], b["metrics"]["recall"]["mean"]
        row += [r / p if p else None, b["parse_success_rate"], b["over_prediction_rate"], b["mean_pred_size"]]
        rows.append(row)
    sink.table(rows, f"xrd-table2-{tag}", SECTION, "Table 2: metrics per model",
               "Macro means with 95% bootstrap intervals" + (", reflections folded by each item's Laue group"
                                                             if s["params"].get("symmetry") else "")
               + "; recall/precision above 1 means the model leaves reflections out less than it adds wrong ones.",
               src)

    fig, ax = plots.dumbbell(models, {"Jaccard": [score_ci(blocks[m]["metrics"]["jaccard"]) for m in models],
                                      "J_pen": [score_ci(blocks[m]["metrics"]["j_pen"]) for m in models]},
                             "score (0–1), 95% bootstrap CI", xlim=(0, 1.18))
    for y, m in zip(range(len(models))[::-1], models):
        j, jp = blocks[m]["metrics"]["jaccard"]["mean"], blocks[m]["metrics"]["j_pen"]["mean"]
        if j:
            ax.annotate(f"−{100 * (j - jp) / j:.1f}%", (1.01, y), fontsize=6, va="center")
    sink.figure(fig, f"xrd-jaccard-jpen-{tag}", SECTION, "Jaccard and penalised Jaccard",
                "J_pen scales Jaccard by min(1, |G|/|P|); the label at the right is the relative drop (Fig. 5).", src)

    for field, label in STRATA:
        values = {v for m in models for v in blocks[m]["by"].get(field, {})}
        if not values:
            continue
        order = _order(field, values)
        series = {m: [score_ci(blocks[m]["by"][field][v]["metrics"]["jaccard"]) if v in blocks[m]["by"][field]
                      else (None, None, None) for v in order] for m in models}
        fig, _ = plots.grouped_bars(order, series, "Jaccard (0–1)", label, rotate=max(map(len, order)) > 8)
        sink.figure(fig, f"xrd-jaccard-by-{field}-{tag}", SECTION, f"Jaccard by {label}",
                    f"Mean Jaccard per {label} with 95% bootstrap intervals (Fig. 7).", src)

    axes = ["Jaccard", "F1", "precision", "recall", "parse success", "1 − over-prediction"]
    profile: dict[str, list[float | None]] = {}
    for m in models:
        b = blocks[m]
        profile[m] = [b["metrics"]["jaccard"]["mean"], b["metrics"]["f1"]["mean"], b["metrics"]["precision"]["mean"],
                     b["metrics"]["recall"]["mean"], b["parse_success_rate"], 1 - b["over_prediction_rate"]]
    fig, _ = plots.radar(axes, profile)
    sink.figure(fig, f"xrd-radar-{tag}", SECTION, "Six-axis profile", "Each model's Jaccard, F1, precision, recall, "
                "parse success and 1 − over-prediction rate (Fig. 9; outward is better on every axis).", src)

    if len(models) >= 2:
        _waterfall(blocks, models, sink, tag, src)
        _top_two_by_db(run, blocks, models, sink, tag)

    fig, ax = figure(COLUMN, COLUMN)
    grid = np.linspace(0.01, 1, 200)
    for f1 in (0.2, 0.4, 0.6, 0.8):
        p = grid[grid > f1 / (2 - f1)]
        ax.plot(p, f1 * p / (2 * p - f1), color="0.7", linewidth=0.6, linestyle=":")
        ax.annotate(f"F1={f1}", (1.0, f1 / (2 - f1)), fontsize=6, color="0.4", ha="right", va="bottom")
    for i, m in enumerate(models):
        b = blocks[m]["metrics"]
        ax.errorbar(b["precision"]["mean"], b["recall"]["mean"],
                    xerr=plots._err([score_ci(b["precision"])]), yerr=plots._err([score_ci(b["recall"])]),
                    fmt=marker(i), color=colour(i), label=m, capsize=2, elinewidth=0.8, clip_on=False)
    ax.set_xlim(0, 1.04)
    ax.set_ylim(0, 1.04)
    ax.set_xlabel("precision (0–1)")
    ax.set_ylabel("recall (0–1)")
    legend_below(fig, ax, len(models))
    sink.figure(fig, f"xrd-precision-recall-{tag}", SECTION, "Precision against recall",
                "Macro precision and recall per model with 95% intervals; dotted curves join equal F1.", src)


def draw_items(run: Run, sink: Sink) -> None:
    """Table 1: per database, items, union-size groups, 3- vs 4-index label sets and mean |G|."""
    items = read_jsonl(run.file("items.jsonl"))
    per: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        per[str(it.get("db") or (it.get("meta") or {}).get("db") or "(missing)")].append(it)
    rows: list[list] = [["db", "items", "single", "double", "triple_plus", "three_index", "four_index", "mean_G"]]
    for db in [*sorted(per), "all"]:
        group = items if db == "all" else per[db]
        sizes = [len(it["answer"]) for it in group]
        four = sum(1 for it in group if it["answer"] and len(it["answer"][0]) == 4)
        rows.append([db, len(group), sizes.count(1), sizes.count(2), sum(1 for n in sizes if n >= 3),
                     len(group) - four, four, float(np.mean(sizes)) if sizes else None])
    sink.table(rows, f"xrd-table1-{run.label}", SECTION, "Table 1: built items",
               "Items per database; ground-truth union sizes (single, double, three or more reflections), "
               "items labelled with 3 or 4 Miller indices, and the mean |G|.", [str(run.file("items.jsonl"))])
    two_theta = [it["two_theta_star"] for it in items if is_number(it.get("two_theta_star"))]
    if two_theta:
        fig, ax = figure(COLUMN, 2.2)
        ax.hist(two_theta, bins=np.arange(0, 92, 5), color=colour(0), edgecolor="white")
        ax.set_xlabel("2θ* of the strongest peak (degrees)")
        ax.set_ylabel("items")
        ax.yaxis.get_major_locator().set_params(integer=True)
        sink.figure(fig, f"xrd-two-theta-{run.label}", SECTION, "Where the strongest peak lies",
                    "Histogram of the built items' 2θ* in 5° bins.", [str(run.file("items.jsonl"))])


def _waterfall(blocks: dict, models: list[str], sink: Sink, tag: str, src: list[str]) -> None:
    """Fig. 10 (a): the two models with the highest Jaccard, metric by metric: the leader's score minus the other's."""
    first, second = sorted(models, key=lambda m: -blocks[m]["metrics"]["jaccard"]["mean"])[:2]
    diffs = [blocks[first]["metrics"][k]["mean"] - blocks[second]["metrics"][k]["mean"] for k in TABLE2]
    fig, ax = figure(COLUMN, 2.4)
    ax.bar(range(len(TABLE2)), diffs, color=[colour(0) if d >= 0 else colour(5) for d in diffs])
    ax.axhline(0, color="0.3", linewidth=0.6)
    for x, d in enumerate(diffs):
        ax.annotate(f"{d:+.3f}", (x, d), fontsize=6, ha="center", va="bottom" if d >= 0 else "top")
    ax.set_xticks(range(len(TABLE2)), ["Jaccard", "P", "R", "F1", "EM", "J_pen", "F1_pen"])
    ax.set_ylabel(f"{first} − {second}")
    ax.margins(y=0.2)
    sink.figure(fig, f"xrd-top-two-{tag}", SECTION, "The top two models, metric by metric",
                f"Mean score of {first} minus that of {second} (Fig. 10a); blue where {first} leads.", src)


def _top_two_by_db(run: Run, blocks: dict, models: list[str], sink: Sink, tag: str) -> None:
    """Fig. 10 (b): the two models with the highest Jaccard compared database by database on the items both
    answered: mean Jaccard difference with a paired bootstrap interval (databases from the gold the run read)."""
    from benchmint.report.paired import paired_bootstrap

    gold = run.input_path((run.summary.get("gold") or {}).get("file"))
    if gold is None:
        return
    db_of = {str(it["id"]): str((it.get("meta") or {}).get("db", "(missing)")) for it in read_jsonl(gold)}
    if len(set(db_of.values())) < 2:
        return
    first, second = sorted(models, key=lambda m: -blocks[m]["metrics"]["jaccard"]["mean"])[:2]
    per: dict[str, dict[str, float]] = {first: {}, second: {}}
    for r in read_score_rows(run.path):
        if r["model"] in per:
            per[r["model"]][r["id"]] = float(r["jaccard"])
    rows: list[list] = [["db", "items", "first", "second", "difference", "low", "high", "p"]]
    for db in stratum_order(set(db_of.values())):
        ids = sorted(i for i in per[first].keys() & per[second].keys() if db_of.get(i) == db)
        r = paired_bootstrap(np.array([per[first][i] for i in ids]), np.array([per[second][i] for i in ids]))
        if r["n"]:
            rows.append([db, r["n"], first, second, r["mean"], r["low"], r["high"], r["p"]])
    if len(rows) < 2:
        return
    sources = [str(score_rows_source(run.path)), str(gold)]
    sink.table(rows, f"xrd-top-two-by-db-{tag}", SECTION, "The top two models, database by database",
               "Mean Jaccard difference on each database's items both models answered, paired bootstrap 95% "
               "interval and p-value (Fig. 10b).", sources)
    fig, ax = plots.dumbbell([str(r[0]) for r in rows[1:]], {f"{first} − {second}": [(r[4], r[5], r[6])
                                                                                     for r in rows[1:]]},
                             "difference in mean Jaccard", xlim=(-1, 1))
    ax.axvline(0, color="0.3", linewidth=0.6)
    ax.set_ylabel("database")
    sink.figure(fig, f"xrd-top-two-by-db-{tag}", SECTION, "The top two models, database by database",
                f"{first} minus {second} in mean Jaccard per database, paired bootstrap 95% intervals (Fig. 10b).",
                sources)
