"""What the figures of graded benchmarks share: a grade block's name, accuracy tables and by-stratum bars."""

from __future__ import annotations

from benchmint.report import plots
from benchmint.report.discover import Run, grade_ci, stratum_order
from benchmint.report.style import Sink


def block_name(block: dict) -> str:
    return block["model"] + (f" ({block['setting']})" if block.get("setting") else "")


def accuracy_table(run: Run, sink: Sink, section: str, prefix: str, title: str) -> None:
    rows: list[list] = [["model", "setting", "items", "answers", "graded", "accuracy", "low", "high",
                         "accuracy_undecided_as_wrong", "undecided", "unparsed", "missing"]]
    for b in run.summary["models"]:
        rows.append([b["model"], b.get("setting"), b.get("items"), b.get("answers"), b.get("graded"),
                     *grade_ci(b.get("accuracy")), b.get("accuracy_undecided_as_wrong"), b.get("undecided"),
                     b.get("unparsed"), b.get("missing")])
    humans = run.summary.get("human_baselines") or {}
    for name, h in humans.items():  # people's answer sheets as baseline rows (seephys.txt §4.2)
        acc = h.get("accuracy") or {}
        rows.append([f"{name} ({h['rule']} of {', '.join(h['members'])})", "people", acc.get("n"), None, None,
                     *grade_ci(acc), None, None, None, None])
    sink.table(rows, f"{prefix}-accuracy-{run.label}", section, title,
               "Accuracy out of the gold items with 95% bootstrap intervals; undecided answers (no judge, judge "
               "failure) are left out of accuracy and counted wrong in the lower bound"
               + ("; human baselines last: a group's score on an item is its members' mean or their best "
                  "(union), over the items they answered." if humans else "."),
               [str(run.file("summary.json"))])


def by_stratum(run: Run, sink: Sink, section: str, prefix: str, field: str, label: str, key: str = "by",
               metric: str = "accuracy", order: list[str] | None = None, metric_label: str | None = None,
               ylim: tuple[float, float] | None = (0, 1)) -> bool:
    """Bars of a metric per value of one stratum, one series per (model, setting); False when no block has it."""
    blocks = [b for b in run.summary["models"] if (b.get(key) or {}).get(field)]
    if not blocks:
        return False
    values = order or stratum_order({v for b in blocks for v in b[key][field]})
    series = {block_name(b): [grade_ci(b[key][field].get(v)) for v in values] for b in blocks}
    shown = metric_label or metric
    fig, _ = plots.grouped_bars(values, series, f"{shown} (0–1)" if ylim == (0, 1) else shown, label,
                                ylim=ylim, rotate=max(map(len, values)) > 8)
    sink.figure(fig, f"{prefix}-{metric}-by-{field}-{run.label}", section, f"{shown[0].upper()}{shown[1:]} by {label}",
                f"Mean {shown} per {label} with 95% bootstrap intervals.", [str(run.file("summary.json"))])
    return True
