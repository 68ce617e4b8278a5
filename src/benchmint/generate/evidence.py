"""Sentences of a paper that may support a claim: Okapi BM25 over the sentences of a figure's context.

A generator that states claims about a paper (MatVQA's reasoning steps) checks each against the text: BM25
ranks the context's sentences for the claim, and a model is then asked whether the best ones support it. The
ranking is plain Okapi BM25 with k1 = 1.5, b = 0.75 and the non-negative idf
``ln(1 + (N - n + 0.5) / (n + 0.5))`` over lower-case word tokens (stop words removed); ties keep the text's
order, so the evidence for a claim is deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

K1 = 1.5
B = 0.75
_STOP = frozenset("a an and are as at be by for from has have in is it its of on or that the this to was were "
                  "which with".split())
_TOKEN = re.compile(r"[a-z0-9]+(?:[.-][a-z0-9]+)*")
# A sentence ends at . ! or ? followed by space and a capital, a digit-free opening bracket or the end; "Fig. 2"
# and "et al. 2021" do not end one (a digit follows).
_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP and len(t) > 1]


def sentences(*texts: str | None) -> list[str]:
    """The distinct sentences of the texts, in order (a harvested discussion may repeat a paragraph)."""
    seen: dict[str, None] = {}
    for text in texts:
        for s in _END.split(text or ""):
            s = " ".join(s.split())
            if s:
                seen.setdefault(s, None)
    return list(seen)


class BM25:
    def __init__(self, docs: Sequence[str]) -> None:
        self.docs = list(docs)
        self.terms = [Counter(tokens(d)) for d in self.docs]
        self.lengths = [sum(c.values()) for c in self.terms]
        n = len(self.docs)
        self.avgdl = sum(self.lengths) / n if n else 0.0
        df: Counter = Counter()
        for c in self.terms:
            df.update(c.keys())
        self.idf = {t: math.log(1 + (n - m + 0.5) / (m + 0.5)) for t, m in df.items()}

    def scores(self, query: str) -> list[float]:
        q = tokens(query)
        out = []
        for c, length in zip(self.terms, self.lengths):
            norm = K1 * (1 - B + B * length / self.avgdl) if self.avgdl else K1
            out.append(sum(self.idf[t] * c[t] * (K1 + 1) / (c[t] + norm) for t in q if c[t]))
        return out

    def top(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best sentences with a score above zero, best first (ties in the text's order)."""
        scored = [(s, i) for i, s in enumerate(self.scores(query)) if s > 0]
        scored.sort(key=lambda p: (-p[0], p[1]))
        return [(self.docs[i], round(s, 6)) for s, i in scored[:k]]


def bounded_discussion(text: str, figure: str, caption: str, budget: int) -> tuple[str, int, int]:
    """A figure's discussion cut to ``budget`` tokens (``pdf.context.count_tokens``, the harvest's own count):
    (text, its tokens, the whole discussion's tokens).

    A text within the budget is returned as it is. Otherwise its distinct sentences are ranked, those citing the
    figure first, then by BM25 against the caption (ties in the text's order); the best are taken while they fit
    (a sentence too long for what is left is skipped, a shorter one after it may still fit) and given back in the
    text's order. ``figure``: the figure's number as the citations write it, case-folded ("2", "s1").
    """
    from benchmint.pdf.context import count_tokens, figure_refs

    whole = count_tokens(text)
    if whole <= budget:
        return text, whole, whole
    found = sentences(text)
    cites = [figure in {r.casefold() for r in figure_refs(s)} for s in found]
    relevance = BM25(found).scores(caption)
    order = sorted(range(len(found)), key=lambda i: (not cites[i], -relevance[i], i))
    kept: list[int] = []
    used = 0
    for i in order:
        n = count_tokens(found[i])
        if used + n <= budget:
            kept.append(i)
            used += n
    return " ".join(found[i] for i in sorted(kept)), used, whole
