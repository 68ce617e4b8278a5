"""Regenerate the bundled demo data in src/benchmint/samples/ (deterministic)."""

from pathlib import Path

from benchmint.io import dumps
from benchmint.metrics.synthetic import hkl_dataset, mcq_dataset

OUT = Path(__file__).resolve().parent.parent / "src" / "benchmint" / "samples"


def write(prefix: str, records) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / f"{prefix}_gold.jsonl", "w", encoding="utf-8") as gold, \
            open(OUT / f"{prefix}_pred.jsonl", "w", encoding="utf-8") as pred:
        for kind, rec in records:
            (gold if kind == "gold" else pred).write(dumps(rec) + "\n")


if __name__ == "__main__":
    write("mcq", mcq_dataset(300, ["wise-model", "cautious-model", "bold-model", "gambling-model"], seed=1))
    write("hkl", hkl_dataset(200, ["wise-model", "bold-model", "gambling-model"], seed=2))
    print(f"wrote samples to {OUT}")
