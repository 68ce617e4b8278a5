"""Peak memory of ``benchmint eval`` as the number of items grows: prompts are built as their turn comes.

Two item sets, each asked of a local chat-completions server (tests/chat_server.py in its own process, keeping no
request bodies) by ``benchmint eval`` in a fresh process whose peak RSS (VmHWM) is read at the end:

- ``image``: MatVQA items, each with a 1 MB PNG figure (one file, read, decoded and encoded again for every item,
  as a release whose figures differ would be);
- ``text``: SeePhys items in the text-only setting (TO).

Before prompts were built lazily, every prompt, image bytes included, was held from the start: 1.07 MB per image
item and about 4 kB per text item. Now what grows is the bookkeeping of each item (its id, keys and place in the
items file: under 2 kB); the images held at once are those of the requests the engine has taken in (it reads
requests 64 at a time), so image runs level off after a few hundred items.

The test runs two sizes of each set and bounds the growth per item; the sizes are small by default so that the
test command runs it quickly (BENCHMINT_EVAL_MEMORY_IMAGE_ITEMS, default "200,600";
BENCHMINT_EVAL_MEMORY_TEXT_ITEMS, default "500,5000"; one size alone is measured, not compared); the README figures
come from runs of one size each.

Run: .venv/bin/python -m pytest benches/bench_eval_memory.py -s
"""

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

SERVER = Path(__file__).resolve().parents[1] / "tests" / "chat_server.py"
IMAGE_SIZES = [int(n) for n in os.environ.get("BENCHMINT_EVAL_MEMORY_IMAGE_ITEMS", "200,600").split(",")]
TEXT_SIZES = [int(n) for n in os.environ.get("BENCHMINT_EVAL_MEMORY_TEXT_ITEMS", "500,5000").split(",")]

# VmHWM is the peak of this process image (ru_maxrss would carry the parent's peak across fork + exec).
SCRIPT = """
import re, sys
from benchmint.cli import main
status = main(sys.argv[1:])
print(status, re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, str(SERVER), "--forget-bodies"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}/v1"
    finally:
        proc.stdin.close()  # the server stops when its stdin closes
        proc.wait(10)


def figure(path: Path) -> int:
    """A 1 MB PNG (noise does not compress)."""
    rng = random.Random(0)
    side = 580
    Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(path, format="PNG")
    return path.stat().st_size


def items(folder: Path, kind: str, n: int) -> tuple[Path, list[str]]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "items.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            if kind == "image":
                row = {"id": f"m{i}", "question": f"Which phase is seen in figure {i}?",
                       "options": ["alpha", "beta", "gamma", "delta"], "answer": 2, "image": "fig.png"}
            else:
                row = {"id": f"s{i}", "question": f"A ball of {i} g falls 2 m. How fast does it land?",
                       "answer": "6.3 m/s", "language": "English"}
            fh.write(json.dumps(row) + "\n")
    if kind == "image":
        assert figure(folder / "fig.png") > 1_000_000
        return path, ["--benchmark", "matvqa"]
    return path, ["--benchmark", "seephys", "--setting", "TO"]


def peak(tmp: Path, url: str, kind: str, n: int) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of one eval over n items; checks that every item got its prediction."""
    path, bench = items(tmp / f"{kind}-{n}", kind, n)
    out = tmp / f"{kind}-{n}" / "out"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", SCRIPT, "eval", str(path), *bench, "--model", "m", "--base-url",
                           url, "--out", str(out), "--concurrency", "8"], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    status, kib = done.stdout.split()[-2:]
    # the server echoes each prompt: SeePhys's open answers are all taken, MatVQA's echoes read as no option
    assert status == ("1" if kind == "image" else "0"), done.stdout[-2000:]
    with open(out / "predictions.jsonl", encoding="utf-8") as fh:
        assert sum(1 for _ in fh) == n
    return int(kib) / 1024, seconds


# KiB per item: a figure held per image item adds 1,024; text items cost 3.8 before (their prompts), 1.4-2.4 now
# (bookkeeping, and the SQLite page caches of the ledger and the reply cache filling up to their bound)
@pytest.mark.parametrize("kind,sizes,per_item_kib", [("image", IMAGE_SIZES, 64), ("text", TEXT_SIZES, 3)])
def test_eval_peak_memory_is_flat_in_the_number_of_items(tmp_path, server, kind, sizes, per_item_kib):
    measured = [(n, *peak(tmp_path, server, kind, n)) for n in sizes]
    for n, mib, seconds in measured:
        print(f"eval {kind} items: {n:>7,}  peak RSS {mib:7.1f} MiB  {seconds:6.1f} s")
    if len(measured) > 1:  # one size alone (a long run for the figures) is measured, not compared
        (n0, m0, _), (n1, m1, _) = measured[0], measured[-1]
        assert (m1 - m0) * 1024 / (n1 - n0) < per_item_kib, measured
