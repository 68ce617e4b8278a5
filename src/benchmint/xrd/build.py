"""benchmint xrd build: CIFs -> XRD benchmark items (crystalxrd-bench §2.1-2.3).

One CIF is one unit of work: a worker process reads the structure
(pymatgen, ``primitive=False`` so Miller indices refer to the CIF's cell),
computes the Cu Kα1 sticks, broadens them into the Kα1 + Kα2 curve on the
0.01° grid (benchmint.xrd.profile), takes 2θ* and the HKL ground truth, and
draws the pattern the way the benchmark's models see it; a CIF of several
structure blocks gives one item per block. The parent records each unit in
the run's SQLite ledger; items.jsonl and errors.jsonl are written from the
ledger in input order while the CIFs run (each result once the files before
it are done) and put in place with the KMeans selection at the end, so reruns
and resumed runs give identical files. Ids (the file's stem, ``stem#block``) and CIF
paths are the parent's to give: a unit's key is its content's, and files of
one content share one result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import struct
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from benchmint.io import FIELD_MARKS, atomic_write, dumps, dumps_text, field_mark, write_jsonl
from benchmint.run import run_files
from benchmint.run.ledger import Encoded, encode_text
from benchmint.xrd.profile import ProfileParams
from benchmint.xrd.realism import Realism

CRYSTAL_SYSTEMS = ("triclinic", "monoclinic", "orthorhombic", "tetragonal", "trigonal", "hexagonal", "cubic")
FEATURES = ("two_theta_star", "peak_intensity", "n_peaks", "union_size", "crystal_system_code", "spacegroup_number")


@dataclass(frozen=True)
class BuildConfig:
    per_db: int = 25
    db_from_dirname: bool = False
    two_theta_range: tuple[float, float] = (2.0, 90.0)
    image_size: tuple[int, int] = (800, 450)  # pixels of the rendered pattern
    seed: int = 0
    profile: ProfileParams = ProfileParams()  # broadening and ground-truth window (the paper's by default)
    realism: Realism = Realism()  # noise, background, texture, drawn widths (benchmint.xrd.realism); off by default
    cif_seconds: float = 300.0  # time limit of one CIF (all its blocks); past it, its worker is stopped

    def __post_init__(self) -> None:
        if self.per_db < 1:
            raise ValueError(f"per_db must be >= 1, got {self.per_db}")
        if not (isinstance(self.cif_seconds, (int, float)) and 0 < self.cif_seconds < float("inf")):
            raise ValueError(f"cif_seconds must be a positive number of seconds, got {self.cif_seconds}")
        if self.realism.fwhm_range is not None and self.profile.caglioti is not None:
            raise ValueError("a FWHM range and Caglioti widths exclude each other")

    def key_settings(self) -> dict:
        """The settings that shape a CIF's result (the time limit does not), with the version of the result's
        form (one item per structure block, the CIF's symmetry source recorded)."""
        settings = asdict(self)
        del settings["cif_seconds"]
        return {**settings, "result_form": 2}


def union_group(size: int) -> str:
    return "Single" if size == 1 else "Double" if size == 2 else "Triple+"


def angle_range(two_theta: float) -> str:
    return "low" if two_theta < 20 else "mid" if two_theta < 40 else "high"


class PatternRenderer:
    """Intensity vs 2θ with labelled axes at a fixed size: the image the benchmark's models read.

    A figure costs ~60 ms to lay out and draw, almost all of it axes, ticks and
    text that are the same for every pattern (the axes are fixed: the grid's
    range and 0-105 % of the maximum). So they are drawn once, without the
    curve and the frame; each pattern then restores that background, draws
    its curve and the frame over it, and is written as an 8-bit grayscale PNG
    (``gray_png``; the plot is black on white). ~3 ms per image; the result depends only on
    the pattern (``render_pattern_full`` draws the same figure the plain way).
    """

    def __init__(self, grid: np.ndarray, size: tuple[int, int]) -> None:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.grid = np.array(grid, dtype=np.float64)
        self.fig, self.ax, self.line = _pattern_figure(self.grid, np.zeros_like(self.grid), size, Figure)
        self.canvas = FigureCanvasAgg(self.fig)
        self.frame = list(self.ax.spines.values())
        for artist in (self.line, *self.frame):
            artist.set_visible(False)
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.fig.bbox)
        for artist in (self.line, *self.frame):
            artist.set_visible(True)

    def pixels(self, curve: np.ndarray) -> np.ndarray:
        """The image as an (height, width) uint8 array."""
        self.canvas.restore_region(self.background)
        self.line.set_ydata(_percent(curve))
        self.ax.draw_artist(self.line)
        for spine in self.frame:
            self.ax.draw_artist(spine)
        return np.asarray(self.canvas.buffer_rgba())[..., 0].copy()  # R = G = B: black, white and greys

    def save(self, curve: np.ndarray, path: Path) -> None:
        Path(path).write_bytes(gray_png(self.pixels(curve)))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def gray_png(pixels: np.ndarray, level: int = 3) -> bytes:
    """An 8-bit grayscale PNG of ``pixels`` (height, width uint8), every row "up"-filtered.

    A plot is mostly rows equal to the one above, which the up filter turns into
    zeros: zlib at level 3 then packs it in ~1 ms, where Pillow's encoder (five
    filters tried per row, level 6) takes ~4 ms for a file a quarter smaller.
    Any PNG reader gives back ``pixels`` exactly.
    """
    height, width = pixels.shape
    rows = np.empty((height, width + 1), dtype=np.uint8)
    rows[:, 0] = 2  # filter type "up" (the first row's "above" is zero)
    rows[0, 1:] = pixels[0]
    np.subtract(pixels[1:], pixels[:-1], out=rows[1:, 1:])  # modulo 256, as the filter defines
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8 bits, grayscale, no interlace
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), level)) + _png_chunk(b"IEND", b""))


def _percent(curve: np.ndarray) -> np.ndarray:
    return curve / curve.max() * 100.0


def _pattern_figure(grid, curve, size: tuple[int, int], figure_class):
    dpi = 100
    fig = figure_class(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    ax = fig.add_subplot()
    (line,) = ax.plot(grid, _percent(curve) if curve.any() else curve, color="black", linewidth=0.8)
    ax.set_xlabel("2θ (degrees)")
    ax.set_ylabel("Intensity (a.u.)")
    ax.set_xlim(grid[0], grid[-1])
    ax.set_ylim(0, 105)
    fig.tight_layout()
    return fig, ax, line


def render_pattern_full(grid, curve, size: tuple[int, int]) -> np.ndarray:
    """The same figure drawn the plain way (every artist, every time), as (height, width) uint8 grey levels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig, _, _ = _pattern_figure(np.asarray(grid, dtype=np.float64), curve, size, Figure)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., 0].copy()


_RENDERERS: dict = {}


def render_pattern(grid, curve, path: Path, size: tuple[int, int]) -> None:
    """Write the pattern's image; one renderer per grid and size is kept for the life of the process."""
    key = (float(grid[0]), float(grid[-1]), len(grid), tuple(size))
    renderer = _RENDERERS.get(key)
    if renderer is None:
        renderer = _RENDERERS[key] = PatternRenderer(grid, size)
    renderer.save(curve, path)


def _build_one(path, key: str, out_dir: str, db: str, cfg: BuildConfig) -> dict | Encoded:
    """One CIF's result as its worker stores it: ``_build_items``' items as their rows (``_as_row``), the
    result encoded as the driver reads it (``_framed``). Runs in a worker process."""
    result = _build_items(path, key, out_dir, db, cfg)
    where = tuple(sorted(path.where())) if hasattr(path, "where") else ()  # an archive's member: its fields
    if "blocks" in result:
        return _framed({"blocks": [_as_row(b, where) for b in result["blocks"]]})
    return _framed(_as_row(result, where))


def _build_items(path, key: str, out_dir: str, db: str, cfg: BuildConfig) -> dict:
    """One CIF -> its item, or {"error": ...}; a CIF of several structure blocks -> {"blocks": [{"block": name,
    and its item or error}, ...]}. The item's id and CIF path are the parent's to give (a file's content may
    stand for several files)."""
    from benchmint.run.archives import read_source
    from benchmint.xrd.cifread import structure_blocks

    blocks = structure_blocks(read_source(path).decode("utf-8", errors="replace"))
    # An item carries its structure's text, so the items folder stands alone: eval reads it there (a path back to
    # the CIF, or to an archive's member, would lie outside the folder, which eval refuses unless told), and a
    # block's text is its own (the file's would give a model, and the baseline, every block).
    if len(blocks) == 1:
        return _with_text(_build_block(blocks[0][1], key, f"{key[:12]}.png", out_dir, db, cfg), blocks[0][1])
    return {"blocks": [{"block": name, **_with_text(_build_block(text, f"{key}#{name}", f"{key[:12]}-{i:03d}.png",
                                                                 out_dir, db, cfg), text)}
                       for i, (name, text) in enumerate(blocks)]}


def _with_text(result: dict, text: str) -> dict:
    return result if "error" in result else {**result, "cif_text": text}


# A field of the item row that only the driver knows is written by the worker as a mark (``io.FIELD_MARKS``).
_SPLICE = FIELD_MARKS
_mark = field_mark


def _as_row(result: dict, where: tuple[str, ...]) -> dict:
    """A structure's item as its worker hands it to the driver: its items.jsonl row already encoded but for the
    fields the driver gives (``_Finish``: id, CIF path, archive and member), cut where they go (``row``: text,
    name, text, ... in the row's sorted-key order), with what the driver reads of it (``select``: the selection's
    fields but the id; ``cif_symmetry``; a block's name stays). The driver then joins the row instead of decoding
    the item and encoding it again. An error is kept as it is."""
    if "error" in result:
        return result
    block = {"block": result["block"]} if "block" in result else {}
    item = {k: v for k, v in result.items() if k != "block"}
    answer = item["answer"]
    names = ("cif", "id", *where)
    row = _SPLICE.split(dumps({**item, **{n: f"\0{n}\0" for n in names},
                               "hkl_convention": "4-index" if answer and len(answer[0]) == 4 else "3-index"}))
    if sorted(row[1::2]) != sorted(names):  # a value of the item's own spelled like a mark: the item as it is
        return result
    return {**block, "row": row, "select": {k: item[k] for k in SelectionInput.FIELDS if k != "id"},
            "cif_symmetry": item["cif_symmetry"]}


# A result with rows, as the ledger stores it: {"head_bytes": the head's length in bytes, "head": the result with
# each row's place instead of its text, "items": [the rows, marks and all]}. A row's place is its pieces' spans in
# bytes after the head: the driver decodes the head alone, found by its length, and hands the rows' bytes on as
# slices of what it read (``_read_rows``), never decoding or encoding them: its work a CIF does not grow with the
# items. The form before ({"head": ...}, spans in characters: the whole text decoded) is still read.
_HEAD_BYTES = '{"head_bytes":'
_HEAD = '{"head":'
_HEAD_AFTER_LENGTH = ',"head":'
_ITEMS = ',"items":['
_HEAD_READER = json.JSONDecoder()


def _framed(result: dict) -> dict | Encoded:
    """``result`` with its rows (``_as_row``) encoded as ``_read_rows`` reads it: a row's place is its pieces'
    byte spans in the text after the head, its fields' names between them. Without a row, the result as it is."""
    blocks = result.get("blocks", [result])
    if not any("row" in b for b in blocks):
        return result
    rows: list[str] = []
    at = len(_ITEMS)
    heads = []
    for b in blocks:
        if "row" not in b:
            heads.append(b)
            continue
        place: list = []
        text = [p if i % 2 == 0 else _mark(p) for i, p in enumerate(b["row"])]
        for i, piece in enumerate(text):
            size = len(piece) if piece.isascii() else len(piece.encode("utf-8"))
            place.append([at, at + size] if i % 2 == 0 else b["row"][i])
            at += size
        rows.append("".join(text))
        at += 1  # the comma before the next row
        heads.append({**b, "row": place})
    head = dumps({"blocks": heads} if "blocks" in result else heads[0])
    return encode_text(f"{_HEAD_BYTES}{len(head.encode('utf-8'))}{_HEAD_AFTER_LENGTH}{head}{_ITEMS}{','.join(rows)}]}}")


def _read_rows(stored: bytes) -> dict | None:
    """A result ``_framed`` encoded, as ``_Finish`` reads it (each row as its pieces, bytes-like, and fields'
    names), its head alone decoded; None for a result of another form (an error, one recorded before rows were
    framed)."""
    if stored.startswith(b'{"head_bytes":'):
        form = "bytes"
    elif stored.startswith(b'{"head":'):
        form = "text"
    else:
        return None
    try:
        if form == "bytes":
            comma = stored.index(b",", len(_HEAD_BYTES))
            start = comma + len(_HEAD_AFTER_LENGTH)
            end = start + int(stored[len(_HEAD_BYTES):comma])
            if stored[comma:start] != b',"head":' or stored[end:end + len(_ITEMS)] != b',"items":[':
                raise ValueError(f"no head of {end - start} bytes after byte {start}")
            head = _HEAD_READER.decode(stored[start:end].decode("utf-8"))
            data: Any = memoryview(stored)
        else:
            data = stored.decode("utf-8")
            head, end = _HEAD_READER.raw_decode(data, len(_HEAD))
        for b in head.get("blocks", [head]):
            if "row" in b:
                place = b["row"]
                if end + place[-1][1] > len(data):  # spans past the text: a head not of these rows
                    raise IndexError(f"a row's place ends at {end + place[-1][1]}, past the text's {len(data)}")
                b["row"] = [data[end + p[0]:end + p[1]] if i % 2 == 0 else p for i, p in enumerate(place)]
                if form == "text":
                    b["row"][::2] = [p.encode("utf-8") for p in b["row"][::2]]
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        return {"error": f"stored result unreadable: {type(exc).__name__}: {exc}"}
    return head


def _build_block(text: str, key: str, image_name: str, out_dir: str, db: str, cfg: BuildConfig) -> dict:
    """One structure (a CIF, or one block of it) -> its item without id, or {"error": ...}."""
    import warnings

    from benchmint.xrd.cifread import read_structure, with_hall_operations
    from benchmint.xrd.profile import sticks_pattern
    from benchmint.xrd.sticks import compute_sticks

    text, hall = with_hall_operations(text)
    notes: list[str] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pymatgen warns on many harmless CIF quirks; its decisions are in notes
            # gemmi where it provably gives pymatgen's structure, else CifParser(...).parse_structures()[0]
            structure, cif_route = read_structure(text, notes)
    except Exception as exc:  # pymatgen raises several types for unreadable CIFs
        return {"error": f"unreadable CIF: {type(exc).__name__}: {exc}"}
    if len(structure) == 0:
        return {"error": "the structure has no sites"}
    if structure.volume <= 1e-6 or not all(x > 1e-6 for x in structure.lattice.abc):
        return {"error": f"degenerate cell (volume {structure.volume:.3g} Å^3)"}
    try:
        sticks = compute_sticks(structure, cfg.two_theta_range)  # Cu Kα1, as pymatgen's XRDCalculator
    except Exception as exc:  # e.g. an element without scattering factors
        return {"error": f"no XRD pattern: {type(exc).__name__}: {exc}"}
    if len(sticks) == 0:
        return {"error": f"no reflection in 2θ {cfg.two_theta_range[0]}-{cfg.two_theta_range[1]}°"}
    real = cfg.realism
    rng = real.rng(key) if real.active else None
    profile = cfg.profile
    if real.fwhm_range is not None and rng is not None:
        profile = dataclasses.replace(profile, fwhm=round(float(rng.uniform(*real.fwhm_range)), 4))
    result = sticks_pattern(sticks, profile)
    symmetry = _symmetry(structure)
    image = Path(out_dir) / "images" / image_name
    image.parent.mkdir(parents=True, exist_ok=True)
    shown, observed = (result.curve, {}) if rng is None else _realistic(result, sticks, structure, symmetry, profile,
                                                                        real, rng)
    render_pattern(result.grid, shown, image, cfg.image_size)
    answer = [list(h) for h in result.ground_truth]
    item = {
        "db": db,
        "formula": structure.composition.reduced_formula,
        **symmetry,
        "two_theta_star": round(result.two_theta_star, 2),
        "peak_intensity": float(result.peak_intensity),
        "n_peaks": len(sticks),
        "union_size": len(answer),
        "answer": answer,
        "image": str(image.relative_to(out_dir)),
        "cif_route": cif_route,
        "cif_symmetry": _cif_symmetry(text, hall, notes),
        "meta": {"db": db, "union_size": union_group(len(answer)), "angle_range": angle_range(result.two_theta_star),
                 "crystal_system": symmetry["crystal_system"], "spacegroup_number": symmetry["spacegroup_number"]},
    }
    if observed:
        item.update({k: v for k, v in observed.items() if k != "peak_shift"})
        item["meta"]["peak_shift"] = observed["peak_shift"]
    return item


def _realistic(result, sticks, structure, symmetry: dict, profile: ProfileParams, real: Realism,
               rng) -> tuple[np.ndarray, dict]:
    """The pattern the image shows, and what the item records of it (see benchmint.xrd.realism)."""
    from benchmint.xrd import realism
    from benchmint.xrd.profile import broadened

    shown = result.curve
    if real.preferred_orientation is not None:
        direction, ratio = real.preferred_orientation
        labels, mults, start = sticks.family_arrays()
        weights = realism.po_weights(labels, mults, start, np.array(symmetry["laue_rotations"]),
                                     structure.lattice.reciprocal_lattice.matrix, direction, ratio)
        shown = broadened(sticks.two_theta, sticks.intensity * weights, profile)
    if real.background is not None:
        shown = shown + realism.chebyshev_background(result.grid, real.background, float(shown.max()))
    if real.noise_counts is not None:
        shown = realism.poisson_counts(shown, real.noise_counts, rng)
    observed = float(result.grid[int(np.argmax(shown))])
    shift = round(observed - result.two_theta_star, 4)
    from benchmint.xrd.profile_ref import stick_fwhm

    window = (profile.gt_window if profile.window_fwhms is None
              else profile.window_fwhms * stick_fwhm(result.two_theta_star, profile, "2theta*"))
    return shown, {"realism": {**real.record(), **({"fwhm": profile.fwhm} if real.fwhm_range else {})},
                   "observed_two_theta_star": round(observed, 2), "peak_shift_deg": shift,
                   "peak_shift": realism.shift_class(shift, window, profile.grid_step)}

ASSUMED_P1 = "assumed P1"


def _cif_symmetry(text: str, hall: str | None, notes: list[str]) -> str:
    """Where the structure's symmetry operations came from: the CIF's own operations, its Hall symbol, a
    space-group symbol or number CifParser read, or none at all (``ASSUMED_P1``: the sites as written)."""
    if hall is not None:
        return f"Hall symbol {hall}"
    if any("Defaulting to P1" in n for n in notes):
        return ASSUMED_P1
    used = next((n for n in notes if "Spacegroup from" in n), None)
    if used is not None:
        return "space group symbol " + used.split("Spacegroup from ", 1)[1].removesuffix(" used.")
    from benchmint.xrd.cifread import has_operations

    return "operations" if has_operations(text) else "space group number"


# spglib's default tolerance first (pymatgen's), then a looser one, recorded in the item when it was needed.
SYMPRECS = (0.01, 0.1)
# Friedel's law puts the inversion in every Laue group: folding by {E, -E} alone is right for any structure.
TRICLINIC_LAUE = [[-1, 0, 0, 0, -1, 0, 0, 0, -1], [1, 0, 0, 0, 1, 0, 0, 0, 1]]


def _symmetry(structure) -> dict:
    """Space group, crystal system, lattice type and Laue rotations, or nulls with a warning when spglib fails.

    The pattern and its ground truth do not depend on the space group, so an undetermined one costs the item
    nothing but its symmetry fields: they are null, the Laue rotations are the triclinic ones (only Friedel
    pairs fold), and ``symmetry_warning`` says why.
    """
    from pymatgen.symmetry.analyzer import SpacegroupAnalyzer

    from benchmint.xrd.symmetry import laue_rotations

    failures = []
    for symprec in SYMPRECS:
        try:
            sga = SpacegroupAnalyzer(structure, symprec=symprec)
            found = {"crystal_system": sga.get_crystal_system(), "spacegroup": sga.get_space_group_symbol(),
                     "spacegroup_number": sga.get_space_group_number(), "lattice_type": sga.get_lattice_type(),
                     "laue_rotations": laue_rotations(structure, analyzer=sga)}
            return found if symprec == SYMPRECS[0] else {**found, "symprec": symprec}
        except Exception as exc:  # spglib gives up on some real structures (overlapping or disordered sites)
            failures.append(f"symprec {symprec}: {type(exc).__name__}: {exc}")
    return {"crystal_system": None, "spacegroup": None, "spacegroup_number": None, "lattice_type": None,
            "laue_rotations": TRICLINIC_LAUE,
            "symmetry_warning": "space group undetermined (" + "; ".join(failures) + "); triclinic Laue rotations"}


class SelectionInput:
    """What ``select`` reads of the items, taken from each item as it comes: per database its ids and its rows of
    the six features (``add``), 48 bytes a row. ``xrd build`` fills it while the structures run, so after the
    last one the rows are ready, not read from every item, and the helper is handed arrays, not dicts."""

    FIELDS = ("db", "id", "two_theta_star", "peak_intensity", "n_peaks", "union_size", "crystal_system",
              "spacegroup_number")  # what ``add`` reads of an item

    def __init__(self, items: Iterable[dict] = ()) -> None:
        self.dbs: dict[str, tuple[list[str], array]] = {}
        for item in items:
            self.add(item)

    def add(self, item: dict) -> None:
        ids, rows = self.dbs.get(item["db"]) or self.dbs.setdefault(item["db"], ([], array("d")))
        ids.append(item["id"])
        # An undetermined symmetry is a code of its own (one past cubic) and space group 0.
        system = item["crystal_system"]
        rows.extend((item["two_theta_star"], item["peak_intensity"], item["n_peaks"], item["union_size"],
                     CRYSTAL_SYSTEMS.index(system) if system else len(CRYSTAL_SYSTEMS),
                     item["spacegroup_number"] or 0))

    def __len__(self) -> int:
        return sum(len(ids) for ids, _ in self.dbs.values())

    def features(self, db: str) -> tuple[list[str], np.ndarray]:
        """A database's ids and its features (rows x the six of ``FEATURES``)."""
        ids, rows = self.dbs[db]
        return ids, np.frombuffer(rows, dtype=np.float64).reshape(-1, len(FEATURES)).copy()  # rows may grow on


def select(items: list[dict] | SelectionInput, per_db: int, seed: int = 0, workers: int = 1,
           spread: Any = None) -> tuple[list[dict], dict[str, float | None]]:
    """KMeans per database on standardised features; the item nearest each centroid (crystalxrd-bench §2.2, App. D).

    The ten KMeans restarts and the silhouette's rows run over ``workers`` threads (``xrd.cluster``), each
    restart on one thread: scikit-learn would start an OpenMP thread per core inside one restart, whose threads
    spin at every Lloyd iteration (0.8-2.7 s for 598 items on two busy cores, 0.08 s on one thread) and whose
    sums would follow the core count. So the selection and the silhouettes are the same on any core count.
    ``spread`` (``run.ray_engine.RayMap``) runs those parts as Ray tasks instead, with the same results.
    ``items``: the items, or their ``SelectionInput``.
    """
    import sklearn.cluster  # noqa: F401 - loads the OpenMP runtime, which the limit below finds only once loaded
    from threadpoolctl import threadpool_limits

    from benchmint.parallel import resolve_workers
    from benchmint.xrd.cluster import Threads

    inp = items if isinstance(items, SelectionInput) else SelectionInput(items)
    with threadpool_limits(limits=1):
        return _select(inp, per_db, seed, spread or Threads(min(resolve_workers(workers), os.cpu_count() or 1)))


def _select(inp: SelectionInput, per_db: int, seed: int, spread: Any) -> tuple[list[dict], dict[str, float | None]]:
    from sklearn.preprocessing import StandardScaler

    from benchmint.xrd import cluster

    rows, silhouettes = [], {}
    for db in sorted(inp.dbs):
        ids, feats = inp.features(db)
        scaled = StandardScaler().fit_transform(feats)
        # Repeated structures give repeated rows: more clusters than distinct rows would leave some empty (no
        # nearest item), so k is capped at the distinct rows, and an empty cluster is skipped all the same.
        k = min(per_db, len(np.unique(scaled, axis=0)))
        labels, centres = cluster.kmeans(scaled, k, seed, spread)
        used = len(np.unique(labels))
        # Rounded as the standardized features are: scikit-learn's silhouette_score takes its distances by
        # BLAS and differs from the exact one here by 1e-11 to 1e-7 (most where rows repeat), not in the last digit.
        silhouettes[db] = round(cluster.silhouette(scaled, labels, spread), 6) if 2 <= used < len(ids) else None
        for c, centre in enumerate(centres):
            members = np.flatnonzero(labels == c)
            if len(members) == 0:
                continue
            nearest = members[np.argmin(np.linalg.norm(scaled[members] - centre, axis=1))]
            rows.append({"db": db, "cluster": c, "id": ids[nearest],
                         "features": dict(zip(FEATURES, feats[nearest].tolist())),
                         "standardized": [round(v, 6) for v in scaled[nearest].tolist()]})
    return rows, silhouettes


class Selector:
    """``select`` in a helper process started with the run, so that importing scikit-learn (~1.2 s) overlaps
    the structures' work instead of following it.

    The helper imports scikit-learn, then waits for one pickled request on stdin and answers on stdout; it
    ends with the run (a parent-death signal, and end of input). Should it fail, ``select`` runs here: the
    same function, so the same selection.

    With ``engine`` "ray" there is no helper: ``select`` runs here, its restarts and silhouette units as tasks
    on the connected cluster (``run.ray_engine.RayMap``), so the cluster's cores share the step a database's
    size makes long; scikit-learn is imported on a thread of this process while the structures run. Should
    the cluster fail it, ``select`` runs on this process's threads.
    """

    def __init__(self, engine: str = "local") -> None:
        import subprocess
        import sys
        import threading

        from benchmint.parallel import die_with_parent

        self.proc: subprocess.Popen | None = None
        self.imports: threading.Thread | None = None
        if engine == "ray":
            self.imports = threading.Thread(target=_import_for_selection, daemon=True,
                                            name="benchmint-selection-imports")
            self.imports.start()
            return
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from benchmint.xrd.build import _serve_selection; _serve_selection()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
        except OSError:
            self.proc = None

    def select(self, items: list[dict] | SelectionInput, per_db: int, seed: int,
               workers: int = 1) -> tuple[list[dict], dict[str, float | None]]:
        import pickle

        items = items if isinstance(items, SelectionInput) else SelectionInput(items)
        if self.imports is not None:
            from benchmint.run.ray_engine import RayMap

            self.imports.join()
            try:
                return select(items, per_db, seed, spread=RayMap())
            except Exception as exc:  # noqa: BLE001 - a task's workers died past its retries, the connection lost
                import warnings

                warnings.warn(f"the Ray cluster failed the KMeans selection ({type(exc).__name__}: {exc}); it runs "
                              "on this machine instead, with the same result", RuntimeWarning, stacklevel=2)
        proc, self.proc = self.proc, None
        if proc is not None:
            request = (items, per_db, seed, workers)
            try:
                out, _ = proc.communicate(pickle.dumps(request), timeout=600)
                if proc.returncode == 0 and out:
                    return pickle.loads(out)
            except Exception:  # noqa: BLE001 - any failure of the helper: select here instead
                proc.kill()
                proc.wait()
        return select(items, per_db, seed, workers)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _import_for_selection() -> None:
    """What ``select`` imports: done while the structures are built."""
    import sklearn.cluster  # noqa: F401
    import sklearn.preprocessing  # noqa: F401

    import benchmint.xrd.cluster  # noqa: F401 - its silhouette kernel's module only when a database needs it


def _serve_selection() -> None:
    import pickle
    import sys

    _import_for_selection()

    data = sys.stdin.buffer.read()
    if not data:  # the run ended without a selection
        return
    items, per_db, seed, workers = pickle.loads(data)
    sys.stdout.buffer.write(pickle.dumps(select(items, per_db, seed, workers)))
    sys.stdout.buffer.flush()
    # The answer is out: tearing down scikit-learn's and SciPy's modules (~0.25 s) would only delay the run.
    os._exit(0)


@dataclass
class BuildResult:
    cifs: int
    items: int
    selected: int
    errors: list[dict]
    skipped: int
    silhouettes: dict
    warnings: list[dict] = dataclasses.field(default_factory=list)  # items kept with a warning (errors.jsonl too)


# What a worker imports for its first structure (``xrd.preload``: pymatgen without the scipy.cluster it never
# uses, matplotlib's figure and Agg canvas).
_WORKER_MODULES = ("benchmint.xrd.preload",)


def share_imports(workers: int, cores: int | None = None) -> bool:
    """Whether the driver imports ``_WORKER_MODULES`` once before forking the workers (``share_preload``),
    rather than each worker importing them as it starts while the driver hashes the CIFs.

    The first CIF waits for one import either way. Imported in parallel, it costs each worker's core an
    import and overlaps the hashing: free where every worker has a core of its own. Where they have not (the
    selection helper imports scikit-learn at the same time), the extra imports take cores from the other
    processes' imports and delay every worker's first CIF. So: shared when the workers and the helper
    outnumber the cores (2 workers on 2 cores; all 16 on 16), in parallel otherwise. ``cores``: this machine's
    when not given (another's, for a measurement that counts a run on it).
    """
    from benchmint.parallel import resolve_workers

    return resolve_workers(workers) + 1 > (cores or os.cpu_count() or 1)


def build(inputs, out_dir, cfg: BuildConfig = BuildConfig(), workers: int = 1, progress: bool = False,
          engine: str = "local") -> BuildResult:
    """Build the items of the CIFs in ``inputs`` into ``out_dir``; ``engine`` "ray": the CIFs run as tasks on the
    connected Ray cluster (``run.run_files``), with the same outputs."""
    settings = cfg.key_settings()
    db_of = (lambda p: p.parent.name) if cfg.db_from_dirname else (lambda p: "default")
    per_db: dict[str, dict] = {}  # one settings object a database: the hashing encodes each once, not per CIF
    selector = Selector(engine)
    finish = _Finish(Path(out_dir))
    try:
        # Each file's result is finished and written as soon as the files before it are (``on_row``), while the
        # rest run: after the last CIF only the rest of that order and the selection are left.
        _, _, skipped = run_files(inputs, ".cif", out_dir, "xrd-build", _build_one, lambda p: (db_of(p), cfg),
                                  lambda p: per_db.setdefault(db_of(p), {**settings, "db": db_of(p)}),
                                  workers, progress, unit_seconds=cfg.cif_seconds, preload=_WORKER_MODULES,
                                  share_preload=share_imports(workers), engine=engine, on_row=finish.add,
                                  read=_read_rows)
        return finish.close(skipped, cfg, selector, workers)
    finally:
        finish.abandon()
        selector.close()


class _Relative:
    """Paths relative to ``out``, both with their symbolic links resolved (``Path.resolve``), each folder
    resolved once: resolving every CIF's whole path again took 0.07-0.15 ms an item, all at the end of the run."""

    def __init__(self, out: Path) -> None:
        self.out = out.resolve()
        self.folders: dict[str, tuple[str, str]] = {}  # as given -> (resolved, relative to out)

    def __call__(self, path, link: bool | None = None) -> str:
        """``link``: whether the file itself is a symbolic link, when its folder's listing told (``FoundFile.link``);
        else one lstat asks."""
        folder, name = os.path.split(os.fspath(path))
        got = self.folders.get(folder)
        if got is None:
            real = Path(folder).resolve()
            got = self.folders[folder] = (str(real), Path(os.path.relpath(real, self.out)).as_posix())
        if link is None:
            link = os.path.islink(os.path.join(got[0], name))
        if link:  # the file itself is a link: resolved as a whole
            return Path(os.path.relpath(Path(got[0], name).resolve(), self.out)).as_posix()
        return name if got[1] == "." else f"{got[1]}/{name}"


class _Finish:
    """Items, errors and the selection from the files' results, given one at a time in input order (``add``).

    Ids are given here: a file's stem, ``stem#block`` for each structure block of a file of several. A file
    whose key (content, database and settings) an earlier file has gives the same items: it is listed as a
    duplicate of that file, and the items carry the earlier file's ids and path. A second file with an id
    already taken (real dumps hold copies in several folders) would make the gold ambiguous, so it is listed
    as an error naming the file that has the id, and left out.

    Items and errors are written as they come, to temporary files that ``close`` renames into place (a reader
    never sees half a file; a run that fails leaves the files before it); of an item only what the selection
    reads (its features, ``SelectionInput``) is kept, so memory follows the number of items, not their size.
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        self.files = contextlib.ExitStack()
        self.items_fh: IO[bytes] | None = None
        self.items_out: list = []  # items.jsonl's bytes not written yet: the rows' pieces and the driver's fields
        self.items_held = 0  # their size
        self.errors_fh: IO[str] | None = None
        self.errors: list[dict] = []
        self.seen_key: dict[str, str] = {}
        self.seen_id: dict[str, str] = {}
        self.selection_input = SelectionInput()
        self.cifs = 0
        self.relative: _Relative | None = None

    def _open(self) -> None:
        # Opened with the first row, once the run made the folder and its inputs were found.
        self.items_fh = self.files.enter_context(atomic_write(self.out / "items.jsonl", "wb"))
        self.errors_fh = self.files.enter_context(atomic_write(self.out / "errors.jsonl"))
        self.relative = _Relative(self.out)

    def _error(self, row: dict) -> None:
        assert self.errors_fh is not None
        self.errors.append(row)
        self.errors_fh.write(dumps(row) + "\n")

    def add(self, f, key: str | None, r: dict) -> None:
        if self.items_fh is None:
            self._open()
        self.cifs += 1
        cif = str(f.path)
        if key is not None and key in self.seen_key:
            self._error({"cif": cif, **f.where(), "error": f"the same content as {self.seen_key[key]}; left out",
                         "kind": "duplicate_content", "duplicate_of": self.seen_key[key]})
            return
        if key is not None:
            self.seen_key[key] = cif
        if "error" in r:
            self._error({"cif": cif, **f.where(), **r})
            return
        stem = f.path.stem
        for b in r.get("blocks", [{**r, "block": None}]):
            name = b.pop("block")
            item_id = stem if name is None else f"{stem}#{name}"
            problem, taken = None, item_id in self.seen_id
            if "error" not in b and not taken:
                problem = self._item(f, b, item_id)
                if problem is None:
                    self.seen_id[item_id] = cif
                    if b.get("cif_symmetry") != ASSUMED_P1:
                        continue
            # The fields of an error's or a warning's row (made for those alone: most items have none).
            where = {"cif": cif, **f.where(), **({"block": name, "id": item_id} if name is not None else {})}
            if "error" in b:
                self._error({**where, **b})
            elif taken:
                self._error({**where, "error": f"duplicate id {item_id!r}: {self.seen_id[item_id]} has it; left out",
                             "kind": "duplicate_id", "duplicate_of": self.seen_id[item_id]})
            elif problem is not None:
                self._error({**where, "error": problem, "kind": "unreadable"})
            else:  # kept, but never silently
                self._error({**where, "id": item_id, "kind": "warning", "warning":
                             "the CIF gives no symmetry pymatgen can read (no operations, Hall or H-M symbol "
                             "or number): the sites are taken as written (P1); the item is kept"})

    def _item(self, f, b: dict, item_id: str) -> str | None:
        # What a prompt needs beside the item: the CIF (its path relative to items.jsonl, added here rather than
        # in the worker so that a resumed run in another place still points at its files) and the index
        # convention. A member of an archive is named by the archive's path and its name in it; its item
        # carries its text.
        assert self.items_fh is not None and self.relative is not None
        cif = (self.relative(f.member.archive) + f"/{f.member.name}" if f.member
               else self.relative(f.path, f.link))
        row = b.get("row")
        out = self.items_out
        if row is not None:  # encoded by the worker (``_as_row``, ``_read_rows``): the driver's fields joined in
            given = {"cif": cif, "id": item_id, **f.where()}
            if len(row) != 2 * len(given) + 1 or not all(n in given for n in row[1::2]):  # this item's error
                return f"stored result unreadable: its row has the fields {row[1::2]}, the file {sorted(given)}"
            # The row's pieces are slices of the bytes read from the ledger: held as they are, copied once.
            out.append(row[0])
            for name, piece in zip(row[1::2], row[2::2]):
                out.append(dumps_text(given[name]).encode("utf-8"))
                out.append(piece)
            out.append(b"\n")
            self.items_held += sum(len(p) for p in row[::2]) + 1
            self.selection_input.add({**b["select"], "id": item_id})
        else:
            # A result recorded before the workers encoded the rows (a ledger of an earlier version): the item.
            item = {**b, "id": item_id, "cif": cif, **f.where(),
                    "hkl_convention": "4-index" if b["answer"] and len(b["answer"][0]) == 4 else "3-index"}
            out.append((dumps(item) + "\n").encode("utf-8"))
            self.items_held += len(out[-1])
            self.selection_input.add(item)
        if self.items_held >= self.ITEMS_WRITE or len(out) >= self.ITEMS_PIECES:
            self._write_items()
        return None

    # items.jsonl is written this many bytes at a time (a few dozen items), or this many pieces (what one writev
    # call takes on Linux): one system call, not one a piece.
    ITEMS_WRITE = 1 << 20
    ITEMS_PIECES = 1024

    def _write_items(self) -> None:
        # The pieces go to the file as they are (os.writev): no copy of the rows joined first.
        assert self.items_fh is not None
        self.items_fh.flush()  # never written to but here: kept exact all the same
        fd, parts, i = self.items_fh.fileno(), self.items_out, 0
        while i < len(parts):
            batch = parts[i:i + self.ITEMS_PIECES]
            written = os.writev(fd, batch)
            for piece in batch:
                if written < len(piece):  # a short write: the rest of this piece first
                    parts[i] = memoryview(piece)[written:]
                    break
                written -= len(piece)
                i += 1
        parts.clear()
        self.items_held = 0

    def close(self, skipped: int, cfg: BuildConfig, selector: Selector, workers: int) -> BuildResult:
        """The selection, and the three files in place."""
        if self.items_fh is None:  # no row at all (the run always has one; kept for a clear state)
            self._open()
        self._write_items()
        items = self.selection_input
        selection, silhouettes = selector.select(items, cfg.per_db, cfg.seed, workers) if len(items) else ([], {})
        self.files.close()  # items.jsonl and errors.jsonl renamed into place
        write_jsonl(self.out / "selection.jsonl",
                    ({**row, "silhouette": silhouettes[row["db"]]} for row in selection))
        failed = [e for e in self.errors if "error" in e]
        return BuildResult(self.cifs, len(items), len(selection), failed, skipped, silhouettes,
                           [e for e in self.errors if "error" not in e])

    def abandon(self) -> None:
        """After a failure: the temporary files removed, the files of the run before left as they were."""
        self.files.__exit__(RuntimeError, RuntimeError("the run failed"), None)
