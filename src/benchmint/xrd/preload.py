"""What an ``xrd build`` worker imports before its first CIF (``ProcessExecutor(preload=...)``), and nothing more.

pymatgen's symmetry analyzer (which ``pymatgen.io.cif`` imports too) runs ``import scipy.cluster`` at its top,
for a clustering helper that no CIF's work calls (a profile of the corpus's 599 CIFs calls no SciPy function).
That one line brings scipy.spatial, scipy.linalg, scipy.special and NumPy's testing and f2py modules: 0.22 s of
CPU of the 0.3 s pymatgen's modules take, paid by every worker (or by the driver before it forks them). So
the analyzer is imported here with a stand-in for ``scipy.cluster``, which is taken out again at once: the
analyzer reaches the module only as ``scipy.cluster.…`` at call time, and SciPy imports a submodule on first
access, so a later call that needs it gets the real one. Should the stand-in break the analyzer's import (a
release of pymatgen importing names from ``scipy.cluster`` or reading it at import), it is imported the plain
way.

Importing this module is all it does; the modules are listed in ``MODULES``, imported in that order.
"""

from __future__ import annotations

import importlib
import sys
import types

# The analyzer first, with its stand-in; then what a CIF's work imports (reading, sticks, profile, symmetry,
# the renderer's figure and canvas). gemmi and pymatgen.io.cif come with the fast CIF reader; the sticks read
# their scattering factors from pymatgen.analysis.diffraction's package files (its __init__ alone).
MODULES = ("benchmint.xrd.cifread", "benchmint.xrd.sticks", "benchmint.xrd.profile", "benchmint.xrd.symmetry",
           "gemmi", "pymatgen.io.cif", "pymatgen.analysis.diffraction", "matplotlib.figure",
           "matplotlib.backends.backend_agg")


def import_analyzer() -> None:
    """Import ``pymatgen.symmetry.analyzer`` without importing ``scipy.cluster`` (see the module's docstring)."""
    name = "scipy.cluster"
    if "pymatgen.symmetry.analyzer" in sys.modules or name in sys.modules:
        return
    import scipy  # the package alone (a few ms): its submodules are imported on first access

    stand_in = types.ModuleType(name, "stands for scipy.cluster while pymatgen's symmetry analyzer is imported")
    sys.modules[name] = stand_in
    try:
        importlib.import_module("pymatgen.symmetry.analyzer")
    except Exception:  # noqa: BLE001 - a release that reads scipy.cluster at import: the plain import below
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        importlib.import_module("pymatgen.symmetry.analyzer")
    finally:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        if scipy.__dict__.get("cluster") is stand_in:  # as an import would have set it on the package
            del scipy.cluster


import_analyzer()
for _name in MODULES:
    importlib.import_module(_name)
