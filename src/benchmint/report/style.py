"""The report's one visual style and its outputs: each figure as PNG and SVG, each table as CSV.

Sizes are those of a paper's column (3.5 in) and page (7.2 in) at 8-point text, so a figure printed at column
width reads as the papers' do. Colours are Okabe and Ito's eight, safe for the common colour-vision deficiencies;
beyond eight series, markers and hatches tell them apart too.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")  # no display: figures are files
import matplotlib.pyplot as plt  # noqa: E402

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*")
COLUMN = 3.5  # inches: one column of a two-column paper
PAGE = 7.2  # inches: the full text width
DPI = 200

RC: dict[str, Any] = {
    "font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.frameon": False, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5, "lines.linewidth": 1.2, "lines.markersize": 5,
    "svg.fonttype": "none", "svg.hashsalt": "benchmint", "figure.dpi": DPI, "savefig.dpi": DPI,
    "font.family": "DejaVu Sans",
}


def styled():
    """A context in which matplotlib draws in the report's style."""
    return plt.rc_context(cast(Any, RC))  # matplotlib types its keys as literals; these are its own names


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def marker(i: int) -> str:
    return MARKERS[i % len(MARKERS)]


def figure(width: float = COLUMN, height: float | None = None, **kw):
    """A new figure in the report's style (height defaults to 3/4 of the width)."""
    with styled():
        return plt.subplots(figsize=(width, height if height is not None else 0.75 * width),
                            layout="constrained", **kw)


def legend_below(fig, ax, n: int, **kw) -> None:
    """The legend under the axes, off the data, in as many columns as fit the width."""
    ncol = max(1, min(n, int(fig.get_figwidth() // 1.2)))
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, **kw)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Output:
    """One figure or table of the report: where it came from and how to make it again."""

    name: str
    section: str
    title: str
    caption: str
    sources: list[str]
    files: dict[str, str] = field(default_factory=dict)  # kind ("png", "svg", "csv") -> file name
    rows: list[list[Any]] | None = None  # a table's rows (header first), for the HTML page


class Sink:
    """Writes figures and tables into the report folder and remembers them in order."""

    def __init__(self, out: Path, command: str) -> None:
        self.out = out
        self.command = command
        self.outputs: list[Output] = []
        self.problems: list[str] = []  # what could not be read or drawn, and why: on the page, never dropped
        self.notes: list[str] = []  # figures the runs hold too little for (three models for a correlation, ...)
        # The folders are the report's own: figures and tables of an earlier report into the same folder go,
        # so none is left that this one did not make.
        for sub, kinds in (("figures", ("*.png", "*.svg")), ("tables", ("*.csv",))):
            (out / sub).mkdir(parents=True, exist_ok=True)
            for kind in kinds:
                for old in (out / sub).glob(kind):
                    old.unlink()

    def _unique(self, name: str, table: bool) -> str:
        taken = {o.name for o in self.outputs if (o.rows is not None) == table}
        base, i = name, 2
        while name in taken:
            name, i = f"{base}-{i}", i + 1
        return name

    def figure(self, fig, name: str, section: str, title: str, caption: str, sources: list[str]) -> Output:
        name = self._unique(name, False)
        fig.suptitle(title, fontsize=RC["axes.titlesize"], fontweight="bold")
        files = {}
        for kind in ("png", "svg"):
            path = self.out / "figures" / f"{name}.{kind}"
            # Fixed metadata: the same run gives the same bytes.
            meta = {"Software": "benchmint"} if kind == "png" else {"Date": None, "Creator": "benchmint"}
            with styled():
                fig.savefig(path, format=kind, metadata=meta)
            files[kind] = f"figures/{name}.{kind}"
        plt.close(fig)
        out = Output(name, section, title, caption, sources, files)
        self.outputs.append(out)
        return out

    def table(self, rows: list[list[Any]], name: str, section: str, title: str, caption: str,
              sources: list[str]) -> Output:
        """rows[0] is the header. Floats are written in full (the CSV is for reading back); the page rounds."""
        name = self._unique(name, True)
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([["" if v is None else v for v in r] for r in rows])
        (self.out / "tables" / f"{name}.csv").write_text(buf.getvalue(), encoding="utf-8")
        out = Output(name, section, title, caption, sources, {"csv": f"tables/{name}.csv"}, rows)
        self.outputs.append(out)
        return out

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def note(self, text: str) -> None:
        self.notes.append(text)
