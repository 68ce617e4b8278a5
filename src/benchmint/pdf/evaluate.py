"""Figure records against hand labels: how well ``harvest`` finds and places figure bodies.

A label is one figure a person marked on a rendered page: ``{"pdf", "page",
"label", "body", "panels", ...}`` with ``page`` counted from 0 (as PyMuPDF
counts) and ``body`` in page points, the visible ink of the figure without its
caption. A record is a row of figures.jsonl (``page`` counted from 1, as the
harvest rows count). They meet on (file name, page, caption label).

Measured per label: whether a record exists for it and has a body box, the IoU of the record's
body box with the hand box (0 without a record or without a body), for
figures of more than one panel whether the panel count is exact, and for single-panel figures with a
record whether it was given more than one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath

Box = tuple[float, float, float, float]


def iou(a: Box | None, b: Box | None) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes; 0 when either is missing or both are empty."""
    if a is None or b is None:
        return 0.0
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(w, 0.0) * max(h, 0.0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


@dataclass(frozen=True)
class LabelResult:
    pdf: str
    page: int  # from 0, as labelled
    label: str
    found: bool
    iou: float
    panels: int  # the hand count
    panels_found: int | None
    has_body: bool = False  # the record has a body box


@dataclass
class FigureReport:
    results: list[LabelResult] = field(default_factory=list)
    iou_threshold: float = 0.5

    @property
    def labelled(self) -> int:
        return len(self.results)

    @property
    def found(self) -> int:
        return sum(r.found for r in self.results)

    @property
    def with_body(self) -> int:
        """Labels whose record has a body box (a record may have none: no graphics next to its caption)."""
        return sum(r.has_body for r in self.results)

    @property
    def placed(self) -> int:
        """Labels whose record's body overlaps the hand box with IoU at or above the threshold."""
        return sum(r.iou >= self.iou_threshold for r in self.results)

    @property
    def multi_panel(self) -> list[LabelResult]:
        return [r for r in self.results if r.panels > 1]

    @property
    def panels_exact(self) -> int:
        return sum(r.panels_found == r.panels for r in self.multi_panel)

    @property
    def single_panel(self) -> list[LabelResult]:
        """Single-panel labels with a record: the ones a panel rule can over-count."""
        return [r for r in self.results if r.panels == 1 and r.found]

    @property
    def single_overcounted(self) -> int:
        return sum((r.panels_found or 0) > 1 for r in self.single_panel)

    @property
    def mean_iou(self) -> float:
        return sum(r.iou for r in self.results) / len(self.results) if self.results else 0.0

    def summary(self) -> dict:
        n, multi = self.labelled, len(self.multi_panel)
        return {
            "labelled": n, "pdfs": len({r.pdf for r in self.results}),
            "found": self.found, "found_share": self.found / n if n else 0.0,
            "with_body": self.with_body, "with_body_share": self.with_body / n if n else 0.0,
            "placed": self.placed, "placed_share": self.placed / n if n else 0.0,
            "iou_threshold": self.iou_threshold, "mean_iou": self.mean_iou,
            "multi_panel": multi, "panels_exact": self.panels_exact,
            "panels_exact_share": self.panels_exact / multi if multi else 0.0,
            "single_panel": len(self.single_panel), "single_overcounted": self.single_overcounted,
        }


def compare(records: Iterable[dict], labels: Iterable[dict], iou_threshold: float = 0.5) -> FigureReport:
    """Each label with the record of the same file name, page and caption label (the first such record)."""
    by_key: dict[tuple[str, int, str], dict] = {}
    for rec in records:
        by_key.setdefault((PurePath(rec["pdf"]).name, int(rec["page"]), str(rec["label"])), rec)
    report = FigureReport(iou_threshold=iou_threshold)
    for lab in labels:
        found = by_key.get((PurePath(lab["pdf"]).name, int(lab["page"]) + 1, str(lab["label"])))
        body = tuple(found["body_box"]) if found and found.get("body_box") else None
        report.results.append(LabelResult(
            pdf=lab["pdf"], page=int(lab["page"]), label=str(lab["label"]), found=found is not None,
            iou=iou(body, tuple(lab["body"])), panels=int(lab["panels"]),
            panels_found=int(found["panels"]) if found else None, has_body=body is not None))
    return report
