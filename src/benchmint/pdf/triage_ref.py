"""Reference of ``benchmint.pdf.triage``: what PyMuPDF itself reports, by running the page's display list."""

from __future__ import annotations

import re

import pymupdf


def page_counts(page: pymupdf.Page) -> tuple[int, int]:
    """(images placed, vector paths painted): ``len(page.get_image_info())``, ``len(page.get_drawings())``."""
    return len(page.get_image_info()), len(page.get_drawings())


# ---------------------------------------------------------------- figure words
# A plain reading of the same rule as the compiled scan (``_core.triage.figure_words``): the shown text of a
# content stream, through each font's code classes (benchmint.pdf.fonts), may read "Fig" or "FIG".

_WHITE = b"\0\t\n\f\r "
_DELIM = b"()<>[]{}/%"
_MAX_ERRORS = 100  # MuPDF gives up on a content stream after this many syntax errors
_MAX_DEPTH = 64
_KEYWORDS = set(
    "w J j M d ri i gs q Q cm m l c v y h re S s f F f* B B* b b* n W W* BT ET Tc Tw Tz TL Tf Tr Ts Td TD Tm T* "
    "Tj TJ ' \" d0 d1 CS cs SC SCN sc scn G g RG rg K k sh BI ID EI Do MP DP BMC BDC EMC BX EX".split())


class _Token:
    __slots__ = ("kind", "value", "start", "end", "closed")

    def __init__(self, kind: str, value, start: int, end: int, closed: bool = True) -> None:
        self.kind, self.value, self.start, self.end, self.closed = kind, value, start, end, closed


def _literal(data: bytes, i: int) -> tuple[int, bool]:
    """End of a literal string whose '(' is before ``i``, and whether its ')' was found."""
    depth = 1
    while i < len(data):
        c = data[i]
        i += 1
        if c == 0x5C:
            i += 1
        elif c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return i, True
    return len(data), False


def _compound(data: bytes, i: int) -> tuple[int, bool]:
    """End of an array or dictionary opened before ``i`` (nested ones, strings inside), and whether it closed."""
    depth = 1
    n = len(data)
    while depth > 0:
        i = _skip_white(data, i)
        if i >= n:
            return n, False
        c = data[i]
        i += 1
        if c == 0x28:
            i, ok = _literal(data, i)
        elif c == 0x5B:
            depth += 1
        elif c == 0x5D:
            depth -= 1
        elif c == 0x3C:
            if data[i:i + 1] == b"<":
                i, depth = i + 1, depth + 1
            else:
                j = data.find(b">", i)
                i = n if j < 0 else j + 1
        elif c == 0x3E and data[i:i + 1] == b">":
            i, depth = i + 1, depth - 1
    return i, True


def _skip_white(data: bytes, i: int) -> int:
    n = len(data)
    while i < n:
        if data[i] in _WHITE:
            i += 1
        elif data[i] == 0x25:  # a comment runs to the end of its line
            while i < n and data[i] not in b"\r\n":
                i += 1
        else:
            break
    return i


def _tokens(data: bytes):
    """The tokens of a content stream; ``send`` a new position to move the reader (after inline image data)."""
    i, n = 0, len(data)
    while True:
        i = _skip_white(data, i)
        if i >= n:
            return
        c, start = data[i], i
        if c == 0x2F:  # a name, #xx escapes decoded
            j = i + 1
            while j < n and data[j] not in _WHITE and data[j] not in _DELIM:
                j += 1
            raw = data[i + 1:j]
            name = re.sub(rb"#([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw)
            tok = _Token("name", name.decode("latin-1"), start, j)
        elif c == 0x28:
            j, ok = _literal(data, i + 1)
            tok = _Token("string", None, start, j, ok)
        elif c == 0x3C and data[i + 1:i + 2] == b"<":
            j, ok = _compound(data, i + 2)
            tok = _Token("dict", None, start, j, ok)
        elif c == 0x3C:
            k = data.find(b">", i + 1)
            j, ok = (n, False) if k < 0 else (k + 1, True)
            tok = _Token("string", None, start, j, ok)
        elif c == 0x5B:
            j, ok = _compound(data, i + 1)
            tok = _Token("array", None, start, j, ok)
        elif c in b")>]{}":
            j = i + 2 if data[i:i + 2] == b">>" else i + 1
            tok = _Token("error", None, start, j)
        else:
            j = i
            while j < n and data[j] not in _WHITE and data[j] not in _DELIM:
                j += 1
            word = data[i:j].decode("latin-1")
            kind = "number" if c in b"0123456789+-." else "bool" if word in ("true", "false", "null") else "keyword"
            tok = _Token(kind, word, start, j)
        moved = yield tok
        i = moved if moved is not None else tok.end


def _string_bytes(data: bytes, tok: _Token) -> bytes:
    end = tok.end - 1 if tok.closed else tok.end
    body = data[tok.start + 1:end]
    if data[tok.start] == 0x3C:
        digits = re.sub(rb"[^0-9A-Fa-f]", b"", body)
        return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode())
    escapes = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f", b"\r\n": b"", b"\r": b"", b"\n": b""}

    def unescape(m: re.Match) -> bytes:
        token = m.group(0)
        if token[:1] == b"\r":  # an end of line inside a literal string reads as \n
            return b"\n"
        body = token[1:]
        if body[:1].isdigit() and body[:1] < b"8":
            return bytes([int(body, 8) & 0xFF])
        return escapes.get(body, body)

    return re.sub(rb"\\(?:[0-7]{1,3}|\r\n|.)|\\$|\r\n?", unescape, body, flags=re.S)


def _inline_dictionary(tokens) -> tuple[dict, _Token] | None:
    """The sizes and filter of an inline image's dictionary, and its ID token; None when no ID comes."""
    info = {"w": -1, "h": -1, "bpc": 8, "comps": 1, "filtered": False, "mask": False, "filter": ""}
    key = None
    for tok in tokens:
        if tok.kind == "keyword" and tok.value == "ID":
            return info, tok
        if key is None:
            key = tok.value if tok.kind == "name" else None
            continue
        number = tok.kind == "number"
        if key in ("W", "Width", "H", "Height"):
            info["w" if key[0] == "W" else "h"] = _lexer_int(tok.value) if number else -1
        elif key in ("BPC", "BitsPerComponent"):
            info["bpc"] = _lexer_int(tok.value) if number else 8
        elif key in ("IM", "ImageMask"):
            info["mask"] = tok.kind == "bool" and tok.value == "true"
        elif key in ("F", "Filter"):
            info["filtered"] = True
            info["filter"] = tok.value if tok.kind == "name" else info["filter"]
        elif key in ("CS", "ColorSpace"):
            info["comps"] = ({"RGB": 3, "DeviceRGB": 3, "CalRGB": 3, "CMYK": 4, "DeviceCMYK": 4}.get(tok.value, 1)
                             if tok.kind == "name" else 1)
        key = None
    return None


def _inline_image_end(data: bytes, i: int) -> int | None:
    """After BI (at ``i``): where the reading goes on after the image's EI, or None when no end is found."""
    found = _inline_dictionary(_tokens(data[i:]))
    if found is None:
        return None
    info, id_token = found
    n = len(data)
    start = i + id_token.end + 1  # one white-space byte follows ID
    if start > n:
        return None
    if not info["filtered"] and info["w"] > 0 and info["h"] > 0 and info["bpc"] > 0:
        comps, bpc = (1, 1) if info["mask"] else (info["comps"], info["bpc"])
        j = start + info["h"] * ((info["w"] * comps * bpc + 7) // 8)
        while j < n and data[j] in _WHITE:
            j += 1
        if data[j:j + 2] == b"EI" and (j + 2 == n or data[j + 2] in _WHITE or data[j + 2] in _DELIM):
            return j + 2
    # ASCII filters end their data with a marker; the EI after it counts
    marker = {"AHx": b">", "ASCIIHexDecode": b">", "A85": b"~>", "ASCII85Decode": b"~>"}.get(info["filter"], b"")
    eod = data.find(marker, start) if marker else start
    ei = None if eod < 0 else _find_ei(data, eod + len(marker))
    return None if ei is None else ei + 2


def _lexer_int(word: str) -> int:
    """A number token as the compiled lexer reads it (signs, digits, one fraction), truncated."""
    m = re.match(r"([+-]*)(\d*)(?:\.(\d*))?", word)
    assert m is not None  # every pattern part may be empty
    value = float(m.group(2) or 0) + (float("0." + m.group(3)) if m.group(3) else 0.0)
    return int(-value if m.group(1).count("-") % 2 else value)


def _find_ei(data: bytes, frm: int) -> int | None:
    """The first white-space-delimited EI followed by 32 bytes that look like content."""
    for m in re.finditer(rb"EI", data[frm:]):
        k = frm + m.start()
        if k > frm and data[k - 1] not in _WHITE:
            continue
        if k + 2 < len(data) and data[k + 2] not in _WHITE and data[k + 2] not in _DELIM:
            continue
        tail = data[k + 2:k + 34]
        if all(b < 0x80 and (b >= 32 or b in _WHITE) for b in tail):
            return k
    return None


_F, _I, _G, _IU, _GU, _ANY = 1, 2, 3, 4, 5, 6


class _FigureWordReading:
    """One page's reading: the classes of its shown characters, in stream order, against "Fig" and "FIG"."""

    def __init__(self, fonts: dict) -> None:
        self.fonts = fonts
        self.last = (0, 0)  # the two classes before
        self.found = False

    def feed(self, c: int) -> None:
        p2, p1 = self.last
        if c == p1 and c not in (0, _ANY):
            return  # a repeated letter may be a duplicate glyph MuPDF drops
        if p2 in (_F, _ANY) and ((p1 in (_I, _ANY) and c in (_G, _ANY)) or (p1 in (_IU, _ANY) and c in (_GU, _ANY))):
            self.found = True
        self.last = (p1, c)

    def show(self, data: bytes, font) -> None:
        if not data:
            return
        if font is None or font[0] == 0:
            self.found = True
            return
        width, default, table = font
        codes = list(data) if width == 1 else [int.from_bytes(data[k:k + 2], "big") for k in range(0, len(data) - 1, 2)]
        for code in codes:
            for c in table.get(code) or bytes([default]):
                self.feed(c)
        if width == 2 and len(data) % 2:
            self.feed(_ANY)

    def run(self, data: bytes, res: dict | None, font, stack: tuple) -> None:
        res = res or {}
        saved: list = []
        operands: list[_Token] = []
        errors = 0
        reader = _tokens(data)
        tok = next(reader, None)
        while tok is not None and not self.found:
            moved = None
            if tok.kind == "error":
                errors += 1
            elif tok.kind != "keyword":
                operands.append(tok)
            elif tok.value not in _KEYWORDS:
                errors += 1
                operands = []
            else:
                font, moved = self.operator(tok, operands, data, res, font, saved, stack)
                operands = []
            if errors >= _MAX_ERRORS:
                self.found = True  # MuPDF stops reading here: what follows is not known
            try:
                tok = reader.send(moved) if moved is not None else next(reader)
            except StopIteration:
                tok = None

    def operator(self, tok: _Token, operands: list[_Token], data: bytes, res: dict, font, saved: list,
                 stack: tuple) -> tuple:
        """Applies one operator; returns the font now selected and where the reading goes on (None: next)."""
        op = tok.value
        names = [t.value for t in operands if t.kind == "name"]
        strings = [t for t in operands if t.kind == "string"]
        arrays = [t for t in operands if t.kind == "array"]
        if op == "q":
            saved.append(font)
        elif op == "Q" and saved:
            font = saved.pop()
        elif op == "Tf":
            xref = res.get("Font", {}).get(names[-1]) if names else None
            font = self.fonts.get(xref) if xref is not None else None
        elif op in ("Tj", "'", '"') and strings:
            self.show(_string_bytes(data, strings[-1]), font)
        elif op == "TJ" and arrays:
            body = data[arrays[-1].start + 1:arrays[-1].end - 1 if arrays[-1].closed else arrays[-1].end]
            for item in _tokens(body):
                if item.kind == "string" and not self.found:
                    self.show(_string_bytes(body, item), font)
        elif op in ("Do", "scn", "SCN") and names:
            entry = res.get("XObject" if op == "Do" else "Pattern", {}).get(names[-1])
            if entry is not None and entry[0] == ("form" if op == "Do" else "tiling"):
                self.run_program(entry, res, font, stack)
        elif op == "BDC":
            dicts = [data[t.start:t.end] for t in operands if t.kind == "dict"]
            if any(b"ActualText" in d or b"#" in d for d in dicts) or (names and names[-1] in res.get("ActualText", ())):
                self.found = True
        elif op == "BI":
            end = _inline_image_end(data, tok.end)
            return font, len(data) if end is None else end
        return font, None

    def run_program(self, entry: tuple, res: dict, font, stack: tuple) -> None:
        if any(p is entry for p in stack):
            return  # a cycle: MuPDF skips the nested run
        if len(stack) >= _MAX_DEPTH:
            self.found = True
            return
        self.run(entry[1], entry[2] if entry[2] is not None else res, font, (*stack, entry))


def may_show_figure_word(content: bytes, resources: dict | None, fonts: dict) -> bool:
    """Whether the text a content stream shows may read "Fig" or "FIG" (False proves it cannot).

    ``resources`` and ``fonts`` as for ``_core.triage.figure_words``.
    """
    reading = _FigureWordReading(fonts)
    reading.run(content, resources, None, ())
    return reading.found
