"""Judges checked against people (seephys.txt D.4 checked its judge on 200 items by hand).

``write_sheet``: a stratified sample of the judge's decisions as a CSV sheet
a person fills in. Strata are (model, judge verdict), so the wrong answers the
judge accepted and the right ones it rejected are both looked at; each stratum
gets a share of the sample proportional to its size and at least one row;
the draw is seeded. The ``person`` column is left empty for a 0 or 1.

``read_labels`` + ``report``: the filled sheet read back; the judge's error
rate (share of labelled rows where person and judge differ) with a 95%
Wilson interval, per verdict too, and the rows where they differ.

``agreement``: two judges on the same answers, Cohen's kappa and the
answers they differ on.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmint.grade.summary import FIRST_REPEAT, repeat_of
from benchmint.records import Grade, error_row

COLUMNS = ("id", "model", "setting", "question", "gold", "answer_judged", "judge", "person", "note")


def stratified_sample(grades: list[Grade], n: int, seed: int) -> list[Grade]:
    """Up to ``n`` of the judge-decided grades, proportionally from each (model, verdict) stratum."""
    if n < 1:
        raise ValueError(f"--audit-sample must be >= 1, got {n}")
    strata: dict[tuple, list[Grade]] = defaultdict(list)
    for g in grades:
        if g.stage == "judge":
            strata[(g.model, g.verdict)].append(g)
    total = sum(len(v) for v in strata.values())
    if total <= n:
        return [g for v in strata.values() for g in v]
    rng = np.random.default_rng(seed)
    keys = sorted(strata, key=str)
    # Largest-remainder allocation with a floor of one per stratum.
    quota = {k: max(1, math.floor(n * len(strata[k]) / total)) for k in keys}
    rest = sorted(keys, key=lambda k: -(n * len(strata[k]) / total - math.floor(n * len(strata[k]) / total)))
    for k in rest:
        if sum(quota.values()) >= n:
            break
        if quota[k] < len(strata[k]):
            quota[k] += 1
    chosen: list[Grade] = []
    for k in keys:
        members = strata[k]
        picks = rng.choice(len(members), size=min(quota[k], len(members)), replace=False)
        chosen.extend(members[i] for i in sorted(picks))
    return chosen


def write_sheet(path: Path, sample: list[Grade], items: dict, shown: dict) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for g in sample:
            setting = g.extra.get("setting", "")
            item = items[g.id]
            w.writerow([g.id, g.model, setting, item.fields.get("question", ""), item.answer,
                        shown.get((g.model, setting, repeat_of(g), g.id), ""), g.verdict, "", ""])


def read_labels(path: str | Path) -> tuple[list[dict], list[dict]]:
    """Rows with a person's 0/1 and the judge's verdict; error rows for the others (file and line named)."""
    rows, errors = [], []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("id", "model", "judge", "person") if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: the audit sheet has no column {', '.join(missing)}")
        for line, row in enumerate(reader, start=2):
            person, judge = (row.get("person") or "").strip(), (row.get("judge") or "").strip()
            if person not in ("0", "1") or judge not in ("0", "1"):
                what = "person" if person not in ("0", "1") else "judge"
                errors.append(error_row("bad_label", f'column "{what}" must be 0 or 1, got {row.get(what)!r}',
                                        str(path), line, id=row.get("id"), model=row.get("model")))
                continue
            rows.append({"id": row["id"], "model": row["model"], "setting": row.get("setting") or None,
                         "judge": int(judge), "person": int(person), "line": line})
    return rows, errors


def check_labels(rows: list[dict], grades: list[Grade], path: str | Path) -> tuple[list[dict], list[dict]]:
    """The rows that audit a judge decision of this run as it was made; error rows for the others.

    A row whose (id, model, setting) the run did not decide by the judge (an unknown id, a judge that failed) or
    whose judge column differs from the run's verdict (edited) would measure something else: listed, left out.
    """
    decided = {(g.id, g.model, g.extra.get("setting") or None): g for g in grades
               if g.stage == "judge" and repeat_of(g) == FIRST_REPEAT}
    kept, errors = [], []
    for r in rows:
        g = decided.get((r["id"], r["model"], r["setting"]))
        if g is None:
            problem = (f"no judge decision of this run for item {r['id']!r} of model {r['model']!r}"
                       + (f" in setting {r['setting']}" if r["setting"] else "")
                       + " (an id the run does not hold, or one the judge failed on); left out of the error rate")
        elif str(r["judge"]) != g.verdict:
            problem = (f"the judge column says {r['judge']}, but the run's judge said {g.verdict} (edited?); left out "
                       "of the error rate")
        else:
            kept.append(r)
            continue
        errors.append(error_row("bad_label", problem, str(path), r["line"], id=r["id"], model=r["model"]))
    return kept, errors


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def report(rows: list[dict]) -> dict:
    def rate(subset: list[dict]) -> dict:
        wrong = sum(r["judge"] != r["person"] for r in subset)
        low, high = wilson(wrong, len(subset))
        return {"labelled": len(subset), "disagreements": wrong,
                "error_rate": wrong / len(subset) if subset else None,
                "low": None if math.isnan(low) else low, "high": None if math.isnan(high) else high}

    return {**rate(rows), "by_judge_verdict": {str(v): rate([r for r in rows if r["judge"] == v]) for v in (0, 1)},
            "disagreeing": [{k: r[k] for k in ("id", "model", "setting", "judge", "person", "line")}
                            for r in rows if r["judge"] != r["person"]]}


def cohen_kappa(a: list[int], b: list[int]) -> float | None:
    """Cohen's kappa of two raters' labels; None when undefined (no items, or chance agreement is certain)."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b)) / n
    labels = set(a) | set(b)
    chance = sum((a.count(v) / n) * (b.count(v) / n) for v in labels)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def agreement(paired: list[tuple[tuple, int, int]]) -> dict:
    """``paired``: (unit key, first judge's verdict, second's) for the answers both decided."""
    first, second = [p[1] for p in paired], [p[2] for p in paired]
    return {"answers": len(paired), "agree": sum(x == y for x, y in zip(first, second)),
            "kappa": cohen_kappa(first, second),
            "disagreeing": [{"model": k[0], "setting": k[1] or None, "id": k[3], "first": x, "second": y}
                            for k, x, y in paired if x != y]}
