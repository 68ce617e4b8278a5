"""MatVQA's figures and tables (matvqa.txt) from ``benchmint grade --benchmark matvqa`` runs.

Accuracy per model and by task type (the paper's task categories) and domain; the two-stage shortcut ablation
(Table 3: raw → language-removed → caption-removed), each set's accuracy and the relative drop over the items both
sets hold, as grade's summary.json holds them (``--ablation``).
"""

from __future__ import annotations

import numpy as np

from benchmint.report.discover import Run
from benchmint.report.grading import accuracy_table, by_stratum
from benchmint.report.style import PAGE, Sink, colour, figure, legend_below, marker

SECTION = "MatVQA"


def draw(run: Run, sink: Sink) -> None:
    s, tag = run.summary, run.label
    src = [str(run.file("summary.json"))]
    accuracy_table(run, sink, SECTION, "matvqa", "Accuracy per model")
    by_stratum(run, sink, SECTION, "matvqa", "task", "task type")
    by_stratum(run, sink, SECTION, "matvqa", "domain", "domain")
    ablation = s.get("ablation") or {}
    if not ablation:
        return
    sets = [n for n in next(iter(ablation.values())) if n != "main"]
    rows: list[list] = [["model", "set", "items", "accuracy", "shared_items", "main_accuracy_shared",
                         "accuracy_shared", "relative_drop", "drop_low", "drop_high"]]
    for model, row in ablation.items():
        rows.append([model, "main", row["main"]["items"], row["main"]["accuracy"], None, None, None, None, None,
                     None])
        for name in sets:
            r = row.get(name) or {}
            drop = r.get("relative_drop") or {}
            shared = r.get("shared") or {}
            rows.append([model, name, r.get("items"), r.get("accuracy"), shared.get("items"),
                         shared.get("main_accuracy"), shared.get("accuracy"), drop.get("mean"), drop.get("low"),
                         drop.get("high")])
    sink.table(rows, f"matvqa-ablation-{tag}", SECTION, "Table 3: shortcut ablation",
               "Each item set's accuracy (out of its own items) and the relative drop from the main set over the "
               "items both hold, with a paired bootstrap interval.", src)
    fig, ax = figure(PAGE / 2 + 0.4, 2.6)
    stages = ["main", *sets]
    for i, (model, row) in enumerate(ablation.items()):
        ys = [(row.get(n) or {}).get("accuracy") for n in stages]
        ax.plot(range(len(stages)), [np.nan if y is None else y for y in ys], marker=marker(i), color=colour(i),
                label=model)
        for k, n in enumerate(sets, 1):
            drop = ((row.get(n) or {}).get("relative_drop") or {}).get("mean")
            if drop is not None and ys[k] is not None:
                ax.annotate(f"−{100 * drop:.0f}%", (k, ys[k]), textcoords="offset points", xytext=(4, 3), fontsize=6,
                            color=colour(i))
    ax.set_xticks(range(len(stages)), ["raw" if n == "main" else n for n in stages])
    ax.set_xlabel("item set")
    ax.set_ylabel("accuracy (0–1)")
    ax.set_ylim(0, 1.05)
    legend_below(fig, ax, len(ablation))
    sink.figure(fig, f"matvqa-ablation-{tag}", SECTION, "Accuracy as shortcuts are removed",
                "Each model's accuracy on the raw items and on each rewritten set; labels are the relative drop "
                "from the raw set over the items both hold (Table 3).", src)
