"""What every benchmark module shares: items, prompts, protocols, templates and the reading loop.

A benchmark reads items from any of the layouts it supports (its own JSONL,
the public release's parquet, TSV, JSON rows or ImageFolder directory), turns
each item into a ``Prompt`` for one of its settings, and carries the protocol
(sampling settings, answer retries, image size limit) its paper ran it with.
Prompts and protocols are package files a user can read and override.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from importlib.resources import files
from pathlib import Path
from typing import Any, ClassVar

from benchmint import tasks
from benchmint.benchmarks import layouts
from benchmint.io import InputError

# ---------------------------------------------------------------------------
# Items


class ItemError(ValueError):
    """One item that cannot be used: where it is, which field, what is wrong. Reading goes on."""

    def __init__(self, location: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{location}: {message}")
        self.location, self.message, self.field = location, message, field

    def to_json(self) -> dict:
        return {"location": self.location, "field": self.field, "error": self.message}


class FieldError(ValueError):
    """Raised while building an item from a row; the reading loop adds the location."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ImageRef:
    """One image of an item: bytes already in memory (parquet, base64 TSV) or a file read when prompted."""

    data: bytes | None = None
    path: str | None = None

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return read_item_file(Path(self.path))

    def describe(self) -> str:
        return self.path if self.path is not None else f"<{len(self.data or b'')} bytes>"


@dataclass(frozen=True)
class EvalItem:
    """One benchmark item, whatever layout it came from.

    ``answer`` is the gold answer as JSON in the benchmark's answer kind (a
    string for graded benchmarks); ``meta`` holds the strata reports group by;
    ``fields`` the benchmark's own inputs (question, options, caption, CIF
    text, ...); ``gold_extra`` what scoring needs beside the answer (e.g.
    ``laue_rotations`` for symmetry folding); ``location`` the file and line
    or row it was read from.
    """

    id: str
    answer: Any
    meta: dict
    images: tuple[ImageRef, ...]
    fields: dict
    location: str
    gold_extra: dict = field(default_factory=dict)

    def gold(self) -> dict:
        """The gold record ``benchmint score --gold`` reads."""
        return {**self.gold_extra, "id": self.id, "answer": self.answer, "meta": self.meta}


# ---------------------------------------------------------------------------
# Files an items file names


def item_file(value: Any, name: str, origin: layouts.Origin) -> Path:
    """The file a row names in field ``name``, resolved; FieldError naming the field unless it is a regular file
    inside the items file's folder (or a folder the user allowed, ``Origin.allowed``).

    An items file may come from anywhere, and what it names is read and sent to the model's server: without this
    rule a downloaded file could send any readable local file (keys, /etc/...) along. Symlinks are resolved before
    the check, so a link inside the folder to a file outside is outside. FIFOs, devices and sockets are refused
    (reading one blocks or never ends).
    """
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise FieldError(name, f'field "{name}" must be a file path')
    path = origin.base / value
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise FieldError(name, f'file of field "{name}" cannot be resolved ({path}): {exc}') from None
    roots = origin.roots()
    if not any(real.is_relative_to(root) for root in roots):
        raise FieldError(name, f'file of field "{name}" is outside the items folder {roots[0]}: {value} resolves to '
                         f"{real} (--allow-paths-outside DIR allows the files under DIR)")
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        raise FieldError(name, f'file of field "{name}" not found: {path}') from None
    except OSError as exc:
        raise FieldError(name, f'cannot read file of field "{name}" ({path}): {exc.strerror or exc}') from None
    if not stat.S_ISREG(mode):
        raise FieldError(name, f'file of field "{name}" is {_file_kind(mode)}, not a regular file: {path}')
    return real


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def read_item_file(path: Path) -> bytes:
    """The bytes of a file ``item_file`` accepted, refused (OSError) should it have become a FIFO, a device or a
    symlink since: opened without blocking and without following a last symlink, then checked."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"{path} is {_file_kind(mode)}, not a regular file")
        return fh.read()


def item_file_stem(item_id: str) -> str:
    """A file name for an item's outputs: never a path, never hidden, unique per id.

    Ids are data (``../../x``, NUL bytes and all); the stem keeps at most 48
    safe characters of the id for readability and adds a hash of the whole id
    so that two ids never share a file.
    """
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", item_id)[:48].strip("_-") or "item"
    return f"{safe}-{hashlib.sha256(item_id.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


# ---------------------------------------------------------------------------
# Prompts


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    data: bytes
    mime: str


@dataclass(frozen=True)
class Prompt:
    """What is sent for one item: an optional system text and the user content, in order."""

    system: str | None
    parts: tuple[TextPart | ImagePart, ...]
    template: str  # the template file used, e.g. "seephys/TV.zh.txt"

    def text(self) -> str:
        """The user text alone (image parts left out)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    def images(self) -> list[ImagePart]:
        return [p for p in self.parts if isinstance(p, ImagePart)]

    def to_openai_messages(self) -> list[dict]:
        """The prompt as OpenAI chat messages, images as base64 data URLs."""
        import base64

        content = []
        for p in self.parts:
            if isinstance(p, TextPart):
                content.append({"type": "text", "text": p.text})
            else:
                url = f"data:{p.mime};base64,{base64.b64encode(p.data).decode('ascii')}"
                content.append({"type": "image_url", "image_url": {"url": url}})
        messages = [{"role": "system", "content": self.system}] if self.system is not None else []
        return messages + [{"role": "user", "content": content}]


class PromptError(ValueError):
    """A template or an item that cannot make a prompt (the message names the file or the item)."""


_PLACEHOLDER = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")
IMAGES = "IMAGES"
# a placeholder alone on its line, with the line break before it (or after it, on a chunk's first line)
_LONE_LINE = re.compile(r"(\n)\{\{([A-Z][A-Z0-9_]*)\}\}(?=\n|$)|^\{\{([A-Z][A-Z0-9_]*)\}\}\n")


@dataclass(frozen=True)
class Template:
    """A prompt file: text with ``{{NAME}}`` placeholders; ``{{IMAGES}}`` marks where the images go.

    A line ``{{! ... }}`` is a comment (where the text comes from) and is not sent.
    """

    name: str  # "<benchmark>/<file>"
    text: str  # as sent: comment lines removed
    origin: str  # "package" or the override file's path
    sha256: str  # of the file as it is

    @classmethod
    def from_file(cls, name: str, raw: str, origin: str) -> Template:
        return cls(name, _template_text(raw), origin, hashlib.sha256(raw.encode("utf-8")).hexdigest())

    def placeholders(self) -> set[str]:
        return set(_PLACEHOLDER.findall(self.text))

    def render(self, values: Mapping[str, str], images: Sequence[ImagePart] = ()) -> tuple[TextPart | ImagePart, ...]:
        """The parts: text with every placeholder replaced in one pass (values are never expanded again)."""
        parts: list[TextPart | ImagePart] = []
        # The line breaks around {{IMAGES}} belong to it: text parts neither start nor end with them.
        for k, chunk in enumerate(re.split(r"\n?\{\{IMAGES\}\}\n?", self.text)):
            if k:
                parts.extend(images)
            # A line holding nothing but a placeholder whose value is empty goes away with its line break
            # (an optional sentence, such as SeePhys's significant-figures hint, leaves no blank line).
            chunk = _LONE_LINE.sub(lambda m: m.group(0) if values[m.group(2) or m.group(3)] else "", chunk)
            text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], chunk)
            if text:
                parts.append(TextPart(text))
        return tuple(parts)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what} {path}: {exc}") from None


def package_file(*parts: str):
    return files("benchmint.benchmarks").joinpath(*parts)


_COMMENT_LINE = re.compile(r"^\{\{!.*\}\}[ \t]*(?:\n|$)", re.M)


def _template_text(raw: str) -> str:
    """A prompt file's text: ``{{! ... }}`` comment lines removed; files end with a line break, prompts do not."""
    text = _COMMENT_LINE.sub("", raw)
    return text[:-1] if text.endswith("\n") else text


# ---------------------------------------------------------------------------
# Protocols


@dataclass(frozen=True)
class Protocol:
    """How a benchmark is run: what its paper states, as package data (``protocols/<name>.json``).

    None means "not set": the server's default applies. ``answer_retries`` is
    how often an unparseable reply is asked again (transport retries are the
    engine's and separate). ``image_max_side`` bounds each image's longest
    side in pixels (larger images are scaled down, aspect kept).
    ``reasoning_effort`` and ``thinking_budget`` are passed to servers that
    take them; ``extra`` holds any other request parameters as they are.
    """

    source: str
    temperature: float | None = None
    max_tokens: int | None = None
    answer_retries: int = 0
    image_max_side: int | None = None
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    response_schema: dict | None = None
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


_PROTOCOL_TYPES = {
    "source": (str,), "temperature": (int, float, type(None)), "max_tokens": (int, type(None)),
    "answer_retries": (int,), "image_max_side": (int, type(None)), "reasoning_effort": (str, type(None)),
    "thinking_budget": (int, type(None)), "response_schema": (dict, type(None)), "extra": (dict,),
}


def parse_protocol(data: Any, where: str, base: Protocol | None = None) -> Protocol:
    """A protocol from JSON; with ``base``, the keys given replace the base's (an override file)."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: a protocol is a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_PROTOCOL_TYPES) - {"benchmark"})
    if unknown:
        raise InputError(f"{where}: unknown protocol keys {unknown}; known: {sorted(_PROTOCOL_TYPES)}")
    for key, value in data.items():
        if key in _PROTOCOL_TYPES and (isinstance(value, bool) or not isinstance(value, _PROTOCOL_TYPES[key])):
            raise InputError(f"{where}: protocol key {key!r} has the wrong type ({type(value).__name__})")
    for key in ("max_tokens", "image_max_side", "thinking_budget"):
        if isinstance(data.get(key), int) and data[key] < 1:
            raise InputError(f"{where}: protocol key {key!r} must be >= 1, got {data[key]}")
    if isinstance(data.get("answer_retries"), int) and data["answer_retries"] < 0:
        raise InputError(f"{where}: protocol key 'answer_retries' must be >= 0")
    if isinstance(data.get("temperature"), (int, float)) and not (0 <= data["temperature"] <= 2):
        raise InputError(f"{where}: protocol key 'temperature' must be within 0-2")
    values = {f.name: data[f.name] for f in fields(Protocol) if f.name in data}
    if base is None:
        if "source" not in values:
            raise InputError(f"{where}: a protocol needs a 'source' (where its settings come from)")
        return Protocol(**values)
    merged = {**base.to_json(), **values}
    if "source" not in values:
        merged["source"] = f"{base.source} (overridden by {where})"
    return Protocol(**merged)


# ---------------------------------------------------------------------------
# Images


def sniff_mime(data: bytes) -> str | None:
    """The type of image data OpenAI-compatible servers take (PNG, JPEG, GIF, WebP), None for others."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_part(data: bytes, max_side: int | None, verify: bool = True) -> ImagePart:
    """An image ready to send: as it is when servers take its format and it fits ``max_side``,
    else decoded and written as PNG (scaled down, aspect kept, when larger than ``max_side``).

    The image is decoded whole (``verify``) even when it is sent as it is: a header that reads well over corrupt
    data, or an image too large to decode, is the item's PromptError here, not a server's error later.
    ``verify=False`` skips that decoding for bytes already checked."""
    mime = sniff_mime(data)
    if mime is not None and max_side is None and not verify:
        return ImagePart(data, mime)
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            w, h = img.size
            if mime is not None and max(w, h) <= (max_side or max(w, h)):
                return ImagePart(data, mime)
            if max_side is not None and max(w, h) > max_side:
                scale = max_side / max(w, h)
                size = (max(1, min(max_side, round(w * scale))), max(1, min(max_side, round(h * scale))))
                img = img.resize(size, Image.Resampling.LANCZOS)
            if img.mode not in ("1", "L", "LA", "RGB", "RGBA", "P"):
                img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
            buf = io.BytesIO()
            img.save(buf, format="PNG")
    except Exception as exc:  # Pillow raises several types for data that is not an image
        raise PromptError(f"not a readable image ({type(exc).__name__}: {exc})") from exc
    return ImagePart(buf.getvalue(), "image/png")


# ---------------------------------------------------------------------------
# Field helpers for building items from rows


def is_blank(value: Any) -> bool:
    """Missing in the sense of the releases: None, NaN (pandas-written files), or an empty string."""
    return (value is None or (isinstance(value, float) and math.isnan(value))
            or (isinstance(value, str) and not value.strip()))


def pick(row: Mapping, *names: str) -> tuple[str, Any] | None:
    """The first of ``names`` the row has with a non-blank value, as (name, value)."""
    for name in names:
        if name in row and not is_blank(row[name]):
            return name, row[name]
    return None


def need_pick(row: Mapping, *names: str) -> tuple[str, Any]:
    """(name, value) of the first of ``names`` present (non-blank); FieldError naming them otherwise."""
    found = pick(row, *names)
    if found is None:
        alts = " or ".join(f'"{n}"' for n in names)
        raise FieldError(names[0], f"missing field {alts}")
    return found


def need(row: Mapping, *names: str) -> Any:
    """The value of the first of ``names`` present (non-blank); FieldError naming them otherwise."""
    return need_pick(row, *names)[1]


def need_str(row: Mapping, *names: str) -> str:
    """``need`` for a text field (a number, as TSV cells and JSON may give it, is written as text)."""
    name, value = need_pick(row, *names)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FieldError(name, f'field "{name}" must be text, got {type(value).__name__}')
    return value if isinstance(value, str) else _plain_number(value)


def opt_str(row: Mapping, *names: str) -> str | None:
    return need_str(row, *names) if pick(row, *names) is not None else None


def _plain_number(value: int | float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def item_id(row: Mapping, *names: str) -> str:
    """The item id: text, or an integer (SeePhys and CSMBench number their items) written as text."""
    found = pick(row, *names)
    if found is None:
        raise FieldError(names[0], "missing field " + " or ".join(f'"{n}"' for n in names))
    name, value = found
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FieldError(name, f'field "{name}" must be text or an integer, got {type(value).__name__}')
    if isinstance(value, float):
        if not value.is_integer():
            raise FieldError(name, f'field "{name}" must be text or an integer, got {value!r}')
        value = int(value)
    return str(value)


def json_value(value: Any, name: str) -> Any:
    """A field the releases store either as JSON or as a string holding JSON."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise FieldError(name, f'field "{name}" holds malformed JSON ({exc.msg} at column {exc.colno})') from None
    return value


def gold_answer(kind_name: str, value: Any, name: str) -> Any:
    """A gold answer checked against its answer kind, as the kind's JSON."""
    kind = tasks.get(kind_name)
    try:
        normalized = kind.normalize(value)
    except tasks.AnswerError as exc:
        raise FieldError(name, f'field "{name}": {exc}') from None
    if not normalized:
        raise FieldError(name, f'field "{name}" has no answer')
    return kind.to_json(normalized)


def image_refs(value: Any, name: str, origin: layouts.Origin) -> tuple[ImageRef, ...]:
    """Images given as a path, a list of paths, HF image structs ({bytes, path}) or raw bytes; in a TSV,
    base64 text, several images as the text of a Python list of base64 strings (VLMEvalKit's layout).

    Relative paths are relative to the folder of the items file and must stay
    inside it (``item_file``); a file that does not exist is an error now, not
    when the prompt is made.
    """
    if origin.container == "tsv":
        return tuple(ImageRef(data=data) for data in _tsv_images(value, name))
    entries = value if isinstance(value, (list, tuple)) else [value]
    if not entries:
        raise FieldError(name, f'field "{name}" lists no image')
    refs = []
    for entry in entries:
        if isinstance(entry, Mapping):  # an HF Image struct: bytes, or a path when the bytes are absent
            if entry.get("bytes"):
                refs.append(ImageRef(data=_checked_image(bytes(entry["bytes"]), name)))
                continue
            entry = entry.get("path")
        if isinstance(entry, (bytes, bytearray)) and entry:
            refs.append(ImageRef(data=_checked_image(bytes(entry), name)))
        elif isinstance(entry, str) and entry.strip():
            refs.append(ImageRef(path=str(item_file(entry, name, origin))))
        else:
            raise FieldError(name, f'field "{name}" holds no image (got {type(entry).__name__})')
    return tuple(refs)


def _tsv_images(value: Any, name: str) -> list[bytes]:
    import ast
    import base64
    import binascii

    text = value.strip() if isinstance(value, str) else ""
    if text.startswith("["):
        try:
            cells = ast.literal_eval(text)  # literals only: never evaluates code
        except (ValueError, SyntaxError):
            raise FieldError(name, f'field "{name}" looks like a list but is not a Python list of strings') from None
        if not (isinstance(cells, list) and cells and all(isinstance(c, str) for c in cells)):
            raise FieldError(name, f'field "{name}" must list base64 images as strings')
    else:
        cells = [text]
    out = []
    for k, cell in enumerate(cells, 1):
        which = f'field "{name}"' + (f" (image {k})" if len(cells) > 1 else "")
        try:
            data = base64.b64decode("".join(cell.split()), validate=True)
        except (binascii.Error, ValueError):
            raise FieldError(name, f"{which} is not base64 image data ({len(cell)} characters)") from None
        if not data:
            raise FieldError(name, f"{which} is empty")
        out.append(_checked_image(data, name, which))
    return out


def _checked_image(data: bytes, name: str, which: str | None = None) -> bytes:
    """The bytes, when they start like an image Pillow can open (only the header is read)."""
    if sniff_mime(data) is None:
        from PIL import Image

        try:
            with Image.open(io.BytesIO(data)):
                pass
        except Exception:  # Pillow raises several types for data that is not an image
            raise FieldError(name, f"{which or f'field {name!r}'} is not image data") from None
    return data


def read_side_file(value: Any, name: str, origin: layouts.Origin) -> str:
    """Text kept in a file beside the items (a CIF, a paper's text), named relative to the items file."""
    path = item_file(value, name, origin)
    try:
        return read_item_file(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FieldError(name, f'cannot read file of field "{name}" ({path}): {exc}') from None


def letter_options(value: Any, name: str, count: tuple[int, int]) -> list[tuple[str, str]]:
    """Options as (letter, text), from a list of texts (lettered A, B, ... in order), a dict letter -> text,
    or a list of {"label", "caption"|"text"} (CSMBench); a JSON string of any of these is read first."""
    value = json_value(value, name)
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        pairs = []
        for v in value:
            label, text = v.get("label"), v.get("caption", v.get("text"))
            pairs.append((label, text))
    elif isinstance(value, list):
        pairs = [(chr(ord("A") + k), v) for k, v in enumerate(value)]
    else:
        raise FieldError(name, f'field "{name}" must be a list or an object of options, got {type(value).__name__}')
    lo, hi = count
    if not lo <= len(pairs) <= hi:
        raise FieldError(name, f'field "{name}" has {len(pairs)} options, expected {lo}-{hi}' if lo != hi
                         else f'field "{name}" has {len(pairs)} options, expected {lo}')
    out = []
    for label, text in pairs:
        if not (isinstance(label, str) and len(label.strip()) == 1 and "A" <= label.strip().upper() <= "Z"):
            raise FieldError(name, f'field "{name}": option label {label!r} is not a letter')
        if not isinstance(text, str) or not text.strip():
            raise FieldError(name, f'field "{name}": option {label.strip()} has no text')
        out.append((label.strip().upper(), text.strip()))
    letters = [k for k, _ in out]
    if sorted(letters) != [chr(ord("A") + k) for k in range(len(letters))]:
        raise FieldError(name, f'field "{name}": option letters {letters} are not A-{chr(ord("A") + len(letters) - 1)}')
    return sorted(out)


# ---------------------------------------------------------------------------
# The benchmark base


class Benchmark(ABC):
    """One benchmark: its item fields, settings, prompts and protocol.

    ``prompts``: a folder whose ``<benchmark>/<file>`` files replace the
    package's prompt files of the same name (others stay the package's);
    ``protocol``: a JSON file whose keys replace the package protocol's.
    """

    name: ClassVar[str]
    #: the registered answer kind of the gold answers (``benchmint.tasks``); a kind scored "graded" (open
    #: answers) is decided by ``benchmint grade``, a "set" kind by ``benchmint score``
    answer_kind: ClassVar[str]
    #: ``benchmint grade`` takes the benchmark: one answer per item, accuracy and the paper's tables
    graded: ClassVar[bool] = False
    settings: ClassVar[tuple[str, ...]]
    default_setting: ClassVar[str]
    #: the meta keys reports group by
    strata: ClassVar[tuple[str, ...]] = ()
    #: an ImageFolder directory names its config this way (CSMBench)
    imagefolder_config: ClassVar[str | None] = None
    #: True when ``baseline_reply`` derives an answer without a model
    has_baseline: ClassVar[bool] = False

    def __init__(self, prompts: str | Path | None = None, protocol: str | Path | None = None) -> None:
        self.prompt_dir = Path(prompts) if prompts is not None else None
        if self.prompt_dir is not None and not self.prompt_dir.is_dir():
            raise InputError(f"prompt folder not found: {self.prompt_dir}")
        where = f"benchmint/benchmarks/protocols/{self.name}.json"
        self.protocol = parse_protocol(json.loads(package_file("protocols", f"{self.name}.json").read_text("utf-8")),
                                       where)
        self.protocol_file = Path(protocol) if protocol is not None else None
        if self.protocol_file is not None:
            try:
                data = json.loads(_read_text(self.protocol_file, "protocol file"))
            except json.JSONDecodeError as exc:
                raise InputError(f"{self.protocol_file}: malformed JSON ({exc.msg} at line {exc.lineno})") from None
            if isinstance(data, dict) and data.get("benchmark", self.name) != self.name:
                raise InputError(f"{self.protocol_file}: a protocol of {data['benchmark']!r}, not of {self.name!r}")
            self.protocol = parse_protocol(data, str(self.protocol_file), self.protocol)
        self._templates: dict[str, Template] = {}

    # -- settings and templates ---------------------------------------------

    def check_setting(self, setting: str | None) -> str:
        setting = self.default_setting if setting is None else setting
        if setting not in self.settings:
            raise ValueError(f"{self.name} settings are {', '.join(self.settings)}; got {setting!r}")
        return setting

    def template_files(self, setting: str) -> tuple[str, ...]:
        """The prompt files a setting may use (variants such as languages included)."""
        return (f"{setting}.txt",)

    def sends_images(self, setting: str | None) -> bool:
        """Whether a setting's prompts send images (any of its prompt files)."""
        setting = self.check_setting(setting)
        return any(self.template_spec(file)[1] for file in self.template_files(setting))

    @abstractmethod
    def template_spec(self, file: str) -> tuple[frozenset[str], bool]:
        """(placeholders the file may use, whether it sends images)."""

    def template(self, file: str) -> Template:
        """A prompt file, the override folder's when it has one; checked against its spec."""
        if file in self._templates:
            return self._templates[file]
        name = f"{self.name}/{file}"
        override = self.prompt_dir / self.name / file if self.prompt_dir is not None else None
        if override is not None and override.is_file():
            tpl = Template.from_file(name, _read_text(override, "prompt file"), str(override))
        else:
            resource = package_file("prompts", self.name, file)
            tpl = Template.from_file(name, resource.read_text(encoding="utf-8"), "package")
        allowed, sends_images = self.template_spec(file)
        where = tpl.origin if tpl.origin != "package" else f"package prompt {name}"
        unknown = sorted(tpl.placeholders() - allowed - {IMAGES})
        if unknown:
            raise PromptError(f"{where}: unknown placeholders {unknown}; this file may use "
                              f"{sorted(allowed | ({IMAGES} if sends_images else set()))}")
        marks = tpl.text.count("{{" + IMAGES + "}}")
        if sends_images and marks != 1:
            raise PromptError(f"{where}: needs {{{{IMAGES}}}} exactly once (where the images go), found {marks}")
        if not sends_images and marks:
            raise PromptError(f"{where}: this setting sends no image; remove {{{{IMAGES}}}}")
        self._templates[file] = tpl
        return tpl

    def prompt_files(self, setting: str | None = None) -> list[dict]:
        """The prompt files of a setting with their SHA-256 and origin, for run.json."""
        setting = self.check_setting(setting)
        out = []
        for file in self.template_files(setting):
            tpl = self.template(file)
            out.append({"name": tpl.name, "sha256": tpl.sha256, "origin": tpl.origin})
            system = self._system_template(file)
            if system is not None:
                out.append({"name": system.name, "sha256": system.sha256, "origin": system.origin})
        return out

    def run_record(self, setting: str | None = None) -> dict:
        """What run.json records about the benchmark: setting, answer kind, protocol and prompt files."""
        setting = self.check_setting(setting)
        return {"benchmark": self.name, "setting": setting, "answer_kind": self.answer_kind,
                "protocol": self.protocol.to_json(),
                "protocol_file": str(self.protocol_file) if self.protocol_file is not None else None,
                "prompts": self.prompt_files(setting)}

    # -- items ------------------------------------------------------------------

    def read_items(self, path: str | Path, setting: str | None = None, *, check: bool = True,
                   allowed: Sequence[str | Path] = ()) -> Iterator[tuple[str, EvalItem | ItemError]]:
        """Every item of ``path`` as (location, item) or (location, ItemError); one bad item never stops reading.

        The layout is found from the path: a directory is an HF ImageFolder
        (``metadata.jsonl`` beside the images), ``.parquet``, ``.tsv``,
        ``.json`` (an array of rows, or JSON lines) or ``.jsonl``. Fields the
        ``setting`` needs are checked here, so its errors carry the file and
        line (``check=False``: not checked, for grading, which needs no prompt).
        Files the rows name must lie in the items file's folder or under one
        of the ``allowed`` folders (``item_file``).
        A whole file that cannot be read raises InputError.
        """
        setting = self.check_setting(setting)
        seen: dict[str, str] = {}
        for location, origin, row in layouts.rows(Path(path), self.imagefolder_config,
                                                  tuple(Path(p) for p in allowed)):
            if isinstance(row, layouts.RowError):
                yield location, ItemError(location, row.message, row.field)
                continue
            try:
                item = self.item_from_row(row, origin, location)
                if check:
                    self.check_item(item, setting)
            except FieldError as exc:
                yield location, ItemError(location, str(exc), exc.field)
                continue
            if item.id in seen:
                yield location, ItemError(location, f"duplicate id {item.id!r} (first at {seen[item.id]})", "id")
                continue
            seen[item.id] = location
            yield location, item

    @abstractmethod
    def item_from_row(self, row: Mapping, origin: layouts.Origin, location: str) -> EvalItem:
        """One row of any supported layout -> the item; FieldError naming the field otherwise."""

    def check_item(self, item: EvalItem, setting: str) -> None:  # noqa: B027 - by default every setting is met
        """FieldError when the item lacks what ``setting`` needs (every setting's needs are met by default)."""

    # -- prompts ----------------------------------------------------------------

    def prompt(self, item: EvalItem, setting: str | None = None, *, verify: bool = True) -> Prompt:
        """The item's prompt in ``setting``; PromptError naming the item when it cannot be made.

        Images are read now and decoded whole (``verify=False``: not decoded unless they must be scaled, for
        images a first build of the same prompt already checked)."""
        setting = self.check_setting(setting)
        try:
            self.check_item(item, setting)
        except FieldError as exc:
            raise PromptError(f"{item.location}: {exc}") from None
        file, values, images = self.prompt_inputs(item, setting)
        tpl = self.template(file)
        parts = []
        for ref in images:
            try:
                data = ref.read()
            except OSError as exc:
                raise PromptError(f"{item.location}: cannot read image {ref.describe()}: {exc}") from None
            try:
                parts.append(image_part(data, self.protocol.image_max_side, verify))
            except PromptError as exc:
                raise PromptError(f"{item.location}: image {ref.describe()}: {exc}") from None
        system = self._system_template(file)
        if system is not None:
            unknown = sorted(system.placeholders() - set(values))
            if unknown:
                raise PromptError(f"{system.origin}: a system prompt may use {sorted(values)}, not {unknown}")
            system_text = "".join(p.text for p in system.render(values) if isinstance(p, TextPart))
        else:
            system_text = None
        return Prompt(system_text, tpl.render(values, parts), tpl.name)

    def _system_template(self, file: str) -> Template | None:
        # A system prompt is optional: "<name>.system.txt" in the override folder adds one to "<name>.txt".
        if self.prompt_dir is None:
            return None
        system_file = file[: -len(".txt")] + ".system.txt"
        path = self.prompt_dir / self.name / system_file
        if not path.is_file():
            return None
        tpl = Template.from_file(f"{self.name}/{system_file}", _read_text(path, "prompt file"), str(path))
        if IMAGES in tpl.placeholders():
            raise PromptError(f"{path}: images go in the user prompt, not the system prompt")
        return tpl

    @abstractmethod
    def prompt_inputs(self, item: EvalItem, setting: str) -> tuple[str, dict[str, str], tuple[ImageRef, ...]]:
        """(template file, placeholder values, images to send) for one item and setting."""

    # -- replies ----------------------------------------------------------------

    def reply_fields(self, text: str) -> dict:
        """Prediction fields the prompt asks for besides the answer (e.g. SPM-Bench's confidence)."""
        return {}

    def baseline_reply(self, item: EvalItem) -> str:
        """A deterministic reply derived without a model, for benchmarks that have one."""
        raise ValueError(f"{self.name} has no deterministic baseline")
