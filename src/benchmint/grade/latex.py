"""A small LaTeX reader for the answers the symbolic screen sees most, in microseconds instead of milliseconds.

latex2sympy2_extended (an ANTLR grammar) reads any LaTeX but pays tens of milliseconds per expression until its
parser has warmed up, in every worker process: on a few hundred answers that warm-up is most of the screen's
time. This reader takes the common subset and gives the same SymPy value latex2sympy does (``tests/
test_grade_latex.py`` checks it on every expression of the golden pairs and on generated ones); anything else
returns None, and the caller hands the text to latex2sympy.

The subset: integers and decimals; letters as symbols (``e`` is Euler's number, ``I`` is a symbol, not the
imaginary unit), with subscripts (``v_0``, ``v_{max}``); Greek letters, ``\\pi``, ``\\infty``; ``+ - * / ^``,
``\\cdot``, ``\\times``, implicit products (which bind tighter than ``/``: ``a/bc`` is a/(bc)), parentheses and
braces (``\\left( \\right)`` too); ``\\frac{}{}``, ``\\sqrt{}``, ``\\sqrt[n]{}``; ``\\sin`` and the other named
functions, whose argument is parenthesised or, as latex2sympy reads it, the product of the symbols and
numbers that follow (``\\sin 2\\theta`` is sin 2θ, ``\\sin\\theta\\cos\\theta`` two factors); ``a(t)``, a letter
applied to one symbol or number, as a function; one ``=``; a whole answer that is a list in parentheses or
brackets: three or more entries a tuple, two an interval (open or closed at each end as written) unless the
ends make it empty or a point, then a tuple, as latex2sympy decides. Declined, because their reading is
ambiguous or another convention would be needed: a letter before any other parenthesis (``a(x+1)``),
commas elsewhere, ``x^23``, ``\\sin^2 x``, ``\\sin x/2``, ``3e8``, text commands.
"""

from __future__ import annotations

import re

import sympy

_TOKEN = re.compile(r"\\[a-zA-Z]+|\\[,;:! ]|\d+\.\d*|\.\d+|\d+|[a-zA-Z]|[-+*/^_=(){}\[\],]|\s+|.")

GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
         "kappa", "lambda", "mu", "nu", "xi", "rho", "varrho", "sigma", "varsigma", "tau", "upsilon", "phi",
         "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Upsilon", "Phi",
         "Psi", "Omega", "hbar"}
FUNCTIONS = {"sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "sec": sympy.sec, "csc": sympy.csc,
             "cot": sympy.cot, "sinh": sympy.sinh, "cosh": sympy.cosh, "tanh": sympy.tanh, "arcsin": sympy.asin,
             "arccos": sympy.acos, "arctan": sympy.atan, "exp": sympy.exp, "ln": sympy.log,
             "log": lambda x: sympy.log(x, 10)}
_SPACES = {"\\,", "\\;", "\\:", "\\!", "\\ ", "\\left", "\\right"}
_TIMES = {"*", "\\cdot", "\\times"}


def _number(tok: str) -> bool:
    return bool(tok) and (tok[0].isdigit() or tok[0] == ".")


class _Declined(Exception):
    """The text is outside the subset."""


class _MixedNumber(Exception):
    """A number written beside a number (2\\frac{1}{2}, 2 (3)): a mixed number or a product, nobody can say."""


def parse(text: str):
    """The SymPy value of ``text`` (LaTeX without ``$``), or None when it is outside the subset.

    ValueError for a number written beside a number (``2\\frac{1}{2}``, ``2 (3)``, ``2 3``): latex2sympy adds
    them (a mixed number), a reader may multiply them; the screen leaves such answers to the judge.
    """
    tokens = [t for t in _TOKEN.findall(text) if not t.isspace() and t not in _SPACES]
    if not tokens:
        return None
    try:
        value = _listed(tokens) if "," in tokens else _whole(tokens)
    except (_Declined, ZeroDivisionError, RecursionError):
        return None
    except _MixedNumber:
        raise ValueError(f"{text!r} writes a number beside a number: a mixed number or a product") from None
    if value.has(sympy.zoo, sympy.nan):
        return None  # it divides by zero as written (2 / \sin\pi): left to latex2sympy, which keeps it unevaluated
    return value


def _whole(tokens: list[str]):
    reader = _Reader(tokens)
    value = reader.relation()
    if reader.i != len(tokens):
        raise _Declined
    return value


def _listed(tokens: list[str]):
    """A whole answer written as (a, b, ...) or [a, b): a tuple, or for two entries an interval."""
    if tokens[0] not in "([" or tokens[-1] not in ")]":
        raise _Declined
    entries, depth, start = [], 0, 1
    for i, tok in enumerate(tokens):
        if tok in ("(", "[", "{"):
            depth += 1
        elif tok in (")", "]", "}"):
            depth -= 1
            if depth == 0 and i != len(tokens) - 1:
                raise _Declined  # (1, 2) + 1, or two lists
        elif tok == "," and depth == 1:
            entries.append(tokens[start:i])
            start = i + 1
    entries.append(tokens[start:-1])
    if depth != 0 or any(not e for e in entries) or any("," in e for e in entries):
        raise _Declined
    values = [_Reader(e).expr_only() for e in entries]
    if len(values) == 2:
        # latex2sympy's reading: an interval, except that two numbers in matching brackets that make it empty,
        # (1, 1) or [2, 1], are a pair; mismatched brackets stay a set, even an empty one.
        interval = sympy.Interval(values[0], values[1], tokens[0] == "(", tokens[-1] == ")")
        matching = (tokens[0] == "(") == (tokens[-1] == ")")
        numbers = all(v.is_number and not any((tok.isalpha() and tok != "e") or tok.lstrip("\\") in GREEK
                                              for tok in e)
                      for v, e in zip(values, entries))  # as written (e is Euler's): (2, a - a) is an empty interval
        if not (matching and interval is sympy.S.EmptySet and numbers):
            return interval
    elif tokens[0] != "(" or tokens[-1] != ")":
        raise _Declined  # three entries in brackets, or mixed brackets
    return sympy.Tuple(*values)


class _Reader:
    def __init__(self, tokens: list[str]) -> None:
        self.t, self.i = tokens, 0

    def peek(self, k: int = 0) -> str | None:
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise _Declined
        self.i += 1
        return tok

    def expr_only(self):
        value = self.expr()
        if self.i != len(self.t):
            raise _Declined
        return value

    def relation(self):
        left = self.expr()
        if self.peek() == "=":
            self.take()
            return sympy.Eq(left, self.expr(), evaluate=False)
        return left

    def expr(self):
        sign = 1
        if self.peek() in ("+", "-"):
            sign = -1 if self.take() == "-" else 1
        value = self.term() * sign
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.implicit()
        while self.peek() in _TIMES or self.peek() == "/":
            op = self.take()
            rhs = self.implicit()
            value = value / rhs if op == "/" else value * rhs
        return value

    def implicit(self):
        """Factors written side by side: one product, read before any / around it."""
        value = last = self.factor()
        while self._starts_factor(self.peek()):
            after_number, nxt = _number(self.t[self.i - 1]), self.peek() or ""
            if after_number and _number(nxt):
                raise _MixedNumber  # 2 3 (latex2sympy reads 5), x^2 3
            last_rational = bool(getattr(last, "is_Rational", False))
            factor = self.factor()
            if factor.is_Rational and (last_rational or after_number):
                raise _MixedNumber  # 2\frac{1}{2}, 2 (3), \frac{2}{2} 2: latex2sympy adds some such pairs
            value, last = value * factor, factor
        return value

    @classmethod
    def _starts_factor(cls, tok: str | None) -> bool:
        if tok is None or cls._atom(tok):
            return tok is not None
        if tok[0] == "\\":
            return tok[1:] in FUNCTIONS or tok[1:] in ("infty", "frac", "dfrac", "tfrac", "sqrt")
        return tok[0] == "." or tok in ("(", "{")

    def factor(self):
        base = self.primary()
        if self.peek() == "^":
            self.take()
            exponent = self.exponent()
            return sympy.exp(exponent) if base is sympy.E else sympy.Pow(base, exponent)
        return base

    def exponent(self):
        tok = self.peek()
        if tok == "{":
            return self.group()
        if tok is not None and ((tok.isdigit() and len(tok) == 1) or (tok.isalpha() and len(tok) == 1)):
            return self.primary()  # x^2, x^n; x^23 (TeX: x^2 times 3) is declined by the digit-run test
        raise _Declined

    def group(self):
        self.take("{")
        value = self.expr()
        self.take("}")
        return value

    def primary(self):
        tok = self.take()
        if tok[0].isdigit() or tok[0] == ".":
            if self.peek() in ("e", "E") and (self.peek(1) or " ")[0] in "0123456789+-":
                raise _Declined  # 3e8: scientific notation, which latex2sympy reads as 3 * e * 8
            return sympy.Float(tok) if "." in tok else sympy.Integer(tok)
        if tok == "(":
            value = self.expr()
            self.take(")")
            return value
        if tok == "{":
            self.i -= 1
            return self.group()
        if tok.isalpha() and len(tok) == 1:
            if self.peek() == "(":
                if tok == "e":
                    raise _Declined  # e(2): latex2sympy multiplies Euler's number, a(2) it applies
                return self._applied(tok)
            return sympy.E if tok == "e" and self.peek() != "_" else self._symbol(tok)
        if tok[0] == "\\":
            return self.command(tok[1:])
        raise _Declined

    def command(self, name: str):
        if name in GREEK:
            return self._symbol(name)
        if name == "pi":
            if self.peek() == "(":
                raise _Declined  # \pi (2): latex2sympy applies \pi as a function
            return sympy.pi
        if name == "infty":
            return sympy.oo
        if name in ("frac", "dfrac", "tfrac"):
            num = self.group()
            return num / self.group()
        if name == "sqrt":
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
                return sympy.Pow(self.group(), 1 / index)
            return sympy.sqrt(self.group())
        if name in FUNCTIONS:
            argument = self._argument()
            if argument.has(sympy.Float):
                raise _Declined  # \exp(0.5): evaluated to a decimal here, kept as exp(0.5) by latex2sympy
            return FUNCTIONS[name](argument)
        raise _Declined

    def _applied(self, name: str):
        """a(t): a function of one symbol or number, as latex2sympy reads it; a(x + 1) is declined (a product)."""
        self.take("(")
        tok = self.take()
        if not (tok.isdigit() or (tok.isalpha() and len(tok) == 1 and tok != "e")) or self.peek() != ")":
            raise _Declined
        self.take(")")
        arg = sympy.Integer(tok) if tok.isdigit() else sympy.Symbol(tok)
        return sympy.Function(name)(arg)

    def _argument(self):
        tok = self.peek()
        if tok == "(":
            self.take()
            value = self.expr()
            self.take(")")
            return value
        # Without parentheses the argument is the run of symbols and numbers that follows, up to a sum, a
        # relation, a closing bracket or the next function (\sin 2\theta \cos x); anything else is declined.
        value = None
        while self._atom(self.peek()):
            if value is not None and _number(self.t[self.i - 1]) and _number(self.peek() or ""):
                raise _MixedNumber  # \cos 2 3: latex2sympy reads cos 5
            atom = self.primary()
            value = atom if value is None else value * atom
        if value is None or not (self.peek() in (None, "+", "-", "=", ")", "}")
                                 or (self.peek() or "").lstrip("\\") in FUNCTIONS):
            raise _Declined  # \sin^2 x, \sin{x}, \sin x/2, \sin x^2
        return value

    @staticmethod
    def _atom(tok: str | None) -> bool:
        if tok is None:
            return False
        if tok[0] == "\\":
            return tok[1:] in GREEK or tok[1:] == "pi"
        return tok[0].isdigit() or (tok.isalpha() and len(tok) == 1)

    def _symbol(self, name: str):
        symbol = self._named(name)
        if self.peek() == "(":
            raise _Declined  # v_0 (t), \omega(t): latex2sympy applies the symbol as a function
        return symbol

    def _named(self, name: str):
        if self.peek() != "_":
            return sympy.Symbol(name)
        self.take()
        tok = self.take()
        if tok == "{":
            parts = []
            while self.peek() != "}":
                part = self.take()
                if not part.isalnum():
                    raise _Declined
                parts.append(part)
            self.take("}")
            sub = "".join(parts)
        elif tok.isalnum():
            sub = tok
        else:
            raise _Declined
        if not sub:
            raise _Declined
        return sympy.Symbol(f"{name}_{sub}" if len(sub) == 1 else f"{name}_{{{sub}}}")
