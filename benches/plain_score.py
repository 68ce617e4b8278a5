"""The plain scorer `benchmint score` is measured against: json + a regex + a loop, the straightforward way.

Rows with every per-item metric and per-model means, written to OUT_DIR/scores.jsonl and summary.json;
bench_score_files.py times it in process, and as a whole process the way a user runs a script:

    .venv/bin/python benches/plain_score.py PRED GOLD OUT_DIR
"""

from __future__ import annotations

import json
import os
import re
import sys

_LETTER = re.compile(r"\b([A-F])\b")


def naive_scorer(pred_path, gold_path, out_dir):
    """The straightforward scorer doing the same job: json + a regex + a loop, rows and per-model means.

    It reads letters after the last "answer" (or anywhere) with one regex, so it
    misreads many outputs; it computes no intervals, strata or personalities.
    """
    gold = {}
    with open(gold_path, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            gold[r["id"]] = set(r["answer"])
    sums: dict[str, list] = {}
    os.makedirs(out_dir, exist_ok=True)
    with open(pred_path, encoding="utf-8") as fh, open(os.path.join(out_dir, "scores.jsonl"), "w") as out:
        for line in fh:
            r = json.loads(line)
            text = r["output"]
            at = text.lower().rfind("answer")
            p = set(_LETTER.findall(text[at:] if at >= 0 else text))
            g = gold[r["id"]]
            tp, fp = len(p & g), len(p - g)
            exact = p == g
            prec = tp / len(p) if p else 0.0
            rec = tp / len(g) if g else 0.0
            f1 = 2 * prec * rec / (prec + rec) if tp else 0.0
            jac = tp / len(p | g) if p | g else 1.0
            pen = min(1.0, len(g) / len(p)) if p else 1.0
            spc = 1.0 if exact else (len(p) / len(g) if p and not fp else 0.0)
            pw = tp / (tp + 6 * fp) if tp else 0.0
            sip = 1.0 if exact else (0.6 * 2 * pw * rec / (pw + rec) if tp else 0.0)
            row = {"id": r["id"], "model": r.get("model"), "answer": sorted(p), "em": float(exact), "spc": spc,
                   "sip_f1": sip, "jaccard": jac, "precision": prec, "recall": rec, "f1": f1,
                   "j_pen": jac * pen, "f1_pen": f1 * pen}
            out.write(json.dumps(row) + "\n")
            acc = sums.setdefault(r.get("model"), [0] + [0.0] * 9)
            acc[0] += 1
            for k, v in enumerate((row["em"], spc, sip, jac, prec, rec, f1, jac * pen, f1 * pen), 1):
                acc[k] += v
    summary = {m: [v / acc[0] for v in acc[1:]] for m, acc in sums.items()}
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh)
    return summary


if __name__ == "__main__":
    naive_scorer(sys.argv[1], sys.argv[2], sys.argv[3])
