"""Review by people: a sample of generated items as one CSV sheet per reviewer, read back with their verdicts.

``export``: ``sample`` items drawn with a seed; ``round(overlap x sample)`` of them go to every reviewer (the
overlap agreement is measured on), the others are dealt to one reviewer each in turn. A sheet has the item
(question, lettered options, answer, image path) and a column per criterion of the benchmark (SPM-Bench and
MatVQA: answerability, correctness, distractor quality) to fill with yes or no, a verdict (keep or reject;
blank: reject when a criterion says no) and a comment. ``review.json`` records the draw.

``import``: every sheet read (the reviewer is the sheet's name); an item a reviewer rejects leaves items.jsonl
and gets a row in rejected.jsonl (stage "review", the reviewer, the criteria they said no to, their comment),
both written to a folder of their own after the generation's rejections;
agreement per criterion on the overlap as % agreement and Cohen's kappa, for each pair of reviewers and as
their mean. A cell that is not yes/no/blank is an error naming sheet, line and column.
"""

from __future__ import annotations

import csv
import json
import os
import random
from itertools import combinations
from pathlib import Path
from typing import Any

from benchmint.grade.audit import cohen_kappa
from benchmint.io import InputError, atomic_write, iter_jsonl, write_jsonl

CRITERIA = {"spm": ("answerability", "correctness", "distractor_quality"),
            "matvqa": ("answerability", "correctness", "distractor_quality")}
YES, NO = frozenset({"yes", "y", "1", "true"}), frozenset({"no", "n", "0", "false"})
ITEM_COLUMNS = ("id", "question", "options", "answer", "image")


def _items(path: str | os.PathLike) -> list[dict]:
    rows = []
    for line, row, problem in iter_jsonl(path, "items"):
        if problem is None and not (isinstance(row, dict) and isinstance(row.get("id"), str)):
            problem = "an item needs a string id"
        if problem is not None:
            raise InputError(f"{path}, line {line}: {problem}")
        rows.append(row)
    return rows


# How each benchmark names its options, as its answers refer to them: SPM-Bench by letter, MatVQA by number.
NUMBERED = frozenset({"matvqa"})


def _options(item: dict, benchmark: str) -> str:
    options = item.get("options") or []
    if isinstance(options, dict):
        return "\n".join(f"{k}. {v}" for k, v in options.items())
    if benchmark in NUMBERED:
        return "\n".join(f"({i}) {text}" for i, text in enumerate(options, 1))
    return "\n".join(f"{chr(65 + i)}. {text}" for i, text in enumerate(options))


def export(items_path: str | os.PathLike, out_dir: str | os.PathLike, benchmark: str, sample: int, reviewers: int,
           overlap: float, seed: int = 0) -> dict:
    if benchmark not in CRITERIA:
        raise ValueError(f"review sheets exist for {', '.join(CRITERIA)}, not {benchmark!r}")
    if sample < 1 or reviewers < 1 or not 0.0 <= overlap <= 1.0:
        raise ValueError("--sample and --reviewers must be at least 1 and --overlap in [0, 1]")
    items = _items(items_path)
    drawn = sorted(random.Random(seed).sample(range(len(items)), min(sample, len(items))))
    shared = drawn[:round(overlap * len(drawn))] if reviewers > 1 else drawn
    rest = drawn[len(shared):]
    sheets: dict[str, list[int]] = {f"reviewer{r + 1}": list(shared) for r in range(reviewers)}
    for k, i in enumerate(rest):
        sheets[f"reviewer{k % reviewers + 1}"].append(i)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    criteria = CRITERIA[benchmark]
    for name, picked in sheets.items():
        with atomic_write(out / f"{name}.csv") as fh:
            writer = csv.writer(fh)
            writer.writerow([*ITEM_COLUMNS, *criteria, "verdict", "comment"])
            for i in sorted(picked):
                item = items[i]
                writer.writerow([item["id"], item.get("question", ""), _options(item, benchmark), item.get("answer", ""),
                                 item.get("image", ""), *[""] * len(criteria), "", ""])
    record = {"items": str(items_path), "benchmark": benchmark, "seed": seed, "sample": len(drawn),
              "overlap": [items[i]["id"] for i in shared] if reviewers > 1 else [],
              "sheets": {name: [items[i]["id"] for i in sorted(picked)] for name, picked in sheets.items()}}
    with atomic_write(out / "review.json") as fh:
        json.dump(record, fh, indent=2, sort_keys=True)
        fh.write("\n")
    return record


def _cell(value: str, where: str) -> bool | None:
    v = value.strip().casefold()
    if not v:
        return None
    if v in YES:
        return True
    if v in NO:
        return False
    raise InputError(f"{where}: expected yes or no, got {value!r}")


def read_sheet(path: Path, criteria: tuple[str, ...]) -> dict[str, dict]:
    """id -> {criterion: bool | None, "reject": bool, "comment": str} for the rows a reviewer filled."""
    try:
        fh = open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("id", *criteria, "verdict") if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: no column {missing[0]!r} (a sheet of benchmint generate review export?)")
        out = {}
        for line, row in enumerate(reader, 2):
            marks = {c: _cell(row[c] or "", f"{path}, line {line}, column {c}") for c in criteria}
            verdict = (row["verdict"] or "").strip().casefold()
            if verdict not in ("", "keep", "reject"):
                raise InputError(f"{path}, line {line}, column verdict: expected keep or reject, got {row['verdict']!r}")
            if verdict == "" and all(m is None for m in marks.values()):
                continue  # not reviewed
            reject = verdict == "reject" or (verdict == "" and any(m is False for m in marks.values()))
            out[row["id"]] = {**marks, "reject": reject, "comment": (row.get("comment") or "").strip()}
    return out


def agreement(sheets: dict[str, dict[str, dict]], criteria: tuple[str, ...]) -> dict:
    """Per criterion: % agreement and Cohen's kappa for each pair of reviewers on the items both marked."""
    out = {}
    for c in criteria:
        pairs: list[dict[str, Any]] = []
        for a, b in combinations(sorted(sheets), 2):
            both = sorted(i for i in sheets[a] if i in sheets[b] and sheets[a][i][c] is not None
                          and sheets[b][i][c] is not None)
            x = [int(sheets[a][i][c]) for i in both]
            y = [int(sheets[b][i][c]) for i in both]
            kappa = cohen_kappa(x, y)
            pairs.append({"reviewers": [a, b], "items": len(both),
                          "agreement": round(sum(p == q for p, q in zip(x, y)) / len(both), 4) if both else None,
                          "kappa": None if kappa is None else round(kappa, 4)})
        kappas: list[float] = [p["kappa"] for p in pairs if p["kappa"] is not None]
        agrees: list[float] = [p["agreement"] for p in pairs if p["agreement"] is not None]
        out[c] = {"pairs": pairs, "mean_agreement": round(sum(agrees) / len(agrees), 4) if agrees else None,
                  "mean_kappa": round(sum(kappas) / len(kappas), 4) if kappas else None}
    return out


def import_sheets(sheet_paths: list[str | os.PathLike], items_path: str | os.PathLike, out_dir: str | os.PathLike,
                  benchmark: str) -> dict:
    if benchmark not in CRITERIA:
        raise ValueError(f"review sheets exist for {', '.join(CRITERIA)}, not {benchmark!r}")
    criteria = CRITERIA[benchmark]
    sheets = {Path(p).stem: read_sheet(Path(p), criteria) for p in sheet_paths}
    items = _items(items_path)
    known = {i["id"] for i in items}
    stray = sorted({i for marks in sheets.values() for i in marks} - known)
    if stray:
        raise InputError(f"the sheets name items that {items_path} does not hold: {stray[:5]}")
    rejected = []
    for reviewer, marks in sorted(sheets.items()):
        for item_id, m in sorted(marks.items()):
            if m["reject"]:
                rejected.append({"stage": "review", "reason": "review_rejected", "id": item_id,
                                 "reviewer": reviewer, "criteria_failed": [c for c in criteria if m[c] is False],
                                 "comment": m["comment"]})
    dropped = {r["id"] for r in rejected}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "items.jsonl", [i for i in items if i["id"] not in dropped])
    # The generation's own rejections first (when its rejected.jsonl sits beside the items), then the reviewers'.
    before = Path(items_path).with_name("rejected.jsonl")
    earlier = [row for _, row, problem in iter_jsonl(before, "rejections") if problem is None] if before.is_file() \
        else []
    write_jsonl(out / "rejected.jsonl", [*earlier, *rejected])
    summary = {"items": len(items), "reviewed": len({i for m in sheets.values() for i in m}),
               "rejected": len(dropped), "kept": len(items) - len(dropped), "reviewers": sorted(sheets),
               "agreement": agreement(sheets, criteria)}
    with atomic_write(out / "review_summary.json") as fh:
        json.dump(summary, fh, indent=2, sort_keys=True)
        fh.write("\n")
    return summary
