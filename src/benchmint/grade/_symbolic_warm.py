"""Imported by the screen's worker processes as they start (``ProcessExecutor(preload=...)``).

SymPy's ``simplify`` pays its set-up on first use (about 0.13 s): importing this module pays it while the calling
process is still reading the answers, not when the first symbolic check arrives. latex2sympy2_extended's parser
is not warmed: most answers never need it (``benchmint.grade.latex`` reads them), and each worker would pay it.
"""

import sympy

_x, _y = sympy.symbols("x y")
sympy.simplify(sympy.cancel((_x + _y) ** 2 - (_x ** 2 + 2 * _x * _y + _y ** 2)) + sympy.sin(_x) ** 2)
