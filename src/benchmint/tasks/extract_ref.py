"""Reference answer extractor: raw model output text -> answer set.

This module is the specification of answer extraction.  It is written as a
small, explicit algorithm so that a compiled port can reproduce it exactly:
pure functions, no state, no locale, no Unicode case folding, and regular
expressions restricted to literals, character classes, ``? * +``, alternation
and non-capturing groups (no look-around, no back-references, no ``\\b``,
``\\s``, ``\\d`` or ``\\w``).  ``finditer`` is used with its usual meaning:
leftmost, non-overlapping matches, alternatives tried in the order written.

Public API
==========
``extract_choices(text)``  -> sorted unique uppercase letters, or None.
``extract_hkls(text)``     -> sorted unique tuples of 3 or 4 ints, or None.
``extract(text, task)``    -> by answer kind (``benchmint.tasks``): ``"mcq"`` /
                              ``"hkl"``; an unknown name raises ValueError.

None means "no answer could be read".  An empty list is returned only when the
output explicitly gives an empty answer (a JSON ``[]`` value).  A non-string
``text`` gives None.

Definitions used below
======================
* Positions are indices into the Python string (code points).  A port that
  works on UTF-8 bytes must treat each non-ASCII character named here
  (``：，、；！？。（）``, CJK ideographs, U+00A0, U+3000, U+2212, ...) as one
  unit; since only ASCII ``A``-``Z`` are ever case-mapped, offsets in the
  original and the lowered text always agree.
* LOWER(text): ASCII ``A``-``Z`` mapped to ``a``-``z``, everything else kept.
  All marker and word searches run on LOWER(text); letters are read from the
  original text.
* LETTER: ASCII ``A``-``Z`` / ``a``-``z`` only.  DIGIT: ``0``-``9`` only.
* HSPACE: space, tab, U+00A0, U+3000.  SPACE: HSPACE plus ``\\n \\r \\f \\v``.
  A LINE BREAK is ``\\r\\n``, ``\\n`` or ``\\r``.  A line is BLANK when it holds
  only SPACE characters.
* WORD at i: the maximal run of LETTERs starting at i (in LOWER(text)).
* A marker match [s, e) is LETTER-BOUNDED when not (text[s] is a LETTER and
  text[s-1] is a LETTER) and not (text[e-1] is a LETTER and text[e] is a
  LETTER).  Marker matches that are not letter-bounded are discarded.
* FOLD-WIDTH(text) (multiple choice only, applied to the whole output before
  every stage): the full-width letters U+FF21-U+FF3A and U+FF41-U+FF5A
  (``Ａ``, ``ｃ``) replaced by ASCII ``A``-``Z`` / ``a``-``z``.  Full-width
  brackets and punctuation are named where they count.
* STRIP-WRAPPERS(s): strip SPACE from both ends, then repeat until nothing
  changes: drop one trailing ``.`` or ``。``; or drop one surrounding pair of
  ``**``/``**``, ``__``/``__``, `````/`````, ``$``/``$``, ``"``/``"``,
  ``'``/``'``, ``“``/``”`` (each followed by stripping SPACE again).

JSON stage (both tasks, tried first)
====================================
J1. Candidates, each a span [start, end) of the text:
    a. every fenced block: a ````` ``` ````` followed by an optional tag of
       LETTERs, DIGITs and ``_ + -``; the content runs to the next
       ````` ``` `````; the pair is consumed and the search goes on after it;
    b. the whole text;
    c. every balanced ``{ ... }`` pair, found in one left-to-right pass that
       keeps a stack of open-brace positions.  While the stack is non-empty a
       ``"`` opens a JSON string; inside a string ``\\`` escapes the next
       character and ``"`` closes it; braces inside strings are ignored.  At
       depth 0 quotes mean nothing.  Unmatched braces produce nothing.
J2. A candidate's text is stripped of SPACE; it must start with ``{`` or
    ``[`` and is given to Python's ``json.loads`` (a failure, or nesting
    deeper than 512 levels, means "not a candidate"; note that it also accepts
    ``NaN``/``Infinity`` and keeps the last of exactly repeated keys).  For
    type c the text must contain ``"`` (a dict with a key always does).
    * A dict QUALIFIES when one of its keys, mapped by LOWER and compared
      exactly, is in the task's key list; the first key of that list present
      in the dict is used (for two dict keys with the same LOWER form, the
      first in document order).
    * A list that is the whole candidate text of a type a or b candidate is
      a BARE ARRAY: it qualifies only when its value can be read (below).
    * Anything else does not qualify.
J3. Qualifying candidates are ranked by end offset (largest first), ties by
    start offset (smallest first, i.e. the enclosing object wins).  The best
    one decides the answer: its value is read; if that fails the result is
    None and no text rule is tried.  If none qualifies, go on to the text
    stages.

MCQ keys: final_answer, answer, answers, correct_options, choice, choices,
selected, options.
MCQ values: a string read with EXACT-LIST; or a list whose elements are all
such strings (union of their letters; ``[]`` gives ``[]``).  Anything else
(numbers, null, dicts, a string that is not an EXACT-LIST) fails.

HKL keys: max_peak_hkls, final_answer, answer, answers, hkls, hkl,
miller_indices.
HKL values: a list of 3 or 4 INTs (one hkl); or a list whose elements are each
a list of 3 or 4 INTs or a string read with EXACT-HKLS (union; ``[]`` gives
``[]``); or a string read with EXACT-HKLS.  INT: a JSON integer (``true`` and
``false`` are not integers) or a finite float with an integral value.
Anything else fails.

Multiple-choice letters: extract_choices
========================================
LIST grammar (read at position i of the original text):
  L0. If LOWER(text) has ``n/a`` at i not followed by a LETTER: no list.
  L1. ITEM := ``**``? CORE ``**``?   where CORE is one of
      * OPEN RUN CLOSE, with OPEN/CLOSE ``(``/``)``, ``(``/``）``,
        ``（``/``）``, ``（``/``)``, ``[``/``]``;
      * RUN CLOSE with CLOSE ``)`` or ``）`` (the ``B)`` form);
      * RUN.
      RUN is a maximal run of LETTERs whose first character is not preceded
      by a LETTER.  A run of length 1 is one letter of either case
      (uppercased).  A longer run must be all UPPERCASE with strictly
      increasing letters (``AC``, ``ABD``); it stands for each letter.  Items
      written with CLOSE are BRACKETED.
      GLOSS := HSPACE* (``(`` or ``（``) then 1 to GLOSS_MAX = 200 characters
      none of which is ``( ) （ ）`` or a line break, then ``)`` or ``）``:
      the option's text repeated after its letter (``A (Tunneling)``).
  L2. SEP := CLOSERS HSPACE* P? HSPACE* W? HSPACE* OPENERS, where CLOSERS is
      a run (maybe empty) of ``}`` and ``$``, P is one of
      ``, ， 、 ; ； / & +``, W is ``and`` (LETTER-bounded), ``以及``, ``和``
      or ``及``, and OPENERS is an optional ``$`` followed by an optional
      LaTeX opener ``\\text{ \\textbf{ \\textrm{ \\mathrm{ \\mathbf{``
      (``$\\mathrm{A}$ and $\\mathrm{C}$``); a SEP must contain P, W or at
      least one HSPACE.  Line breaks never separate items.  ``or`` is not a
      separator.
  L3. LIST := ITEM (SEP ITEM)*, read greedily: after each item a SEP followed
      by an ITEM extends the list; when none follows, a GLOSS right after the
      item is taken into it (its end moves past the GLOSS) and a SEP followed
      by an ITEM is tried once more; otherwise the list ends there.
  L4. TERMINATOR at the end position p of the list (the last item's end):
      a. fail if, after HSPACE*, an optional one of ``, ， ; ；`` and
         HSPACE*, the text continues with ``or`` or ``and/or`` (not followed
         by a LETTER), ``或`` or ``还是`` (ambiguous: "A or C", "A, or C");
      b. accept at the end of the text, also after HSPACE*;
      c. accept if, after HSPACE*, the next character is one of
         ``. , ; ! ? 。 ， ； ！ ？ 、 … ) ] } （ ） * " ' $ ` <`` or a line break
         (not ``:``, so "A: correct, B: wrong" style lines are never read),
         or is a CJK ideograph (U+4E00-U+9FFF; Chinese text has no spaces),
         or is ``\\`` followed by ``)`` or ``]`` (the end of ``\\(A\\)``);
      d. otherwise at least one HSPACE is required, and then accept if the
         last item is BRACKETED (``(B) 3.2 nm``: the rest is option text), or
         the next character is one of ``( - – —``, or the next WORD is one of
         because since as is are was were which that for based given due
         with and but so while whereas only; after is/are/was/were the list
         fails when the following WORD is not, incorrect, wrong, false or
         invalid;
      e. fail otherwise.
SKIP (after a marker, at i): repeatedly skip SPACE, the decorations
  ``* _ ` " ' $ : ：``, the LaTeX openers ``\\text{ \\textbf{ \\textrm{
  \\mathrm{ \\mathbf{ \\( \\[``, ``选项``, and (when not preceded by a
  LETTER) the WORDs option options choice choices letter letters statement
  statements the therefore thus hence clearly likely probably definitely
  most both.
EXACT-LIST(s): s2 = STRIP-WRAPPERS(s); SKIP at 0; read a LIST there; it must
  end exactly at the end of s2.  Letters are returned uppercase, unique,
  sorted.

Order of the stages:
C1. JSON stage with the MCQ keys.
C2. Markers.  Every regex below is run with ``finditer`` over LOWER(text)
    (H = ``[ \\t\\u00a0\\u3000]``, CONN = ``H*[:：=] | H+(is|are) |
    H+(would|should|will|must)H+be``, BOLD = ``(H*(\\*\\*|__))?``; the
    patterns never put two quantified H next to each other, so matching is
    linear); each letter-bounded match gives a candidate whose position is
    the match end:
      ANSWER    ``answers?(\\(s\\))?(H+(choice|option|letter)s?)?BOLD CONN``
      HEADING   ``answers?BOLD H*(\\r|\\n)``
      CORRECT   ``(correct|right|true|best)H+(option|choice|statement|answer)s?(\\(s\\))?BOLD CONN``
      CHOOSE    ``i(H+(would|will)|'d|’d|'ll|’ll)?H+(choose|select|pick|goH+with)``
                ``| myH+(finalH+)?(choice|selection|pick)s?CONN``
      CHINESE   ``(答案|正确的?选项|正确的是|选择|选)(应该是|应该为|应为|应是|是|为)?``
      TAG       ``<answer>``
      BOXED     ``\\\\(boxed|fbox)H*{``: position after the ``{``; the content
                runs to the matching ``}`` (plain depth count over the whole
                text: one pass with a stack of open-brace positions);
                candidates without a matching brace, or whose content is
                longer than SPAN_MAX = 1000 characters, are dropped.
      REVERSE   ``(option|choice|statement)s?H+``
    (``final``/``correct`` before ``answer`` needs no pattern of its own: the
    list starts at the same place.  ``故选``/``应选`` are covered by ``选``.)
    Candidates are tried by position, largest first (ties: the order of the
    table).  The first that yields a list wins:
      ANSWER, HEADING, CORRECT, CHOOSE, CHINESE, TAG: first BULLETS; when
        that does not apply, SKIP, read a LIST, check its TERMINATOR;
      BOXED: the content with every ``\\\\`` + LETTERs command removed, ``\\\\``
        + one other character and ``~`` replaced by a space, and ``{ }``
        removed, read as EXACT-LIST;
      REVERSE: read a LIST right at the position, check its TERMINATOR, then
        require ``H+(is|are)H+(theH+)?(bothH+|allH+|alsoH+)?(correct|right|true)``
        not followed by a LETTER ("Options A and C are correct").
    BULLETS (after a forward marker at p): applies when the rest of the
      marker's line holds only HSPACE and ``* _ : ：`` (for HEADING, whose
      match ends with the line break, it is empty) and, after any blank
      lines, the next line starts with HSPACE* BULLET HSPACE+ (BULLET is
      ``-``, ``*`` or ``•``).  Then every such bullet line (blank lines
      between them allowed, the first other line ends the run) must give a
      list: SKIP after the bullet without leaving the line, read a LIST,
      check its TERMINATOR.  The answer is the union; one failing bullet
      line makes the candidate fail (no fall-back to SKIP + LIST).
C3. Bare answer: the whole text as EXACT-LIST; else, if the text has two or
    more non-blank lines, the union over all of them when every non-blank
    line is an EXACT-LIST; else the last non-blank line as EXACT-LIST; else
    the text as OPTION-LINE.
    OPTION-LINE(s): s stripped of SPACE must hold no line break.  At its
    start: an optional ``**``; then either the WORD ``option`` or ``choice``
    and HSPACE+, then an uppercase LETTER not followed by a LETTER, then
    ``:``, ``：``, ``.`` or ``)``; or ``(`` or ``（``, an uppercase LETTER,
    ``)`` or ``）``.  Then an optional ``**``, HSPACE*, and the option's text,
    which must start with a CJK ideograph, or with a LETTER after at least
    one HSPACE, and whose first WORD (when it starts with a LETTER) is none
    of the terminator words of L4d, the negations of L4d, ``or``,
    ``correct``, ``right``, ``true`` and ``valid``: ``(C) SEM image of
    alumina`` and ``Option C: SEM micrograph`` are C; ``(A) is wrong``,
    ``Option A: correct`` and ``(a) shows grains`` are not read.
C4. Otherwise None.  Letters in reasoning are never collected on their own.

Forms, with what they give (each is a row of the golden corpus,
tests/data/extract_golden.jsonl, read the same by the compiled port):

=========================================  ===========  =======================
output                                     letters      rule
=========================================  ===========  =======================
``Answer: A, C``                           A C          ANSWER, LIST
``答案：Ａ``                                 A            FOLD-WIDTH, CHINESE
``ＡＢ``                                     A B          FOLD-WIDTH, C3
``The answer is both A and B.``            A B          SKIP ``both``
``Both A and C``                           A C          C3, SKIP ``both``
``Answer: \\(A\\)``                        A            SKIP ``\\(``, L4c
``Answer: A (Tunneling) and C (Force)``    A C          GLOSS
``Answer: $\\mathrm{A}$ and $\\mathrm{C}$``  A C          SEP CLOSERS/OPENERS
``(C) SEM image of alumina``               C            OPTION-LINE
``Option C: SEM micrograph of sintered grains``  C       OPTION-LINE
``Answer: A or C``                         (none)       L4a: a hedge
``Answer: A (Tunneling) or C (Force)``     (none)       GLOSS, then L4a
``The answer is not A; it is C.``          (none)       negation, no marker
``(A) is wrong``                           (none)       OPTION-LINE word
``Option A: correct``                      (none)       OPTION-LINE word
=========================================  ===========  =======================

Miller indices: extract_hkls
============================
PIECE (at i): ``\\overline{D}`` or ``\\bar{D}`` (D = 1-3 DIGITs, value -D);
  ``\\bar`` directly followed by one DIGIT (its negation); or an optional
  minus (``-`` or U+2212) followed by a run of DIGITs, each DIGIT optionally
  followed by a combining overline (U+0304 or U+0305).
INDICES of pieces, COMPACT mode (no separators): a bar piece is one index; a
  digit run gives one index per DIGIT, the minus applying to the first DIGIT,
  a combining overline negating its DIGIT (minus plus overline on the same
  DIGIT is invalid).  SPACED mode: every piece is one index, at most 3
  DIGITs; an overline is only allowed on a single DIGIT without minus.
DELIMITED token: OPEN HSPACE* PIECE (SEP? PIECE)* SEP? CLOSE with OPEN/CLOSE
  ``()`` ``[]`` ``{}`` ``<>`` ``⟨⟩`` ``（）``; CLOSE may be preceded by ``\\\\``
  (``\\{110\\}``).  SEP is a run of HSPACE and at most one ``,``.  If some
  pieces are separated and some adjacent the token is invalid; all separated
  means SPACED mode, all adjacent COMPACT mode.  Valid with 3 or 4 indices.
BARE token: a maximal run of adjacent pieces, COMPACT mode, 3 or 4 indices.
  Invalid when the character before it is a LETTER, DIGIT or one of
  ``_ / ^ ° % # + × \\ - − ' Å θ μ µ``, or the character after it is a
  LETTER, DIGIT or one of those, or when a neighbouring ``. , :`` has a
  DIGIT on its far side (decimals, ratios, thousands).  With 4 indices the
  first three must sum to 0 (Miller-Bravais i = -(h+k)); this rejects years
  like 2019.  The check is not applied to delimited tokens.
SCAN(a, b): left to right; at an OPEN try a delimited token (on success jump
  past it, else advance one); at a DIGIT, minus or ``\\\\`` read a bare run (jump
  past the whole run, keeping it if valid); else advance one.  The result is
  the delimited tokens if there are any, otherwise the bare tokens.
EXACT-HKLS(s): s2 = STRIP-WRAPPERS(s); s2 must be TOKEN (HSEP TOKEN)* HSEP?
  where TOKEN is a delimited or bare token and HSEP a run of SPACE, ``, ; ，
  、 ； &`` and the words ``and`` (LETTER-bounded), ``和``, ``及``.

Order of the stages:
H1. JSON stage with the HKL keys.
H2. Markers: ANSWER, HEADING, CORRECT, CHOOSE, CHINESE, TAG and BOXED as for
    MCQ, plus HKLMARK ``hk(i)?ls?|millerH+ind(ices|exes|ex)|(peak|reflection)s?``
    ``(CONN|H+correspond(s|ing)?H+to)`` ``|SUPERLATIVE H+((diffraction|xrd|bragg)H+)?``
    ``(peak|reflection)s?`` with SUPERLATIVE ``strongest|mostH+intense|``
    ``highest(H+intensity)?|maximum(H+intensity)?|tallest|dominant``.
    Candidates by position, largest first (ties: the order just listed,
    HKLMARK after TAG, BOXED last), and only the first
    MAX_HKL_CANDIDATES = 64 of them are tried.  All span computations for a
    candidate at position p treat the text as ending at p + SPAN_MAX (the
    line end, paragraph and CUT are looked for only up to there; the
    neighbour checks of bare tokens still see the real text).  The span of a
    BOXED candidate is its content; for the others it is the rest of the
    line, CUT at the first sentence end.  If that span has no token and the
    rest of the line holds only SPACE and ``* _ # : ： ` $``, the span is
    instead the next paragraph (blank lines skipped, then lines up to the
    next blank line), also CUT.  The first candidate whose span SCAN is
    non-empty wins.
    CUT(a, b): the first k in [a, b) where text[k] is ``。 ！ ？``, or where
    text[k] is ``. ! ?`` followed by one or more SPACE and then an uppercase
    LETTER ("(111). The (200) peak is weaker" keeps only (111)); else b.
H3. Bare answer: the whole text as EXACT-HKLS; else the last non-blank line
    as EXACT-HKLS.
H4. Otherwise None.  (0,0,0) and other unphysical indices are kept.
"""

from __future__ import annotations

import json
import re

from benchmint.io import nesting_error

__all__ = ["extract", "extract_choices", "extract_hkls", "ascii_lower"]

# ---------------------------------------------------------------------------
# character classes

_ASCII_LOWER_TABLE = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

_HSPACE = " \t\u00a0\u3000"
_SPACE = _HSPACE + "\n\r\f\v"
_LINE_BREAK = "\n\r"


def ascii_lower(s: str) -> str:
    """Lowercase ASCII A-Z only; every other character (and so every offset) is kept."""
    return s.translate(_ASCII_LOWER_TABLE)


def _is_letter(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_upper(c: str) -> bool:
    return "A" <= c <= "Z"


def _is_digit(c: str) -> bool:
    return "0" <= c <= "9"


def _is_cjk(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff"


def _letter_at(s: str, i: int) -> bool:
    return 0 <= i < len(s) and _is_letter(s[i])


def _digit_at(s: str, i: int) -> bool:
    return 0 <= i < len(s) and _is_digit(s[i])


def _skip(s: str, i: int, chars: str) -> int:
    n = len(s)
    while i < n and s[i] in chars:
        i += 1
    return i


def _word_at(lo: str, i: int) -> str:
    j = i
    n = len(lo)
    while j < n and _is_letter(lo[j]):
        j += 1
    return lo[i:j]


def _strip_space(s: str) -> str:
    return s.strip(_SPACE)


def _letter_bounded(lo: str, start: int, end: int) -> bool:
    if start < end:
        if _is_letter(lo[start]) and _letter_at(lo, start - 1):
            return False
        if _is_letter(lo[end - 1]) and _letter_at(lo, end):
            return False
    return True


def _line_end(s: str, i: int, n: int) -> int:
    """First line break at or after i, or n (an upper bound <= len(s))."""
    while i < n and s[i] not in _LINE_BREAK:
        i += 1
    return i


def _split_lines(s: str) -> list[str]:
    lines = []
    start = 0
    i = 0
    n = len(s)
    while i < n:
        if s[i] in _LINE_BREAK:
            lines.append(s[start:i])
            i += 2 if (s[i] == "\r" and i + 1 < n and s[i + 1] == "\n") else 1
            start = i
        else:
            i += 1
    lines.append(s[start:])
    return lines


_WRAPPER_PAIRS = (("**", "**"), ("__", "__"), ("`", "`"), ("$", "$"), ('"', '"'), ("'", "'"), ("\u201c", "\u201d"))


def _strip_wrappers(s: str) -> str:
    """STRIP-WRAPPERS, on indices so that long runs of wrapper characters stay linear."""
    a, b = 0, len(s)
    while a < b and s[a] in _SPACE:
        a += 1
    while b > a and s[b - 1] in _SPACE:
        b -= 1
    changed = True
    while changed and a < b:
        changed = False
        if s[b - 1] in ".\u3002":
            b -= 1
            changed = True
        else:
            for left, right in _WRAPPER_PAIRS:
                if b - a >= len(left) + len(right) and s.startswith(left, a) and s.startswith(right, b - len(right)):
                    a += len(left)
                    b -= len(right)
                    changed = True
                    break
        if changed:
            while a < b and s[a] in _SPACE:
                a += 1
            while b > a and s[b - 1] in _SPACE:
                b -= 1
    return s[a:b]


SPAN_MAX = 1000
MAX_HKL_CANDIDATES = 64


def _brace_pairs(s: str) -> dict[int, int]:
    """Position of each ``{`` -> position of its matching ``}`` (plain depth count, one pass)."""
    pairs = {}
    stack: list[int] = []
    for i, c in enumerate(s):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


def _boxed_candidates(s: str, lo: str) -> list[tuple[int, int]]:
    """(content start, content end) of every BOXED marker kept by the rules."""
    out = []
    pairs = None
    for m in _RE_BOXED.finditer(lo):
        if pairs is None:
            pairs = _brace_pairs(s)
        close = pairs.get(m.end() - 1)
        if close is not None and close - m.end() <= SPAN_MAX:
            out.append((m.end(), close))
    return out


# ---------------------------------------------------------------------------
# marker patterns (run on the ASCII-lowered text)

_H = "[ \t\u00a0\u3000]"
_CONN = rf"(?:{_H}*[:\uff1a=]|{_H}+(?:is|are)|{_H}+(?:would|should|will|must){_H}+be)"

_BOLD = rf"(?:{_H}*(?:\*\*|__))?"
_RE_ANSWER = re.compile(rf"answers?(?:\(s\))?(?:{_H}+(?:choice|option|letter)s?)?{_BOLD}{_CONN}")
_RE_HEADING = re.compile(rf"answers?{_BOLD}{_H}*[\r\n]")
_RE_CORRECT = re.compile(
    rf"(?:correct|right|true|best){_H}+(?:option|choice|statement|answer)s?(?:\(s\))?{_BOLD}{_CONN}")
_RE_CHOOSE = re.compile(
    rf"i(?:{_H}+(?:would|will)|'d|\u2019d|'ll|\u2019ll)?{_H}+(?:choose|select|pick|go{_H}+with)"
    rf"|my{_H}+(?:final{_H}+)?(?:choice|selection|pick)s?{_CONN}")
_RE_CHINESE = re.compile("(?:答案|正确的?选项|正确的是|选择|选)(?:应该是|应该为|应为|应是|是|为)?")
_RE_TAG = re.compile("<answer>")
_RE_BOXED = re.compile(rf"\\(?:boxed|fbox){_H}*\{{")
_RE_REVERSE = re.compile(rf"(?:option|choice|statement)s?{_H}+")
_RE_REVERSE_TAIL = re.compile(
    rf"{_H}+(?:is|are){_H}+(?:the{_H}+)?(?:both{_H}+|all{_H}+|also{_H}+)?(?:correct|right|true)")
_RE_HKL_MARK = re.compile(
    rf"hki?ls?|miller{_H}+ind(?:ices|exes|ex)"
    rf"|(?:peak|reflection)s?(?:{_CONN}|{_H}+correspond(?:s|ing)?{_H}+to)"
    rf"|(?:strongest|most{_H}+intense|highest(?:{_H}+intensity)?|maximum(?:{_H}+intensity)?|tallest|dominant)"
    rf"{_H}+(?:(?:diffraction|xrd|bragg){_H}+)?(?:peak|reflection)s?")
_RE_LATEX_CMD = re.compile(r"\\[A-Za-z]+")
_RE_LATEX_OTHER = re.compile(r"\\[^A-Za-z]")

_FORWARD_MARKERS = (_RE_ANSWER, _RE_HEADING, _RE_CORRECT, _RE_CHOOSE, _RE_CHINESE, _RE_TAG)


def _marker_positions(lo: str, patterns) -> list[int]:
    out = []
    for rx in patterns:
        for m in rx.finditer(lo):
            if _letter_bounded(lo, m.start(), m.end()):
                out.append(m.end())
    return out


# ---------------------------------------------------------------------------
# JSON stage

_MCQ_KEYS = ("final_answer", "answer", "answers", "correct_options", "choice", "choices", "selected", "options")
_HKL_KEYS = ("max_peak_hkls", "final_answer", "answer", "answers", "hkls", "hkl", "miller_indices")


def _json_spans(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, may_be_bare_array) for every JSON candidate (rule J1)."""
    n = len(text)
    spans = []
    i = 0
    while True:
        a = text.find("```", i)
        if a < 0:
            break
        j = a + 3
        while j < n and (_is_letter(text[j]) or _is_digit(text[j]) or text[j] in "_+-"):
            j += 1
        b = text.find("```", j)
        if b < 0:
            break
        spans.append((j, b, True))
        i = b + 3
    spans.append((0, n, True))
    stack: list[int] = []
    in_str = False
    esc = False
    for idx in range(n):
        c = text[idx]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == "{":
            stack.append(idx)
        elif c == "}":
            if stack:
                spans.append((stack.pop(), idx + 1, False))
        elif c == '"' and stack:
            in_str = True
    return spans


def _lookup_key(d: dict, keys: tuple[str, ...]):
    lowered: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(k, str):
            lowered.setdefault(ascii_lower(k), v)
    for key in keys:
        if key in lowered:
            return True, lowered[key]
    return False, None


def _json_stage(text: str, keys: tuple[str, ...], read_value):
    """Rules J1-J3: (True, result-or-None) if a candidate qualifies, else (False, None)."""
    found = []
    for start, end, may_be_bare in _json_spans(text):
        chunk = _strip_space(text[start:end])
        if not chunk or chunk[0] not in "{[":
            continue
        if not may_be_bare and '"' not in chunk:
            continue
        if nesting_error(chunk):  # a fixed bound: where Python's own lies depends on the caller's stack
            continue
        try:
            obj = json.loads(chunk)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            has, value = _lookup_key(obj, keys)
            if has:
                found.append((end, start, True, value))
        elif isinstance(obj, list) and may_be_bare:
            found.append((end, start, False, obj))
    found.sort(key=lambda t: (-t[0], t[1]))
    for _end, _start, is_dict, value in found:
        result = read_value(value)
        if is_dict:
            return True, result
        if result is not None:
            return True, result
    return False, None


# ---------------------------------------------------------------------------
# LIST grammar (multiple choice)

_OPEN_CLOSE = {"(": ")\uff09", "\uff08": "\uff09)", "[": "]"}
_SEP_PUNCT = ",\uff0c\u3001;\uff1b/&+"
_TERM_CHARS = ".,;!?\u3002\uff0c\uff1b\uff01\uff1f\u3001\u2026)]}\uff08\uff09*\"'$`<\n\r"
_TERM_WORDS = frozenset("because since as is are was were which that for based given due with and but so while whereas "
                        "only".split())
_COPULAS = frozenset(("is", "are", "was", "were"))
_NEGATIONS = frozenset(("not", "incorrect", "wrong", "false", "invalid"))
_SKIP_WORDS = frozenset("option options choice choices letter letters statement statements the therefore thus hence "
                        "clearly likely probably definitely most both".split())
_SKIP_DECOR = "*_`\"'$:\uff1a"
_LATEX_OPENERS = ("\\text{", "\\textbf{", "\\textrm{", "\\mathrm{", "\\mathbf{")
_SKIP_OPENERS = _LATEX_OPENERS + ("\\(", "\\[")
GLOSS_MAX = 200
_GLOSS_STOP = "()\uff08\uff09\n\r"
# OPTION-LINE: words that make the text after an option letter a verdict or a clause, not the option's text
_OPTION_LINE_BAD = _TERM_WORDS | _NEGATIONS | frozenset(("or", "correct", "right", "true", "valid"))
_FULLWIDTH_LETTERS = {c: c - 0xFEE0 for r in ((0xFF21, 0xFF3A), (0xFF41, 0xFF5A)) for c in range(r[0], r[1] + 1)}


def _read_item(t: str, i: int):
    """ITEM at i -> (letters, end, bracketed) or None (rule L1)."""
    n = len(t)
    j = i
    if t.startswith("**", j):
        j += 2
    closers = None
    if j < n and t[j] in _OPEN_CLOSE:
        closers = _OPEN_CLOSE[t[j]]
        j += 1
    if j >= n or not _is_letter(t[j]) or _letter_at(t, j - 1):
        return None
    k = j
    while k < n and _is_letter(t[k]):
        k += 1
    run = t[j:k]
    if len(run) == 1:
        letters = [run.upper()]
    else:
        for x in range(len(run)):
            if not _is_upper(run[x]) or (x and run[x - 1] >= run[x]):
                return None
        letters = list(run)
    bracketed = False
    if closers is not None:
        if k < n and t[k] in closers:
            k += 1
            bracketed = True
        else:
            return None
    elif k < n and t[k] in ")\uff09":
        k += 1
        bracketed = True
    if t.startswith("**", k):
        k += 2
    return letters, k, bracketed


def _sep_word(lo: str, i: int) -> int:
    """Length of a separator word at i, or 0."""
    if lo.startswith("and", i) and not _letter_at(lo, i + 3) and not _letter_at(lo, i - 1):
        return 3
    if lo.startswith("以及", i):
        return 2
    if i < len(lo) and lo[i] in "和及":
        return 1
    return 0


def _skip_sep(t: str, lo: str, i: int) -> int | None:
    """End of a SEP starting at i, or None (rule L2)."""
    i = _skip(t, i, "}$")
    k = _skip(t, i, _HSPACE)
    got = k > i
    if k < len(t) and t[k] in _SEP_PUNCT:
        k = _skip(t, k + 1, _HSPACE)
        got = True
    w = _sep_word(lo, k)
    if w:
        k = _skip(t, k + w, _HSPACE)
        got = True
    if not got:
        return None
    if t.startswith("$", k):
        k += 1
    for opener in _LATEX_OPENERS:
        if lo.startswith(opener, k):
            return k + len(opener)
    return k


def _gloss_end(t: str, i: int) -> int | None:
    """End of a GLOSS starting at i, or None (rule L1)."""
    k = _skip(t, i, _HSPACE)
    if k >= len(t) or t[k] not in "(\uff08":
        return None
    j = k + 1
    limit = min(len(t), j + GLOSS_MAX + 1)
    while j < limit and t[j] not in _GLOSS_STOP:
        j += 1
    if j == k + 1 or j >= len(t) or t[j] not in ")\uff09" or j - k - 1 > GLOSS_MAX:
        return None
    return j + 1


def _read_list(t: str, lo: str, i: int):
    """LIST at i -> (set of letters, end, last item bracketed) or None (rules L0-L3)."""
    if lo.startswith("n/a", i) and not _letter_at(lo, i + 3):
        return None
    item = _read_item(t, i)
    if item is None:
        return None
    letters = set(item[0])
    end, bracketed = item[1], item[2]
    glossed = False
    while True:
        k = _skip_sep(t, lo, end)
        item = _read_item(t, k) if k is not None else None
        if item is None:
            g = None if glossed else _gloss_end(t, end)
            if g is None:
                break
            end, glossed = g, True
            continue
        letters.update(item[0])
        end, bracketed = item[1], item[2]
        glossed = False
    return letters, end, bracketed


def _or_word(lo: str, i: int) -> bool:
    if lo.startswith("and/or", i) and not _letter_at(lo, i + 6):
        return True
    if lo.startswith("or", i) and not _letter_at(lo, i + 2):
        return True
    return lo.startswith("或", i) or lo.startswith("还是", i)


def _terminated(t: str, lo: str, i: int, bracketed: bool) -> bool:
    """TERMINATOR check at the end i of a list (rule L4)."""
    n = len(t)
    k = _skip(t, i, _HSPACE)
    k2 = k
    if k2 < n and t[k2] in ",\uff0c;\uff1b":
        k2 = _skip(t, k2 + 1, _HSPACE)
    if _or_word(lo, k2):
        return False
    if k >= n:
        return True
    c = t[k]
    if c in _TERM_CHARS or _is_cjk(c) or (c == "\\" and k + 1 < n and t[k + 1] in ")]"):
        return True
    if k == i:
        return False
    if bracketed or c in "(-\u2013\u2014":
        return True
    w = _word_at(lo, k)
    if w in _TERM_WORDS:
        if w in _COPULAS and _word_at(lo, _skip(t, k + len(w), _HSPACE)) in _NEGATIONS:
            return False
        return True
    return False


def _skip_after_marker(t: str, lo: str, i: int) -> int:
    """SKIP: whitespace, decorations, LaTeX text openers and filler words."""
    n = len(t)
    while i < n:
        c = t[i]
        if c in _SPACE or c in _SKIP_DECOR:
            i += 1
            continue
        if c == "\\":
            for opener in _SKIP_OPENERS:
                if lo.startswith(opener, i):
                    i += len(opener)
                    break
            else:
                break
            continue
        if lo.startswith("选项", i):
            i += 2
            continue
        if _is_letter(c) and not _letter_at(t, i - 1):
            w = _word_at(lo, i)
            if w in _SKIP_WORDS:
                i += len(w)
                continue
        break
    return i


def _exact_list(s: str) -> list[str] | None:
    """EXACT-LIST: the whole (wrapper-stripped) string is one LIST."""
    s = _strip_wrappers(s)
    lo = ascii_lower(s)
    i = _skip_after_marker(s, lo, 0)
    r = _read_list(s, lo, i)
    if r is None or r[1] != len(s):
        return None
    return sorted(r[0])


def _read_choice_value(v) -> list[str] | None:
    if isinstance(v, str):
        return _exact_list(v)
    if isinstance(v, list):
        acc: set[str] = set()
        for el in v:
            if not isinstance(el, str):
                return None
            r = _exact_list(el)
            if r is None:
                return None
            acc.update(r)
        return sorted(acc)
    return None


def _boxed_text(content: str) -> str:
    content = _RE_LATEX_CMD.sub("", content)
    content = _RE_LATEX_OTHER.sub(" ", content)
    return content.replace("~", " ").replace("{", "").replace("}", "")


_KIND_FORWARD, _KIND_BOXED, _KIND_REVERSE = 0, 1, 2


def _choice_candidates(t: str, lo: str) -> list[tuple[int, int, int]]:
    cands = [(pos, _KIND_FORWARD, -1) for pos in _marker_positions(lo, _FORWARD_MARKERS)]
    for pos, close in _boxed_candidates(t, lo):
        cands.append((pos, _KIND_BOXED, close))
    for m in _RE_REVERSE.finditer(lo):
        if _letter_bounded(lo, m.start(), m.end()):
            cands.append((m.end(), _KIND_REVERSE, -1))
    cands.sort(key=lambda c: (-c[0], c[1]))
    return cands


_BULLETS = "-*\u2022"
_NOT_BULLETS = "not bullets"


def _bullet_list(t: str, lo: str, pos: int):
    """BULLETS after a forward marker: letters, None (a bullet line failed) or _NOT_BULLETS."""
    n = len(t)
    if pos > 0 and t[pos - 1] in _LINE_BREAK:  # HEADING: the match already ended the line
        pos -= 1
    k = _skip(t, pos, _HSPACE + "*_:\uff1a")
    if k >= n or t[k] not in _LINE_BREAK:
        return _NOT_BULLETS
    letters: set[str] = set()
    count = 0
    while True:
        j = _skip(t, k, _SPACE)
        if j + 1 >= n or t[j] not in _BULLETS or t[j + 1] not in _HSPACE:
            break
        le = _line_end(t, j, n)
        i = _skip_after_marker(t, lo, j + 1)
        lst = _read_list(t, lo, i) if i < le else None
        if lst is None or not _terminated(t, lo, lst[1], lst[2]):
            return None
        letters.update(lst[0])
        count += 1
        k = le
    return sorted(letters) if count else _NOT_BULLETS


def _choices_from_markers(t: str, lo: str) -> list[str] | None:
    for pos, kind, close in _choice_candidates(t, lo):
        if kind == _KIND_BOXED:
            r = _exact_list(_boxed_text(t[pos:close]))
            if r is not None:
                return r
            continue
        if kind == _KIND_FORWARD:
            bullets = _bullet_list(t, lo, pos)
            if bullets is None:
                continue
            if bullets is not _NOT_BULLETS:
                return bullets
        start = _skip_after_marker(t, lo, pos) if kind == _KIND_FORWARD else pos
        lst = _read_list(t, lo, start)
        if lst is None or not _terminated(t, lo, lst[1], lst[2]):
            continue
        if kind == _KIND_REVERSE:
            m = _RE_REVERSE_TAIL.match(lo, lst[1])
            if m is None or _letter_at(lo, m.end()):
                continue
        return sorted(lst[0])
    return None


def _option_line(text: str) -> list[str] | None:
    """OPTION-LINE: one line that starts with an option letter and goes on with the option's text (rule C3)."""
    s = _strip_space(text)
    if any(c in _LINE_BREAK for c in s):
        return None
    lo = ascii_lower(s)
    n = len(s)
    i = 2 if s.startswith("**") else 0
    w = _word_at(lo, i)
    if w in ("option", "choice"):
        k = _skip(s, i + len(w), _HSPACE)
        if k == i + len(w) or k >= n or not _is_upper(s[k]) or _letter_at(s, k + 1):
            return None
        if k + 1 >= n or s[k + 1] not in ":\uff1a.)":
            return None
        letter, j = s[k], k + 2
    elif i + 2 < n and s[i] in "(\uff08" and _is_upper(s[i + 1]) and s[i + 2] in ")\uff09":
        letter, j = s[i + 1], i + 3
    else:
        return None
    if s.startswith("**", j):
        j += 2
    k = _skip(s, j, _HSPACE)
    if k >= n or not (_is_cjk(s[k]) or (k > j and _is_letter(s[k]))):  # Chinese text needs no space
        return None
    if _word_at(lo, k) in _OPTION_LINE_BAD:
        return None
    return [letter]


def _bare_lines(text: str, exact):
    """Rules C3/H3: whole text, then (MCQ) all lines, then the last non-blank line, then (MCQ) an option line."""
    r = exact(text)
    if r is not None:
        return r
    if exact is _exact_list:
        r = _bare_line_rules(text, exact)
        return r if r is not None else _option_line(text)
    return _bare_line_rules(text, exact)


def _bare_line_rules(text: str, exact):
    lines = [ln for ln in _split_lines(text) if _strip_space(ln)]
    if len(lines) < 2:
        return None
    if exact is _exact_list:
        acc: set = set()
        for ln in lines:
            r = exact(ln)
            if r is None:
                break
            acc.update(r)
        else:
            return sorted(acc)
    return exact(lines[-1])


def _staged(text, keys, read_value, from_markers, exact):
    """The stages every kind goes through in order: a JSON object with an answer key, answer markers, bare lines."""
    if not isinstance(text, str):
        return None
    qualified, result = _json_stage(text, keys, read_value)
    if qualified:
        return result
    r = from_markers(text, ascii_lower(text))
    return r if r is not None else _bare_lines(text, exact)


def extract_choices(text: str) -> list[str] | None:
    """Multiple-choice letters in a model output (see the module docstring, C1-C4)."""
    if isinstance(text, str):
        text = text.translate(_FULLWIDTH_LETTERS)  # FOLD-WIDTH
    return _staged(text, _MCQ_KEYS, _read_choice_value, _choices_from_markers, _exact_list)


# ---------------------------------------------------------------------------
# Miller indices

_MINUS = "-\u2212"
_COMBINING_BAR = "\u0304\u0305"
_HKL_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">", "\u27e8": "\u27e9", "\uff08": "\uff09"}
_BARE_BAD = set("_/^\u00b0%#+\u00d7\\-\u2212'\u00c5\u03b8\u03bc\u00b5")
_HKL_SEP_CHARS = _SPACE + ",;\uff0c\u3001\uff1b&"
_HKL_SPAN_FILLER = _SPACE + "*_#:\uff1a`$"


def _read_piece(s: str, i: int, end: int):
    """PIECE at i -> (is_bar, payload, end) or None.

    payload is the value for a bar piece, else (negative, [(digit, overlined), ...]).
    """
    if i >= end:
        return None
    for prefix in ("\\overline{", "\\bar{"):
        if s.startswith(prefix, i):
            j = i + len(prefix)
            k = j
            while k < end and _is_digit(s[k]):
                k += 1
            if k == j or k - j > 3 or k >= end or s[k] != "}":
                return None
            return True, -int(s[j:k]), k + 1
    if s.startswith("\\bar", i):
        if i + 4 < end and _is_digit(s[i + 4]):
            return True, -int(s[i + 4]), i + 5
        return None
    j = i
    negative = False
    if s[j] in _MINUS:
        negative = True
        j += 1
    digits = []
    while j < end and _is_digit(s[j]):
        d = int(s[j])
        j += 1
        over = j < end and s[j] in _COMBINING_BAR
        if over:
            j += 1
        digits.append((d, over))
    if not digits:
        return None
    return False, (negative, digits), j


def _compact_indices(pieces) -> list[int] | None:
    out = []
    for is_bar, payload, _end in pieces:
        if is_bar:
            out.append(payload)
            continue
        negative, digits = payload
        for x, (d, over) in enumerate(digits):
            neg = over
            if x == 0 and negative:
                if over:
                    return None
                neg = True
            out.append(-d if neg else d)
    return out


def _spaced_indices(pieces) -> list[int] | None:
    out = []
    for is_bar, payload, _end in pieces:
        if is_bar:
            out.append(payload)
            continue
        negative, digits = payload
        if len(digits) > 3:
            return None
        if any(over for _d, over in digits):
            if len(digits) != 1 or negative:
                return None
            out.append(-digits[0][0])
            continue
        value = 0
        for d, _over in digits:
            value = value * 10 + d
        out.append(-value if negative else value)
    return out


def _read_delimited(s: str, i: int, end: int):
    """DELIMITED token at the opener s[i] -> (indices tuple, end) or None."""
    close = _HKL_OPEN[s[i]]
    j = _skip(s, i + 1, _HSPACE)
    pieces = []
    separated = adjacent = False
    while True:
        p = _read_piece(s, j, end)
        if p is None:
            return None
        pieces.append(p)
        j = p[2]
        k = j
        commas = 0
        while k < end and (s[k] in _HSPACE or s[k] == ","):
            commas += s[k] == ","
            k += 1
        if commas > 1:
            return None
        if k < end and s[k] == close:
            j = k + 1
            break
        if k + 1 < end and s[k] == "\\" and s[k + 1] == close:
            j = k + 2
            break
        if k > j:
            separated = True
        else:
            adjacent = True
        j = k
    if separated and adjacent:
        return None
    idx = _spaced_indices(pieces) if separated else _compact_indices(pieces)
    if idx is None or len(idx) not in (3, 4):
        return None
    return tuple(idx), j


def _bare_neighbour_ok(s: str, pos: int, far: int) -> bool:
    if pos < 0 or pos >= len(s):
        return True
    c = s[pos]
    if _is_letter(c) or _is_digit(c) or c in _BARE_BAD:
        return False
    if c in ".,:" and _digit_at(s, far):
        return False
    return True


def _read_bare(s: str, i: int, end: int):
    """BARE run at i -> (indices tuple or None, run end); run end == i when there is no run."""
    pieces = []
    j = i
    while True:
        p = _read_piece(s, j, end)
        if p is None:
            break
        pieces.append(p)
        j = p[2]
    if not pieces:
        return None, i
    idx = _compact_indices(pieces)
    if idx is None or len(idx) not in (3, 4):
        return None, j
    if len(idx) == 4 and idx[0] + idx[1] + idx[2] != 0:
        return None, j
    if not _bare_neighbour_ok(s, i - 1, i - 2) or not _bare_neighbour_ok(s, j, j + 1):
        return None, j
    return tuple(idx), j


def _scan_hkls(s: str, a: int, b: int) -> list[tuple[int, ...]]:
    delimited = []
    bare = []
    i = a
    while i < b:
        c = s[i]
        if c in _HKL_OPEN:
            r = _read_delimited(s, i, b)
            if r is not None:
                delimited.append(r[0])
                i = r[1]
            else:
                i += 1
            continue
        if _is_digit(c) or c in _MINUS or c == "\\":
            idx, j = _read_bare(s, i, b)
            if j > i:
                if idx is not None:
                    bare.append(idx)
                i = j
                continue
        i += 1
    return delimited or bare


def _skip_hkl_sep(s: str, lo: str, i: int) -> int:
    n = len(s)
    while i < n:
        if s[i] in _HKL_SEP_CHARS or s[i] in "和及":
            i += 1
        elif lo.startswith("and", i) and not _letter_at(lo, i - 1) and not _letter_at(lo, i + 3):
            i += 3
        else:
            break
    return i


def _exact_hkls(s: str) -> list[tuple[int, ...]] | None:
    """EXACT-HKLS: the whole (wrapper-stripped) string is tokens and separators."""
    s = _strip_wrappers(s)
    n = len(s)
    if not n:
        return None
    lo = ascii_lower(s)
    out = []
    i = 0
    while True:
        if s[i] in _HKL_OPEN:
            r = _read_delimited(s, i, n)
            if r is None:
                return None
            tok, j = r
        else:
            tok, j = _read_bare(s, i, n)
            if tok is None:
                return None
        out.append(tok)
        k = _skip_hkl_sep(s, lo, j)
        if k >= n:
            break
        if k == j:
            return None
        i = k
    return sorted(set(out))


def _to_int(x) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float) and x == x and x not in (float("inf"), float("-inf")) and x.is_integer():
        return int(x)
    return None


def _int_tuple(v) -> tuple[int, ...] | None:
    if not isinstance(v, list) or len(v) not in (3, 4):
        return None
    out = []
    for x in v:
        y = _to_int(x)
        if y is None:
            return None
        out.append(y)
    return tuple(out)


def _read_hkl_value(v) -> list[tuple[int, ...]] | None:
    if isinstance(v, str):
        return _exact_hkls(v)
    if not isinstance(v, list):
        return None
    if v and all(not isinstance(x, (list, str)) for x in v):
        one = _int_tuple(v)
        return None if one is None else [one]
    acc: set[tuple[int, ...]] = set()
    for el in v:
        if isinstance(el, str):
            r = _exact_hkls(el)
            if r is None:
                return None
            acc.update(r)
        else:
            tup = _int_tuple(el)
            if tup is None:
                return None
            acc.add(tup)
    return sorted(acc)


def _sentence_cut(s: str, a: int, b: int) -> int:
    for k in range(a, b):
        c = s[k]
        if c in "\u3002\uff01\uff1f":
            return k
        if c in ".!?":
            j = k + 1
            while j < b and s[j] in _SPACE:
                j += 1
            if k + 1 < j < b and _is_upper(s[j]):
                return k
    return b


def _hkl_marker_span(s: str, pos: int) -> list[tuple[int, ...]]:
    n = min(len(s), pos + SPAN_MAX)
    le = _line_end(s, pos, n)
    toks = _scan_hkls(s, pos, _sentence_cut(s, pos, le))
    if toks or any(c not in _HKL_SPAN_FILLER for c in s[pos:le]):
        return toks
    k = le
    para_start = para_end = -1
    while k < n:
        k += 2 if (s[k] == "\r" and k + 1 < n and s[k + 1] == "\n") else 1
        e = _line_end(s, k, n)
        if not _strip_space(s[k:e]):
            if para_start >= 0:
                break
        else:
            if para_start < 0:
                para_start = k
            para_end = e
        k = e
    if para_start < 0:
        return []
    return _scan_hkls(s, para_start, _sentence_cut(s, para_start, para_end))


def _hkls_from_markers(s: str, lo: str) -> list[tuple[int, ...]] | None:
    cands = [(pos, 0, -1) for pos in _marker_positions(lo, _FORWARD_MARKERS + (_RE_HKL_MARK,))]
    for pos, close in _boxed_candidates(s, lo):
        cands.append((pos, 1, close))
    cands.sort(key=lambda c: (-c[0], c[1]))
    for pos, kind, close in cands[:MAX_HKL_CANDIDATES]:
        toks = _scan_hkls(s, pos, close) if kind == 1 else _hkl_marker_span(s, pos)
        if toks:
            return sorted(set(toks))
    return None


def extract_hkls(text: str) -> list[tuple[int, ...]] | None:
    """Miller indices in a model output (see the module docstring, H1-H4)."""
    return _staged(text, _HKL_KEYS, _read_hkl_value, _hkls_from_markers, _exact_hkls)


def extract(text: str, task: str) -> list | None:
    """The reference rules of answer kind ``task``: ``"mcq"`` -> letters, ``"hkl"`` -> Miller indices."""
    from benchmint import tasks  # the kinds call back into this module

    return tasks.get(task).extract(text)
