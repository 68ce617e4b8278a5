"""CIF text -> pymatgen Structure, fast where provably identical to pymatgen's parser.

The reference route (``cifread_ref.structure``) is
``CifParser.from_str(text).parse_structures(primitive=False)[0]`` with
warnings silenced (~12 ms for an ordinary CIF, mostly Python tokenising,
per-operation ``SymmOp`` parsing, per-image ``in_coord_list_pbc`` calls and the
composition check). ``BENCHMINT_IMPL=reference`` sends every CIF there.

``read_structure`` tokenises the CIF with gemmi (C++), checks the space group
with gemmi, and rebuilds the unit cell with NumPy following pymatgen's
``CifParser._get_structure`` step by step:

* numbers are read from the same raw strings with pymatgen's ``str2float``, and
  coordinates within 1e-4 (relative) of 1/3 or 2/3 are snapped as
  ``CifParser._sanitize_data`` does;
* rows are merged into positions in row order (a row joins the first position
  that one of its symmetry images lies within 1e-4, per component, modulo 1);
  rows sharing a position become one disordered site (pymatgen ``Composition``
  objects built exactly as pymatgen builds them);
* positions are grouped by composition (pymatgen's sort and ``groupby``), and
  each group's images are kept in pymatgen's order (position by position,
  operation by operation, wrapped with ``x - floor(x)``), dropping an image
  within 1e-4 of an earlier kept one of its group;
* the ``Structure`` is built from the same species list and sorted with
  ``get_sorted_structure`` as pymatgen does.

The fast route is taken only when the CIF stays inside conditions under which
each of those steps is pymatgen's: one data block; the lattice given by all
six parameters; an explicit ``_symmetry_equiv_pos_as_xyz`` or
``_space_group_symop_operation_xyz`` loop of plain ``x,y,z`` operations
(coefficients ±1, at most one rational translation per component) that gemmi
recognises as a space group; atom sites in a loop whose element CifParser
reads from the type symbol (``Fe``, ``Fe3+``, ``O2-``) or, without type
symbols, from the label (``Fe1``), as ``CifParser._parse_symbol`` does (no
water, hydroxide or nitrate specials, implicit hydrogens or Pauling-file
``0.8Nb + 0.2Zr`` symbols); occupancies in (0, 1] and at most 1 per position;
no magnetic (magCIF), implicit-hydrogen or oxidation-number data; every
closeness decision at least 1e-9 away from pymatgen's 1e-4 threshold (so
rounding-order differences cannot flip it), and the closeness relation among
each group's images is an equivalence (so the vectorised "first of each
class" equals pymatgen's greedy loop). Anything else goes to pymatgen (counted
as a fallback). The closeness tests run in ``benchmint._core.cifread``, whose
NumPy forms are ``cifread_ref.pbc_close`` / ``pbc_groups``.

Where benchmint reads a CIF differently from pymatgen alone, it does so before
either route, on the text both read (so the routes stay equal):
``structure_blocks`` splits a file of several structure blocks into one text
per block (pymatgen's ``parse_structures()[0]`` is the first block's
structure only), and ``with_hall_operations`` gives a block that names its
space group only by a Hall symbol the symbol's operations (pymatgen builds
such a block's asymmetric unit as P1).
"""

from __future__ import annotations

import functools
import math
import re
from itertools import groupby
from typing import TYPE_CHECKING

import numpy as np

from benchmint import _dispatch
from benchmint.xrd import cifread_ref

if TYPE_CHECKING:
    from pymatgen.core import Structure

__all__ = ["CellSites", "read_sites", "read_structure", "structure_blocks", "with_hall_operations"]

SITE_TOL = 1e-4  # CifParser's default site_tolerance
FRAC_TOL = 1e-4  # CifParser's default frac_tolerance
MARGIN = 1e-9  # closeness decisions must be this far from SITE_TOL
MAX_IMAGES = 6000  # per composition group; larger groups go to pymatgen (N^2 memory)

_SYMOP_TAGS = ("_symmetry_equiv_pos_as_xyz", "_symmetry_equiv_pos_as_xyz_",
               "_space_group_symop_operation_xyz", "_space_group_symop_operation_xyz_")
_REJECT = ("_space_group_magn", "_atom_site_moment", "_space_group_symop_magn", "_cell_modulation",
           "_cell_wave_vector")
_OXI_SUFFIX = re.compile(r"\d?[\+,\-]?$")  # CifParser._parse_oxi_states strips this from _atom_type_symbol
_NEEDED = ("_cell_length_a", "_cell_length_b", "_cell_length_c", "_cell_angle_alpha", "_cell_angle_beta",
           "_cell_angle_gamma", "_atom_site_label", "_atom_site_fract_x", "_atom_site_fract_y",
           "_atom_site_fract_z")
_TERM = re.compile(r"([+-]?)(?:([xyz])|(\d+)(?:/(\d+))?)")
_COMPONENT = re.compile(r"[+-]?(?:[xyz]|\d+(?:/\d+)?)(?:[+-](?:[xyz]|\d+(?:/\d+)?))*")
_TAG = re.compile(r"^[ \t]*(_\S+)", re.MULTILINE)
_SPECIAL = re.compile("Hw|Ow|Wat|wat|OH|OH2|NO3")  # CifParser._parse_symbol's special symbols


class _Fallback(Exception):
    """The CIF is outside the conditions of the fast route."""


class _Memo:
    """A Composition whose ``<`` and ``==`` results are remembered per pair of objects.

    CifParser sorts and groups the positions by their Composition; the same
    few Composition objects are compared thousands of times in a large cell.
    Each comparison still is Composition's own, made once, so the sort and
    the grouping are exactly CifParser's.
    """

    __slots__ = ("comp", "memo")

    def __init__(self, comp, memo: dict) -> None:
        self.comp, self.memo = comp, memo

    def _ask(self, op: str, other: _Memo) -> bool:
        key = (op, id(self.comp), id(other.comp))
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = bool(self.comp < other.comp if op == "<" else self.comp == other.comp)
        return got

    def __lt__(self, other: _Memo) -> bool:
        return self._ask("<", other)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Memo) and self._ask("==", other)

    __hash__ = None  # type: ignore[assignment]  # typeshed declares object.__hash__ a method; None: unhashable


class _SiteOrder:
    """Sort key comparing exactly as pymatgen's Site.__lt__ (NaN electronegativities included)."""

    __slots__ = ("en", "ss")

    def __init__(self, en: float, ss: str) -> None:
        self.en, self.ss = en, ss

    def __lt__(self, other: _SiteOrder) -> bool:
        if self.en < other.en:
            return True
        if self.en > other.en:
            return False
        return self.ss < other.ss


class CellSites:
    """The sites of a unit cell as plain lists: what the XRD kernels need, without a pymatgen Structure.

    ``lattice`` (pymatgen Lattice), ``species`` (one Composition per site),
    ``frac_coords`` (n x 3), ``labels``, in pymatgen's site order.
    ``structure()`` builds the equal pymatgen Structure (once).
    """

    __slots__ = ("lattice", "species", "frac_coords", "labels", "_structure")

    def __init__(self, lattice, species: list, frac_coords: np.ndarray, labels: list[str], structure=None) -> None:
        self.lattice, self.species, self.frac_coords, self.labels = lattice, species, frac_coords, labels
        self._structure = structure

    @classmethod
    def of(cls, structure) -> CellSites:
        return cls(structure.lattice, [site.species for site in structure], structure.frac_coords,
                   [site.label for site in structure], structure)

    def __len__(self) -> int:
        return len(self.species)

    def structure(self) -> Structure:
        if self._structure is None:
            from pymatgen.core import Structure

            self._structure = Structure(self.lattice, self.species, self.frac_coords, labels=self.labels)
        return self._structure


def read_sites(text: str, notes: list[str] | None = None) -> tuple[CellSites, str]:
    """(sites, route): route is "gemmi" when the fast route applies, else "pymatgen" (CifParser decides;
    always under ``BENCHMINT_IMPL=reference``). ``notes`` receives CifParser's warnings where it decided
    (the fast route reads only CIFs with explicit operations, about which it has nothing to say)."""
    if not _dispatch.use_reference("cifread"):
        try:
            return _fast(text), "gemmi"
        except Exception:  # noqa: BLE001 - _Fallback, or anything unforeseen: pymatgen decides, exactly as before
            _dispatch.fallback("cifread")
    return CellSites.of(cifread_ref.structure(text, notes)), "pymatgen"


def read_structure(text: str, notes: list[str] | None = None):
    """(structure, route): ``read_sites`` as a pymatgen Structure, equal to CifParser's parse_structures(primitive=False)[0]."""
    sites, route = read_sites(text, notes)
    return sites.structure(), route


# CifFile.from_str's block split, so that a block here is a block there.
_BLOCK_SPLIT = re.compile(r"^\s*data_", re.MULTILINE | re.DOTALL)
_HAS_SITES = re.compile(r"^[ \t]*_atom_site_(?:fract|cartn)_x\b", re.MULTILINE | re.IGNORECASE)


def structure_blocks(text: str) -> list[tuple[str | None, str]]:
    """The data blocks of a CIF that hold a structure (atom sites), as (block name, block text), in order.

    A file of one data block, or of one block with atom sites, is [(None, text)] (its structure is the
    file's); a file without any block with atom sites too, for CifParser to say what is wrong with it.
    Blocks are split as CifParser splits them, so a block means the same to both routes.
    """
    parts = _BLOCK_SPLIT.split(f"x\n{text}")[1:]
    if len(parts) <= 1:
        return [(None, text)]
    blocks = [(part.split(None, 1)[0] if part.strip() else "", f"data_{part}") for part in parts]
    with_sites = [(name, block) for name, block in blocks if _HAS_SITES.search(block)]
    if not with_sites:
        return [(None, text)]
    if len(with_sites) == 1:
        return [(None, with_sites[0][1])]
    return with_sites


_OPS_TAGS = (*_SYMOP_TAGS, "_space_group_symop.operation_xyz")
_OPS_TAG = re.compile(r"^[ \t]*_(?:symmetry_equiv_pos_as_xyz|space_group_symop[._]operation_xyz)_?\s",
                      re.MULTILINE | re.IGNORECASE)


def has_operations(text: str) -> bool:
    """The CIF lists its symmetry operations (as xyz triplets)."""
    return _OPS_TAG.search(text) is not None
_HALL_TAGS = ("_symmetry_space_group_name_Hall", "_space_group_name_Hall", "_space_group.name_Hall")


def with_hall_operations(text: str) -> tuple[str, str | None]:
    """(text, Hall symbol): a one-block CIF that gives its space group only by a Hall symbol, completed with
    the symbol's operations as an ``_symmetry_equiv_pos_as_xyz`` loop (gemmi's table), else (text, None).

    CifParser looks Hall symbols up among H-M symbols, finds none, and builds the asymmetric unit alone as
    P1 (rock salt from ``-F 4 2 3`` would be two atoms in a primitive cubic cell); both routes read the
    completed text. A CIF with explicit operations is left as it is; one with a Hall symbol and an H-M
    symbol but no operations is completed from the Hall symbol, which names the setting and origin an H-M
    symbol may leave open.
    """
    if "name_hall" not in text.lower() or has_operations(text):  # the common case, without parsing the text
        return text, None
    import gemmi

    try:
        doc = gemmi.cif.read_string(text)
    except Exception:  # noqa: BLE001 - not readable here: the parsers say what is wrong with it
        return text, None
    if len(doc) != 1:
        return text, None
    block = doc[0]
    if any(len(block.find_values(tag)) for tag in _OPS_TAGS):
        return text, None
    hall = next((gemmi.cif.as_string(v).strip() for v in map(block.find_value, _HALL_TAGS) if v is not None), "")
    if hall in ("", "?", "."):
        return text, None
    try:
        ops = gemmi.symops_from_hall(hall)
    except Exception:  # noqa: BLE001 - a symbol gemmi cannot read: the CIF stays as written (and says P1)
        return text, None
    nl = "\r\n" if "\r\n" in text else "\n"
    loop = nl.join(["", "loop_", "_symmetry_equiv_pos_as_xyz", *(f"'{op.triplet()}'" for op in ops), ""])
    return text.rstrip("\r\n") + nl + loop, hall


@functools.lru_cache(maxsize=4096)
def _element_of(symbol: str) -> str:
    """The element CifParser._parse_symbol reads from a type symbol or label ("Fe3+" and "Fe1" are Fe, "O2-" is
    O); _Fallback where pymatgen would do more than that: its special symbols (water, hydroxide, nitrate), implicit
    hydrogens, Pauling-file "0.8Nb + 0.2Zr" symbols, or no element at all."""
    from pymatgen.core import Element

    if not symbol or _SPECIAL.match(symbol) or symbol[:3] == "O-H" or " + " in symbol:
        raise _Fallback
    if Element.is_valid_symbol(symbol[:2].title()):
        return symbol[:2].title()
    if Element.is_valid_symbol(symbol[0].upper()):
        return symbol[0].upper()
    raise _Fallback  # pymatgen's last resort (a capitalised word) is no element, or the site is skipped


def _oxidation_states(block, written: set[str]) -> dict[str, float] | None:
    """CifParser._parse_oxi_states: {type symbol: oxidation number}, with each symbol also stripped of its
    charge suffix; None where pymatgen finds none (a tag missing as written, a number it cannot read)."""
    import gemmi
    from pymatgen.io.cif import str2float

    if not {"_atom_type_symbol", "_atom_type_oxidation_number"} <= written:
        return None
    table = block.find("_atom_type_", ["symbol", "oxidation_number"])
    if len(table) == 0 or table.loop is None:
        raise _Fallback  # two single values, or in two loops: pymatgen indexes strings or other rows
    try:
        pairs = [(gemmi.cif.as_string(r[0]), str2float(gemmi.cif.as_string(r[1]))) for r in table]
    except ValueError:
        return None
    states = dict(pairs)
    for symbol, number in pairs:
        states[_OXI_SUFFIX.sub("", symbol)] = number
    return states


def _check_attached_hydrogens(block, written: set[str]) -> None:
    """CifParser._sanitize_data reads every _atom_site_attached_hydrogens value (only to warn); one it cannot read
    makes the whole parse fail, which pymatgen's own route reports."""
    import gemmi
    from pymatgen.io.cif import str2float

    if "_atom_site_attached_hydrogens" not in written:
        return
    for value in block.find_values("_atom_site_attached_hydrogens"):
        try:
            str2float(gemmi.cif.as_string(value))
        except Exception as exc:
            raise _Fallback from exc


def _parse_op(s: str) -> tuple[np.ndarray, np.ndarray]:
    """A plain xyz operation as pymatgen's SymmOp.from_xyz_str reads it (rotation, translation)."""
    tokens = s.strip().replace(" ", "").lower().split(",")
    if len(tokens) != 3:
        raise _Fallback
    rot = np.zeros((3, 3))
    trans = np.zeros(3)
    for i, tok in enumerate(tokens):
        if not _COMPONENT.fullmatch(tok):
            raise _Fallback
        seen_var, seen_t = set(), False
        for m in _TERM.finditer(tok):
            sign = -1.0 if m[1] == "-" else 1.0
            if m[2]:
                if m[2] in seen_var:
                    raise _Fallback
                seen_var.add(m[2])
                rot[i, ord(m[2]) - 120] = sign
            else:
                if seen_t:
                    raise _Fallback
                seen_t = True
                trans[i] = (float(m[3]) / float(m[4]) if m[4] else float(m[3])) * sign
    return rot, trans


@functools.lru_cache(maxsize=1024)
def _operations(xyz: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(rotations, translations) of an op list that gemmi recognises as a whole space group; else _Fallback.

    Cached: a CIF database repeats a few hundred op lists (one per space-group
    setting), and matching a list against gemmi's table costs ~0.1 ms.
    """
    import gemmi

    parsed = [_parse_op(s) for s in xyz]
    try:
        gops = gemmi.GroupOps([gemmi.Op(s.strip().replace(" ", "").lower()) for s in xyz])
        sg = gemmi.find_spacegroup_by_ops(gops)
    except Exception as exc:
        raise _Fallback from exc
    if sg is None or len(gops) != len(xyz):
        raise _Fallback
    rots = np.array([r for r, _ in parsed])
    trans = np.array([t for _, t in parsed])
    rots.flags.writeable = trans.flags.writeable = False
    return rots, trans


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairs of positions within pymatgen's site tolerance; a pair too near the tolerance sends the CIF to pymatgen."""
    close, ambiguous = _dispatch.core().cifread.pbc_close(np.ascontiguousarray(a, dtype=np.float64),
                                                         np.ascontiguousarray(b, dtype=np.float64),
                                                         SITE_TOL, MARGIN)
    if ambiguous:
        raise _Fallback
    return close


def _groups(a: np.ndarray) -> np.ndarray:
    """root[j]: the first position close to position j. Sends the CIF to pymatgen when closeness is not
    an equivalence (pymatgen's greedy order would then matter) or a pair is too near the tolerance."""
    root, consistent, ambiguous = _dispatch.core().cifread.pbc_groups(
        np.ascontiguousarray(a, dtype=np.float64), SITE_TOL, MARGIN)
    if ambiguous or not consistent:
        raise _Fallback
    return root


def _fast(text: str):  # noqa: C901 - one pass over CifParser's rules, in their order; kept whole to read beside them
    import gemmi
    from pymatgen.core import Composition, Element, Lattice, Species
    from pymatgen.core.periodic_table import get_el_sp
    from pymatgen.core.sites import Site
    from pymatgen.io.cif import str2float

    low = text.lower()
    if any(tag in low for tag in _REJECT):
        raise _Fallback
    written = set(_TAG.findall(text))
    if not written.issuperset(_NEEDED):  # pymatgen's keys are case-sensitive: require them as written
        raise _Fallback
    try:
        doc = gemmi.cif.read_string(text)
    except Exception as exc:
        raise _Fallback from exc
    if len(doc) != 1:
        raise _Fallback
    block = doc[0]

    def one(tag: str) -> float:
        v = block.find_value(tag)
        if v is None:
            raise _Fallback
        try:
            return str2float(gemmi.cif.as_string(v))
        except Exception as exc:
            raise _Fallback from exc

    lengths = [one(f"_cell_length_{x}") for x in "abc"]
    angles = [one(f"_cell_angle_{x}") for x in ("alpha", "beta", "gamma")]
    if not all(math.isfinite(v) for v in lengths + angles):
        raise _Fallback
    lattice = Lattice.from_parameters(*lengths, *angles)
    with np.errstate(all="ignore"):
        thickness = (1.0 / np.linalg.norm(np.linalg.inv(lattice.matrix), axis=0)).tolist()  # d(100), d(010), d(001)
    if not all(math.isfinite(t) and t > 0.02 for t in thickness):  # pymatgen rejects < 0.01 Å
        raise _Fallback

    # symmetry operations: the first tag pymatgen would use
    xyz = None
    for tag in _SYMOP_TAGS:
        col = block.find_values(tag)  # gemmi matches tags case-insensitively, pymatgen does not
        if len(col) > 0 and tag not in written:
            raise _Fallback
        if len(col) > 0:
            if not col.get_loop():
                raise _Fallback  # a one-line op list: pymatgen's special case
            xyz = [gemmi.cif.as_string(v) for v in col]
            break
    if not xyz:
        raise _Fallback
    rots, trans = _operations(tuple(xyz))

    table = block.find("_atom_site_", ["label", "?type_symbol", "fract_x", "fract_y", "fract_z", "?occupancy"])
    if len(table) == 0 or table.loop is None:
        raise _Fallback
    has_type = table.has_column(1)
    if has_type != ("_atom_site_type_symbol" in written):  # written in another case: pymatgen would not see it
        raise _Fallback
    has_occ = table.has_column(5)
    if has_occ and "_atom_site_occupancy" not in written:
        raise _Fallback
    _check_attached_hydrogens(block, written)
    oxi = _oxidation_states(block, written)
    rows = []
    for row in table:
        # CifParser reads the element from the type symbol, or from the label when there is none
        raw = gemmi.cif.as_string(row[1] if has_type else row[0])
        element = _element_of(raw)
        sym: str | Species = element
        if oxi is not None:  # with an oxidation-number loop every site is a Species, 0 where none is given
            try:
                sym = Species(element, oxi.get(raw, oxi.get(element, 0)) if has_type else oxi.get(element, 0))
            except Exception as exc:
                raise _Fallback from exc  # pymatgen makes a DummySpecies
        try:
            coord = [str2float(gemmi.cif.as_string(row[k])) for k in (2, 3, 4)]
            occ = str2float(gemmi.cif.as_string(row[5])) if has_occ else 1.0
        except Exception as exc:
            raise _Fallback from exc
        if not (0.0 < occ <= 1.0) or not all(math.isfinite(c) for c in coord):
            raise _Fallback
        for k, c in enumerate(coord):  # CifParser._sanitize_data's snapping to 1/3 and 2/3
            for ideal in (1 / 3, 2 / 3):
                if math.isclose(c / ideal, 1, abs_tol=FRAC_TOL, rel_tol=0):
                    coord[k] = float(str(ideal))
        rows.append((gemmi.cif.as_string(row[0]), sym, tuple(coord), occ))

    # rows -> positions (CifParser's get_matching_coord, in row order)
    comps: dict = {}  # one Composition per (symbol, occupancy); "+=" below rebinds, never mutates
    for _, sym, _, occ in rows:
        if (sym, occ) not in comps:
            comps[sym, occ] = Composition({get_el_sp(sym): max(occ, 1e-8)})
    coord_to_species: dict = {}
    labels: dict = {}
    n_rows = len(rows)
    merges = True
    if n_rows * n_rows * len(rots) <= 1_000_000:
        # the common case decided at once: no image of a row lies near an earlier row
        base = np.array([r[2] for r in rows])
        images = np.einsum("oij,nj->noi", rots, base).reshape(-1, 3) + np.tile(trans, (n_rows, 1))
        near = _close(images, base).reshape(n_rows, len(rots), n_rows).any(axis=1)
        merges = bool(np.tril(near, -1).any())
    if not merges:
        for label, sym, pos, occ in rows:
            if pos in coord_to_species:
                raise _Fallback
            coord_to_species[pos] = comps[sym, occ]
            labels[pos] = label
    else:
        keys: list = []
        for label, sym, pos, occ in rows:
            comp = comps[sym, occ]
            match = None
            if keys:
                images = np.asarray(pos) @ rots.transpose(0, 2, 1) + trans  # n_ops x 3
                close = _close(images, np.array(keys))
                hit = np.flatnonzero(close.any(axis=1))
                if len(hit):
                    match = keys[int(np.flatnonzero(close[hit[0]])[0])]
            if match is None:
                coord_to_species[pos] = comp
                labels[pos] = label
                keys.append(pos)
            else:
                coord_to_species[match] += comp
                labels[match] = label

    all_species: list[Composition] = []
    all_coords: list[np.ndarray] = []
    all_labels: list[str] = []
    memo: dict = {}
    ordered = sorted(coord_to_species.items(), key=lambda x: _Memo(x[1], memo))
    for key, group in groupby(ordered, key=lambda x: _Memo(x[1], memo)):
        comp = key.comp
        tmp = [c for c, _ in group]
        if set(comp.elements) == {Element("O"), Element("H")}:
            raise _Fallback
        base = np.array(tmp)
        cand = np.einsum("oij,nj->noi", rots, base) + trans[None, :, :]  # position-major, then op
        cand = cand.reshape(-1, 3)
        cand = cand - np.floor(cand)
        n = len(cand)
        if n > MAX_IMAGES:
            raise _Fallback
        root = _groups(cand)
        keep = np.flatnonzero(root == np.arange(n))
        src = keep // len(rots)
        all_coords.extend(cand[keep])
        all_labels.extend(labels.get(tmp[i], "no_label") for i in src)
        all_species.extend([comp] * len(keep))
    if any(sum(comp.values()) > 1 for comp in set(coord_to_species.values())):
        raise _Fallback  # pymatgen raises or rescales
    if not all_species:
        raise _Fallback

    # get_sorted_structure(): a stable sort with Site.__lt__ (electronegativity, then species string),
    # done on the lists so the Structure is built once
    keys_of = {}
    for comp in all_species:
        if comp not in keys_of:
            site = Site(comp, (0.0, 0.0, 0.0))
            keys_of[comp] = (site.species.average_electroneg, site.species_string)
    order = sorted(range(len(all_species)), key=lambda i: _SiteOrder(*keys_of[all_species[i]]))
    return CellSites(lattice, [all_species[i] for i in order], np.array([all_coords[i] for i in order]),
                     [all_labels[i] for i in order])
