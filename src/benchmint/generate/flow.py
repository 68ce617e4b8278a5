"""What every generator shares: prompt files, structured replies, result codes and the run's output files.

Outputs of a run (``write_outputs``), all written from the run's ledger at the end, in input order:

    items.jsonl      the items, in the layout ``benchmint eval --benchmark <name>`` reads
    rejected.jsonl   every figure or question dropped: {stage, reason, id or figure, detail, the model's words}
    trace.jsonl      each question's versions through the loop, with the critiques and verdicts
    errors.jsonl     inputs that could not be read and model calls that failed (tried again by the next run)
    run.json         settings, prompt files with their SHA-256, tokens/calls/cost per stage and model, result codes
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from benchmint.benchmarks.base import IMAGES, PromptError, Template
from benchmint.generate.schema import validate
from benchmint.io import InputError, atomic_write, write_jsonl


class PromptSet:
    """A generator's package files (``generate/prompts/<name>/``), each replaceable by ``<dir>/<name>/<file>``.

    Every file read is recorded with its SHA-256 and origin for run.json, whether it is a prompt template, a
    term list or a taxonomy.
    """

    def __init__(self, name: str, override_dir: str | os.PathLike | None = None) -> None:
        self.name = name
        self.override_dir = Path(override_dir) if override_dir is not None else None
        if self.override_dir is not None and not self.override_dir.is_dir():
            raise InputError(f"--prompts: no such directory: {self.override_dir}")
        self._read: dict[str, Template] = {}

    def _file(self, file: str) -> Template:
        if file not in self._read:
            key = f"{self.name}/{file}"
            override = self.override_dir / self.name / file if self.override_dir is not None else None
            if override is not None and override.is_file():
                try:
                    raw = override.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise InputError(f"cannot read prompt file {override}: {exc}") from None
                self._read[file] = Template.from_file(key, raw, str(override))
            else:
                resource = files("benchmint.generate").joinpath("prompts", self.name, file)
                self._read[file] = Template.from_file(key, resource.read_text(encoding="utf-8"), "package")
        return self._read[file]

    def template(self, file: str, allowed: Iterable[str], images: bool = True) -> Template:
        """A prompt template, checked: only ``allowed`` placeholders, and ``{{IMAGES}}`` once when ``images``."""
        tpl = self._file(file)
        where = tpl.origin if tpl.origin != "package" else f"package prompt {tpl.name}"
        unknown = sorted(tpl.placeholders() - set(allowed) - {IMAGES})
        if unknown:
            raise PromptError(f"{where}: unknown placeholders {unknown}; this file may use {sorted(allowed)}")
        marks = tpl.text.count("{{" + IMAGES + "}}")
        if marks != (1 if images else 0):
            raise PromptError(f"{where}: needs {{{{IMAGES}}}} {'exactly once' if images else 'nowhere'}, "
                              f"found {marks}")
        return tpl

    def terms(self, file: str) -> list[str]:
        """A term list: one term a line, ``#`` comment lines and blank lines skipped."""
        lines = (line.strip() for line in self._file(file).text.splitlines())
        return [line for line in lines if line and not line.startswith("#")]

    def data(self, file: str) -> Any:
        tpl = self._file(file)
        try:
            return json.loads(tpl.text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{tpl.origin if tpl.origin != 'package' else tpl.name}: malformed JSON at line "
                             f"{exc.lineno}: {exc.msg}") from None

    def record(self) -> list[dict]:
        """The files read, for run.json."""
        return [{"name": t.name, "sha256": t.sha256, "origin": t.origin} for _, t in sorted(self._read.items())]


@dataclass
class GenerateResult:
    """What a generator's run gives its caller: the output folder, run.json's record, the counts and error rows."""

    out_dir: Path
    run: dict = field(default_factory=dict)
    items: int = 0
    rejected: int = 0
    errors: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


def read_chain(ledger, first, next_units: Callable[[dict], list]) -> list[dict]:
    """A loop's results in order, read back from the ledger: ``first``'s, then each follow-up's that
    ``next_units(result)`` names (the first of them), until a unit the ledger does not hold or none follows."""
    chain: list[dict] = []
    unit = first
    while unit is not None:
        got = ledger.get(unit.key)
        if got is None:
            break
        chain.append(got[1])
        nxt = next_units(got[1])
        unit = nxt[0] if nxt else None
    return chain


class HarvestPDFs:
    """The PDFs that harvest records name, by the path the harvest was given (``pdf``): with a folder given
    (``--pdfs``), looked up under it only, by that path and then by file name; else where the record says, then
    under ``default`` (the harvest's folder) by path and by name. Lookups are remembered: a paper's figures share
    the search."""

    def __init__(self, default: Path, given: str | os.PathLike | None = None) -> None:
        self.folder = Path(given) if given is not None else default
        self.given = given is not None
        self._found: dict[str, Path | None] = {}

    def find(self, name: str) -> Path | None:
        if name not in self._found:
            path = Path(name)
            relative = Path(path.name) if path.is_absolute() else path
            where = [self.folder / relative] if self.given else [path, self.folder / relative]
            found = next((p for p in where if p.is_file()), None)
            if found is None:
                found = next(iter(sorted(self.folder.rglob(path.name))), None)
            self._found[name] = found
        return self._found[name]


def save_crop(out: Path, pdf: str | os.PathLike, page_number: int, box: list[float]) -> dict:
    """The 300-DPI render of ``box`` (page points) on a page, kept once by content under ``out/crops/``:
    {"sha256", "png" (relative to ``out``)}. Identical crops share one file."""
    import hashlib

    from benchmint.pdf.crop import open_page
    from benchmint.pdf.geometry import render_crop

    doc, page = open_page(pdf, page_number)
    try:
        png = render_crop(page, box).tobytes("png")
    finally:
        doc.close()
    sha = hashlib.sha256(png).hexdigest()
    path = out / "crops" / f"{sha[:16]}.png"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(png)
        os.replace(tmp, path)
    return {"sha256": sha, "png": f"crops/{path.name}"}


def json_reply(schema: Mapping[str, Any], check: Callable[[Any], None] | None = None) -> Callable[[str], Any]:
    """The parser of a structured reply: its JSON value, valid under ``schema`` and passing ``check``.

    Whatever it raises makes the engine ask again, within the answer-attempt bound; the last reason is the
    failure's detail, which becomes the rejection's.
    """
    from benchmint.models.structured import parse_json

    def parse(text: str) -> Any:
        value = parse_json(text)
        validate(value, schema)
        if check is not None:
            check(value)
        return value

    return parse


def call_result(outcome, **fields) -> dict:
    """A model call's outcome as a unit's result: the reply's value, or the failure with its cause.

    A failure of the call itself (HTTP status, timeout, connection, budget) is tried again by the next run
    (``retry``); a reply that stayed unusable through its answer attempts is final, with the model's last words.
    """
    from benchmint.models import ChatReply
    from benchmint.models.call import EMPTY_REPLY, UNPARSEABLE

    if isinstance(outcome, ChatReply):
        return {**fields, "value": outcome.value, "tokens": outcome.completion_tokens, "cached": outcome.cached}
    failed = {**fields, "error": outcome.detail, "cause": outcome.cause, "status": outcome.status,
              "requests": outcome.requests}
    if outcome.cause in (UNPARSEABLE, EMPTY_REPLY):
        return {**failed, "words": outcome.text}
    return {**failed, "retry": True}


def code_counts(codes: Iterable[str], known: Iterable[str]) -> dict:
    """Result codes as counts and shares (every known code listed, zero or not), for run.json."""
    counts = Counter(codes)
    total = sum(counts.values())
    return {"total": total,
            "codes": {c: {"count": counts.get(c, 0), "share": round(counts.get(c, 0) / total, 4) if total else 0.0}
                      for c in [*known, *sorted(set(counts) - set(known))]}}


def write_outputs(out: Path, items: list[dict], rejected: list[dict], trace: list[dict], errors: list[dict],
                  run: dict) -> None:
    write_jsonl(out / "items.jsonl", items)
    write_jsonl(out / "rejected.jsonl", rejected)
    write_jsonl(out / "trace.jsonl", trace)
    write_jsonl(out / "errors.jsonl", errors)
    with atomic_write(out / "run.json") as fh:
        json.dump(run, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
