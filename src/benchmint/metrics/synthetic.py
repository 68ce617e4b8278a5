"""Synthetic gold items and raw model outputs, for the bundled demo and the benchmarks.

Models are simulated with the selection habits of spm-bench's personalities
(Wise, Conservative, Aggressive, Gambler) and answer in the shapes real
models use: marker lines, markdown, JSON, fenced blocks, Chinese, LaTeX boxes,
long reasoning that mentions other letters and panels, and some refusals.
Everything is drawn from a seeded generator: same seed, same files.
"""

from __future__ import annotations

import json
import random

DOMAINS = ("STM", "AFM", "TEM", "SEM")
PERSONAS = {
    # name: (p_exact, p_drop, p_add, p_all, p_unparseable)
    "wise-model": (0.84, 0.12, 0.03, 0.00, 0.01),
    "cautious-model": (0.50, 0.45, 0.03, 0.00, 0.02),
    "bold-model": (0.50, 0.05, 0.40, 0.03, 0.02),
    "gambling-model": (0.30, 0.05, 0.25, 0.35, 0.05),
}
_REASONING = (
    "Panel (a) shows a topographic image with a clear moiré superlattice, while panel (b) is the dI/dV map.",
    "Option A would require a uniform contrast, which is not what we see in (c).",
    "The FFT in panel (d) has six-fold spots, so the lattice is hexagonal; B and D both rely on this.",
    "Considering the scale bar of 5 nm, the periodicity is about 1.2 nm.",
    "Statement C confuses the Friedel oscillation with a covalent bond.",
)


def _letters(answer: list[str]) -> str:
    return ", ".join(answer)


def render_choices(answer: list[str], rng: random.Random) -> str:
    """One raw model output whose intended answer is ``answer`` (non-empty)."""
    s = _letters(answer)
    shape = rng.randrange(10)
    if shape == 0:
        return f"Answer: {s}"
    if shape == 1:
        return "**Answer:** " + ", ".join(f"({c})" for c in answer)
    if shape == 2:
        body = " and ".join(answer) if len(answer) <= 2 else ", ".join(answer[:-1]) + " and " + answer[-1]
        return f"The correct options are {body}."
    if shape == 3:
        steps = " ".join(rng.sample(_REASONING, 3))
        return f"Let me analyse the figure. {steps}\n\nFinal answer: {s}"
    if shape == 4:
        return json.dumps({"answer": answer})
    if shape == 5:
        return "```json\n" + json.dumps({"answer": answer, "confidence": 0.8}) + "\n```"
    if shape == 6:
        return "答案：" + "".join(answer)
    if shape == 7:
        return " ".join(rng.sample(_REASONING, 2)) + f" Therefore the answer is \\boxed{{{s}}}."
    if shape == 8:
        return f"answer: {', '.join(c.lower() for c in answer)}"
    return f"{rng.choice(_REASONING)}\nThe answer is {s}"


def render_unparseable(rng: random.Random) -> str:
    return rng.choice([
        "I cannot determine the answer from the image provided.",
        "It could be A or C, depending on the bias voltage.",
        "",
        "The figure is too blurry to tell; confidence 7/10.",
    ])


def simulate_choice(gold: list[str], n_options: int, persona: tuple, rng: random.Random) -> list[str] | None:
    p_exact, p_drop, p_add, p_all, p_bad = persona
    options = [chr(65 + i) for i in range(n_options)]
    r = rng.random()
    if r < p_bad:
        return None
    r = rng.random() * (p_exact + p_drop + p_add + p_all)
    wrong = [c for c in options if c not in gold]
    if r < p_exact:
        return list(gold)
    if r < p_exact + p_drop:  # leaves one right option out (a single answer is kept)
        return sorted(rng.sample(gold, len(gold) - 1)) if len(gold) > 1 else list(gold)
    if r < p_exact + p_drop + p_add:
        return sorted(gold + [rng.choice(wrong)]) if wrong else list(gold)
    return options


def mcq_dataset(n_items: int, models: list[str], seed: int = 0, behaviour_fields: bool = True):
    """Yield ("gold", record) for every item, then ("pred", record) for every model and item.

    ``behaviour_fields``: predictions carry confidence, difficulty and tokens.
    """
    rng = random.Random(seed)
    golds = []
    for i in range(n_items):
        n_options = rng.choice((4, 4, 5, 6))
        size = rng.choice((1, 1, 2, 2, 3))
        answer = sorted(rng.sample([chr(65 + k) for k in range(n_options)], size))
        golds.append((f"q{i:07d}", answer, n_options))
        meta = {"domain": rng.choice(DOMAINS), "level": rng.randint(1, 5), "n_options": n_options}
        yield "gold", {"id": f"q{i:07d}", "answer": answer, "meta": meta}
    for model in models:
        persona = PERSONAS[model]
        for rid, answer, n_options in golds:
            choice = simulate_choice(answer, n_options, persona, rng)
            text = render_unparseable(rng) if choice is None else render_choices(choice, rng)
            record = {"id": rid, "model": model, "output": text}
            confidence = round(min(1.0, max(0.0, rng.gauss(0.85 if choice == answer else 0.7, 0.1))), 3)
            difficulty, tokens = round(rng.random(), 3), rng.randint(200, 5000)
            if behaviour_fields:
                record.update(confidence=confidence, difficulty=difficulty, tokens=tokens)
            yield "pred", record


_HKL_POOL = [(1, 0, 0), (1, 1, 0), (1, 1, 1), (2, 0, 0), (2, 1, 0), (2, 1, 1), (2, 2, 0), (3, 1, 0), (3, 1, 1),
             (2, 2, 2), (1, -1, 0), (0, 0, 2), (1, 0, 2), (1, 1, -2, 0), (1, 0, -1, 1), (0, 0, 0, 2), (1, 0, -1, 0)]
DATABASES = ("QMOF", "hMOF", "OMDB", "Cantor-HEA", "JARVIS-DFT", "MP", "OQMD", "GNoME")


def _hkl_text(h: tuple) -> str:
    return "(" + " ".join(str(x) for x in h) + ")"


def render_hkls(answer: list[tuple], rng: random.Random) -> str:
    shape = rng.randrange(5)
    as_lists = [list(h) for h in answer]
    if shape == 0:
        return json.dumps({"max_peak_hkls": as_lists})
    if shape == 1:
        return "```json\n" + json.dumps({"max_peak_hkls": as_lists}) + "\n```"
    if shape == 2:
        return ("The strongest reflection sits near 2θ = 28.44° (d = 3.14 Å); several planes overlap there.\n"
                "Answer: " + ", ".join(_hkl_text(h) for h in answer))
    if shape == 3:
        return "Miller indices of the highest peak: " + "; ".join(_hkl_text(h) for h in answer)
    return json.dumps({"answer": as_lists})


def hkl_dataset(n_items: int, models: list[str], seed: int = 0):
    """Like ``mcq_dataset`` for HKL-set items with CrystalXRD-style strata."""
    rng = random.Random(seed)
    golds = []
    for i in range(n_items):
        size = rng.choice((1, 1, 2, 2, 3, 4))
        four = rng.random() < 0.15
        pool = [h for h in _HKL_POOL if (len(h) == 4) == four]
        answer = sorted(rng.sample(pool, min(size, len(pool))))
        two_theta = round(rng.uniform(3, 85), 2)
        angle = "low" if two_theta < 20 else "mid" if two_theta < 40 else "high"
        group = ("Single", "Double")[len(answer) - 1] if len(answer) < 3 else "Triple+"
        golds.append((f"x{i:05d}", answer, pool))
        meta = {"db": rng.choice(DATABASES), "union_size": group, "angle_range": angle, "two_theta_star": two_theta}
        yield "gold", {"id": f"x{i:05d}", "answer": [list(h) for h in answer], "meta": meta}
    for model in models:
        for rid, answer, pool in golds:
            extra = [h for h in pool if h not in answer]
            yield "pred", {"id": rid, "model": model, "output": _hkl_output(answer, extra, PERSONAS[model], rng)}


def _hkl_output(answer: list[tuple], extra: list[tuple], persona: tuple, rng: random.Random) -> str:
    """A simulated model's raw output for an HKL item: a refusal, or the answer with a persona's slip."""
    p_exact, p_drop, p_add, _p_all, p_bad = persona
    if rng.random() < p_bad:
        return render_unparseable(rng)
    pred = list(answer)
    r = rng.random()
    if r < p_drop and len(pred) > 1:
        pred.pop(rng.randrange(len(pred)))
    elif r < p_drop + p_add and extra:
        pred.append(rng.choice(extra))
    elif r > p_exact + p_drop + p_add and extra:
        pred = [rng.choice(extra)]
    return render_hkls(pred, rng)


def hkl_predictions(items: list[dict], models: list[str], seed: int = 0):
    """Raw outputs of simulated models for built XRD items (their "answer" lists), as prediction records."""
    rng = random.Random(seed)
    pool = sorted({tuple(h) for it in items for h in it["answer"]})
    for model in models:
        for it in items:
            answer = [tuple(h) for h in it["answer"]]
            extra = [h for h in pool if h not in answer and len(h) == len(answer[0])] if answer else []
            yield {"id": it["id"], "model": model, "output": _hkl_output(answer, extra, PERSONAS[model], rng)}
