"""Print benchmint's declared dependencies (and those of the extras named as arguments), one per line.

Set-up installs these before benchmint itself, so that a dependency shipped
only as an sdist is built in pip's isolated build environment.
"""

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
extras = project.get("optional-dependencies", {})
unknown = [name for name in sys.argv[1:] if name not in extras]
if unknown:
    sys.exit(f"requirements.py: no such extra: {', '.join(unknown)} (have: {', '.join(sorted(extras))})")
for requirement in project["dependencies"] + [r for name in sys.argv[1:] for r in extras[name]]:
    print(requirement)
