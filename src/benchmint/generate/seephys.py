"""SeePhys items built from raw physics problems (seephys.txt §3.2, App. A), in the layout ``eval --benchmark
seephys`` reads, for all four settings.

Input: a JSONL of problems, each ``{question, answer, images: [paths relative to the file], ...}`` with optional
``id``, ``language``, ``subject`` (the seven codes), ``level`` (the eight levels, by name or 1..8),
``img_category``, ``vision_relevance``, ``caption``, ``sig_figs``, ``solution``.

Deterministic steps:

* an answer that explains in more than three sentences drops the problem (``long_answer``, App. A's rule);
* ``sig_figs`` is derived from a numeric reference answer written with a decimal point (10.1 gives 3, as §3.2
  says); a given value that disagrees is kept and flagged (``sig_figs_mismatch``);
* the VO composite: the question (LaTeX through matplotlib's mathtext) over its diagrams in one image no larger
  than ``max_side`` × ``max_side`` (§3.2 "Multimodal enhancement").

Model stages (``--model``, optional): OCR repair with the Fig. 9 instruction (``repair.txt``), refused when it
changes the numbers of the text (the shared text, and each sub-question a record gives in ``parts``, repaired
on its own); the TC caption with the Fig. 10 instruction (``caption.txt``) for problems that
have none, refused when it states the answer; a multiple-choice stem rewritten as an open question
(``mcq.txt``), refused when it drops a number or names an option; a ``multi_part`` problem split into
self-contained sub-questions (``split.txt``), refused when the numbers of the problem or of its answer do not
add up. Parts given in the record (``parts``) are split without a model. A refused reply is asked again with
the reason, ``max_attempts`` replies at most. The labels a problem lacks (subject, level, diagram type, vision
relevance, and the language when only the script told it) are asked in one call (``label.txt``); each value
is checked against its taxonomy (the language against the script too), and one that fails is left empty (the
language: the script's kept, as eval needs one) and flagged, the problem kept.

The leak check (§3.2) runs on the built items as any evaluation does: ``eval --setting TO`` with a model that
may search, then ``grade``; its ``grades.jsonl`` given back (``leak_grades``) flags the items answered right
without the diagram (``solved_without_diagram``), which stay in the set.

The composite: the seed picks the text font, the math font set and the font size; the size and the margins grow with the largest
diagram side, so a large diagram does not dwarf its question. Diagrams are pasted unscaled when they fit (their
pixels are the input's), stacked under the text and centred; when the whole would pass the bound they are scaled
down together, and the text's size with them. The same question, diagrams and seed give the same PNG bytes.
Chinese text is drawn with a CJK font file (``--font``, else the first installed font with CJK glyphs), whose
hash is part of the composite's key; without one the item is flagged ``no_composite`` with that reason.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from benchmint.benchmarks.base import TextPart
from benchmint.generate.executor import Role, RoleExecutor
from benchmint.generate.flow import GenerateResult, PromptSet, call_result, code_counts, json_reply, write_outputs
from benchmint.io import InputError, iter_jsonl, write_jsonl
from benchmint.run import Ledger, SerialExecutor, Unit, content_key, run_units
from benchmint.run.runner import LEDGER_NAME

TEXT_FONTS = ("DejaVu Sans", "DejaVu Serif", "STIXGeneral")
MATH_FONTS = ("dejavusans", "dejavuserif", "stix", "cm")
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uff00-\uffef]")
# Math segments are kept whole when lines are broken: $$...$$, $...$, \(...\), \[...\]
_TOKEN = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]|\S+", re.S)
# A run of CJK text breaks between any two characters; these never start a line (they stay with the one before)
_CJK_CLOSING = "，。、；：？！）」』】》〉…．,.;:?!)"
# Characters every CJK font has: a font that lacks one is no CJK font
CJK_PROBE = "的中力电"
NO_CJK_FONT = ("the text has CJK characters and no CJK font was found (scripts/setup.sh installs "
               "fonts-wqy-microhei; --font FILE names any TTF/OTF/TTC with CJK glyphs)")


class CompositeError(ValueError):
    """A problem that cannot be made into a composite (its text does not fit, a glyph is missing)."""


def _charmap(path: str) -> dict | None:
    from matplotlib.ft2font import FT2Font

    try:
        return FT2Font(path).get_charmap()
    except (OSError, RuntimeError, ValueError):
        return None


def _font_candidates() -> list[str]:
    """The system's font files, in a fixed order (matplotlib lists them, through fontconfig where there is one)."""
    from matplotlib import font_manager

    return sorted(font_manager.findSystemFonts())


def find_cjk_font(path: str | os.PathLike | None = None) -> str | None:
    """The font file Chinese text is drawn with: ``path`` when given (checked: a font with CJK glyphs, else
    ValueError), else the first system font that has them, else None."""
    if path is not None:
        if not Path(path).is_file():
            raise ValueError(f"--font {path}: no such font file")
        cmap = _charmap(str(path))
        if cmap is None:
            raise ValueError(f"--font {path}: not a font file FreeType reads (TTF, OTF or TTC)")
        lacking = [c for c in CJK_PROBE if ord(c) not in cmap]
        if lacking:
            raise ValueError(f"--font {path}: has no CJK glyphs (none for {''.join(lacking)})")
        return str(path)
    for found in _font_candidates():
        cmap = _charmap(found)
        if cmap is not None and all(ord(c) in cmap for c in CJK_PROBE):
            return found
    return None


@functools.cache
def _font_family(path: str) -> tuple[str, frozenset[int]]:
    """A font file made known to matplotlib (its cached font list predates fonts installed since): its family
    name, which text properties name, and the characters it has."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    font_manager.fontManager.addfont(path)
    font = FT2Font(path)
    return font.family_name, frozenset(font.get_charmap())


@functools.cache
def font_id(path: str) -> dict:
    """What identifies a font for a composite's key and layout: its family and its file's SHA-256 (another
    version of the font is another rendering)."""
    return {"family": _font_family(path)[0], "file": Path(path).name,
            "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}


def _style(seed: int, fid: str) -> dict:
    rng = random.Random(f"{seed}-{fid}-vo")
    return {"family": rng.choice(TEXT_FONTS), "mathtext": rng.choice(MATH_FONTS), "scale": rng.uniform(0.9, 1.15)}


def _as_mathtext(token: str) -> str:
    """Display math and \\( \\) wrappers as the $...$ that mathtext reads; a bare '$' (a price) escaped."""
    for a, b in (("$$", "$$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if token.startswith(a) and token.endswith(b) and len(token) > len(a) + len(b):
            return "$" + token[len(a):-len(b)].strip() + "$"
    return token if token.count("$") % 2 == 0 else token.replace("$", r"\$")


def _lines(tokens: list[tuple[str, bool]], width: float, measure) -> list[list[tuple[str, bool]]]:
    """Tokens (text, whether a space precedes it) filled into lines ``measure`` finds no wider than ``width``."""
    lines: list[list[tuple[str, bool]]] = []
    line: list[tuple[str, bool]] = []
    for token in tokens:
        # A closing mark written right after the last token (a comma after a math segment) never starts a line
        glued = not token[1] and token[0][:1] in _CJK_CLOSING
        if line and not glued and measure([*line, token]) > width:
            lines.append(line)
            line = [token]
        else:
            line.append(token)
    if line:
        lines.append(line)
    return lines


def _pieces(word: str) -> list[str]:
    """A word cut where a line may break: between CJK characters (closing punctuation kept with the character
    before it); a word with no CJK character stays whole."""
    if not _CJK.search(word):
        return [word]
    pieces: list[str] = []
    latin = ""
    for ch in word:
        if _CJK.match(ch) and ch not in _CJK_CLOSING:
            if latin and all(c in _CJK_CLOSING for c in latin):
                pieces.append(latin + ch)  # a closing mark that opens the word stays with what follows it
            else:
                pieces.extend([latin, ch] if latin else [ch])
            latin = ""
        elif pieces and not latin and ch in _CJK_CLOSING:
            pieces[-1] += ch
        else:
            latin += ch
    if latin:
        pieces.append(latin)
    return pieces


def render_text(text: str, width: int, size: float, family: str, mathtext: str, cjk_font: str | None = None
                ) -> tuple[Image.Image, list[str]]:
    """The text wrapped to ``width`` pixels (a math segment is never split), black on white; and its lines.

    A math segment mathtext cannot parse, or one holding CJK characters (math fonts have none), is drawn as its
    source, escaped, so the question stays readable. CJK characters are drawn with ``cjk_font`` (a font file),
    matplotlib falling back to it glyph by glyph from ``family``; a text with CJK characters and no such font,
    or with a character neither font has, is a CompositeError (rather than boxes in place of glyphs).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties

    families = _families(text, family, cjk_font)
    prop = FontProperties(family=families, size=size, math_fontfamily=mathtext)
    tokens = [_paragraph_tokens(paragraph, prop) for paragraph in text.split("\n")]
    fig = Figure(dpi=100)
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    widths: dict[str, float] = {}

    def measure(s: str) -> float:
        if s not in widths:
            t = fig.text(0, 0, s, fontproperties=prop)
            widths[s] = t.get_window_extent(renderer).width
            t.remove()
        return widths[s]

    if len(families) == 1:
        # One string per line: mathtext lays out the words and the math together.
        def line_width(pieces: list[tuple[str, bool]]) -> float:
            return measure(_joined(pieces))
    else:
        # Mathtext draws the text between math segments in its own font, with no fallback to the CJK font: each
        # line is drawn as runs, a math segment alone, the text between in one string (glyph fallback there).
        space = measure("a a") - measure("aa")
        thin = size * 100 / 72 * 0.15  # between a run of text and a math segment written without a space

        def line_width(pieces: list[tuple[str, bool]]) -> float:
            runs = _runs(pieces)
            return sum(measure(r) for r, _ in runs) + sum(space if spaced else thin for _, spaced in runs[1:])

    lines = [line for words in tokens for line in (_lines(words, width, line_width) or [[]])]
    step = size * 100 / 72 * 1.6  # line height in pixels
    height = int(step * len(lines) + size * 100 / 72 * 0.6) + 1
    fig.set_size_inches(width / 100, height / 100)
    fig.patch.set_facecolor("white")
    for i, line in enumerate(lines):
        y = 1 - (i + 1) * step / height + 0.3 * step / height
        if len(families) == 1:
            fig.text(0, y, _joined(line), fontproperties=prop, color="black", va="baseline")
            continue
        x = 0.0
        for k, (run, spaced) in enumerate(_runs(line)):
            x += 0.0 if k == 0 else space if spaced else thin
            fig.text(x / width, y, run, fontproperties=prop, color="black", va="baseline")
            x += measure(run)
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    return image.convert("RGB"), [_joined(line) for line in lines]


def _families(text: str, family: str, cjk_font: str | None) -> list[str]:
    """The font families a text is drawn with: ``family``, then the CJK font's when the text has CJK, every
    character checked to be in one of them."""
    from matplotlib.font_manager import FontProperties, findfont

    if not _CJK.search(text):
        return [family]
    if cjk_font is None:
        raise CompositeError(NO_CJK_FONT)
    cjk_family, cjk_chars = _font_family(cjk_font)
    own = _charmap(findfont(FontProperties(family=family))) or {}
    lacking = sorted({c for c in text if not c.isspace() and ord(c) not in own and ord(c) not in cjk_chars})
    if lacking:
        raise CompositeError(f"no glyph for {''.join(lacking)!r} in {family} or {cjk_family} "
                             f"({Path(cjk_font).name})")
    return [family, cjk_family]


def _paragraph_tokens(paragraph: str, prop) -> list[tuple[str, bool]]:
    """A paragraph's pieces where a line may break, each with whether a space precedes it in the text; math as
    mathtext reads it, or escaped when mathtext cannot draw it."""
    from matplotlib.mathtext import MathTextParser

    parser = MathTextParser("path")
    words: list[tuple[str, bool]] = []
    for match in _TOKEN.finditer(paragraph):
        token = _as_mathtext(match.group())
        spaced = match.start() == 0 or paragraph[match.start() - 1].isspace()
        if _is_math(token):
            try:
                if _CJK.search(token):
                    raise ValueError("CJK in math")
                parser.parse(token, 72, prop)
            except ValueError:
                token = token.replace("$", r"\$")
        words.extend((piece, k == 0 and spaced) for k, piece in enumerate(_pieces(token)))
    return words


def _joined(pieces: list[tuple[str, bool]]) -> str:
    return "".join((" " if spaced and k else "") + piece for k, (piece, spaced) in enumerate(pieces))


def _is_math(token: str) -> bool:
    return token.count("$") - token.count(r"\$") >= 2


def _runs(pieces: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """A line's pieces as runs to draw one by one: each math segment alone, the text between joined; each run
    with whether a space precedes it."""
    runs: list[tuple[str, bool]] = []
    for k, (piece, spaced) in enumerate(pieces):
        if runs and not _is_math(piece) and not _is_math(pieces[k - 1][0]):
            runs[-1] = (runs[-1][0] + (" " if spaced else "") + piece, runs[-1][1])
        else:
            runs.append((piece, spaced))
    return runs


def compose(text: str, diagrams: list[Image.Image], seed: int, fid: str, max_side: int = 4096,
            cjk_font: str | None = None) -> tuple[Image.Image, dict]:
    """The composite of ``text`` over ``diagrams`` and its layout: {font, math font, size, margin, gap, text box,
    diagram boxes [x0, y0, x1, y1], scale applied to the diagrams; the CJK font when the text has CJK}.
    ``cjk_font``: the font file CJK characters are drawn with (``find_cjk_font``)."""
    if not diagrams:
        raise CompositeError("a composite needs at least one diagram")
    style = _style(seed, fid)
    diagrams = [d.convert("RGB") for d in diagrams]
    largest = max(max(d.size) for d in diagrams)
    scale = 1.0
    for _ in range(8):
        shown = [d if scale == 1.0 else d.resize((max(1, round(d.width * scale)), max(1, round(d.height * scale))),
                                                 Image.Resampling.LANCZOS) for d in diagrams]
        side = max(max(d.size) for d in shown)
        # Sizes follow the diagram's largest side: readable beside it, never tiny nor huge.
        size = round(min(40.0, max(12.0, side / 36)) * style["scale"], 1)
        margin = max(16, round(side * 0.04))
        gap = max(12, round(side * 0.05))
        widest = max(d.width for d in shown)
        if widest + 2 * margin > max_side:  # scaled to the width first: a diagram is never cut off
            scale *= (max_side - 2 * margin) / widest
            continue
        width = max(widest + 2 * margin, min(720, max_side))
        text_img, lines = render_text(text, width - 2 * margin, size, style["family"], style["mathtext"],
                                      cjk_font)
        height = margin + text_img.height + sum(gap + d.height for d in shown) + margin
        if height <= max_side:
            break
        room = max_side - 2 * margin - text_img.height - gap * len(shown)
        total = sum(d.height for d in shown)
        if room <= 0:
            scale *= 0.7  # the text alone is too tall: smaller diagrams bring a smaller font
        else:
            scale *= min(0.95, room / total)
    else:
        raise CompositeError(f"the text and diagrams do not fit in {max_side}x{max_side}")
    canvas = Image.new("RGB", (width, height), "white")
    canvas.paste(text_img, (margin, margin))
    y = margin + text_img.height
    boxes = []
    for d in shown:
        y += gap
        x = (width - d.width) // 2
        canvas.paste(d, (x, y))
        boxes.append([x, y, x + d.width, y + d.height])
        y += d.height
    layout = {"font": style["family"], "math_font": style["mathtext"], "font_size": size, "margin": margin,
              "gap": gap, "text_box": [margin, margin, margin + text_img.width, margin + text_img.height],
              "lines": len(lines), "diagram_boxes": boxes, "diagram_scale": round(scale, 4),
              "largest_diagram_side": largest}
    if _CJK.search(text) and cjk_font is not None:
        layout["cjk_font"] = font_id(cjk_font)
    return canvas, layout


def png_bytes(image: Image.Image) -> bytes:
    """PNG bytes with no metadata: the same pixels give the same file."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------------------------
# Labels and answer rules

SUBJECTS = ("CM", "EM", "ACG", "OPT", "AMONP", "QMIT", "TSM")
LEVELS = ("Mid", "High", "BO", "AO", "UG", "SUG", "MA", "PhD")  # written as 1..8, the order of the paper
# The diagram types as the release writes them (snake_case; the paper names 21 in Title Case)
IMG_CATEGORIES = frozenset((
    "circuit_diagram", "static_force_analysis", "electromagnetic_field", "optical_path", "coordinate_system",
    "circular_motion", "thermodynamics", "charge_distribution", "spring_force", "linear_motion",
    "capacitance_resistance", "relativity_gravity", "atomic_physics", "projectile_motion", "simple_harmonic_motion",
    "photoelectric_effect", "wave_motion", "quantum_mechanics", "astrophysics", "feynman_diagram", "acoustics",
    "magnetic_circuit"))
RELEVANCE = {"essential": "essential", "vision-essential": "essential", "ve": "essential",
             "optional": "optional", "vision-optional": "optional", "vo": "optional"}
LANGUAGES = ("English", "Chinese")
_LANGUAGE_NAMES = {"english": "English", "en": "English", "chinese": "Chinese", "zh": "Chinese"}
# The labels a model writes for a problem that lacks them, in the order they are asked
LABELS = ("subject", "level", "img_category", "vision_relevance", "language")
CODES = ("ITEM", "long_answer", "bad_record", "image_missing", "image_unreadable", "duplicate_id",
         "mcq_not_rewritten", "mcq_failed", "mcq_rewrite_refused", "split_not_done", "split_failed", "split_refused",
         "repair_changed_number", "repair_failed", "caption_states_answer", "caption_failed", "call_failed")

_MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]", re.S)
_WRAPPERS = re.compile(r"\$|\\\(|\\\)|\\\[|\\\]")
_UNIT_CMD = re.compile(r"\\(?:mathrm|text|rm|operatorname|mathit|textrm)\s*\{[^{}]*\}")
_EXPONENT = re.compile(r"(?:\\times|×|\\cdot|\*)\s*10\s*\^\s*(?:\{\s*[-−+]?\s*\d+\s*\}|[-−+]?\d+)"
                       r"|(?<=\d)[eE][-+]?\d+")
_SCRIPT = re.compile(r"[_^]\s*(?:\{[^{}]*\}|\w)")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?|(?<![\w.])\.\d+")


def sig_figs_of(answer: str) -> int | None:
    """Significant figures of a reference answer that is one number written with a decimal point, else None.

    The mantissa counts (``1.50 \\times 10^{-7}`` has 3); leading zeros do not, trailing ones do (``0.0250``: 3).
    Units, sub- and superscripts are not numbers of the answer; two numbers or none, or no decimal point (an
    integer's precision is not written), give None.
    """
    text = _UNIT_CMD.sub(" ", _WRAPPERS.sub(" ", str(answer)))
    text = _SCRIPT.sub(" ", _EXPONENT.sub(" ", text))
    numbers = _NUMBER.findall(text)
    if len(numbers) != 1 or "." not in numbers[0]:
        return None
    digits = numbers[0].replace(".", "").lstrip("0")
    return len(digits) or None


_ABBREV = re.compile(r"\b(?:e\.g|i\.e|etc|vs|approx|Fig|Eq|cf)\.", re.I)


def sentences_of(answer: str) -> int:
    """Sentences of an answer: math segments and decimal points do not end one; ``. ! ? 。 ！ ？`` do."""
    text = _MATH.sub(" M ", str(answer))
    text = _ABBREV.sub(" A ", re.sub(r"(\d)\.(\d)", r"\1\2", text))
    parts = re.split(r"[.!?]+(?=\s|$)|[。！？]+", text)
    return sum(1 for part in parts if re.search(r"\w", part))


def numbers_in(text: str) -> list[str]:
    """The numbers a text states, in order (for the OCR repair's check): digits with their decimal part."""
    return re.findall(r"\d+(?:\.\d+)?", text)


def states_answer(caption: str, answer: str) -> str | None:
    """What of the answer a caption gives away: the whole answer's text, or its number; None when nothing."""
    def norm(s: str) -> str:
        return re.sub(r"[\s${}\\]", "", _WRAPPERS.sub("", s)).lower()

    whole = norm(answer)
    if len(whole) >= 2 and whole in norm(caption):
        return f"the caption contains the answer {answer!r}"
    nums = _NUMBER.findall(_SCRIPT.sub(" ", _EXPONENT.sub(" ", _UNIT_CMD.sub(" ", _WRAPPERS.sub(" ", answer)))))
    if len(nums) == 1 and (sig_figs_of(answer) is not None or len(nums[0]) >= 2):
        if nums[0] in numbers_in(caption):
            return f"the caption states the answer's number {nums[0]}"
    return None


_OPTION_MARK = re.compile(r"(?:^|\s)\(?[A-H]\)\s|\b(?:which|choose|select)\b[^.?]*\b(?:following|options?|"
                          r"choices?)\b", re.I)


def open_rewrite_problem(stem: str, question: str, choices: dict[str, str]) -> str | None:
    """Why an open rewrite of a multiple-choice stem is refused, or None: it must keep every number of the stem,
    and neither list nor name the options."""
    missing = Counter(numbers_in(stem)) - Counter(numbers_in(question))
    if missing:
        return f"the rewrite drops the stem's numbers {sorted(missing.elements())}"
    if _OPTION_MARK.search(question):
        return "the rewrite still refers to lettered options"
    text = question.lower()
    named = [k for k, v in choices.items() if len(v) >= 3 and v.lower() in text]
    if named:
        return f"the rewrite states option(s) {', '.join(named)}"
    return None


# Sub-question labels, "(1)", "(b)", "(iii)", "2)": not numbers of the problem
_PART_MARK = re.compile(r"\(\s*(?:\d{1,2}|[a-zA-Z]|[ivxIVX]+)\s*\)|(?<![\w.(])\d{1,2}\)")


def split_problem(question: str, answer: str, value: dict) -> str | None:
    """Why a model's split of a multi-part problem is refused, or None: the shared text and the sub-questions
    together keep every number of the problem, and the parts' answers hold the reference answer's numbers, no
    more and none left out."""
    def counted(*texts: str) -> Counter:
        return Counter(n for t in texts for n in numbers_in(_PART_MARK.sub(" ", t)))

    missing = counted(question) - counted(value["context"], *(part["question"] for part in value["parts"]))
    if missing:
        return f"the parts drop the problem's numbers {sorted(missing.elements())}"
    reference = counted(answer)
    given = counted(*(part["answer"] for part in value["parts"]))
    if given - reference:
        return f"the parts' answers add numbers {sorted((given - reference).elements())} the reference lacks"
    if reference - given:
        return f"the parts' answers leave out the reference's numbers {sorted((reference - given).elements())}"
    return None


def allowed_labels(label: str) -> list[str]:
    """The values a label may take, as the prompt lists them."""
    return {"subject": list(SUBJECTS), "level": list(LEVELS), "img_category": sorted(IMG_CATEGORIES),
            "vision_relevance": ["essential", "optional"], "language": list(LANGUAGES)}[label]


def label_value(label: str, value: Any, question: str) -> tuple[Any, str | None]:
    """A model's label checked against its taxonomy: (the value as items carry it, None), or (None, the flag and
    why) when it is outside the taxonomy or, for the language, contradicts the text's script."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    got: Any = None
    if label == "subject":
        got = text.upper() if text.upper() in SUBJECTS else None
    elif label == "level":
        try:
            got = _level(value)
        except ValueError:
            got = None
    elif label == "img_category":
        snake = re.sub(r"[\s-]+", "_", text.lower())
        got = snake if snake in IMG_CATEGORIES else None
    elif label == "vision_relevance":
        got = RELEVANCE.get(text.lower())
    elif label == "language":
        got = _LANGUAGE_NAMES.get(text.lower())
        script = _script(question)
        if got is not None and got != script:
            return None, (f"label_contradicts_text: the model's language {value!r}, the text is written in "
                          f"{script} script")
    if got is None:
        return None, f"label_off_taxonomy: the model's {label} {value!r} is none of {allowed_labels(label)}"
    return got, None


def _level(value) -> int:
    if isinstance(value, bool):
        raise ValueError(f"level must be one of {list(LEVELS)} or 1..8, got {value!r}")
    if isinstance(value, int) and 1 <= value <= len(LEVELS):
        return value
    if isinstance(value, str):
        if value.strip().isdigit() and 1 <= int(value) <= len(LEVELS):
            return int(value)
        by_name = {name.lower(): i for i, name in enumerate(LEVELS, 1)}
        if value.strip().lower() in by_name:
            return by_name[value.strip().lower()]
    raise ValueError(f"level must be one of {list(LEVELS)} or 1..8, got {value!r}")


def _script(text: str) -> str:
    """The language a text's script says: Chinese when it has CJK characters."""
    return "Chinese" if _CJK.search(text) else "English"


def _language(row: dict) -> tuple[str, str]:
    """A problem's language and where it came from ("given", or "script" when the record has none)."""
    given = row.get("language")
    if given is None or (isinstance(given, str) and not given.strip()):
        return _script(row["question"]), "script"
    found = _LANGUAGE_NAMES.get(str(given).strip().lower())
    if found is None:
        raise ValueError(f"language must be English or Chinese, got {given!r}")
    return found, "given"


def _choices(value, answer: str) -> dict:
    """A multiple-choice record's options by letter and the correct letter (the answer: a letter or an option's
    text)."""
    if isinstance(value, list):
        value = {chr(ord("A") + k): v for k, v in enumerate(value)}
    if not isinstance(value, dict) or len(value) < 2 or not all(
            isinstance(k, str) and isinstance(v, (str, int, float)) and str(v).strip() for k, v in value.items()):
        raise ValueError('field "choices" must hold two options or more: a list, or letters to texts')
    choices = {k.strip().upper(): str(v).strip() for k, v in value.items()}
    letter = answer.strip().strip("()").upper()
    if letter not in choices:
        letter = next((k for k, v in choices.items() if v == answer.strip()), "")
    if not letter:
        raise ValueError(f"the answer {answer!r} is neither an option's letter ({', '.join(choices)}) nor its text")
    return {"choices": choices, "letter": letter}


def _part_sig_figs(part: dict) -> int | None:
    from benchmint.benchmarks.seephys import parse_sig_figs

    return parse_sig_figs(part.get("sig_figs"))


def _unreadable(path: Path) -> str | None:
    """Why a diagram file cannot be decoded, or None."""
    try:
        with Image.open(path) as im:
            im.verify()
    except Exception as exc:  # noqa: BLE001 - any decoder error names the file
        return f"{path}: not a readable image ({exc})"
    return None


def read_problem(row, base: Path) -> dict:
    """A problem record checked and labelled; ValueError naming the field at fault."""
    if not isinstance(row, dict):
        raise ValueError("a problem record must be a JSON object")
    if not isinstance(row.get("question"), str) or not row["question"].strip():
        raise ValueError('missing field "question" (the problem text)')
    parts = _parts(row)
    answer = "; ".join(str(part["answer"]) for part in parts) if parts is not None else row.get("answer")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)) or not str(answer).strip():
        raise ValueError('missing field "answer" (the reference answer, text)')
    split = row.get("multi_part", False)
    if not isinstance(split, bool):
        raise ValueError(f'field "multi_part" must be true or false, got {split!r}')
    if split and ("parts" in row or "choices" in row):
        raise ValueError('"multi_part" asks the model to find the parts: give it without "parts" and "choices"')
    mcq = None
    if "choices" in row:
        mcq = _choices(row["choices"], str(answer))
        answer = mcq["choices"][mcq["letter"]]
    images = row.get("images", row.get("image"))
    images = [images] if isinstance(images, str) else images
    if not isinstance(images, list) or not images or not all(isinstance(i, str) and i for i in images):
        raise ValueError('field "images" must name the diagram file(s), relative to the problems file')
    language, language_from = _language(row)
    out = {"question": row["question"], "answer": str(answer), "images": images,
           "paths": [base / i for i in images], "language": language, "language_from": language_from}
    if mcq is not None:
        out["mcq"] = mcq
    if split:
        out["split"] = True
    if parts is not None:
        out["parts"] = [{"question": part["question"], "answer": str(part["answer"]),
                         "sig_figs": part.get("sig_figs")} for part in parts]
    _labels(row, out)
    if row.get("id") not in (None, ""):
        if isinstance(row["id"], bool) or not isinstance(row["id"], (str, int)):
            raise ValueError(f'field "id" must be text or an integer, got {row["id"]!r}')
        out["id"] = str(row["id"])
    return out


def _parts(row: dict) -> list[dict] | None:
    parts = row.get("parts")
    if parts is None:
        return None
    if not isinstance(parts, list) or len(parts) < 2:
        raise ValueError('field "parts" must list two sub-questions or more, each {question, answer}')
    for k, part in enumerate(parts, 1):
        if not (isinstance(part, dict) and isinstance(part.get("question"), str) and part["question"].strip()
                and isinstance(part.get("answer"), (str, int, float)) and not isinstance(part["answer"], bool)
                and str(part["answer"]).strip()):
            raise ValueError(f"part {k} needs a question and an answer (text)")
        _part_sig_figs(part)  # a bad value names its field here, not in the middle of the run
    if "choices" in row:
        raise ValueError('a record has "parts" or "choices", not both')
    return parts


def _labels(row: dict, out: dict) -> None:
    if row.get("subject") not in (None, ""):
        if row["subject"] not in SUBJECTS:
            raise ValueError(f"subject must be one of {list(SUBJECTS)}, got {row['subject']!r}")
        out["subject"] = row["subject"]
    if row.get("level") not in (None, ""):
        out["level"] = _level(row["level"])
    if row.get("vision_relevance") not in (None, ""):
        rel = RELEVANCE.get(str(row["vision_relevance"]).strip().lower())
        if rel is None:
            raise ValueError(f"vision_relevance must be essential or optional, got {row['vision_relevance']!r}")
        out["vision_relevance"] = rel
    for key in ("img_category", "caption", "solution", "source"):
        if isinstance(row.get(key), str) and row[key].strip():
            out[key] = row[key]
    if row.get("sig_figs") not in (None, ""):
        from benchmint.benchmarks.seephys import parse_sig_figs

        out["sig_figs_given"] = parse_sig_figs(row["sig_figs"])


# ---------------------------------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True)
class SeePhysConfig:
    model: str | None = None  # None: no model stages (the problems' own text and captions)
    repair: bool = True  # OCR repair, with a model
    caption: bool = True  # captions for problems without one, with a model
    max_attempts: int = 3  # replies per stage the checks may refuse
    max_side: int = 4096  # the composite's bound
    image_max_side: int = 1024  # the diagram's longest side as the captioning model sees it
    temperature: float | None = 0.0
    max_tokens: int | None = 2048
    seed: int = 0
    limit: int | None = None
    font: str | None = None  # the font file CJK text is drawn with; None: the first the system has
    labels: bool = True  # labels a problem lacks, written by the model
    text_only: bool = False  # the labelling model is sent no image
    progress: bool = False

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("--max-attempts must be at least 1")
        if self.max_side < 256:
            raise ValueError(f"--max-side must be at least 256, got {self.max_side}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be at least 1, got {self.limit}")
        if self.text_only and self.caption and self.model is not None:
            raise ValueError("--text-only: a caption describes the diagram, which a text-only model does not see; "
                             "add --no-caption")


SeePhysResult = GenerateResult  # the flow's one result shape


def _schema(key: str) -> dict:
    return {"type": "object", "additionalProperties": False, "required": [key],
            "properties": {key: {"type": "string", "minLength": 1}}}


STAGE_KEY = {"repair": "text", "caption": "caption", "mcq": "question", "split": "parts", "label": "labels"}
# A label reply is checked for its shape only (every value is text, or a number for the level); its values are
# checked against the taxonomies afterwards, so a value outside them empties that label and keeps the problem.
LABEL_SCHEMA = {"type": "object", "properties": {
    label: {"type": ["string", "integer"] if label == "level" else "string", "minLength": 1} for label in LABELS}}


def label_request_schema(wanted: list[str]) -> dict:
    """The schema a label request is sent with: the wanted labels, each one of its values (a server that
    enforces schemas then keeps the model inside the taxonomies)."""
    return {"type": "object", "additionalProperties": False, "required": list(wanted),
            "properties": {label: {"type": "string", "enum": allowed_labels(label)} for label in wanted}}
REFUSED = {"repair": "repair_changed_number", "caption": "caption_states_answer", "mcq": "mcq_rewrite_refused",
           "split": "split_refused"}
SPLIT_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["context", "parts"],
                "properties": {"context": {"type": "string"},
                               "parts": {"type": "array", "minItems": 2,
                                         "items": {"type": "object", "additionalProperties": False,
                                                   "required": ["question", "answer"],
                                                   "properties": {"question": {"type": "string", "minLength": 1},
                                                                  "answer": {"type": "string", "minLength": 1}}}}}}


def _targets(p: dict, stage: str) -> list[int | None]:
    """A stage's chains for a problem: one for the problem (None); the repair also one per sub-question the
    record gives (1-based), whose texts are OCR'd as the shared one is (a split's parts come from the repaired
    text, and are not repaired again)."""
    if stage == "repair" and "parts" in p and not p.get("split"):
        return [None, *range(1, len(p["parts"]) + 1)]
    return [None]


def _outcome_key(pid: str, stage: str, part: int | None) -> tuple:
    return (pid, stage) if part is None else (pid, stage, part)


def _repair_text(p: dict, part: int | None) -> str:
    """The text a repair takes: the problem's (its shared text when it has parts), or a given part's."""
    return p["question"] if part is None else p["parts"][part - 1]["question"]


def _of_part(outcome: dict, detail: str | None) -> str | None:
    """A failure's detail, naming the sub-question when it is one's."""
    return detail if "part" not in outcome or detail is None else f"part {outcome['part']}: {detail}"


def _words(stage: str, value: dict) -> str:
    """A reply's words for a refusal's feedback and the rejection."""
    got = value[STAGE_KEY[stage]] if stage not in ("split", "label") else value
    # sorted keys: the words (and the follow-up request that quotes them) are the same read back from the ledger
    return got if isinstance(got, str) else json.dumps(got, ensure_ascii=False, sort_keys=True)


class SeePhysBuilder:
    def __init__(self, problems: str | os.PathLike, out_dir: str | os.PathLike, cfg: SeePhysConfig,
                 roles: dict[str, Role] | None = None, prompts: str | os.PathLike | None = None,
                 leak_grades: str | os.PathLike | None = None) -> None:
        self.source = Path(problems)
        self.leaks = read_leak_grades(leak_grades) if leak_grades is not None else None
        self.leak_grades = str(leak_grades) if leak_grades is not None else None
        self.out = Path(out_dir)
        self.cfg = cfg
        self.prompts = PromptSet("seephys", prompts)
        roles = roles or {}
        self.roles: dict[str, Role] = {}
        if cfg.model is not None:
            if "gen" not in roles:
                raise ValueError("--model needs a server (--base-url)")
            engine = roles["gen"].engine
            if cfg.repair:
                self.t_repair = self.prompts.template("repair.txt", {"TEXT", "FEEDBACK"}, images=False)
                self.roles["repair"] = Role(engine, "repair", json_reply(_schema("text")))
            self.t_mcq = self.prompts.template("mcq.txt", {"STEM", "OPTIONS", "ANSWER", "FEEDBACK"}, images=False)
            self.roles["mcq"] = Role(engine, "mcq", json_reply(_schema("question")))
            self.t_split = self.prompts.template("split.txt", {"QUESTION", "ANSWER", "FEEDBACK"}, images=False)
            self.roles["split"] = Role(engine, "split", json_reply(SPLIT_SCHEMA))
            if cfg.caption:
                self.t_caption = self.prompts.template("caption.txt", {"QUESTION", "FEEDBACK"})
                self.roles["caption"] = Role(engine, "caption", json_reply(_schema("caption")))
            if cfg.labels:
                self.t_label = self.prompts.template("label.txt", {"QUESTION", "CAPTION", "LABELS", "EXAMPLE"})
                self.roles["label"] = Role(engine, "label", json_reply(LABEL_SCHEMA))
        self.errors: list[dict] = []
        self._problems: dict[str, dict] = {}
        # An explicit --font is checked before anything runs; the system's fonts are searched only when a
        # question has CJK text.
        self.cjk_font = find_cjk_font(cfg.font) if cfg.font is not None else None
        self._font_searched = cfg.font is not None

    # ---- inputs
    def _read(self, rejected: list[dict], codes: dict[str, str]) -> list[dict]:
        if not self.source.is_file():
            raise InputError(f"{self.source}: no such problems file (a JSONL of problems)")
        problems: list[dict] = []
        seen: set[str] = set()
        for line, row, problem in iter_jsonl(self.source, "problems"):
            if self.cfg.limit is not None and len(problems) + len(codes) >= self.cfg.limit:
                break
            pid = str(row.get("id")) if isinstance(row, dict) and row.get("id") not in (None, "") else f"line{line}"
            if problem is None:
                try:
                    got = read_problem(row, self.source.parent)
                except ValueError as exc:
                    problem = str(exc)
            if problem is not None:
                codes[pid] = "bad_record"
                rejected.append({"stage": "input", "reason": "bad_record", "id": pid, "line": line,
                                 "detail": f"{self.source}:{line}: {problem}"})
                continue
            got["id"] = got.get("id", pid)
            got["line"] = line
            if got["id"] in seen:
                codes[f"{got['id']}@{line}"] = "duplicate_id"
                rejected.append({"stage": "input", "reason": "duplicate_id", "id": got["id"], "line": line,
                                 "detail": f"{self.source}:{line}: the id {got['id']!r} is used by an earlier line"})
                continue
            missing = [str(p) for p in got["paths"] if not p.is_file()]
            if missing:
                codes[got["id"]] = "image_missing"
                rejected.append({"stage": "input", "reason": "image_missing", "id": got["id"], "line": line,
                                 "detail": f"{self.source}:{line}: no such diagram file: {', '.join(missing)}"})
                continue
            unreadable = [m for m in map(_unreadable, got["paths"]) if m]
            if unreadable:
                codes[got["id"]] = "image_unreadable"
                rejected.append({"stage": "input", "reason": "image_unreadable", "id": got["id"], "line": line,
                                 "detail": f"{self.source}:{line}: {'; '.join(unreadable)}"})
                continue
            seen.add(got["id"])
            if not got.get("split") and self._long(got, rejected, codes):
                continue  # a problem the model splits has each part's answer checked after the split
            for stage, code, what in (("mcq", "mcq_not_rewritten", "a multiple-choice stem becomes an open question"),
                                      ("split", "split_not_done", "a multi_part problem is split into parts")):
                if stage in got and stage not in self.roles:
                    codes[got["id"]] = code
                    rejected.append({"stage": stage, "reason": code, "id": got["id"], "line": line,
                                     "detail": f"{what} only with --model"})
                    break
            else:
                problems.append(got)
        return problems

    @staticmethod
    def _long(p: dict, rejected: list[dict], codes: dict[str, str]) -> bool:
        """Whether an answer (or a part's) explains in more than three sentences: the problem is then rejected."""
        answers = [part["answer"] for part in p.get("parts", [])] or [p["answer"]]
        n = max(sentences_of(a) for a in answers)
        if n > 3:
            codes[p["id"]] = "long_answer"
            rejected.append({"stage": "answer", "reason": "long_answer", "id": p["id"], "line": p["line"],
                             "detail": f"the answer has {n} sentences; answers longer than three are dropped"})
        return n > 3

    # ---- model stages: a chain of units per problem and stage, a refused reply asked again with the reason
    def _unit(self, p: dict, stage: str, attempt: int, refused: list[dict], part: int | None = None) -> Unit:
        """One request of a stage's chain; ``part`` (1-based) names a given sub-question whose own text the
        repair takes, a unit of its own."""
        from benchmint.benchmarks.base import ImagePart as TemplateImage
        from benchmint.models import ChatRequest, ImagePart, Message

        feedback = "".join(f"An earlier reply was refused ({r['reason']}): {r['text']}\n\n" for r in refused)
        if stage == "repair":
            parts = self.t_repair.render({"TEXT": _repair_text(p, part), "FEEDBACK": feedback})
            content: Any = "".join(x.text for x in parts if isinstance(x, TextPart))
        elif stage == "split":
            parts = self.t_split.render({"QUESTION": p["question"], "ANSWER": p["answer"], "FEEDBACK": feedback})
            content = "".join(x.text for x in parts if isinstance(x, TextPart))
        elif stage == "mcq":
            options = "\n".join(f"({k}) {v}" for k, v in p["mcq"]["choices"].items())
            parts = self.t_mcq.render({"STEM": p["question"], "OPTIONS": options, "FEEDBACK": feedback,
                                       "ANSWER": f"({p['mcq']['letter']}) {p['answer']}"})
            content = "".join(x.text for x in parts if isinstance(x, TextPart))
        else:
            images = []
            for path in p["paths"] if stage == "caption" or not self.cfg.text_only else []:
                data = path.read_bytes()
                images.append(TemplateImage(data, "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"))
            if stage == "caption":
                parts = self.t_caption.render({"QUESTION": p["question"], "FEEDBACK": feedback}, images)
            else:
                wanted = self._wanted(p)
                parts = self.t_label.render({
                    "QUESTION": p["question"],
                    "CAPTION": f"Diagram caption: {p['caption']}" if "caption" in p else "",
                    "LABELS": "\n".join(f"- {k}: {', '.join(allowed_labels(k))}" for k in wanted),
                    "EXAMPLE": json.dumps(dict.fromkeys(wanted, "..."))}, images)
            content = tuple(x.text if isinstance(x, TextPart) else ImagePart(x.data, self.cfg.image_max_side)
                            for x in parts)
            if not images:
                content = "".join(content)
        assert self.cfg.model is not None
        # The schema the reply is checked against travels with the request (a server that enforces it, such as
        # llama.cpp's grammar, then shapes the reply to it).
        schema = (SPLIT_SCHEMA if stage == "split" else label_request_schema(self._wanted(p)) if stage == "label"
                  else _schema(STAGE_KEY[stage]))
        request = ChatRequest(self.cfg.model, (Message("user", content),), self.cfg.temperature,
                              max_tokens=self.cfg.max_tokens, seed=self.cfg.seed, schema=schema, schema_name=stage)
        # A part's unit says so in its key and context; the problem's own keep the keys they always had
        where = {} if part is None else {"part": part}
        ctx = {"id": p["id"], "stage": stage, **where, "attempt": attempt, "refused": refused}
        key = content_key(self.roles[stage].engine.key(request).encode("ascii"),
                          {"id": p["id"], "stage": stage, **where, "attempt": attempt})
        label = p["id"] if part is None else f"{p['id']} part {part}"
        return Unit(key, (stage, request, ctx), f"{label} {stage} attempt {attempt}")

    @staticmethod
    def _wanted(p: dict) -> list[str]:
        """The labels a problem lacks (its language counts as lacking when only its script told it)."""
        return [k for k in LABELS if (p.get("language_from") == "script" if k == "language" else k not in p)]

    def _verdict(self, result: dict) -> str | None:
        p = self._problems[result["id"]]
        if result["stage"] == "label":
            return None  # a label is checked against its taxonomy when applied, one at a time
        if result["stage"] == "repair":
            before, after = numbers_in(_repair_text(p, result.get("part"))), numbers_in(result["value"]["text"])
            if before != after:
                return f"the repair changed the numbers {before} to {after}"
            return None
        if result["stage"] == "split":
            return split_problem(p["question"], p["answer"], result["value"])
        if result["stage"] == "mcq":
            return open_rewrite_problem(p["question"], result["value"]["question"], p["mcq"]["choices"])
        answers = [part["answer"] for part in p.get("parts", [])] or [p["answer"]]
        return next((r for a in answers if (r := states_answer(result["value"]["caption"], a))), None)

    def _next(self, result: dict) -> list[Unit]:
        if "value" not in result:
            return []
        reason = self._verdict(result)
        if reason is None or result["attempt"] + 1 >= self.cfg.max_attempts:
            return []
        refused = [*result["refused"], {"reason": reason, "text": _words(result["stage"], result["value"])}]
        return [self._unit(self._problems[result["id"]], result["stage"], result["attempt"] + 1, refused,
                           result.get("part"))]

    def _outcome(self, ledger: Ledger, first: Unit) -> tuple[dict, list[dict]]:
        chain: list[dict] = []
        unit: Unit | None = first
        while unit is not None:
            got = ledger.get(unit.key)
            if got is None:
                break
            chain.append(got[1])
            nxt = self._next(got[1])
            unit = nxt[0] if nxt else None
        last = chain[-1] if chain else None
        stage = first.args[2]["stage"]
        if last is None or last.get("retry") or ("value" not in last and "words" not in last):
            return {"code": "call_failed", "detail": (last or {}).get("error", "not asked yet"),
                    "cause": (last or {}).get("cause")}, chain
        if "value" not in last:
            return {"code": f"{stage}_failed", "detail": last.get("error"), "words": last.get("words")}, chain
        reason = self._verdict(last)
        if reason is not None:
            code = REFUSED[stage]
            return {"code": code, "detail": f"{reason} ({self.cfg.max_attempts} replies refused, --max-attempts)",
                    "words": _words(stage, last["value"])}, chain
        value = last["value"] if stage in ("split", "label") else last["value"][STAGE_KEY[stage]]
        return {"code": "ok", "value": value, "attempts": len(chain)}, chain

    # ---- files
    def _diagram(self, path: Path) -> dict:
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        ext = path.suffix.lower() if path.suffix.lower() in (".png", ".jpg", ".jpeg", ".gif", ".webp") else ".png"
        target = self.out / "images" / f"{sha[:16]}{ext}"
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        return {"path": f"images/{target.name}", "sha256": sha}

    def _font_for(self, question: str) -> dict:
        """The CJK font a question is drawn with, as the composite's key holds it (none for a text without CJK)."""
        if not _CJK.search(question):
            return {}
        if not self._font_searched:
            self.cjk_font, self._font_searched = find_cjk_font(), True
        return {"cjk_font": font_id(self.cjk_font)["sha256"] if self.cjk_font is not None else None}

    def _composite(self, pid: str, question: str, diagrams: list[str]) -> dict:
        images = []
        for rel in diagrams:
            with Image.open(self.out / rel) as im:
                images.append(im.convert("RGB"))
        try:
            image, layout = compose(question, images, self.cfg.seed, pid, self.cfg.max_side,
                                    self.cjk_font if _CJK.search(question) else None)
        except CompositeError as exc:
            return {"error": str(exc), "reason": "composite_failed"}
        data = png_bytes(image)
        sha = hashlib.sha256(data).hexdigest()
        # Named by content: a render of another seed or text in the same folder is another file, so a result the
        # ledger kept always points at its own pixels.
        path = self.out / "vo" / f"{sha[:16]}.png"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return {"path": f"vo/{path.name}", "sha256": sha, "size": list(image.size), "layout": layout}

    # ---- the whole run
    def _stage_batch(self, ledger: Ledger, problems: list[dict], stages: dict[str, Any], trace: list[dict]
                     ) -> dict[tuple, dict]:
        """Run the given stages (name -> which problems take it) as unit chains; each chain's outcome by (id,
        stage), a given part's repair by (id, "repair", part)."""
        firsts = [self._unit(p, stage, 0, [], part) for p in problems for stage, takes in stages.items()
                  if stage in self.roles and takes(p) for part in _targets(p, stage)]
        if not firsts:
            return {}
        run_units(ledger, firsts, lambda outcome, ctx: call_result(outcome, **ctx), RoleExecutor(self.roles),
                  desc="build seephys: " + ", ".join(s for s in stages if s in self.roles), progress=self.cfg.progress,
                  then=lambda unit, result: self._next(result))
        outcomes = {}
        for first in firsts:
            ctx = first.args[2]
            outcome, chain = self._outcome(ledger, first)
            outcomes[_outcome_key(ctx["id"], ctx["stage"], ctx.get("part"))] = outcome
            where = {"part": ctx["part"]} if "part" in ctx else {}
            trace.append({"id": ctx["id"], "stage": ctx["stage"], **where, "outcome": outcome["code"],
                          "steps": [{k: v for k, v in r.items() if k != "cached"} for r in chain]})
        return outcomes

    def _settle(self, problems: list[dict], outcomes: dict, rejected: list[dict], codes: dict[str, str]
                ) -> list[dict]:
        """The problems whose stages all succeeded; a failed call is an error (asked again by the next run), any
        other failure a rejection with its reason."""
        kept = []
        for p in problems:
            # A label reply that is never usable leaves the labels empty (flagged when applied), never drops the
            # problem; a failed call holds it back like any stage's
            chains = [(s, part) for s in ("repair", "split", "mcq", "caption", "label") for part in _targets(p, s)]
            failed = [o | {"stage": s} | ({"part": part} if part is not None else {}) for s, part in chains
                      if (o := outcomes.get(_outcome_key(p["id"], s, part))) is not None and o["code"] != "ok"
                      and (s != "label" or o["code"] == "call_failed")]
            calls = [o for o in failed if o["code"] == "call_failed"]
            if calls:
                codes[p["id"]] = "call_failed"
                self.errors.extend({"kind": "model_call", "stage": o["stage"], "id": p["id"],
                                    **({"part": o["part"]} if "part" in o else {}),
                                    "cause": o.get("cause"), "message": _of_part(o, o["detail"])} for o in calls)
            elif failed:
                codes[p["id"]] = failed[0]["code"]
                rejected.extend({"stage": o["stage"], "reason": o["code"], "id": p["id"], "line": p["line"],
                                 **{k: v for k, v in o.items() if k not in ("code", "stage", "detail")},
                                 "detail": _of_part(o, o.get("detail"))} for o in failed)
            else:
                kept.append(p)
        return kept

    # ---- the whole run
    def run(self) -> SeePhysResult:
        self.out.mkdir(parents=True, exist_ok=True)
        rejected: list[dict] = []
        flagged: list[dict] = []
        trace: list[dict] = []
        codes: dict[str, str] = {}
        problems = self._read(rejected, codes)
        self._problems = {p["id"]: p for p in problems}
        with Ledger(self.out / LEDGER_NAME, "build-seephys") as ledger:
            # The OCR repair and the caption first (the caption is checked against the answer, known already);
            # a multiple-choice stem is rewritten from its repaired text.
            outcomes = self._stage_batch(ledger, problems, {"repair": lambda p: True,
                                                            "caption": lambda p: "caption" not in p}, trace)
            kept = self._settle(problems, outcomes, rejected, codes)
            for p in kept:
                if (p["id"], "repair") in outcomes:
                    p["ocr_text"], p["question"] = p["question"], outcomes[(p["id"], "repair")]["value"]
                for k, part in enumerate(p.get("parts", ()), 1):
                    if (p["id"], "repair", k) in outcomes:
                        part["ocr_text"] = part["question"]
                        part["question"] = outcomes[(p["id"], "repair", k)]["value"]
                if (p["id"], "caption") in outcomes:
                    p["caption"] = outcomes[(p["id"], "caption")]["value"]
                    p["caption_by"] = self.cfg.model
            rewrites = self._stage_batch(ledger, kept, {"mcq": lambda p: "mcq" in p, "split": lambda p: "split" in p,
                                                        "label": lambda p: bool(self._wanted(p))}, trace)
            kept = self._settle(kept, rewrites, rejected, codes)
            for p in kept:
                if (p["id"], "label") in rewrites:
                    self._apply_labels(p, rewrites[(p["id"], "label")])
                if (p["id"], "mcq") in rewrites:
                    p["mcq_stem"], p["question"] = p["question"], rewrites[(p["id"], "mcq")]["value"]
                if (p["id"], "split") in rewrites:
                    split = rewrites[(p["id"], "split")]["value"]
                    p["unsplit"], p["question"] = p["question"], split["context"]
                    p["parts"] = [{**part, "sig_figs": None} for part in split["parts"]]
            kept = [p for p in kept if "unsplit" not in p or not self._long(p, rejected, codes)]
            # Diagrams are kept by content: one file, and one unit, for a diagram several problems share.
            keys = {path: content_key(path.read_bytes()) for p in kept for path in p["paths"]}
            units = {key: Unit(key, (path,), str(path)) for path, key in keys.items()}
            done, _ = run_units(ledger, list(units.values()), self._diagram, SerialExecutor(),
                                desc="build seephys: diagrams")
            by_key = dict(zip(units, done))
            ready = []
            for p in kept:
                p["diagrams"] = [by_key[keys[path]] for path in p["paths"]]
                if any("error" in d for d in p["diagrams"]):
                    codes[p["id"]] = "image_unreadable"
                    rejected.append({"stage": "input", "reason": "image_unreadable", "id": p["id"], "line": p["line"],
                                     "detail": "; ".join(d["error"] for d in p["diagrams"] if "error" in d)})
                else:
                    ready.extend(self._split(p))
            settings = {"seed": self.cfg.seed, "max_side": self.cfg.max_side}
            composites, _ = run_units(
                ledger, [Unit(content_key(q["question"].encode("utf-8"),
                                          {**settings, "id": q["id"], "diagrams": [d["sha256"] for d in q["diagrams"]],
                                           **self._font_for(q["question"])}),
                              (q["id"], q["question"], [d["path"] for d in q["diagrams"]]), f"{q['id']} composite")
                         for q in ready],
                self._composite, SerialExecutor(), desc="build seephys: VO composites", progress=self.cfg.progress)
        items = []
        for q, comp in zip(ready, composites):
            item, flags = self._item(q, comp)
            items.append(item)
            flagged.extend(flags)
            codes[q["problem"]] = "ITEM"
        return self._finish(items, rejected, flagged, trace, codes)

    def _apply_labels(self, p: dict, outcome: dict) -> None:
        """The model's labels set where they are in their taxonomies; each one that is not is left empty, with a
        flag saying why. The language is the exception: eval needs one (it picks the prompt), so the script's
        stays, flagged."""
        wanted = self._wanted(p)
        flags: list[dict] = []
        written: list[str] = []
        def kept(label: str) -> str:
            return f"the script's {p['language']} kept" if label == "language" else "left empty"

        if outcome["code"] != "ok":
            flags.append({"flag": "labels_failed", "words": outcome.get("words"),
                          "detail": f"{outcome['detail']}; " + ", ".join(f"{k} {kept(k)}" for k in wanted)})
        else:
            for label in wanted:
                if label not in outcome["value"]:
                    flags.append({"flag": "label_not_given", "detail": f"the model gave no {label}; {kept(label)}"})
                    continue
                got, why = label_value(label, outcome["value"][label], p["question"])
                if why is None:
                    p[label] = got
                    written.append(label)
                else:
                    flag, detail = why.split(": ", 1)
                    flags.append({"flag": flag, "detail": f"{detail}; {kept(label)}"})
        if written:
            p["labelled"] = {"model": self.cfg.model, "labels": written}
        p["label_flags"] = flags

    @staticmethod
    def _split(p: dict) -> list[dict]:
        """A problem's items: itself, or one per sub-question, each with the shared text and the diagrams."""
        if "parts" not in p:
            return [{**p, "problem": p["id"]}]
        out = []
        for k, part in enumerate(p["parts"], 1):
            out.append({**p, "problem": p["id"], "id": f"{p['id']}-{k}", "part": k, "context": p["question"],
                        "question": f"{p['question'].rstrip()}\n\n{part['question'].strip()}",
                        "answer": part["answer"], "sig_figs_given": _part_sig_figs(part),
                        **({"part_ocr_text": part["ocr_text"]} if "ocr_text" in part else {})})
        return out

    def _item(self, p: dict, comp: dict) -> tuple[dict, list[dict]]:
        flags = []
        derived = sig_figs_of(p["answer"])
        given = p.get("sig_figs_given")
        if given is not None and derived is not None and given != derived:
            flags.append({"id": p["id"], "flag": "sig_figs_mismatch",
                          "detail": f"sig_figs {given} given, the answer {p['answer']!r} is written with {derived}"})
        sig = given if given is not None else derived
        item = {"id": p["id"], "question": p["question"], "answer": p["answer"],
                **({"language": p["language"]} if "language" in p else {}),
                "images": [d["path"] for d in p["diagrams"]], "sig_figs": str(sig) if sig is not None else "",
                **{k: p[k] for k in ("subject", "level", "img_category", "vision_relevance", "caption",
                                     "source") if k in p}}
        flags.extend({"id": p["id"], **f} for f in p.get("label_flags", ()))
        meta: dict[str, Any] = {"line": p["line"], "sig_figs_from": "given" if given is not None else
                                ("answer" if derived is not None else None)}
        if "error" in comp:
            flags.append({"id": p["id"], "flag": "no_composite", "detail": comp["error"]})
        else:
            item["composite_image"] = comp["path"]
            meta["composite"] = {k: comp[k] for k in ("sha256", "size", "layout")}
        if self.leaks is not None and p["id"] in self.leaks:
            meta["leak"] = self.leaks[p["id"]]
            if self.leaks[p["id"]]["solved"]:
                flags.append({"id": p["id"], "flag": "solved_without_diagram",
                              "detail": f"{self.leaks[p['id']]['model']} answered it right in "
                                        f"{self.leaks[p['id']]['setting']} ({self.leak_grades})"})
        if "img_category" in p and p["img_category"] not in IMG_CATEGORIES:
            flags.append({"id": p["id"], "flag": "unknown_img_category",
                          "detail": f"img_category {p['img_category']!r} is none of the release's diagram types"})
        if "caption" not in p:
            flags.append({"id": p["id"], "flag": "no_caption", "detail": "no caption given or made: not in TC"})
        if "part" in p:
            meta["problem"], meta["part"] = p["problem"], p["part"]
        if "mcq" in p:
            meta["mcq"] = {"stem": p["mcq_stem"], **p["mcq"]}
        if "unsplit" in p:
            meta["unsplit"] = p["unsplit"]
        for key in ("ocr_text", "part_ocr_text", "caption_by", "labelled", "solution"):
            if key in p:
                meta[key] = p[key]
        item["meta"] = meta
        return item, flags

    def _finish(self, items, rejected, flagged, trace, codes) -> SeePhysResult:
        engine = next(iter(self.roles.values())).engine if self.roles else None
        settings = asdict(self.cfg)
        del settings["progress"]
        run = {"benchmark": "seephys", "source": str(self.source), "settings": settings,
               "leak_grades": self.leak_grades,
               "prompts": self.prompts.record(),
               "counts": {"problems": len(codes), "items": len(items), "rejected": len(rejected),
                          "flagged": len(flagged), "errors": len(self.errors),
                          "composites": sum(1 for i in items if "composite_image" in i),
                          "captions": sum(1 for i in items if "caption" in i)},
               "problems": code_counts(codes.values(), CODES),
               "flags": dict(sorted(Counter(f["flag"] for f in flagged).items())),
               "cjk_font": ({"path": self.cjk_font, **font_id(self.cjk_font)} if self.cjk_font is not None
                            else "none found" if self._font_searched else "not needed"),
               "calls": engine.accounting.summary() if engine is not None else None}
        write_jsonl(self.out / "flagged.jsonl", flagged)
        write_outputs(self.out, items, rejected, trace, self.errors, run)
        return SeePhysResult(self.out, run, len(items), len(rejected), list(self.errors))


def read_leak_grades(path: str | os.PathLike) -> dict[str, dict]:
    """A leak check's verdicts by item id: the ``grades.jsonl`` of ``benchmint grade`` over an eval of the built
    items without their diagrams (setting TO, by a model that may search). An item any row scores 1 is solved."""
    found: dict[str, dict] = {}
    for line, row, problem in iter_jsonl(path, "leak-check grades"):
        if problem is None and not (isinstance(row, dict) and isinstance(row.get("id"), (str, int))
                                    and isinstance(row.get("score"), (int, float))):
            problem = 'a grade row needs "id" and a numeric "score"'
        if problem is not None:
            raise InputError(f"{path}:{line}: {problem}")
        setting = row.get("setting")
        if setting not in (None, "TO"):
            raise InputError(f"{path}:{line}: a leak check grades answers given without the diagram (setting TO), "
                             f"not {setting}")
        rid = str(row["id"])
        seen = found.get(rid, {"solved": False, "model": row.get("model"), "setting": "TO", "scores": []})
        seen["scores"].append(row["score"])
        if row["score"] >= 1:
            seen["solved"], seen["model"] = True, row.get("model")
        found[rid] = seen
    return found


def build(problems, out_dir, cfg: SeePhysConfig, roles: dict[str, Role] | None = None,
          prompts=None, leak_grades=None) -> SeePhysResult:
    """Build SeePhys items from a problems JSONL; see the module docstring."""
    return SeePhysBuilder(problems, out_dir, cfg, roles, prompts, leak_grades).run()


__all__ = ["SeePhysConfig", "SeePhysResult", "build", "compose", "numbers_in", "read_problem", "sentences_of",
           "sig_figs_of", "states_answer"]
