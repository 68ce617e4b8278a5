"""benchmint harvest: PDFs -> page verdicts, figure records and thumbnails (spm-bench §2.1-2.3).

One PDF is one unit of work: a worker process opens it, triages every page
without rendering (placed images, painted paths, caption anchors: the
Anchor-Gated Sieve), and on candidate pages pairs captions with figure
bodies, estimates panel counts, finds discussion paragraphs and renders the
thumbnail a VLM will see (written by a small thread pool). A second look
(``HarvestConfig.sieve``) reads the pages the sieve's path threshold drops
that have a few paths and no image, and records their captioned figures
whose bodies the drawings give, marked as its own. The parent records
each finished unit in the run's SQLite ledger, and writes pages.jsonl,
figures.jsonl and errors.jsonl from the ledger in input order at the end, so
a killed run resumes where it stopped and its files equal an uninterrupted
run's; a rerun of a finished run recomputes nothing.

Real dumps hold pages MuPDF needs minutes to read or render (dense vector
maps, broken content streams), and MuPDF cannot be interrupted from Python.
So every page stage (reading text, rendering the thumbnail, pairing figures)
is reported to the runner, whose worker is killed when one stage runs past
``page_seconds`` or one unit past ``document_seconds``; opening the document
and the stages over a whole page range (counting, the figure-word check) run
under ``range_seconds`` instead, being no one page's work. A page range
stopped on a page is run again without that page (at most
``MAX_SKIPPED_PAGES`` pages a document): the page gets a row saying which
limit it hit, errors.jsonl lists it, and the rest of the document is
harvested. The limits are not part of a unit's key (they do not change a
finished result); a unit stopped by a limit is tried again by the next run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmint.arxiv import Filters, MetadataIndex, joined, latest_versions, parse_id
from benchmint.io import FIELD_MARKS, InputError, atomic_write, dumps, write_jsonl
from benchmint.pdf import default_text_switches
from benchmint.run import (
    Executor,
    Hashed,
    Ledger,
    Unit,
    content_key,
    executor_for_files,
    find_files_into,
    hash_files,
    hash_threads,
    in_workers,
    read_error,
    run_units,
    stage,
)

# How many stuck pages a document may skip before it is given up as a whole.
MAX_SKIPPED_PAGES = 8
# Pages per unit of work: small enough to share a long document among the workers, large enough that
# opening the document and reading its shared resources again stays a small part of a unit.
CHUNK_PAGES = 32
# --triage-only over many documents (GROUP_MIN_DOCS or more): ranges of TRIAGE_PAGES pages, and the first ranges
# of short documents several to a unit. Triaging a document takes a worker some 25 ms (a page about 1.3 ms), and
# the driver's own work a unit (taking its result, recording it, reading it back: about 0.35 ms) is then paid
# once for a group. A group holds consecutive documents in input order and ends after a document whose key's
# first byte is GROUP_CUT - 1 modulo GROUP_CUT (one in GROUP_CUT), or at GROUP_DOCS documents or GROUP_BYTES
# bytes; a document over GROUP_ALONE_BYTES is a unit of its own. The ends depend on the documents alone, so a
# group's key is the same from one run to the next, and a file added to the inputs changes the groups up to the
# next end set by a key, not all those after it. Below GROUP_MIN_DOCS documents every range is a unit of its
# own and CHUNK_PAGES long, so that a small run still spreads over its workers. A group that fails as a whole (a
# time limit, a worker lost) gives way to its documents, each run alone.
GROUP_MIN_DOCS = 256
TRIAGE_PAGES = 128  # a 300-page document is still three units
GROUP_DOCS = 12
GROUP_CUT = 8
GROUP_BYTES = 16 << 20
GROUP_ALONE_BYTES = 4 << 20
_PAGE_STAGE = re.compile(r"page (\d+) ")


# Which pages get figure records: "paper" is the Anchor-Gated Sieve alone (spm-bench's pre-filter: a placed image or
# at least min_paths paths, and a caption anchor); "second_look" also reads the pages the pre-filter drops that have
# a few paths and no image, and records a caption there whose figure body the page's drawings give (a placeholder
# frame, a diagram of a few shapes), marked ``"sieve": "second_look"``. The pages' verdicts are the sieve's either way.
SIEVES = ("second_look", "paper")


@dataclass(frozen=True)
class HarvestConfig:
    min_paths: int = 12
    sieve: str = "second_look"
    min_panels: int = 1
    triage_only: bool = False
    max_pages: int = 5000
    thumb_longest: int = 1024
    discussion_tokens: tuple[int, int] = (100, 300)
    page_seconds: float = 60.0  # one stage of one page (text, thumbnail, figures)
    document_seconds: float = 900.0  # one unit: a document's check, or one of its page ranges
    range_seconds: float = 300.0  # opening the document, and a range's stages over all its pages (counts, words)

    def __post_init__(self) -> None:
        if self.min_paths < 0 or self.min_panels < 1 or self.max_pages < 1:
            raise ValueError("min_paths must be >= 0, min_panels and max_pages >= 1")
        if self.sieve not in SIEVES:
            raise ValueError(f"sieve must be one of {', '.join(SIEVES)}, got {self.sieve!r}")
        for name in ("page_seconds", "document_seconds", "range_seconds"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and value != float("inf")):
                raise ValueError(f"{name} must be a positive number of seconds, got {value}")

    def key_settings(self) -> dict:
        """The settings that shape a result (the time limits do not): a dict of its own each call."""
        return dict(_key_settings(self))


@functools.lru_cache(maxsize=8)
def _key_settings(cfg: HarvestConfig) -> dict:
    # Every file's and page range's key spreads these: asdict takes 21 us a call, per unit of the driver.
    settings = asdict(cfg)
    del settings["page_seconds"], settings["document_seconds"], settings["range_seconds"]
    return settings


def _graphic(images: int, paths: int, cfg: HarvestConfig) -> bool:
    return images >= 1 or paths >= cfg.min_paths


def _second_look(images: int, paths: int, cfg: HarvestConfig) -> bool:
    """A page the pre-filter drops that the second look reads: no image, and at least one path."""
    return cfg.sieve == "second_look" and not cfg.triage_only and images == 0 and 1 <= paths < cfg.min_paths


def triage_pages(doc, name: str, cfg: HarvestConfig, skip: dict[int, str] | None = None,
                 numbers: range | None = None):
    """The Anchor-Gated Sieve over an open document (or its 1-based page ``numbers``), without rendering.

    The graphic test comes first, from the compiled content-stream counts; only
    pages that pass it have their text read for caption anchors (a page with
    no graphic cannot be a candidate, and text extraction is the costly part),
    so their ``captions`` are null. ``skip`` maps page numbers to the reason
    they are not read (a page time limit). Returns (page rows, [(page number,
    captions)] of the pages to look for figures on, text segments per page or
    None where unread).

    With ``cfg.sieve`` "second_look", the pages the pre-filter drops with a few
    paths and no image are read too (after the same figure-word check): their
    rows keep the sieve's verdict, and those with a caption anchor join the
    pages to look for figures on (a row gains ``second_look``, the number of
    records, once pairing gives it some).
    """
    from benchmint.pdf.captions import page_captions, text_segments
    from benchmint.pdf.triage import _Extractor, lean_text_copy, may_show_figure_words, open_document_counts

    numbers = numbers if numbers is not None else range(1, doc.page_count + 1)
    pages: list[dict] = []
    candidates: list[tuple[int, list]] = []
    segments_by_page: list[list | None] = []
    # Stages over the whole range are bounded by the range limit, not by one page's.
    stage(f"pages {numbers.start}-{numbers.stop - 1} counts", cfg.range_seconds)
    extractor = _Extractor(doc)
    counts = open_document_counts(doc, extractor=extractor, pages=[n - 1 for n in numbers])  # resources read once
    graphic = [n for n, (im, pa, _) in zip(numbers, counts) if (_graphic(im, pa, cfg) or _second_look(im, pa, cfg))
               and not (skip and n in skip)]
    stage(f"pages {numbers.start}-{numbers.stop - 1} figure words", cfg.range_seconds)
    # Pages whose shown text cannot read "Fig" hold no anchor: MuPDF's text page is not needed to say so.
    try:
        may = may_show_figure_words(doc, [n - 1 for n in graphic], extractor)
    except Exception:  # noqa: BLE001 - the check only spares work: should it fail, MuPDF reads every page
        may = [True] * len(graphic)
    no_anchor = {n for n, m in zip(graphic, may) if not m}
    for number, (images, paths, _damaged) in zip(numbers, counts):
        row = {"pdf": name, "page": number, "images": images, "paths": paths, "captions": None}
        segments = None
        if skip and number in skip:
            row.update(candidate=False, reason=skip[number])
        elif not _graphic(images, paths, cfg):
            row.update(candidate=False, reason=f"no graphic ({images} images, {paths} paths < {cfg.min_paths})")
            if _second_look(images, paths, cfg) and number not in no_anchor:
                segments = _second_look_text(doc, number, extractor, row, candidates)
        elif number in no_anchor:
            row.update(captions=[], candidate=False, reason="graphic but no figure-caption anchor")
        else:
            stage(f"page {number} text")
            page = doc[number - 1]
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


def _second_look_text(doc, number: int, extractor, row: dict, candidates: list) -> list | None:
    """The second look at a page the pre-filter dropped: its text segments (None when unreadable: the row keeps
    the sieve's verdict, and the page simply gives no figure), the page added to ``candidates`` when a caption
    anchor opens one of its blocks."""
    from benchmint.pdf.captions import page_captions, text_segments
    from benchmint.pdf.triage import lean_text_copy

    stage(f"page {number} text")
    page = doc[number - 1]
    try:
        lean = lean_text_copy(page, extractor)
        segments = text_segments(lean[0] if lean else page)
    except Exception as exc:  # noqa: BLE001 - a damaged text layer on a page the sieve left out: said in its row
        row["second_look_error"] = f"unreadable text layer: {exc}"
        return None
    captions = page_captions(page, segments)
    if captions:
        candidates.append((number, captions))
    return segments


def _open(source, read: dict | None = None):
    """(document, None) or (None, the reason it cannot be harvested). ``source`` is a path, or an archive
    ``Member`` read into memory (its SHA-256 into ``read["sha256"]``)."""
    import pymupdf

    from benchmint.run.archives import Member, MemberError, read_member

    try:
        if isinstance(source, Member):
            try:
                data = read_member(source)
            except MemberError as exc:
                return None, str(exc)
            if read is not None:
                read["sha256"] = hashlib.sha256(data).hexdigest()
            doc = pymupdf.open(stream=data, filetype="pdf")
        else:
            doc = pymupdf.open(source)
    except Exception as exc:  # PyMuPDF raises several types for unreadable files
        # Its message quotes the path; copies of a file share one result, and the error row names the file.
        return None, f"cannot open as a PDF: {str(exc).replace(str(source), Path(str(source)).name)}"
    if doc.needs_pass:
        doc.close()
        return None, "encrypted (password required)"
    return doc, None


def _name(source) -> str:
    from benchmint.run.archives import Member

    return Path(source.name if isinstance(source, Member) else source).name


def _harvest_range(path, paper: str, out_dir: str, cfg: HarvestConfig, first: int, last: int,
                   skip: dict[int, str] | None) -> dict:
    """``_range_of``; the first range's also has the SHA-256 of an archive member's bytes (the parent has not
    read them)."""
    read: dict = {}
    with default_text_switches():
        return {**_range_of(path, paper, out_dir, cfg, first, last, skip, read if first == 1 else None), **read}


def _range_of(path, paper: str, out_dir: str, cfg: HarvestConfig, first: int, last: int,
              skip: dict[int, str] | None, read: dict | None) -> dict:
    """In a worker: page rows of pages ``first``..``last`` (1-based, cut at the document's end) and figure
    records of their candidate pages and of the second look's (without discussion), thumbnails written; where
    there are figures, the paragraphs of the pages read that cite one figure alone (``cited``), for the
    discussions; the document's page count. Any range checks the document (unreadable,
    encrypted, empty, too long): the first range's result says so for the whole document."""
    name = _name(path)
    stage("open", cfg.range_seconds)
    doc, problem = _open(path, read)
    if doc is None:
        return {"error": problem}
    with doc:
        n = doc.page_count
        if n == 0:
            return {"error": "the document has no pages"}
        if n > cfg.max_pages:
            return {"error": f"{n} pages exceed --max-pages {cfg.max_pages}"}
        last = min(last, n)
        try:
            pages, candidates, segments = triage_pages(doc, name, cfg, skip, range(first, last + 1))
        except Exception as exc:  # resources PyMuPDF cannot resolve: the file is unusable here
            return {"error": f"cannot read the page contents: {exc}"}
        if cfg.triage_only or not candidates:
            # No text kept: the ledger would hold the text of every graphic page of a dump. Should another
            # range of the document have figures, the text pass reads these pages again.
            return {"page_count": n, "pages": pages, "figures": []}
        from benchmint.pdf.figures import find_figures
        from benchmint.pdf.geometry import render_thumbnail  # NumPy with it: triage-only runs go without

        figures, thumbs = [], []
        thumb_dir = Path(out_dir) / "thumbs"
        rows = {row["page"]: row for row in pages}
        for number, captions in candidates:
            page = doc[number - 1]
            thumb = thumb_dir / f"{paper}-p{number:04d}.png"
            second = not rows[number]["candidate"]  # a page of the second look, not of the sieve
            if not second:
                stage(f"page {number} thumbnail")
                thumbs.append((render_thumbnail(page, cfg.thumb_longest), thumb))
            stage(f"page {number} figures")
            found = []
            for fig in find_figures(page, captions):
                body, panels = fig.body, fig.panels
                # The second look records a caption only with a body: its page has too few paths for the
                # sieve, so a caption there without graphics beside it has its figure elsewhere, if anywhere.
                if panels < cfg.min_panels or (second and body is None):
                    continue
                found.append({
                    "paper": paper, "pdf": name, "page": number, "label": fig.caption.label,
                    "caption": fig.caption.text, "caption_box": [round(v, 2) for v in fig.caption.bbox],
                    "body_box": [round(v, 2) for v in body] if body else None, "panels": panels,
                    "discussion": None, "thumb": str(thumb.relative_to(out_dir)),
                    "sieve": "second_look" if second else "paper",
                })
            # Only a page the second look gave records says so: which pages it read at all is the figure-word
            # check's saving, which must not show in the outputs.
            if second and found:
                rows[number]["second_look"] = len(found)
                stage(f"page {number} thumbnail")  # the generators' VLM localises on the page's thumbnail
                thumbs.append((render_thumbnail(page, cfg.thumb_longest), thumb))
            figures.extend(found)
        thumb_dir.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=4) as pool:  # PNG encoding and writing overlap
            list(pool.map(lambda t: t[0].save(t[1]), thumbs))
        return {"page_count": n, "pages": pages, "figures": figures, "cited": _cited(first, segments)}


def _range_rows(path, paper: str, out_dir: str, cfg: HarvestConfig, first: int, last: int,
                skip: dict[int, str] | None, fields: tuple[str, ...]) -> dict:
    """A page range's unit as its worker runs it: ``_harvest_range``'s result with its page rows made into
    pages.jsonl's lines here (``_framed_rows``), the document's ``fields`` (pdf, sha256 and its labels, which
    the driver knows) left as marks."""
    return _framed_rows(_harvest_range(path, paper, out_dir, cfg, first, last, skip), fields)


def _page_unit(*args) -> dict:
    """A unit of the page-range pass as its worker runs it: one range (``_range_rows``' arguments), or the first
    ranges of a group of documents (one argument: theirs, ``_group_rows``)."""
    return _group_rows(*args) if len(args) == 1 else _range_rows(*args)


def _group_rows(ranges: tuple[tuple, ...]) -> dict:
    """Several documents' first ranges as one unit (``_Run.grouped``): each one's ``_range_rows``, in order."""
    return {"group": [_range_rows(*args) for args in ranges]}


def _members(result: dict, n: int) -> list[dict] | None:
    """The ``n`` results of a group's documents, or None for a group that failed as a whole."""
    got = result.get("group")
    return got if isinstance(got, list) and len(got) == n else None


def _framed_rows(result: dict, fields: tuple[str, ...]) -> dict:
    """``result`` with its page rows (``pages``) as one text of pages.jsonl's lines (``page_rows``) in which the
    fields the driver fills in are marks (``io.FIELD_MARKS``; their names sorted in ``fields``), with what the
    driver reads of the rows beside it: their count, the candidates', the second look's, the pages whose
    thumbnails a full harvest writes (candidates, the second look's with figures). Decoding
    one string costs the driver far less than the rows' objects, and it joins each line without encoding it. A
    row whose own text spells a mark keeps the result as it is (``pages``, decoded as before)."""
    if "pages" not in result:
        return result
    marks = {name: f"\0{name}\0" for name in fields}
    lines = [dumps({**row, **marks}) for row in result["pages"]]
    names = sorted(fields)
    if any(sorted(FIELD_MARKS.findall(line)) != names for line in lines):
        return result
    pages = result["pages"]
    head = {k: v for k, v in result.items() if k != "pages"}
    return {**head, "fields": names, "page_rows": "".join(line + "\n" for line in lines), "rows": len(pages),
            "candidates": sum(bool(row["candidate"]) for row in pages),
            "second_look": sum(bool(row.get("second_look")) for row in pages),
            "thumb_pages": [row["page"] for row in pages if row["candidate"] or row.get("second_look")]}


def _cited(first: int, segments: list) -> list:
    """[page number, its paragraphs that cite one figure alone (``context.cited_alone``)] of the pages whose text
    was read: what the discussions need of the text, found here rather than by the driver."""
    from benchmint.pdf.context import cited_alone

    return [[first + i, cited_alone(text for text, _ in segs)] for i, segs in enumerate(segments) if segs is not None]


def _cited_pages(r: dict) -> list:
    """A result's [page number, cited_alone pairs]; a result of the form before holds the pages' paragraphs
    ("text"), whose pairs are found here."""
    if "cited" in r:
        return r["cited"]
    if "text" not in r:  # no text read (triage-only, no figures): nothing to import
        return []
    from benchmint.pdf.context import cited_alone  # here: it imports PyMuPDF, which triage-only drivers spare

    return [[n, cited_alone(texts)] for n, texts in r.get("text", ())]


def _read_texts(path, numbers: list[int], open_seconds: float | None = None) -> dict:
    """In a worker: what the discussions need of the pages ``numbers`` (1-based): their ``cited_alone`` pairs."""
    from benchmint.pdf.captions import text_segments
    from benchmint.pdf.context import cited_alone

    stage("open", open_seconds)
    doc, problem = _open(path)
    if doc is None:
        return {"error": problem}
    with doc, default_text_switches():
        out = []
        for number in numbers:
            stage(f"page {number} text")
            out.append([number, cited_alone(text for text, _ in text_segments(doc[number - 1]))])
        return {"cited": out}


@dataclass
class HarvestResult:
    pdfs: int
    pages: int
    candidates: int
    figures: int
    errors: list[dict]
    skipped: int  # PDFs whose every unit was in the ledger already
    left_out: int = 0  # files found twice or that could not be read (each an error row)
    dropped: dict[str, int] = field(default_factory=dict)  # papers the filters left out, by reason (dropped.jsonl)
    second_look: int = 0  # pages the sieve dropped that gave figure records to the second look


@dataclass
class _Doc:
    """One PDF of the run. Every output names it by ``path`` (as found from the inputs as given; an archive
    member's is ``archive/member``) and ``sha256`` (of its bytes), with ``labels``: the archive and member, the
    arXiv id and version its name gives. The units' keys hash its bytes (a member's identity in its archive)
    with the settings and its base name; ``source`` is what the workers read."""

    path: Path
    digest: bytes
    paper: str
    sha256: str | None = ""
    source: object = None
    labels: dict = field(default_factory=dict)
    meta: dict | None = None  # the paper's metadata (--metadata), for documents.jsonl and figures.jsonl
    error: dict | None = None
    skips: dict[int, str] = field(default_factory=dict)  # page -> why it is not read (a time limit)
    ranges: dict[tuple[int, int], dict] = field(default_factory=dict)  # (first, last) -> its result
    texts: dict[int, list] = field(default_factory=dict)  # page -> its cited_alone pairs, read by the text pass
    text_errors: list[dict] = field(default_factory=list)  # error rows of text-pass units (discussions may lack text)
    done_before: bool = True
    size: int = 0  # its bytes: the cost of each of its ranges, so the largest documents start first

    def key(self, settings: dict) -> str:
        return content_key(self.digest, {**settings, "name": self.path.name})

    def fields(self) -> tuple[str, ...]:
        """The fields of its rows that the driver fills in (``_framed_rows``)."""
        return tuple(sorted(("pdf", "sha256", *self.labels)))

    def share(self, other: _Doc) -> None:
        """Take the results of ``other``, a copy of this file run in its place."""
        self.skips, self.ranges, self.texts, self.done_before = other.skips, other.ranges, other.texts, other.done_before
        self.text_errors = [{**row, "pdf": str(self.path)} for row in other.text_errors]
        self.sha256 = self.sha256 or other.sha256
        self.error = None if other.error is None else {**other.error, "pdf": str(self.path)}


# What a page-range unit imports: the workers import it as they start, while the run hashes its inputs. Every
# pass preloads what its units import (the text pass: the triage modules), so no import falls inside a page's
# time limit (a fresh worker after a stuck page, a Ray worker that has not run a range yet).
_TRIAGE_MODULES = ("benchmint._core", "pymupdf", "benchmint.pdf.captions", "benchmint.pdf.context",
                   "benchmint.pdf.triage")
_FIGURE_MODULES = ("benchmint.pdf.geometry", "benchmint.pdf.pairing", "benchmint.pdf.panels", "benchmint.pdf.figures",
                   "benchmint.pdf.scan")


def _range_modules(cfg: HarvestConfig) -> tuple[str, ...]:
    return _TRIAGE_MODULES + (() if cfg.triage_only else _FIGURE_MODULES)


def harvest(inputs, out_dir, cfg: HarvestConfig = HarvestConfig(), workers: int = 1, progress: bool = False,
            metadata: str | os.PathLike | None = None, filters: Filters | None = None,
            engine: str = "local") -> HarvestResult:
    """Harvest the PDFs in ``inputs`` (files, folders, archives) into ``out_dir``. ``metadata``: an arXiv
    metadata snapshot, indexed into ``out_dir/metadata.sqlite`` and joined into the records by the arXiv id of
    each file's name; ``filters`` leave papers out before any of their bytes is read (dropped.jsonl).
    ``engine`` "ray": the page ranges run as tasks on the connected Ray cluster (``run.ray_engine``;
    ``workers`` is then the cluster's), with the same outputs."""
    filters = filters or Filters()
    if filters.need_metadata and metadata is None:
        raise ValueError("--categories, --from and --to need --metadata")
    if metadata is not None and not Path(metadata).is_file():
        raise InputError(f"--metadata {metadata}: No such file or directory")
    out = Path(out_dir)
    files = find_files_into(inputs, ".pdf", out)
    out.mkdir(parents=True, exist_ok=True)
    first_pass = _executor(workers, cfg, _range_modules(cfg), engine)
    first_pass.start()
    index = None
    try:
        index = MetadataIndex.open(metadata, out / METADATA_INDEX) if metadata is not None else None
        kept, dropped, problems = _select(files, index, filters)
        docs: list[_Doc] = []
        left_out: list[tuple[int, dict]] = []  # (how many documents came before it, its error row)
        shared = cfg.key_settings()
        settings = [{**shared, "name": f.path.name} for f, _, _ in kept]
        # The document's key hashes its bytes with the settings (its first 16 digits name its thumbnails); the
        # units' keys hash that key, so a long document's ranges do not hash it again.
        read = [i for i, (f, _, _) in enumerate(kept) if f.error_row() is None and f.member is None]
        hashed = dict(zip(read, hash_files([kept[i][0].path for i in read], [settings[i] for i in read],
                                           hash_threads(workers))))
        for i, (f, labels, meta) in enumerate(kept):
            row = f.error_row()
            if row is None and f.member is not None:  # not read here: a finished member is skipped unread
                docs.append(_Doc(f.path, bytes.fromhex(key := f.member.key(settings[i])), key[:16], None, f.member,
                                 labels, meta, size=f.member.size))
                continue
            got = hashed.get(i)  # None for a file left out already
            if isinstance(got, Hashed):
                docs.append(_Doc(f.path, bytes.fromhex(got.key), got.key[:16], got.sha256, str(f.path), labels,
                                 meta, size=got.size))
                continue
            if isinstance(got, OSError):  # no permission, gone since the listing: this file's error, not the run's
                row = read_error(got)
            left_out.append((len(docs), {"pdf": str(f.path), **labels, **(row or {})}))
        # Copies of one file under one base name (in several folders) share every unit: one of them runs.
        first: dict[bytes, _Doc] = {}
        for d in docs:
            first.setdefault(d.digest, d)
        with Ledger(out / "ledger.sqlite", "harvest") as ledger:
            run = _Run(ledger, out, cfg, workers, progress, first_pass, engine)
            run.page_ranges(list(first.values()))
            run.unread_text(list(first.values()))
        for d in docs:
            if first[d.digest] is not d:
                d.share(first[d.digest])
    finally:
        first_pass.close()  # idle workers of a run that had nothing to do, or that failed before its first pass
        if index is not None:
            index.close()
    write_jsonl(out / "dropped.jsonl", dropped)
    result = _write(out, docs, cfg, left_out, problems)
    result.dropped = dict(sorted(Counter(row["reason"] for row in dropped).items()))
    return result


METADATA_INDEX = "metadata.sqlite"


def _select(files: list, index: MetadataIndex | None, filters: Filters) -> tuple[list, list[dict], list[dict]]:
    """The files the filters keep, as (FoundFile, labels, metadata or None), in input order; the rows of those
    dropped ({pdf, labels, reason}); the error rows of snapshot lines that could not be read. By file names and
    the index only: nothing of a PDF is read."""
    idents = [parse_id(f.path.name) for f in files]
    found = index.lookup(i[0] for i in idents if i is not None) if index is not None else {}
    kept, dropped = [], []
    for position, (f, ident) in enumerate(zip(files, idents)):
        labels = {**f.where(), **({"arxiv_id": ident[0], "arxiv_version": ident[1]} if ident else {})}
        meta = None if index is None else joined(found.get(ident[0]) if ident else None, ident[1] if ident else None)
        # Files left out as unreadable or found twice are error rows, not drops.
        reason = filters.why_dropped(ident, meta) if filters.active and f.error_row() is None else None
        if reason is None:
            kept.append((f, labels, meta, ident, position))
        else:
            dropped.append((position, {"pdf": str(f.path), **labels, "reason": reason}))
    if filters.latest_version:
        latest = latest_versions([ident if f.error_row() is None else None for f, _, _, ident, _ in kept])
        survivors = []
        for (f, labels, meta, ident, position), best in zip(kept, latest):
            if ident is not None and best is not None and (ident[1] or 0) < best:
                dropped.append((position, {"pdf": str(f.path), **labels,
                                           "reason": "not the latest version"}))
            else:
                survivors.append((f, labels, meta, ident, position))
        kept = survivors
    problems = [] if index is None else [{"metadata": str(index.snapshot), "line": line, "error": error}
                                         for line, error in index.problems()]
    return [(f, labels, meta) for f, labels, meta, _, _ in kept], [row for _, row in sorted(dropped)], problems



def _executor(workers: int, cfg: HarvestConfig, preload: tuple[str, ...] = (), engine: str = "local"):
    return executor_for_files(engine, workers, unit_seconds=cfg.document_seconds, stage_seconds=cfg.page_seconds,
                              preload=preload)


class _Run:
    """The passes of one harvest over the ledger: page ranges (with the retries of stuck pages), then text."""

    def __init__(self, ledger: Ledger, out: Path, cfg: HarvestConfig, workers: int, progress: bool,
                 started: Executor | None = None, engine: str = "local") -> None:
        self.ledger, self.out, self.cfg, self.workers, self.progress = ledger, out, cfg, workers, progress
        self.engine = engine
        self.owner: dict[str, tuple[_Doc, tuple[int, int]]] = {}  # unit key -> its document and range
        self.groups: dict[str, list[Unit]] = {}  # a group's key -> its documents' first ranges (``grouped``)
        self.shared, self.out_text = cfg.key_settings(), str(out)  # what every range's unit spells the same
        self.started = started  # workers started for the first pass

    def run(self, units: list[Unit], owners: list[_Doc], work, desc: str, preload: tuple[str, ...],
            then=None, on_recorded=None) -> list[dict]:
        """The results of ``units`` in their order; with ``on_recorded`` (which sees each result as it is
        recorded), none: the caller keeps what it needs."""
        for u, d in zip(units, owners):
            done = self.ledger.done(u.key)
            for member in self.groups.get(u.key, ()):  # a group's documents: all done, or none
                self.owner[member.key][0].done_before &= done
            d.done_before &= done
        executor, self.started = self.started or _executor(self.workers, self.cfg, preload, self.engine), None
        # Encoded, and filed beside the ledger, by the workers: the driver records where each result is.
        return run_units(self.ledger, units, in_workers(work, executor, self.ledger), executor, desc, self.progress,
                         then=then, on_recorded=on_recorded, read_back=on_recorded is None)[0]

    def range_unit(self, d: _Doc, first: int, last: int) -> Unit:
        skip = {n: why for n, why in d.skips.items() if first <= n <= last}
        settings = {**self.shared, "pages": [first, last], **({"skip": sorted(skip)} if skip else {})}
        unit = Unit(d.key(settings), (d.source, d.paper, self.out_text, self.cfg, first, last, skip or None,
                                      d.fields()), f"{d.path} pages {first}-{last}", d.size)
        self.owner[unit.key] = (d, (first, last))
        return unit

    def rest_of(self, unit: Unit, result: dict) -> list[Unit]:
        """Once a document's first range tells its length, its other ranges join the run."""
        members = self.groups.get(unit.key)
        if members is not None:
            got = _members(result, len(members))
            return [] if got is None else [nxt for m, r in zip(members, got) for nxt in self.rest_of(m, r)]
        d, (first, step) = self.owner[unit.key]  # a first range's last page is its size: CHUNK_PAGES or TRIAGE_PAGES
        if first != 1 or "page_count" not in result:
            return []
        n = result["page_count"]
        return [self.range_unit(d, f, min(f + step - 1, n)) for f in range(1 + step, n + 1, step)]

    def page_ranges(self, docs: list[_Doc]) -> None:
        """Each document's first range, then its others as the first tells its length; a range stopped on a
        page runs again without that page. Leaves each document's range results (and its own error)."""
        pending = self.grouped(docs)
        # Each result as it is recorded (the runner reads it for ``rest_of`` anyway): the ledger is read again
        # only for the units an earlier run recorded.
        results: dict[str, dict] = {}
        # A group failing as a whole costs its documents one round (they run alone in the next).
        for _attempt in range(MAX_SKIPPED_PAGES + 1 + bool(self.groups)):
            owners = [self.owner[self.groups[u.key][0].key if u.key in self.groups else u.key][0] for u in pending]
            self.run(pending, owners, _page_unit, "harvest: pages", _range_modules(self.cfg), self.rest_of,
                     lambda u, r: results.__setitem__(u.key, r))
            pending = self.ungroup(results)
            for key, (d, rng) in list(self.owner.items()):
                if key not in results:
                    stored = self.ledger.get(key)
                    if stored is not None:
                        results[key] = stored[1]
                result = results.get(key, {})
                page = _stuck_page(result)
                if page is not None and page not in d.skips and len(d.skips) < MAX_SKIPPED_PAGES:
                    limit = result["time_limit"]
                    d.skips[page] = f"skipped: {limit['stage']} ran past the page time limit ({limit['seconds']:g} s)"
                    del self.owner[key]  # the range runs again without the page, under a key of its own
                    pending.append(self.range_unit(d, *rng))
            if not pending:
                break
        for key, (d, rng) in self.owner.items():  # each range's last result (its latest set of skipped pages)
            got = results.get(key)
            if got is None:  # every range was run above, or by an earlier run
                raise RuntimeError(f"{d.path} pages {rng[0]}-{rng[1]} have no result in {self.ledger.path}")
            d.ranges[rng] = got
            if d.sha256 is None:  # a member's, from the worker that read it
                d.sha256 = got.get("sha256")
        for d in docs:
            first = next((r for (start, _), r in d.ranges.items() if start == 1), None)
            if first is not None and "error" in first:  # the document itself cannot be harvested
                d.error = _error_row(d, first)

    def grouped(self, docs: list[_Doc]) -> list[Unit]:
        """The units of ``docs``' first ranges, in input order: each a range of CHUNK_PAGES, or, for --triage-only
        runs of GROUP_MIN_DOCS documents or more, of TRIAGE_PAGES, those of short documents in groups of
        consecutive ones (``GROUP_*``). A first range the ledger holds already (run alone by an earlier run, or
        by the code before groups, at either size) stays alone and is read as it is; it does not end a group, so
        the groups do not depend on what the ledger holds."""
        if not self.cfg.triage_only or len(docs) < GROUP_MIN_DOCS:
            return [self.range_unit(d, 1, CHUNK_PAGES) for d in docs]
        fresh = len(self.ledger) == 0  # no earlier run's range to look for
        out: list[Unit] = []
        group: list[Unit] = []

        def close() -> None:
            if len(group) > 1:
                key = content_key("\n".join(u.key for u in group).encode(), {"group": "first ranges"})
                out.append(Unit(key, (tuple(u.args for u in group),), f"{group[0].label} and {len(group) - 1} more",
                                sum(u.cost for u in group)))
                self.groups[key] = list(group)
            else:
                out.extend(group)
            group.clear()

        for d in docs:
            if not fresh:
                u = self.range_unit(d, 1, CHUNK_PAGES)
                if self.ledger.done(u.key):
                    out.append(u)
                    continue
                del self.owner[u.key]
            u = self.range_unit(d, 1, TRIAGE_PAGES)
            if not fresh and self.ledger.done(u.key):
                out.append(u)
            elif u.cost > GROUP_ALONE_BYTES:
                close()
                out.append(u)
            else:
                group.append(u)
                if (len(group) == GROUP_DOCS or sum(g.cost for g in group) >= GROUP_BYTES
                        or d.digest[0] % GROUP_CUT == GROUP_CUT - 1):
                    close()
        close()
        return out

    def ungroup(self, results: dict[str, dict]) -> list[Unit]:
        """Each group's result split into its documents' (into ``results``, under their ranges' keys); the first
        ranges of a group that failed as a whole, to run alone."""
        alone: list[Unit] = []
        for key, members in self.groups.items():
            result = results.pop(key, None)
            if result is None:  # recorded by an earlier run
                stored = self.ledger.get(key)
                result = {} if stored is None else stored[1]
            got = _members(result, len(members))
            if got is None:
                alone.extend(members)
            else:
                results.update((m.key, r) for m, r in zip(members, got))
        self.groups.clear()
        return alone

    def unread_text(self, docs: list[_Doc]) -> None:
        """For documents with figures, the text of the pages the page ranges did not keep (into ``texts``)."""
        units, wanted = [], []
        for d in docs:
            if d.error is not None or not any(r.get("figures") for r in d.ranges.values()):
                continue
            for (first, last), r in sorted(d.ranges.items()):
                read = {n for n, _ in _cited_pages(r)}
                end = min(last, r.get("page_count", last))
                unread = [n for n in range(first, end + 1) if n not in read and n not in d.skips]
                if unread and "error" not in r:
                    units.append(Unit(d.key({"text": unread}), (d.source, unread, self.cfg.range_seconds),
                                      f"{d.path} text"))
                    wanted.append(d)
        for d, u, r in zip(wanted, units, self.run(units, wanted, _read_texts, "harvest: text", _TRIAGE_MODULES)):
            if "error" in r:  # the document changed or vanished since its pages were read, a page's text stuck
                d.text_errors.append(_error_row(d, r, text_of_pages=u.args[1]))
            d.texts.update({n: cited for n, cited in _cited_pages(r)})


def _error_row(d: _Doc, result: dict, **where) -> dict:
    """errors.jsonl's row of a failed unit: the file, where in it, the error and the time limit it hit."""
    return {"pdf": str(d.path), **where, "error": result["error"],
            **({"time_limit": result["time_limit"]} if "time_limit" in result else {})}


def _write(out: Path, docs: list, cfg: HarvestConfig, left_out: list[tuple[int, dict]],
           snapshot_errors: list[dict]) -> HarvestResult:
    pages: list[str] = []  # pages.jsonl's text, a range's lines at a time
    counts: Counter[str] = Counter()  # pages, candidates, second_look
    figures: list[dict] = []
    errors: list[dict] = list(snapshot_errors)  # lines of the metadata snapshot that could not be read
    documents: list[dict] = []  # one a document run: its identifiers, pages and metadata (errors.jsonl says why not)
    held = iter(left_out)  # (how many documents came before it, its row): in input order among the documents
    pending = next(held, None)
    for i, d in enumerate([*docs, None]):  # input order; a document's own error, then its ranges' and its pages'
        while pending is not None and pending[0] == i:
            errors.append(pending[1])
            pending = next(held, None)
        if d is None:
            break
        ident = {"pdf": str(d.path), "sha256": d.sha256, **d.labels}  # every row of every file names the document so
        count = next((r["page_count"] for r in d.ranges.values() if "page_count" in r), None)
        documents.append({**ident, "page_count": None if d.error is not None else count, **(d.meta or {})})
        if d.error is not None:
            errors.append({**d.error, **ident})
            continue
        texts = dict(d.texts)
        doc_figures: list[dict] = []
        for (first, last), r in sorted(d.ranges.items()):
            if "error" in r:
                errors.append({**_error_row(d, r, pages=[first, last]), **ident})
                continue
            pages.append(_page_lines(r, ident))
            counts.update(_page_counts(r))
            doc_figures.extend({**ident, **{k: v for k, v in f.items() if k != "paper"}, "pdf": ident["pdf"],
                                **(d.meta or {})} for f in r["figures"])
            texts.update({n: cited for n, cited in _cited_pages(r)})
        if doc_figures:
            # here: it imports PyMuPDF, which triage-only runs spare
            from benchmint.pdf.context import discussions_of_cited

            cited = [pair for n in sorted(texts) for pair in texts[n]]
            lo, hi = cfg.discussion_tokens
            found = discussions_of_cited(cited, [f["label"] for f in doc_figures], lo, hi)
            doc_figures = [{**f, "discussion": text} for f, text in zip(doc_figures, found)]
        figures.extend(doc_figures)
        errors += [{**ident, "page": page, "error": reason} for page, reason in sorted(d.skips.items())]
        errors += [{**row, **ident} for row in d.text_errors]
    with atomic_write(out / "pages.jsonl") as fh:
        fh.writelines(pages)
    write_jsonl(out / "figures.jsonl", figures)
    write_jsonl(out / "errors.jsonl", errors)
    write_jsonl(out / "documents.jsonl", documents)
    _drop_stale_thumbnails(out, docs, cfg)
    return HarvestResult(len(docs) + len(left_out), counts["pages"], counts["candidates"], len(figures),
                         errors, sum(d.done_before for d in docs), len(left_out), second_look=counts["second_look"])


def _page_lines(r: dict, ident: dict) -> str:
    """pages.jsonl's lines of a range's result: its worker's lines with the document's fields joined in
    (``_framed_rows``), or, for a result of another form (a ledger of the code before, marks that do not fit
    these fields), its rows with the fields, encoded here."""
    if r.get("fields") == sorted(ident):
        parts = FIELD_MARKS.split(r["page_rows"])
        values = {name: dumps(value) for name, value in ident.items()}
        parts[1::2] = [values[p] for p in parts[1::2]]  # the marks' names, between the pieces of the lines
        return "".join(parts)
    return "".join(dumps({**ident, **row, "pdf": ident["pdf"]}) + "\n" for row in _page_rows(r))


def _page_rows(r: dict) -> list[dict]:
    """A range result's page rows as dicts (the fields its worker left as marks dropped)."""
    if "page_rows" not in r:
        return r["pages"]
    marked = set(r["fields"])
    # lines end at "\n" alone: a row's text may hold U+2028 raw, at which splitlines() would cut
    return [{k: v for k, v in json.loads(line).items() if k not in marked}
            for line in r["page_rows"].split("\n") if line]


def _page_counts(r: dict) -> dict[str, int]:
    """A range result's pages, candidate pages and pages the second look gave figures."""
    if "page_rows" in r:
        return {"pages": r["rows"], "candidates": r["candidates"], "second_look": r["second_look"]}
    rows = r["pages"]
    return {"pages": len(rows), "candidates": sum(bool(row["candidate"]) for row in rows),
            "second_look": sum(bool(row.get("second_look")) for row in rows)}


def _drop_stale_thumbnails(out: Path, docs: list, cfg: HarvestConfig) -> None:
    """Remove thumbnails of earlier runs into ``out`` (other settings, other files): thumbs/ holds this run's
    candidate pages only."""
    folder = out / "thumbs"
    if not folder.is_dir():
        return
    keep = set() if cfg.triage_only else {
        f"{d.paper}-p{page:04d}.png" for d in docs if d.error is None for r in d.ranges.values()
        for page in (r["thumb_pages"] if "thumb_pages" in r else [
            row["page"] for row in r.get("pages", ()) if row["candidate"] or row.get("second_look")])}
    for p in folder.iterdir():
        if p.suffix == ".png" and p.name not in keep:
            p.unlink()


def _stuck_page(result: dict) -> int | None:
    """The page a unit was stopped on by the page time limit, else None."""
    limit = result.get("time_limit")
    if not limit or limit["limit"] != "stage" or not limit["stage"]:
        return None
    m = _PAGE_STAGE.match(limit["stage"])
    return int(m.group(1)) if m else None
