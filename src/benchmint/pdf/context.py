"""Discussion paragraphs of a figure (csmbench §III-A.2): the body text that explains it.

Paragraphs citing the figure are kept when they cite no other figure and hold
no table data; the fragments kept for one figure are merged into one
paragraph, which is kept when it has 100-300 tokens (configurable).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from benchmint.pdf.captions import caption_label

# "Fig. 2", "Figure 2(b)", "Figs. 2 and 3", "Figures 2-4", "Fig. S1", "Figs. 2b, 3c", "Figure 2.3" (a chapter's)
_N = r"S?\d{1,3}(?:\.\d{1,3})?[a-z]?"
_REF = re.compile(
    r"\b(?:Fig(?:ure)?s?\.?|FIGS?\.?)\s*"
    rf"(?P<list>{_N}(?:\s*\([a-z](?:[-–,][a-z])?\))?"
    rf"(?:\s*(?:,|and|&|[-–])\s*{_N}(?:\s*\([a-z](?:[-–,][a-z])?\))?)*)")
_NUM = re.compile(r"(S?)(\d{1,3})(?:\.(\d{1,3}))?")
_TABLE = re.compile(r"\bTable\s+(?:S?\d+|[IVX]+)\b")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def figure_refs(text: str) -> set[str]:
    """Figure numbers a paragraph cites, ranges expanded ("Figs. 2-4" -> {"2", "3", "4"})."""
    refs: set[str] = set()
    for m in _REF.finditer(text):
        items = re.split(r"\s*(?:,|and|&)\s*", m.group("list"))
        for item in items:
            bounds = _NUM.findall(item)
            if len(bounds) == 2 and bounds[0][0] == bounds[1][0] and bool(bounds[0][2]) == bool(bounds[1][2]):
                (s, a, b), (_, c, d) = bounds
                if not b and int(a) <= int(c) <= int(a) + 20:  # "Figures 2-4"
                    refs.update(f"{s}{k}" for k in range(int(a), int(c) + 1))
                    continue
                if b and a == c and int(b) <= int(d) <= int(b) + 20:  # "Figures 2.1-2.4"
                    refs.update(f"{s}{a}.{k}" for k in range(int(b), int(d) + 1))
                    continue
            refs.update(f"{s}{a}.{b}" if b else f"{s}{a}" for s, a, b in bounds)
    return refs


def holds_table_data(text: str, numeric_share: float = 0.3) -> bool:
    """Cites a table, or reads like one (a large share of its words are numbers)."""
    if _TABLE.search(text):
        return True
    words = text.split()
    numbers = sum(1 for w in words if re.fullmatch(r"[-+±]?\d[\d.,]*%?", w.strip("()[];:")))
    return len(words) >= 10 and numbers / len(words) >= numeric_share


def count_tokens(text: str) -> int:
    """Words and punctuation marks; close to subword counts on scientific English."""
    return len(_TOKEN.findall(text))


def discussion(paragraphs: Iterable[str], label: str, min_tokens: int = 100, max_tokens: int = 300,
               counter: Callable[[str], int] = count_tokens) -> str | None:
    """The merged discussion of figure ``label`` ("2", "S1", "2.1"; a letter suffix is ignored), or None."""
    return discussions(paragraphs, [label], min_tokens, max_tokens, counter)[0]


def discussions(paragraphs: Iterable[str], labels: Sequence[str], min_tokens: int = 100, max_tokens: int = 300,
                counter: Callable[[str], int] = count_tokens) -> list[str | None]:
    """``discussion`` of each of ``labels`` in one pass over the paragraphs (a document's figures share it)."""
    return discussions_of_cited(cited_alone(paragraphs), labels, min_tokens, max_tokens, counter)


def cited_alone(paragraphs: Iterable[str]) -> list[list[str]]:
    """[figure number, the paragraph with its whitespace runs made single spaces] of each paragraph, in order,
    that cites one figure alone, holds no table data and is not a caption: what ``discussions`` keeps of a
    document's text, paragraph by paragraph (so harvest's workers find it and the driver only merges)."""
    out = []
    for p in paragraphs:
        if caption_label(p) is not None:
            continue
        refs = figure_refs(p)
        if len(refs) == 1 and not holds_table_data(p):
            out.append([next(iter(refs)), " ".join(p.split())])
    return out


def discussions_of_cited(cited: Iterable[Sequence[str]], labels: Sequence[str], min_tokens: int = 100,
                         max_tokens: int = 300, counter: Callable[[str], int] = count_tokens) -> list[str | None]:
    """``discussions`` from a document's ``cited_alone`` pairs, in the order of its paragraphs."""
    numbers = []
    for label in labels:
        m = re.match(r"S?\d+(?:\.\d+)?", label)
        if m is None:
            raise ValueError(f"not a figure label: {label!r}")
        numbers.append(m.group(0))
    kept: dict[str, list[str]] = {}  # figure number -> the paragraphs citing it alone, in order
    for number, text in cited:
        kept.setdefault(number, []).append(text)
    out: list[str | None] = []
    for number in numbers:
        merged = " ".join(kept.get(number, ()))
        out.append(merged if merged and min_tokens <= counter(merged) <= max_tokens else None)
    return out
