"""SeePhys's figures and tables (seephys.txt) from ``benchmint grade --benchmark seephys`` runs.

Accuracy per model and setting with the relative gaps Δ1 (TC), Δ2 (TO), Δ3 (VO) against TV (Table 3); accuracy by
level group (Table 4), by difficulty tag (Table 5), by subject, diagram type and vision relevance; the dataset's
make-up by level and subject (Fig. 7) from the gold items.
"""

from __future__ import annotations

from collections import Counter

from benchmint.grade.summary import LEVELS, level_name
from benchmint.report import plots
from benchmint.report.discover import Run, grade_ci, read_jsonl
from benchmint.report.grading import accuracy_table, block_name, by_stratum
from benchmint.report.style import PAGE, Sink, colour, figure

SECTION = "SeePhys"
DELTAS = (("delta1", "Δ1 (TC)"), ("delta2", "Δ2 (TO)"), ("delta3", "Δ3 (VO)"))
STRATA = (("subject", "subject"), ("img_category", "diagram type"), ("vision_relevance", "vision relevance"),
          ("language", "language"))


def draw(run: Run, sink: Sink) -> None:
    s, tag = run.summary, run.label
    src = [str(run.file("summary.json"))]
    accuracy_table(run, sink, SECTION, "seephys", "Accuracy per model and setting (Table 3)")
    models = sorted({b["model"] for b in s["models"]})
    settings = sorted({b.get("setting") or "" for b in s["models"]}, key=lambda x: ("TV", "TC", "TO", "VO").index(x)
                      if x in ("TV", "TC", "TO", "VO") else 9)
    cell = {(b["model"], b.get("setting") or ""): b for b in s["models"]}
    fig, _ = plots.grouped_bars(models, {st or "as given": [grade_ci((cell.get((m, st)) or {}).get("accuracy"))
                                                             for m in models] for st in settings},
                                "accuracy (0–1)", "model", rotate=max(map(len, models)) > 10)
    sink.figure(fig, f"seephys-accuracy-by-setting-{tag}", SECTION, "Accuracy by setting",
                "Accuracy of each model in each setting (TV text+vision, TC text+caption, TO text only, VO vision "
                "only) with 95% bootstrap intervals.", src)
    gaps = s.get("settings_gaps") or {}
    shown = [(k, label) for k, label in DELTAS if any(k in g for g in gaps.values())]
    if shown:
        gm = sorted(gaps)
        fig, ax = plots.grouped_bars(gm, {label: [grade_ci(gaps[m].get(k)) for m in gm] for k, label in shown},
                                     "relative gap (TV − X) / TV", "model", ylim=None)
        ax.axhline(0, color="0.3", linewidth=0.6)
        sink.figure(fig, f"seephys-deltas-{tag}", SECTION, "What each setting loses against TV",
                    "Δ1–Δ3 of Table 3 with paired bootstrap intervals over the items graded in both settings; "
                    "above 0 the model does worse without the diagram (or the text).", src)
    order = [n for n in (*LEVELS, "theory_memorization", "problem_solving")
             if any(n in (b.get("levels") or {}) for b in s["models"])]
    if order:
        series = {block_name(b): [grade_ci((b.get("levels") or {}).get(v)) for v in order] for b in s["models"]}
        fig, _ = plots.grouped_bars(order, series, "accuracy (0–1)", "knowledge level (Table 4)", rotate=True,
                                    width=PAGE)
        sink.figure(fig, f"seephys-accuracy-by-level-{tag}", SECTION, "Accuracy by knowledge level",
                    "Mid, High, BO, AO (problem solving) and UG, SUG, MA, PhD (theory memorization), with both "
                    "groups (Table 4); 95% bootstrap intervals.", src)
        rows = [["model", "setting", *order]]
        rows += [[b["model"], b.get("setting"), *((b.get("levels") or {}).get(v, {}).get("mean") for v in order)]
                 for b in s["models"]]
        sink.table(rows, f"seephys-table4-{tag}", SECTION, "Table 4: accuracy by level", "Mean accuracy.", src)
    for field, label in STRATA:
        by_stratum(run, sink, SECTION, "seephys", field, label)
    tags = (s.get("difficulty_tags") or {}).get("tags")
    if tags:
        tm = s["difficulty_tags"]["models"]
        rows = [["tag", "items", *tm, *LEVELS]]
        rows += [[t, c["items"], *(c["accuracy"][m] for m in tm), *(c["level_counts"].get(lv, 0) for lv in LEVELS)]
                 for t, c in tags.items()]
        sink.table(rows, f"seephys-table5-{tag}", SECTION, "Table 5: items by how many models solve them",
                   "Each tag is the share of the graded models that solve an item; per tag the items, each model's "
                   "accuracy and the items per level.", src)
    _dataset(run, sink)


def _dataset(run: Run, sink: Sink) -> None:
    """Fig. 7: the gold items by level, subject, diagram type and vision relevance (the fields the items have)."""
    gold = run.input_path((run.summary.get("inputs") or {}).get("gold"))
    if gold is None or not gold.is_file():
        sink.problem(f"{run.path}: gold items not found as a JSONL file: no dataset statistics")
        return
    items = read_jsonl(gold)
    def value(item: dict, key: str):
        return level_name(item.get("level")) if key == "level" else item.get(key)

    fields = [("level", "knowledge level"), *((k, label) for k, label in STRATA if k != "language")]
    counted = [(key, label, Counter(str(value(it, key) if value(it, key) is not None else "(none)") for it in items))
               for key, label in fields if any(value(it, key) is not None for it in items)]
    fig, axes = figure(PAGE, 2.4 * ((len(counted) + 1) // 2), ncols=2, nrows=(len(counted) + 1) // 2,
                       squeeze=False)
    for k, (_, label, counts) in enumerate(counted):
        ax = axes[k // 2][k % 2]
        names = [n for n in LEVELS if n in counts] + sorted(n for n in counts if n not in LEVELS)
        ax.bar(names, [counts[n] for n in names], color=colour(0))
        ax.set_xlabel(label)
        ax.set_ylabel("items")
        ax.tick_params(axis="x", rotation=30)
        ax.yaxis.get_major_locator().set_params(integer=True)
    for k in range(len(counted), axes.size):
        axes[k // 2][k % 2].set_visible(False)
    sink.figure(fig, f"seephys-dataset-{run.label}", SECTION, "The items",
                f"The {len(items)} gold items by " + ", ".join(label for _, label, _ in counted) + " (Fig. 7).",
                [str(gold)])
    rows: list[list] = [["field", "value", "items"]]
    rows += [[key, v, n] for key, _, counts in counted for v, n in sorted(counts.items())]
    sink.table(rows, f"seephys-dataset-{run.label}", SECTION, "Dataset statistics", "Gold items per value of each "
               "field.", [str(gold)])
