"""Drawing primitives shared by the papers' figures: dumbbells, grouped bars, radars, heatmaps.

Intervals are drawn where the numbers carry them (``low``/``high`` None: a point without whiskers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from benchmint.report.style import COLUMN, PAGE, colour, figure, is_number, legend_below, marker

Interval = tuple[float | None, float | None, float | None]  # mean, low, high


def _num(x: float | None) -> float | None:
    return float(x) if x is not None and is_number(x) else None


def _err(values: Sequence[Interval]) -> np.ndarray | None:
    """Whisker lengths below and above each mean (0 where the interval or the mean is missing)."""
    lows, highs = [], []
    for v in values:
        m, lo, hi = _num(v[0]), _num(v[1]), _num(v[2])
        lows.append(m - lo if m is not None and lo is not None else 0.0)
        highs.append(hi - m if m is not None and hi is not None else 0.0)
    return None if not any(lows) and not any(highs) else np.array([lows, highs])


def _mean(v: Interval) -> float:
    m = _num(v[0])
    return np.nan if m is None else m


def dumbbell(rows: Sequence[str], series: Mapping[str, Sequence[Interval]], xlabel: str, xlim=(0, 1)):
    """One line per row (a model) joining its series' means, each mean a marker with its interval."""
    fig, ax = figure(COLUMN, max(1.8, 0.9 + 0.32 * len(rows) + 0.15 * len(series)))
    y = np.arange(len(rows))[::-1]
    means = np.array([[_mean(v) for v in vals] for vals in series.values()])
    with np.errstate(all="ignore"):
        lo, hi = np.nanmin(means, axis=0), np.nanmax(means, axis=0)
    ax.hlines(y, lo, hi, color="0.75", linewidth=3, zorder=1)
    offsets = np.linspace(-0.12, 0.12, len(series)) if len(series) > 1 else [0.0]
    for i, (name, vals) in enumerate(series.items()):
        ax.errorbar([_mean(v) for v in vals], y + offsets[i], xerr=_err(vals), fmt=marker(i), color=colour(i),
                    label=name, capsize=2, elinewidth=0.8, zorder=3)
    ax.set_yticks(y, rows)
    ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    legend_below(fig, ax, len(series))
    return fig, ax


def grouped_bars(categories: Sequence[str], series: Mapping[str, Sequence[Interval]], ylabel: str, xlabel: str = "",
                 ylim=(0, 1), width: float | None = None, rotate: bool = False):
    """Bars per category, one per series, with interval whiskers."""
    n = max(1, len(series))
    fig, ax = figure(width or (COLUMN if len(categories) * n <= 12 else PAGE), 2.6)
    x = np.arange(len(categories))
    w = 0.8 / n
    for i, (name, vals) in enumerate(series.items()):
        xs = x + (i - (n - 1) / 2) * w
        ax.bar(xs, [0.0 if np.isnan(_mean(v)) else _mean(v) for v in vals], w, yerr=_err(vals),
               color=colour(i), label=name, capsize=2, error_kw={"elinewidth": 0.8}, edgecolor="white", linewidth=0.4)
        for xi, v in zip(xs, vals):
            if _num(v[0]) is None:  # no value is not a value of 0: said on the bar's place
                ax.annotate("n/a", (xi, 0), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                            rotation=90, fontsize=5, color=colour(i))
    ax.set_xticks(x, categories, rotation=30 if rotate else 0, ha="right" if rotate else "center")
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(axis="x", visible=False)
    legend_below(fig, ax, n)
    return fig, ax


def radar(axes_labels: Sequence[str], series: Mapping[str, Sequence[float | None]], rmax: float = 1.0):
    """A polar chart with one closed line per series over the axes (values missing on an axis drawn at 0)."""
    import matplotlib.pyplot as plt

    from benchmint.report.style import styled

    with styled():
        fig = plt.figure(figsize=(COLUMN, COLUMN + 0.3 + 0.12 * len(series)), layout="constrained")
        ax = cast(Any, fig.add_subplot(projection="polar"))  # a PolarAxes
    angles = np.linspace(0, 2 * np.pi, len(axes_labels), endpoint=False)
    closed = np.append(angles, angles[0])
    for i, (name, vals) in enumerate(series.items()):
        v = np.array([x if is_number(x) else 0.0 for x in vals], dtype=float)
        ax.plot(closed, np.append(v, v[0]), color=colour(i), marker=marker(i), markersize=3, label=name)
        ax.fill(closed, np.append(v, v[0]), color=colour(i), alpha=0.08)
    ax.set_xticks(angles, axes_labels)
    ax.set_ylim(0, rmax)
    ax.set_yticks(np.linspace(0, rmax, 5)[1:])
    ax.set_rlabel_position(180 / len(axes_labels))  # between the first two axes, off their labels
    ax.tick_params(axis="y", labelsize=6)
    legend_below(fig, ax, len(series))
    return fig, ax


def heatmap(ax, matrix: np.ndarray, xlabels: Sequence[str], ylabels: Sequence[str], fmt: str = "{:.2f}",
            vmin: float | None = None, vmax: float | None = None, cmap: str = "viridis"):
    """Cells coloured by value (viridis: ordered for every reader), each annotated; NaN cells left grey."""
    masked = np.ma.masked_invalid(np.asarray(matrix, dtype=float))
    import matplotlib

    im = ax.imshow(masked, cmap=matplotlib.colormaps[cmap].with_extremes(bad="0.85"), vmin=vmin, vmax=vmax,
                   aspect="auto")
    ax.set_xticks(range(len(xlabels)), xlabels)
    ax.set_yticks(range(len(ylabels)), ylabels)
    ax.grid(False)
    for (r, c), v in np.ndenumerate(np.asarray(matrix, dtype=float)):
        if np.isfinite(v):
            red, green, blue, _ = im.cmap(im.norm(v))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # the cell's luminance picks the text colour
            ax.text(c, r, fmt.format(v), ha="center", va="center", fontsize=6, color="white" if dark else "black")
    return im
