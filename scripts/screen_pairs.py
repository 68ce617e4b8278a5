"""The SeePhys screen on the category pair sets: how much it proves and how often it is wrongly sure.

    .venv/bin/python scripts/screen_pairs.py [dev|heldout ...] [--json]

Each row of tests/data/screen_pairs_<set>.jsonl is a gold answer, a model answer (or a whole reply, read by the
final-answer rules first), the item's significant figures and the truth: ``same`` (``provable``: a sound check
can show it), ``different``, or ``judge`` (a matter of judgement that neither verdict may decide). Printed per
category and in total:

- proved: ``same`` pairs the screen calls equivalent, of the provable ones;
- false equivalents: ``different`` or ``judge`` pairs called equivalent (must be 0);
- rejected: ``different`` pairs the screen is sure are not equivalent (what ``--screen-rejects`` saves);
- false rejections: ``same`` or ``judge`` pairs called surely different (must be 0).

Exit status 1 when any false decision was made.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS = ("dev", "heldout")


def load(name: str) -> list[dict]:
    with (DATA / f"screen_pairs_{name}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def inputs(rows: list[dict]) -> list[tuple]:
    from benchmint.tasks.quantity import extract_final

    return [(r["gold"], extract_final(r["reply"]) if "reply" in r else r["answer"], r["sig_figs"]) for r in rows]


def measure(rows: list[dict], results) -> dict:
    """Counts per category and in total (``results``: the screen's verdicts, in row order)."""
    cells: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    wrong: list[dict] = []
    for r, x in zip(rows, results):
        for cell in (cells[r["category"]], cells["total"]):
            cell["pairs"] += 1
            if r["truth"] == "same" and r.get("provable"):
                cell["provable"] += 1
                cell["proved"] += x.equivalent
            if r["truth"] == "different":
                cell["different"] += 1
                cell["rejected"] += x.different
            cell["false_equivalents"] += x.equivalent and r["truth"] != "same"
            cell["false_rejections"] += x.different and r["truth"] != "different"
        if (x.equivalent and r["truth"] != "same") or (x.different and r["truth"] != "different"):
            wrong.append({**r, "screen": x.to_json()})
    return {"categories": {k: dict(v) for k, v in sorted(cells.items())}, "false_decisions": wrong}


def run(names: list[str]) -> dict:
    from benchmint.grade.screen import Screen

    out = {}
    with Screen(workers=2) as screen:
        for name in names:
            rows = load(name)
            out[name] = measure(rows, screen.check_many(inputs(rows)))
    return out


def _row(name: str, c: dict) -> str:
    share = f"{100 * c.get('proved', 0) / c['provable']:.1f}%" if c.get("provable") else "-"
    return (f"{name:<14}{c['pairs']:>6}{c.get('proved', 0):>7}/{c.get('provable', 0):<5}{share:>7}"
            f"{c.get('false_equivalents', 0):>7}{c.get('rejected', 0):>9}/{c.get('different', 0):<4}"
            f"{c.get('false_rejections', 0):>7}")


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("--")] or list(SETS)
    got = run(names)
    if "--json" in argv:
        print(json.dumps(got, indent=2, ensure_ascii=False, sort_keys=True))
    else:
        for name, m in got.items():
            print(f"== {name}\n{'category':<14}{'pairs':>6}{'proved':>13}{'share':>7}{'F-eq':>7}"
                  f"{'rejected':>14}{'F-rej':>7}")
            for cat, c in m["categories"].items():
                print(_row(cat, c))
            for w in m["false_decisions"]:
                print("  FALSE:", json.dumps(w, ensure_ascii=False))
    return 1 if any(m["false_decisions"] for m in got.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
