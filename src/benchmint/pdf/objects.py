"""Reading PDF objects from the source text PyMuPDF gives (``Document.xref_object``): dictionary entries,
names, indirect references."""

from __future__ import annotations

import re

REF = re.compile(rb"^\s*(\d+)\s+\d+\s+R\s*$")  # an indirect reference, "12 0 R"

_STRUCTURE = re.compile(r"<<|>>|[\[\]()/]")
_NESTING = re.compile(r"<<|>>|[\[\]()]")  # inside a value: only the nesting matters
_NAME_END = re.compile(r"[^\s/<>\[\]()]*")


def dict_entries(text: str) -> dict[str, str]:
    """Top-level ``/Name value`` pairs of a PDF dictionary's source text."""
    entries: dict[str, str] = {}
    s = text.strip()
    if not s.startswith("<<"):
        return entries
    end = len(s) - 2  # inside the outer << >>
    key, value_at, depth, i = None, 0, 0, 2
    while m := (_STRUCTURE if depth == 0 else _NESTING).search(s, i, end):
        token, i = m.group(), m.end()
        if token in ("<<", "[", "("):
            depth += 1
        elif token in (">>", "]", ")"):
            depth -= 1
        elif key is None or s[value_at:m.start()].strip():  # a slash at depth 0 after a value: the next key
            if key is not None:
                entries[key] = s[value_at:m.start()].strip()
            name_end = _NAME_END.match(s, i, end).end()  # type: ignore[union-attr]  # matches the empty name at least
            key, value_at = unescape_name(s[i:name_end]), name_end
    if key is not None:
        entries[key] = s[value_at:end].strip()
    return entries


def unescape_name(raw: str) -> str:
    """A name's characters with its #xx escapes decoded ("F#2Esc" is "F.sc")."""
    return re.sub(r"#([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), raw) if "#" in raw else raw
