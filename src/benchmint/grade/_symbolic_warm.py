"""Imported by the screen's worker processes as they start (``ProcessExecutor(preload=...)``).

SymPy's ``simplify`` and latex2sympy2_extended's parser pay their set-up on first use (about 0.13 s each on the
reference machine): importing this module pays it while the calling process is still reading the answers, not
when the first symbolic check arrives.
"""

import sympy

from benchmint.grade import symbolic

_x, _y = sympy.symbols("x y")
sympy.simplify((_x + _y) ** 2 - (_x ** 2 + 2 * _x * _y + _y ** 2))
symbolic._latex2sympy()(r"\frac{a}{b}\sin^{2} y")
