"""What the generators made: result codes from a ``benchmint generate`` run's run.json, and reviewers' agreement
from ``benchmint generate review import``'s review_summary.json.

- Result codes: each count group of run.json (``code_counts``: ``{"total", "codes": {code: {count, share}}}``):
  the figures' outcomes and the questions' or problems' of every generator, MatVQA's two shortcut-removal stages
  (``stage1`` language, ``stage2`` caption). The table lists every code the generator knows, zero or not; the
  figure draws the codes that occurred, one panel per group, as shares of the group's results.
- Review: per criterion and pair of reviewers, % agreement and Cohen's kappa on the items both marked.
"""

from __future__ import annotations

import numpy as np

from benchmint.report import plots
from benchmint.report.discover import Run
from benchmint.report.style import PAGE, Sink, colour, figure

SECTION = "Generation"
# run.json's groups in a reader's words (others keep their key)
GROUPS = {"figures": "figures", "questions": "questions", "problems": "problems",
          "stage1": "stage 1 (language removed)", "stage2": "stage 2 (caption removed)"}


def code_groups(run_json: dict) -> dict[str, dict]:
    """The result-code groups of a generator's run.json, in its key order."""
    return {k: v for k, v in run_json.items()
            if isinstance(v, dict) and isinstance(v.get("codes"), dict) and "total" in v}


def draw_codes(run: Run, sink: Sink) -> None:
    groups = code_groups(run.summary)
    bench = run.summary.get("benchmark", "?")
    src = [str(run.file("run.json"))]
    if not groups:
        sink.note(f"{run.path}: the generation run's run.json holds no result codes")
        return
    rows: list[list] = [["generator", "group", "code", "count", "share", "group_total"]]
    for key, g in groups.items():
        for code, c in g["codes"].items():
            rows.append([bench, key, code, c.get("count"), c.get("share"), g["total"]])
    sink.table(rows, f"generate-codes-{run.label}", SECTION, f"Result codes of generate {bench} ({run.label})",
               "Every result code of each stage of the generation, with its count and share of the stage's "
               "results.", src)
    drawn = {k: g for k, g in groups.items() if g["total"]}
    if not drawn:
        sink.note(f"{run.path}: generate {bench} produced no results to draw")
        return
    heights = [0.35 + 0.2 * sum(1 for c in g["codes"].values() if c.get("count")) for g in drawn.values()]
    fig, axes = figure(PAGE / 2 + 0.6, max(1.8, 0.6 + sum(heights)), nrows=len(drawn), squeeze=False,
                       gridspec_kw={"height_ratios": heights})
    for i, (ax, (key, g)) in enumerate(zip(axes[:, 0], drawn.items())):
        seen = [(code, c["count"]) for code, c in g["codes"].items() if c.get("count")]
        y = np.arange(len(seen))[::-1]
        shares = [100.0 * n / g["total"] for _, n in seen]
        ax.barh(y, shares, color=colour(i), height=0.7)
        for yi, share, (_, n) in zip(y, shares, seen):
            ax.annotate(f"{n}", (share, yi), xytext=(2, 0), textcoords="offset points", va="center", fontsize=6)
        ax.set_yticks(y, [code for code, _ in seen])
        ax.set_xlim(0, 112)
        ax.set_title(f"{GROUPS.get(key, key)}: {g['total']} results", fontsize=7, loc="left")
        ax.grid(axis="y", visible=False)
    axes[-1, 0].set_xlabel("share of the stage's results (%); counts on the bars")
    sink.figure(fig, f"generate-codes-{run.label}", SECTION, f"Result codes of generate {bench}",
                "Share of each result code per stage of the generation (codes that did not occur are in the "
                "table).", src)


def draw_review(run: Run, sink: Sink) -> None:
    s = run.summary
    src = [str(run.file("review_summary.json"))]
    agreement = s.get("agreement") or {}
    rows: list[list] = [["criterion", "reviewer_a", "reviewer_b", "items", "agreement", "kappa"]]
    for criterion, c in agreement.items():
        for p in c.get("pairs", []):
            a, b = p["reviewers"]
            rows.append([criterion, a, b, p.get("items"), p.get("agreement"), p.get("kappa")])
        rows.append([criterion, "(mean of pairs)", None, None, c.get("mean_agreement"), c.get("mean_kappa")])
    sink.table(rows, f"review-agreement-{run.label}", SECTION, f"Reviewers' agreement ({run.label})",
               f"{s.get('reviewed')} of {s.get('items')} items reviewed by {', '.join(s.get('reviewers', []))}; "
               f"{s.get('rejected')} rejected. Per criterion and pair of reviewers, % agreement and Cohen's kappa "
               "on the items both marked.", src)
    pairs = sorted({(r[1], r[2]) for r in rows[1:] if r[2] is not None})
    if not pairs:
        sink.note(f"{run.path}: no two reviewers marked the same items: no agreement to draw")
        return
    criteria = list(agreement)
    series = {f"{a} vs {b}": [next(((r[5], None, None) for r in rows[1:] if r[0] == c and (r[1], r[2]) == (a, b)),
                                   (None, None, None)) for c in criteria] for a, b in pairs}
    fig, ax = plots.grouped_bars([c.replace("_", " ") for c in criteria], series, "Cohen's kappa (−1 to 1)",
                                 "criterion", ylim=(-1, 1))
    ax.axhline(0, color="0.3", linewidth=0.6)
    sink.figure(fig, f"review-agreement-{run.label}", SECTION, "Reviewers' agreement (Cohen's kappa)",
                "Kappa between each pair of reviewers per criterion on the items both marked; 0 is chance "
                "agreement, n/a where the pair shared no item or every mark was the same.", src)
