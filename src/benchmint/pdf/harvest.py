"""benchmint harvest: PDFs -> page verdicts, figure records and thumbnails (spm-bench §2.1-2.3).

One PDF is one unit of work: a worker process opens it, triages every page
without rendering (placed images, painted paths, caption anchors: the
Anchor-Gated Sieve), and on candidate pages pairs captions with figure
bodies, estimates panel counts, finds discussion paragraphs and renders the
thumbnail a VLM will see (written by a small thread pool). The parent records
each finished unit in the run's SQLite ledger, and writes pages.jsonl,
figures.jsonl and errors.jsonl from the ledger in input order at the end, so
a killed run resumes where it stopped and its files equal an uninterrupted
run's; a rerun of a finished run recomputes nothing.

Real dumps hold pages MuPDF needs minutes to read or render (dense vector
maps, broken content streams), and MuPDF cannot be interrupted from Python.
So every page stage (reading text, rendering the thumbnail, pairing figures)
is reported to the runner, whose worker is killed when one stage runs past
``page_seconds`` or the document past ``document_seconds``. A document
stopped on a page is run again without that page (at most
``MAX_SKIPPED_PAGES`` times): the page gets a row saying which limit it hit,
errors.jsonl lists it, and the rest of the document is harvested. The limits
are not part of a document's key (they do not change a finished result); a
document stopped by a limit is tried again by the next run.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmint.io import write_jsonl
from benchmint.run import run_files, stage

# How many stuck pages a document may skip before it is given up as a whole.
MAX_SKIPPED_PAGES = 8
_PAGE_STAGE = re.compile(r"page (\d+) ")


@dataclass(frozen=True)
class HarvestConfig:
    min_paths: int = 12
    min_panels: int = 1
    triage_only: bool = False
    max_pages: int = 5000
    thumb_longest: int = 1024
    discussion_tokens: tuple[int, int] = (100, 300)
    page_seconds: float = 60.0  # one stage of one page (text, thumbnail, figures)
    document_seconds: float = 900.0

    def __post_init__(self) -> None:
        if self.min_paths < 0 or self.min_panels < 1 or self.max_pages < 1:
            raise ValueError("min_paths must be >= 0, min_panels and max_pages >= 1")
        if not (self.page_seconds > 0 and self.document_seconds > 0):
            raise ValueError("page_seconds and document_seconds must be positive")

    def key_settings(self) -> dict:
        """The settings that shape a result (the time limits do not)."""
        settings = asdict(self)
        del settings["page_seconds"], settings["document_seconds"]
        return settings


def _graphic(images: int, paths: int, cfg: HarvestConfig) -> bool:
    return images >= 1 or paths >= cfg.min_paths


def triage_pages(doc, name: str, cfg: HarvestConfig, skip: dict[int, str] | None = None):
    """The Anchor-Gated Sieve over an open document, without rendering.

    The graphic test comes first, from the compiled content-stream counts; only
    pages that pass it have their text read for caption anchors (a page with
    no graphic cannot be a candidate, and text extraction is the costly part),
    so their ``captions`` are null. ``skip`` maps page numbers to the reason
    they are not read (a page time limit). Returns (page rows, [(page number,
    captions)] of candidate pages, text segments per page or None where unread).
    """
    from benchmint.pdf.captions import page_captions, text_segments
    from benchmint.pdf.triage import _Extractor, lean_text_copy, open_document_counts

    pages, candidates, segments_by_page = [], [], []
    extractor = _Extractor(doc)
    counts = open_document_counts(doc, extractor=extractor)  # shared resources read once
    for number, page in enumerate(doc, 1):
        images, paths, _damaged = counts[number - 1]
        row = {"pdf": name, "page": number, "images": images, "paths": paths, "captions": None}
        segments = None
        if skip and number in skip:
            row.update(candidate=False, reason=skip[number])
        elif not _graphic(images, paths, cfg):
            row.update(candidate=False, reason=f"no graphic ({images} images, {paths} paths < {cfg.min_paths})")
        else:
            stage(f"page {number} text")
            try:
                lean = lean_text_copy(page, extractor)  # the same text, without running text-free forms
                segments = text_segments(lean[0] if lean else page)
            except Exception as exc:  # a damaged text layer is reported, the document goes on
                row.update(candidate=False, reason=f"unreadable text layer: {exc}")
            else:
                captions = page_captions(page, segments)
                row["captions"] = [c.label for c in captions]
                row.update(candidate=bool(captions), reason="graphic and caption anchor" if captions
                           else "graphic but no figure-caption anchor")
                if captions:
                    candidates.append((number, captions))
        pages.append(row)
        segments_by_page.append(segments)
    return pages, candidates, segments_by_page


def _harvest_pdf(path: str, key: str, out_dir: str, cfg: HarvestConfig, skip: dict[int, str] | None = None) -> dict:
    """Everything the run keeps about one PDF; problems become {"error": ...}. Runs in a worker process."""
    import pymupdf

    from benchmint.pdf.captions import estimate_panels
    from benchmint.pdf.context import discussion
    from benchmint.pdf.geometry import render_thumbnail
    from benchmint.pdf.pairing import page_figures
    from benchmint.pdf.panels import count_panels

    name = Path(path).name
    try:
        doc = pymupdf.open(path)
    except Exception as exc:  # PyMuPDF raises several types for unreadable files
        return {"error": f"cannot open as a PDF: {exc}"}
    with doc:
        if doc.needs_pass:
            return {"error": "encrypted (password required)"}
        if doc.page_count == 0:
            return {"error": "the document has no pages"}
        if doc.page_count > cfg.max_pages:
            return {"error": f"{doc.page_count} pages exceed --max-pages {cfg.max_pages}"}
        paper = key[:16]
        try:
            pages, candidates, segments_by_page = triage_pages(doc, name, cfg, skip)
        except Exception as exc:  # resources PyMuPDF cannot resolve: the file is unusable here
            return {"error": f"cannot read the page contents: {exc}"}
        if cfg.triage_only:
            return {"paper": paper, "pages": pages, "figures": []}
        if not candidates:
            return {"paper": paper, "pages": pages, "figures": []}
        from benchmint.pdf.captions import text_segments

        # Discussion paragraphs may sit on any page: read the pages the sieve skipped.
        paragraphs: list[str] = []
        for number, segs in enumerate(segments_by_page, 1):
            if segs is None and not (skip and number in skip):
                stage(f"page {number} text")
                segs = text_segments(doc[number - 1])
            paragraphs.extend(text for text, _ in segs or ())
        figures, thumbs = [], []
        thumb_dir = Path(out_dir) / "thumbs"
        for number, captions in candidates:
            page = doc[number - 1]
            thumb = thumb_dir / f"{paper}-p{number:04d}.png"
            stage(f"page {number} thumbnail")
            thumbs.append((render_thumbnail(page, cfg.thumb_longest), thumb))
            stage(f"page {number} figures")
            words = page.get_text("words")
            drawings, images = page.get_drawings(), page.get_image_info()
            for fig in page_figures(page, captions, words, drawings, images):
                body = fig.body
                tokens = [w[4] for w in words if body and w[0] >= body[0] - 1 and w[2] <= body[2] + 1
                          and w[1] >= body[1] - 1 and w[3] <= body[3] + 1]
                panels = (count_panels(drawings, images, body, fig.caption.text, tokens) if body
                          else estimate_panels(fig.caption.text))
                if panels < cfg.min_panels:
                    continue
                lo, hi = cfg.discussion_tokens
                figures.append({
                    "paper": paper, "pdf": name, "page": number, "label": fig.caption.label,
                    "caption": fig.caption.text, "caption_box": [round(v, 2) for v in fig.caption.bbox],
                    "body_box": [round(v, 2) for v in body] if body else None, "panels": panels,
                    "discussion": discussion(paragraphs, fig.caption.label, lo, hi),
                    "thumb": str(thumb.relative_to(out_dir)),
                })
        thumb_dir.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=4) as pool:  # PNG encoding and writing overlap
            list(pool.map(lambda t: t[0].save(t[1]), thumbs))
        return {"paper": paper, "pages": pages, "figures": figures}


@dataclass
class HarvestResult:
    pdfs: int
    pages: int
    candidates: int
    figures: int
    errors: list[dict]
    skipped: int  # units already in the ledger


def harvest(inputs, out_dir, cfg: HarvestConfig = HarvestConfig(), workers: int = 1, progress: bool = False):
    skips: dict[Path, dict[int, str]] = {}
    final: dict[Path, dict] = {}
    pending: list = list(inputs)
    skipped = 0
    for attempt in range(MAX_SKIPPED_PAGES + 1):
        out, results, done = run_files(
            pending, ".pdf", out_dir, "harvest", _harvest_pdf, lambda p: (cfg, skips.get(p)),
            lambda p: _key_settings(cfg, p, skips.get(p)),
            workers, progress, unit_seconds=cfg.document_seconds, stage_seconds=cfg.page_seconds)
        skipped += done if attempt == 0 else 0
        pending = []
        for p, r in results:
            page = _stuck_page(r)
            if page is not None and len(skips.get(p, {})) < MAX_SKIPPED_PAGES:
                limit = r["time_limit"]
                skips.setdefault(p, {})[page] = (f"skipped: {limit['stage']} ran past the page time limit "
                                                 f"({limit['seconds']:g} s)")
                pending.append(p)
            final[p] = r
        if not pending:
            break
    results = list(final.items())
    errors = []
    for p, r in results:  # input order; a document's stuck pages after its own error
        if "error" in r:
            errors.append({"pdf": str(p), "error": r["error"], **({"time_limit": r["time_limit"]}
                                                                   if "time_limit" in r else {})})
        errors += [{"pdf": str(p), "page": page, "error": reason} for page, reason in sorted(skips.get(p, {}).items())]
    pages = [row for _, r in results for row in r.get("pages", [])]
    write_jsonl(out / "pages.jsonl", pages)
    write_jsonl(out / "figures.jsonl", (row for _, r in results for row in r.get("figures", [])))
    write_jsonl(out / "errors.jsonl", errors)
    return HarvestResult(len(results), len(pages), sum(row["candidate"] for row in pages),
                         sum(len(r.get("figures", [])) for _, r in results), errors, skipped)


def _key_settings(cfg: HarvestConfig, path: Path, skip: dict[int, str] | None) -> dict:
    # The file name is part of the key: rows and messages name their file, and real dumps hold the
    # same bytes under several names (empty or truncated downloads above all).
    settings = {**cfg.key_settings(), "name": path.name}
    return {**settings, "skip": sorted(skip)} if skip else settings


def _stuck_page(result: dict) -> int | None:
    """The page a document was stopped on by the page time limit, else None."""
    limit = result.get("time_limit")
    if not limit or limit["limit"] != "stage" or not limit["stage"]:
        return None
    m = _PAGE_STAGE.match(limit["stage"])
    return int(m.group(1)) if m else None
