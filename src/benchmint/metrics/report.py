"""Plain-text tables of a scoring summary for the terminal."""

from __future__ import annotations

from benchmint import tasks

COLUMNS = (("EM", "em"), ("SPC", "spc"), ("SIP-F1", "sip_f1"), ("Jacc", "jaccard"), ("Prec", "precision"),
           ("Rec", "recall"), ("F1", "f1"), ("J_pen", "j_pen"), ("F1_pen", "f1_pen"))


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(r) for r in rows)])


def _cells(block: dict) -> list[str]:
    m = block["metrics"]
    return ([str(block["n"])] + [f"{m[key]['mean']:.4f}" for _, key in COLUMNS]
            + [f"{100 * block['parse_success_rate']:.1f}", f"{block['mean_pred_size']:.2f}",
               f"{100 * block['over_prediction_rate']:.1f}"])


def render(summary: dict) -> str:
    header = ["model", "n", *(c for c, _ in COLUMNS), "parse%", "avg|P|", "OP%", "personality"]
    rows = []
    for name, block in summary["models"].items():
        rows.append([name, *_cells(block), block["personality"]["label"] or "-"])
    parts = [f"task {summary['task']}  ·  gold {summary['gold']['n_items']} items  ·  "
             f"95% CI from {summary['params']['bootstrap_resamples']} bootstrap resamples (in summary.json)"
             + ("  ·  reflections folded by each item's Laue group" if summary["params"].get("symmetry") else ""),
             _table(header, rows)]
    primary = tasks.get(summary["task"]).primary_metric
    names = list(summary["models"])
    for field in summary["params"]["by"]:
        values = sorted({v for b in summary["models"].values() for v in b["by"].get(field, {})})
        if not values:
            continue
        srows = []
        for value in values:
            cells = [f"{field}={value}"]
            for name in names:
                b = summary["models"][name]["by"][field].get(value)
                cells.append(f"{b['metrics'][primary]['mean']:.4f} (n={b['n']})" if b else "-")
            srows.append(cells)
        parts.append(f"\n{primary} by {field}\n" + _table([field, *names], srows))
    for name, block in summary["models"].items():
        calib = block.get("calibration")
        if calib and "ece" in calib:
            parts.append(f"{name} calibration ({calib['score_metric']}): ECE {calib['ece']:.4f}  "
                         f"Brier {calib['brier']:.4f}  mean confidence {calib['mean_confidence']:.3f}")
        if block["unparsed_ids"]:
            shown = ", ".join(block["unparsed_ids"][:5]) + (" ..." if len(block["unparsed_ids"]) > 5 else "")
            parts.append(f"{name}: {len(block['unparsed_ids'])} unparseable outputs scored as empty ({shown})")
    errs = summary["errors"]
    if errs["count"]:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(errs["by_kind"].items()))
        parts.append(f"\n{errs['count']} input problems ({kinds}); every one is listed in {errs['file']}")
    return "\n".join(parts)
