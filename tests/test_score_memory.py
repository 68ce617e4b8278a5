"""The prediction text is streamed: memory grows by a few dozen bytes per prediction, not by its text."""

import json
import subprocess
import sys

from benchmint.io import dumps
from benchmint.metrics.synthetic import mcq_dataset

# VmHWM is the peak of this process image; ru_maxrss would carry the parent's peak across fork + exec.
SCRIPT = """
import re, sys
from benchmint.metrics.pipeline import ScoreConfig, score_files
score_files(sys.argv[1], sys.argv[2], sys.argv[3], ScoreConfig(task="mcq", by=("domain",), workers=2))
print(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def peak_rss_kib(pred, gold, out) -> int:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(pred), str(gold), str(out)],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1])


def test_peak_memory_does_not_follow_the_text(tmp_path):
    # Same gold, one model's predictions vs the same predictions with 20 kB of reasoning each.
    records = list(mcq_dataset(20_000, ["wise-model"], seed=2))
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(dumps(r) + "\n" for k, r in records if k == "gold"), encoding="utf-8")
    short, long = tmp_path / "short.jsonl", tmp_path / "long.jsonl"
    preds = [r for k, r in records if k == "pred"]
    short.write_text("".join(dumps(r) + "\n" for r in preds), encoding="utf-8")
    padding = "Reasoning about the figure. " * 700
    with open(long, "w", encoding="utf-8") as fh:
        for r in preds:
            fh.write(dumps({**r, "output": padding + "\n\n" + r["output"]}) + "\n")
    grown_mib = (long.stat().st_size - short.stat().st_size) / 2**20
    assert grown_mib > 350
    rss_short = peak_rss_kib(short, gold, tmp_path / "o1")
    rss_long = peak_rss_kib(long, gold, tmp_path / "o2")
    # The text grew by ~390 MiB; memory may grow by the read-ahead chunks only.
    assert (rss_long - rss_short) / 1024 < 64, (rss_short, rss_long)
    assert rss_long / 1024 < 200, rss_long  # far below the 390 MiB file: it was never held
    rows_short = (tmp_path / "o1" / "scores.jsonl").read_text().splitlines()
    rows_long = (tmp_path / "o2" / "scores.jsonl").read_text().splitlines()
    assert [json.loads(a)["sip_f1"] for a in rows_short] == [json.loads(b)["sip_f1"] for b in rows_long]
