"""The golden corpus of raw model outputs and their expected parses (tests/data/extract_golden.jsonl)."""

import json
from pathlib import Path

CORPUS = Path(__file__).parent / "data" / "extract_golden.jsonl"


def load_corpus() -> list[tuple[int, dict]]:
    """(line number, case) for every non-blank line."""
    rows = []
    with CORPUS.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                rows.append((lineno, json.loads(line)))
    return rows
