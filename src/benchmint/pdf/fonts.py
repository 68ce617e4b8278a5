"""What a font's character codes read as, as far as the words of a figure caption need.

A figure-caption anchor starts with "Fig" or "FIG" (benchmint.pdf.captions). A
page whose shown text cannot read either needs no MuPDF text page to be told
it holds no anchor. This module gives each font code one of a few classes,
the letters that matter and OTHER, or ANY where MuPDF's reading of the code
cannot be known without loading the font program:

``(code_bytes, default, table)``: ``code_bytes`` is 1 (simple fonts), 2
(Identity-H/V composite fonts) or 0 (codes of unknown length: any text in the
font may be anything); ``table`` maps codes to their class sequences (a
ToUnicode entry may read as several characters), ``default`` is the class of
codes missing from it.

MuPDF's order is followed: the ToUnicode CMap first, then the glyph names of
the encoding (base encoding, Differences, or the builtin encoding of an
embedded Type 1 program), read with MuPDF's own glyph-name function.
Anything else (CFF or TrueType builtin encodings, predefined CMaps,
ToUnicode CMaps with ``usecmap`` or CID mappings, unknown glyph names) is ANY.
"""

from __future__ import annotations

import re
from functools import lru_cache

from benchmint.pdf.objects import unescape_name

OTHER, F, I_LOWER, G_LOWER, I_UPPER, G_UPPER, ANY = range(7)
_LETTER = {ord("F"): F, ord("i"): I_LOWER, ord("g"): G_LOWER, ord("I"): I_UPPER, ord("G"): G_UPPER}
_UNKNOWN = (0, 0xFFFD)  # MuPDF shows the code itself (or a replacement) for these

# The named base encodings (Standard, WinAnsi, MacRoman) agree on printable
# ASCII; their other codes hold no plain F, i, g, I or G but may be undefined,
# so they are left ANY.
_ASCII = {code: bytes([_LETTER.get(code, OTHER)]) for code in range(0x20, 0x7F)}
_BASE_ENCODINGS = {"StandardEncoding", "WinAnsiEncoding", "MacRomanEncoding"}
FontTable = tuple[int, int, dict[int, bytes]]
OPAQUE: FontTable = (0, ANY, {})


@lru_cache(maxsize=65536)
def classes(text: str) -> bytes:
    """The class of each character of a code's reading."""
    return bytes(ANY if ord(c) in _UNKNOWN else _LETTER.get(ord(c), OTHER) for c in text)


@lru_cache(maxsize=4096)
def glyph_classes(name: str) -> bytes:
    """The class of a glyph name, read as MuPDF reads it (``a70``, ``uni0046`` and ``F.sc`` are all F)."""
    from pymupdf import mupdf

    return classes(chr(mupdf.fz_unicode_from_glyph_name(name)))


_SECTION = re.compile(rb"beginbf(char|range)(.*?)endbf(?:char|range)", re.S)
_PAIR = re.compile(rb"<([0-9A-Fa-f\s]*)>\s*<([0-9A-Fa-f\s]*)>")
_RANGE = re.compile(rb"<([0-9A-Fa-f\s]*)>\s*<([0-9A-Fa-f\s]*)>\s*(?:<([0-9A-Fa-f\s]*)>|\[([^\]]*)\])")
_HEX = re.compile(rb"<([0-9A-Fa-f\s]*)>")


def _hex_value(digits: bytes) -> bytes:
    return bytes.fromhex(digits.decode("latin-1"))  # skips white space; an odd digit count raises ValueError


def _code(digits: bytes) -> int:
    return int.from_bytes(_hex_value(digits), "big")


def _utf16(units: bytes) -> str:
    return units.decode("utf-16-be", errors="replace") if len(units) >= 2 else "\ufffd"


def parse_to_unicode(cmap: bytes) -> tuple[dict[int, str], bool]:
    """(code -> text, complete) of a ToUnicode CMap's bfchar and bfrange sections.

    ``complete`` is False when the CMap holds what is not read here
    (``usecmap``, CID ranges): codes missing from the result are then unknown.
    """
    out: dict[int, str] = {}
    complete = not any(k in cmap for k in (b"usecmap", b"begincid", b"beginnotdef"))
    for section in _SECTION.finditer(cmap):
        try:
            _read_section(section.group(1), section.group(2), out)
        except ValueError:  # odd hex digits: how MuPDF reads them is not modelled, so codes stay unknown
            complete = False
    return out, complete


def _read_section(kind: bytes, body: bytes, out: dict[int, str]) -> None:
    if kind == b"char":
        for src, dst in _PAIR.findall(body):
            out[_code(src)] = _utf16(_hex_value(dst))
        return
    for lo_digits, hi_digits, dst_digits, array in _RANGE.findall(body):
        lo, hi = _code(lo_digits), _code(hi_digits)
        if array:  # [<dst> <dst> ...]: one destination per code
            for k, dst in enumerate(_HEX.findall(array)[: max(hi - lo + 1, 0)]):
                out[lo + k] = _utf16(_hex_value(dst))
            continue
        dst = _hex_value(dst_digits)
        if len(dst) >= 2 and hi >= lo and hi - lo < 0x10000:
            head, last = dst[:-2], int.from_bytes(dst[-2:], "big")
            for k in range(hi - lo + 1):  # the last UTF-16 unit counts up through the range
                out[lo + k] = _utf16(head + ((last + k) & 0xFFFF).to_bytes(2, "big"))


_DUP = re.compile(rb"dup\s+(\d+)\s*/([^\s/\[\]{}()<>]+)\s+put")


def type1_builtin(program: bytes) -> dict[int, bytes] | None:
    """The builtin encoding of a Type 1 font program (its clear-text part), as classes; None when unreadable."""
    clear = program[: program.find(b"eexec")] if b"eexec" in program else program[:65536]
    if re.search(rb"/Encoding\s+StandardEncoding\s+def", clear):
        return dict(_ASCII)
    if b"/Encoding" not in clear:
        return None
    return {int(code): glyph_classes(name.decode("latin-1")) for code, name in _DUP.findall(clear)
            if int(code) < 256}


def parse_differences(text: str) -> dict[int, str]:
    """code -> glyph name of a Differences array's source text."""
    out: dict[int, str] = {}
    code = 0
    for token in re.findall(r"/[^\s/\[\]()<>]*|[+-]?\d+", text):
        if token.startswith("/"):
            if code < 256:
                out[code] = unescape_name(token[1:])
            code += 1
        else:
            code = int(token)
    return out


def simple_table(base: str | None, differences: dict[int, str], builtin: dict[int, bytes] | None,
                 default_standard: bool, to_unicode: tuple[dict[int, str], bool] | None) -> FontTable:
    """The table of a simple font (Type 1, TrueType, Type 3) from what its dictionary gives.

    ``base``: the name of its base encoding; ``builtin``: the builtin encoding of
    its embedded program where read; ``default_standard``: a non-embedded,
    non-symbolic font, whose codes default to StandardEncoding.
    """
    table: dict[int, bytes] = dict(builtin or {})
    if base in _BASE_ENCODINGS or (base is None and default_standard):
        table = dict(_ASCII)  # codes outside printable ASCII are ANY, whatever the builtin said
    elif base is not None:
        table = {}  # MacExpert or an unknown name
    for code, name in differences.items():
        table[code] = glyph_classes(name)
    if to_unicode is not None:
        mapped, complete = to_unicode
        if not complete:
            table = {}
        for code, text in mapped.items():
            if code < 256:
                table[code] = classes(text)
    return 1, ANY, {code: cls for code, cls in table.items() if cls != bytes([ANY])}


def composite_table(identity: bool, to_unicode: tuple[dict[int, str], bool] | None) -> FontTable:
    """The table of a Type 0 font: two-byte codes under Identity-H/V, else opaque."""
    if not identity:
        return OPAQUE
    mapped = to_unicode[0] if to_unicode else {}
    return 2, ANY, {code: classes(text) for code, text in mapped.items() if code < 0x10000}
