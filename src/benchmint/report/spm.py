"""SPM-Bench's figures and tables (spm-bench.txt) from ``benchmint score --task mcq`` runs.

EM / SPC / SIP-F1 per model with intervals (the headline comparison), SIP-F1 by domain as a radar per model (the
eight-domain radars), by Bloom level (Fig. 3's levels), Table 4 (SIP-F1 of the paper's answer scenarios over λ and Γ,
from the metric's own function), the λ×Γ sensitivity of each model's mean SIP-F1 (Fig. 5, over the run's per-item
tp/fp/fn), personalities (Table 2, §4.2), and the confidence–difficulty–tokens panels (Fig. 8) from the predictions
the run read.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from benchmint.metrics.batch import score_counts
from benchmint.metrics.rowfiles import SCORES_FILE, read_score_rows, score_rows_source
from benchmint.records import DEFAULT_MODEL
from benchmint.report import plots
from benchmint.report.discover import Run, read_jsonl, score_ci, stratum_order
from benchmint.report.style import COLUMN, PAGE, Sink, colour, figure, legend_below, marker

SECTION = "SPM-Bench"
HEADLINE = (("EM", "em"), ("SPC", "spc"), ("SIP-F1", "sip_f1"))
LAMBDAS = (0.4, 0.5, 0.6, 0.7)  # Fig. 5's region
GAMMAS = (4.0, 5.0, 6.0, 7.0, 8.0)
#: Table 4 of the paper: (|Sc|, TP, FP) scenarios, λ columns and Γ rows (Γ only matters when FP > 0).
TABLE4_SCENARIOS = ((1, 1, 1), (1, 1, 0), (2, 2, 1), (2, 2, 0), (2, 1, 0), (3, 3, 1), (3, 2, 0), (3, 1, 0))
TABLE4_LAMBDAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
TABLE4_GAMMAS = (1.0, 2.0, 4.0, 6.0, 8.0, 10.0)


def table4_rows() -> list[list]:
    """SIP-F1 of each scenario (Table 4) by the metric's own function: one row per (|Sc|, TP, FP, Γ)."""
    rows: list[list] = [["gold_size", "tp", "fp", "gamma", *(f"lambda_{lam}" for lam in TABLE4_LAMBDAS)]]
    for g, tp, fp in TABLE4_SCENARIOS:
        for gamma in (TABLE4_GAMMAS if fp else (None,)):
            cells = []
            for lam in TABLE4_LAMBDAS:
                s = score_counts(np.array([tp]), np.array([tp + fp]), np.array([g]), sip_lambda=lam,
                                 sip_gamma=gamma or 1.0)
                cells.append(round(float(s["sip_f1"][0]), 6))
            rows.append([g, tp, fp, gamma, *cells])
    return rows


def per_item(run: Run) -> dict[str, list[dict]]:
    """scores.jsonl rows per model, in file order."""
    out: dict[str, list[dict]] = defaultdict(list)
    for row in read_score_rows(run.path):
        out[row["model"]].append(row)
    return out


def sensitivity(rows: list[dict], lambdas=LAMBDAS, gammas=GAMMAS) -> np.ndarray:
    """Mean SIP-F1 of a model's items over (Γ rows, λ columns), recomputed from each item's tp/fp/fn."""
    tp = np.array([r["tp"] for r in rows], dtype=np.int64)
    n_pred = tp + np.array([r["fp"] for r in rows], dtype=np.int64)
    n_gold = tp + np.array([r["fn"] for r in rows], dtype=np.int64)
    grid = np.empty((len(gammas), len(lambdas)))
    for i, gamma in enumerate(gammas):
        for j, lam in enumerate(lambdas):
            grid[i, j] = score_counts(tp, n_pred, n_gold, sip_lambda=lam, sip_gamma=gamma)["sip_f1"].mean()
    return grid


def _sources(run: Run, *names: str) -> list[str]:
    return [str(score_rows_source(run.path) if n == SCORES_FILE else run.file(n)) for n in names]


def draw(run: Run, sink: Sink) -> None:
    s = run.summary
    models = list(s["models"])
    if not models:
        sink.problem(f"{run.path}: the score run holds no model")
        return
    tag = run.label
    blocks = s["models"]
    header = ["model", "n"]
    for _, key in (*HEADLINE, ("J", "jaccard"), ("P", "precision"), ("R", "recall")):
        header += [key, f"{key}_low", f"{key}_high"]
    header += ["parse_success_rate", "mean_pred_size", "over_prediction_rate", "personality"]
    rows: list[list] = [header]
    for m in models:
        b = blocks[m]
        row: list = [m, b["n"]]
        for _, key in (*HEADLINE, ("J", "jaccard"), ("P", "precision"), ("R", "recall")):
            row += list(score_ci(b["metrics"].get(key)))
        row += [b["parse_success_rate"], b["mean_pred_size"], b["over_prediction_rate"],
                (b.get("personality") or {}).get("label")]
        rows.append(row)
    sink.table(rows, f"spm-metrics-{tag}", SECTION, "Per-model metrics",
               "Macro means with 95% bootstrap intervals, parse success, mean |P|, over-prediction rate and "
               "personality, as score's summary.json holds them.", _sources(run, "summary.json"))

    fig, _ = plots.dumbbell(models, {label: [score_ci(blocks[m]["metrics"][key]) for m in models]
                                     for label, key in HEADLINE}, "score (0–1), 95% bootstrap CI")
    sink.figure(fig, f"spm-dumbbell-{tag}", SECTION, "EM, SPC and SIP-F1 per model",
                "Each model's three scores on one line; whiskers are 95% bootstrap intervals. SIP-F1 ≤ SPC where a "
                "model adds wrong options.", _sources(run, "summary.json"))

    for field in s["params"].get("by", []):
        values = stratum_order({v for m in models for v in blocks[m]["by"].get(field, {})})
        if not values:
            continue
        cells = {m: [blocks[m]["by"][field].get(v) for v in values] for m in models}
        if field.lower() == "domain" and len(values) >= 3:
            fig, _ = plots.radar(values, {m: [c["metrics"]["sip_f1"]["mean"] if c else None for c in cells[m]]
                                          for m in models})
            sink.figure(fig, f"spm-domain-radar-{tag}", SECTION, "SIP-F1 by domain",
                        "Mean SIP-F1 of each model on each domain's items (radius 0–1).",
                        _sources(run, "summary.json"))
        else:
            fig, _ = plots.grouped_bars(values, {m: [score_ci(c["metrics"]["sip_f1"]) if c else (None, None, None)
                                                     for c in cells[m]] for m in models},
                                        "SIP-F1 (0–1)", field, rotate=max(map(len, values)) > 6)
            sink.figure(fig, f"spm-by-{field}-{tag}", SECTION, f"SIP-F1 by {field}",
                        f"Mean SIP-F1 per {field} with 95% bootstrap intervals"
                        + (" (Bloom levels, Fig. 3)." if field.lower() == "level" else "."),
                        _sources(run, "summary.json"))

    if not any(o.name == "spm-table4-sip-f1-sensitivity" for o in sink.outputs):  # the metric's, not a run's
        sink.table(table4_rows(), "spm-table4-sip-f1-sensitivity", SECTION, "Table 4: SIP-F1 of answer scenarios",
                   "SIP-F1 of a single item with |Sc| gold options, TP right and FP wrong selections, for each λ "
                   "(columns) and Γ (rows; Γ has no effect without a wrong option).", [])
        _figure5(sink)

    items = per_item(run)
    grids = {m: sensitivity(items[m]) for m in models if items.get(m)}
    if grids:
        cols = min(4, len(grids))
        nrows = -(-len(grids) // cols)
        fig, axes = figure(PAGE if cols > 2 else COLUMN * cols / 1.6, 1.9 * nrows + 0.5, nrows=nrows, ncols=cols,
                           squeeze=False)
        table: list[list] = [["model", "gamma", *(f"lambda_{lam}" for lam in LAMBDAS)]]
        for k, (m, grid) in enumerate(grids.items()):
            ax = axes[k // cols][k % cols]
            im = plots.heatmap(ax, grid, [f"{lam:g}" for lam in LAMBDAS], [f"{g:g}" for g in GAMMAS], vmin=0, vmax=1)
            ax.set_title(m, fontsize=8)
            ax.set_xlabel("cutoff λ")
            ax.set_ylabel("penalty Γ")
            table += [[m, g, *(float(x) for x in grid[i])] for i, g in enumerate(GAMMAS)]
        for k in range(len(grids), nrows * cols):
            axes[k // cols][k % cols].set_visible(False)
        fig.colorbar(im, ax=axes, shrink=0.8, label="mean SIP-F1")
        sink.figure(fig, f"spm-lambda-gamma-{tag}", SECTION, "SIP-F1 sensitivity to λ and Γ",
                    f"Each model's mean SIP-F1 recomputed from its items' TP/FP/FN over λ ∈ [0.4, 0.7] and "
                    f"Γ ∈ [4, 8]; the run used λ = {s['params']['sip_lambda']:g}, Γ = {s['params']['sip_gamma']:g}.",
                    _sources(run, "scores.jsonl"))
        sink.table(table, f"spm-lambda-gamma-{tag}", SECTION, "Mean SIP-F1 over λ and Γ",
                   "The values of the λ×Γ heatmap.", _sources(run, "scores.jsonl"))

    _personalities(run, sink, models, blocks, tag)
    _panels(run, sink, items, tag)
    _dataset(run, sink, tag)


def _dataset(run: Run, sink: Sink, tag: str) -> None:
    """Table 1 (items, options offered, gold options, by domain) and the items per (Bloom) level of Fig. 3, from
    the gold file the run scored."""
    recorded = (run.summary.get("gold") or {}).get("file")
    gold = run.input_path(recorded)
    if gold is None:
        sink.problem(f"{run.path}: gold file {recorded} not found: no dataset statistics")
        return
    items = read_jsonl(gold)
    per: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        per[str((it.get("meta") or {}).get("domain", "(missing)"))].append(it)

    def mean_of(group, get):
        vals = [v for v in map(get, group) if isinstance(v, (int, float))]
        return float(np.mean(vals)) if vals else None

    rows: list[list] = [["domain", "items", "mean_options", "mean_gold_options", "multi_answer_share"]]
    for domain in [*stratum_order(per), "all"]:
        group = items if domain == "all" else per[domain]
        rows.append([domain, len(group), mean_of(group, lambda it: (it.get("meta") or {}).get("n_options")),
                     mean_of(group, lambda it: len(it.get("answer") or [])),
                     sum(1 for it in group if len(it.get("answer") or []) > 1) / len(group) if group else None])
    sink.table(rows, f"spm-table1-{tag}", SECTION, "Table 1: dataset statistics",
               "Items per domain, options offered (the gold's meta n_options), gold options per item and the share "
               "of items with more than one right option.", [str(gold)])
    levels: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for it in items:
        meta = it.get("meta") or {}
        if "level" in meta:
            levels[str(meta["level"])][str(meta.get("domain", "(missing)"))] += 1
    if not levels:
        return
    order = stratum_order(levels)
    domains = stratum_order({d for v in levels.values() for d in v})
    fig, ax = figure(COLUMN, 2.6)
    bottom = np.zeros(len(order))
    for i, d in enumerate(domains):
        vals = np.array([levels[lv].get(d, 0) for lv in order])
        ax.bar(order, vals, bottom=bottom, color=colour(i), label=d, edgecolor="white", linewidth=0.4)
        bottom += vals
    ax.set_xlabel("cognitive (Bloom) level")
    ax.set_ylabel("items")
    ax.yaxis.get_major_locator().set_params(integer=True)
    legend_below(fig, ax, len(domains))
    sink.figure(fig, f"spm-levels-{tag}", SECTION, "Items per level", "The gold items per level, stacked by "
                "domain (Fig. 3).", [str(gold)])


def _personalities(run: Run, sink: Sink, models, blocks, tag: str) -> None:
    header = ["model", "label", "token_profile", "precision", "recall", "sip_f1", "over_selection_rate",
              "under_selection_rate", "abstention_rate", "spc_minus_sip_f1", "overconfident", "ece", "reason"]
    rows: list[list] = [header]
    for m in models:
        p = blocks[m].get("personality") or {}
        rows.append([m, p.get("label"), (p.get("token_profile") or {}).get("label"), p.get("precision"),
                     p.get("recall"), p.get("sip_f1"), p.get("over_selection_rate"), p.get("under_selection_rate"),
                     p.get("abstention_rate"), p.get("spc_minus_sip_f1"), p.get("overconfident"),
                     (blocks[m].get("calibration") or {}).get("ece"), p.get("reason")])
    sink.table(rows, f"spm-personalities-{tag}", SECTION, "Personalities (Table 2, §4.2)",
               "Each model's selection habits and its label by the rules of metrics/behaviour.py.",
               _sources(run, "summary.json"))


def _panels(run: Run, sink: Sink, items: dict[str, list[dict]], tag: str) -> None:
    """Fig. 8: SIP-F1 against stated confidence, stated difficulty and tokens (per-item, from the predictions)."""
    stated: dict[tuple[str, str], dict] = {}
    for recorded in run.summary.get("predictions", []):
        path = run.input_path(recorded)
        if path is None:
            sink.problem(f"{run.path}: predictions file {recorded} not found: no confidence/difficulty panels")
            return
        for row in read_jsonl(path):
            stated.setdefault((row.get("model") or DEFAULT_MODEL, str(row.get("id"))), row)  # score names it so too
    fields = [("confidence", "stated confidence (0–1)"), ("difficulty", "stated difficulty (0–1)"),
              ("tokens", "reply length (tokens)")]
    data: dict[str, dict[str, np.ndarray]] = {f: {} for f, _ in fields}
    for m, rows in items.items():
        for f, _ in fields:
            pairs = [(float(stated[(m, r["id"])][f]), r["sip_f1"]) for r in rows
                     if isinstance(stated.get((m, r["id"]), {}).get(f), (int, float))]
            if len(pairs) >= 5:
                data[f][m] = np.array(pairs)
    shown = [(f, label) for f, label in fields if data[f]]
    if not shown:
        return
    fig, axes = figure(PAGE, 2.5, ncols=len(shown), squeeze=False)
    for k, (f, label) in enumerate(shown):
        ax = axes[0][k]
        for i, (m, arr) in enumerate(data[f].items()):
            # Quintile bins of the stated value: the mean score in each, at the bin's mean value.
            edges = np.unique(np.quantile(arr[:, 0], np.linspace(0, 1, 6)))
            idx = np.clip(np.searchsorted(edges, arr[:, 0], side="right") - 1, 0, max(0, len(edges) - 2))
            xs = [arr[idx == b, 0].mean() for b in range(len(edges) - 1) if (idx == b).any()]
            ys = [arr[idx == b, 1].mean() for b in range(len(edges) - 1) if (idx == b).any()]
            ax.plot(xs, ys, marker=marker(i), color=colour(i), label=m, markersize=3)
        if f == "confidence":
            ax.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=0.8, label="perfect calibration")
        ax.set_xlabel(label)
        ax.set_ylabel("mean SIP-F1 (0–1)")
        ax.set_ylim(0, 1.02)
    legend_below(fig, axes[0][0], len(data[shown[0][0]]) + 1)
    sink.figure(fig, f"spm-confidence-difficulty-tokens-{tag}", SECTION, "Score against confidence, difficulty "
                "and tokens", "Mean SIP-F1 in quintile bins of each stated value (Fig. 8); the dashed line is "
                "confidence equal to score.", _sources(run, "scores.jsonl") + [str(p) for p in
                                                                              run.summary.get("predictions", [])])


def _figure5(sink: Sink) -> None:
    """Fig. 5: SIP-F1 of the Aggressive answer ({A, B, C} for {A, B}: TP 2, FP 1) over λ and Γ, against the 0.40 of
    the Conservative one ({A}: TP 1, FP 0, at λ = 0.6)."""
    lambdas = np.round(np.arange(0.4, 0.71, 0.05), 2)
    gammas = np.arange(4.0, 8.01, 1.0)
    grid = np.array([[score_counts(np.array([2]), np.array([3]), np.array([2]), sip_lambda=float(lam),
                                   sip_gamma=float(g))["sip_f1"][0] for lam in lambdas] for g in gammas])
    fig, ax = figure(COLUMN + 0.5, 2.6)
    im = plots.heatmap(ax, grid, [f"{lam:g}" for lam in lambdas], [f"{g:g}" for g in gammas], vmin=0, vmax=0.5)
    ax.set_xlabel("cutoff λ")
    ax.set_ylabel("penalty Γ")
    fig.colorbar(im, ax=ax, shrink=0.85, label="SIP-F1 of TP 2, FP 1")
    rows: list[list] = [["gamma", *(f"lambda_{lam:g}" for lam in lambdas)]]
    rows += [[float(g), *(float(x) for x in grid[i])] for i, g in enumerate(gammas)]
    sink.figure(fig, "spm-fig5-aggressive", SECTION, "SIP-F1 of an aggressive answer over λ and Γ",
                "An answer with both right options and one wrong one (|Sc| = 2) scores below the 0.40 of the "
                "conservative single right option everywhere in λ ∈ [0.4, 0.7], Γ ∈ [4, 8] (Fig. 5).", [])
    sink.table(rows, "spm-fig5-aggressive", SECTION, "SIP-F1 of an aggressive answer over λ and Γ",
               "The values of the heatmap.", [])
