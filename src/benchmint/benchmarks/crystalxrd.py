"""CrystalXRD-Bench: the Miller indices of the strongest peak of a powder XRD pattern (crystalxrd-bench.txt).

The model gets the pattern image, the CIF text and the chemical formula
(§2.1, §3.2) and returns JSON ``{"max_peak_hkls": [[h,k,l], ...]}``; for
hexagonal and trigonal cells the prompt asks for 4-index Miller-Bravais
labels [h,k,i,l], i = -(h+k) (App. A). Settings:

* ``full``: image, CIF and formula, the paper's prompt (App. A);
* ``image_only`` and ``cif_only``: the input ablations the paper names
  (§6), each dropping one input and keeping the formula;
* ``release``: the release row's own ``prompt`` text as it is, with the image.

``baseline_reply`` derives the answer from the CIF with benchmint's own
simulator, the paper's deterministic ceiling (Jaccard 1.0, §5-6), written as
a model reply so it runs through the same extraction and scoring.

Item fields (``benchmint xrd build`` items, CrystalXRD-Bench JSON rows):

=========================  ================================================
``id``/``sample_id``       item id
``answer``/``gt_hkls``     gold HKL set: a list, or a string holding the
                           JSON list (the release)
``formula``                chemical formula
``cif_text``/``cif_content``  the CIF text; or ``cif``: the CIF file, relative
                           to the items file (``xrd build``); needed by
                           full, cif_only and the baseline
``image``/``file_name``    the pattern image, relative to the items file;
                           needed by full, image_only and release
``hkl_convention``         ``3-index`` or ``4-index``; when absent, taken
                           from the gold answer's index count
``prompt``                 release: the ready-made prompt of the row
``laue_rotations``         kept for symmetry-folded scoring when present
``meta`` (``xrd build``) or ``dataset``, ``material_type``,
``gt_theta_argmax``: strata
=========================  ================================================
"""

from __future__ import annotations

from collections.abc import Mapping

from benchmint.benchmarks import layouts
from benchmint.benchmarks.base import (
    Benchmark,
    EvalItem,
    FieldError,
    ImageRef,
    gold_answer,
    image_refs,
    item_id,
    json_value,
    need_pick,
    opt_str,
    pick,
    read_side_file,
)
from benchmint.io import dumps

SETTINGS = ("full", "image_only", "cif_only", "release")
NEEDS_CIF = ("full", "cif_only")
NEEDS_IMAGE = ("full", "image_only", "release")
CONVENTIONS = {"3-index": 3, "4-index": 4}


def union_group(size: int) -> str:
    return "Single" if size == 1 else "Double" if size == 2 else "Triple+"


def angle_range(two_theta: float) -> str:
    return "low" if two_theta < 20 else "mid" if two_theta < 40 else "high"


def to_convention(hkls, width: int) -> list[list[int]]:
    """Reflections written with ``width`` indices: (h, k, l) <-> (h, k, -(h+k), l)."""
    out = []
    for hkl in hkls:
        hkl = list(hkl)
        if len(hkl) == 3 and width == 4:
            hkl = [hkl[0], hkl[1], -(hkl[0] + hkl[1]), hkl[2]]
        elif len(hkl) == 4 and width == 3:
            hkl = [hkl[0], hkl[1], hkl[3]]
        out.append(hkl)
    return sorted(out)


class CrystalXRD(Benchmark):
    name = "crystalxrd"
    answer_kind = "hkl"
    settings = SETTINGS
    default_setting = "full"
    strata = ("db", "union_size", "angle_range")
    has_baseline = True

    def item_from_row(self, row: Mapping, origin: layouts.Origin, location: str) -> EvalItem:
        rid = item_id(row, "id", "sample_id")
        name, value = need_pick(row, "answer", "gt_hkls")
        answer = gold_answer(self.answer_kind, json_value(value, name), name)
        widths = {len(h) for h in answer}
        if len(widths) != 1:
            raise FieldError(name, f'field "{name}" mixes 3- and 4-index reflections')
        convention = pick(row, "hkl_convention")
        if convention is None:
            width = widths.pop()
        else:
            width = CONVENTIONS.get(str(convention[1]).strip())
            if width is None:
                raise FieldError("hkl_convention", f'field "hkl_convention" must be 3-index or 4-index, '
                                 f"got {convention[1]!r}")
            if widths != {width}:
                raise FieldError(name, f'field "{name}" has {widths.pop()}-index reflections but '
                                 f'"hkl_convention" is {convention[1]}')
        formula = opt_str(row, "formula")  # every prompt but release's names it (check_item); scoring does not
        cif = pick(row, "cif_text", "cif_content")
        if cif is not None and not isinstance(cif[1], str):
            raise FieldError(cif[0], f'field "{cif[0]}" must be text')
        if cif is not None:
            cif_text = cif[1]
        elif pick(row, "cif") is not None:
            cif_text = read_side_file(row["cif"], "cif", origin)
        else:
            cif_text = None
        found = pick(row, "image", "file_name")
        images = image_refs(found[1], found[0], origin) if found else ()
        if len(images) > 1:
            raise FieldError(found[0], f'field "{found[0]}" must hold one pattern image')
        release_prompt = pick(row, "prompt")
        gold_extra = {"laue_rotations": row["laue_rotations"]} if "laue_rotations" in row else {}
        return EvalItem(id=rid, answer=answer, meta=self._meta(row, answer), images=images,
                        fields={"formula": formula, "cif_text": cif_text, "width": width,
                                "prompt": release_prompt[1] if release_prompt else None},
                        location=location, gold_extra=gold_extra)

    @staticmethod
    def _meta(row: Mapping, answer: list) -> dict:
        if isinstance(row.get("meta"), Mapping):  # xrd build writes the strata itself
            return dict(row["meta"])
        meta = {"union_size": union_group(len(answer))}
        db = pick(row, "db", "dataset")
        if db is not None:
            meta["db"] = db[1]
        if pick(row, "material_type") is not None:
            meta["material_type"] = row["material_type"]
        peak = pick(row, "gt_theta_argmax", "two_theta_star")
        if peak is not None and isinstance(peak[1], (int, float)) and not isinstance(peak[1], bool):
            meta["angle_range"] = angle_range(float(peak[1]))
        return meta

    def check_item(self, item: EvalItem, setting: str) -> None:
        if setting != "release" and item.fields["formula"] is None:
            raise FieldError("formula", 'missing field "formula"')
        if setting in NEEDS_CIF and item.fields["cif_text"] is None:
            raise FieldError("cif_text", f'{setting} needs the CIF: missing field "cif_text", "cif_content" or "cif"')
        if setting in NEEDS_IMAGE and not item.images:
            raise FieldError("image", f'{setting} needs the pattern image: missing field "image" or "file_name"')
        if setting == "release" and not isinstance(item.fields["prompt"], str):
            raise FieldError("prompt", 'release needs the row\'s own prompt: missing field "prompt"')

    def template_files(self, setting: str) -> tuple[str, ...]:
        return ("release.txt",) if setting == "release" else (f"{setting}.txt", f"{setting}.hkil.txt")

    def template_spec(self, file: str) -> tuple[frozenset[str], bool]:
        setting = file.split(".", 1)[0]
        if setting == "release":
            return frozenset({"PROMPT"}), True
        names = {"FORMULA"} | ({"CIF_TEXT"} if setting in NEEDS_CIF else set())
        return frozenset(names), setting in NEEDS_IMAGE

    def prompt_inputs(self, item: EvalItem, setting: str) -> tuple[str, dict[str, str], tuple[ImageRef, ...]]:
        f = item.fields
        if setting == "release":
            return "release.txt", {"PROMPT": f["prompt"]}, item.images
        file = f"{setting}.hkil.txt" if f["width"] == 4 else f"{setting}.txt"
        values = {"FORMULA": f["formula"], "CIF_TEXT": f["cif_text"] or ""}
        return file, values, item.images if setting in NEEDS_IMAGE else ()

    def baseline_reply(self, item: EvalItem) -> str:
        """The answer benchmint's simulator derives from the item's CIF, as the reply the prompt asks for."""
        from benchmint.xrd.simulate import simulate

        if item.fields["cif_text"] is None:
            raise ValueError(f'{item.location}: the baseline needs the CIF: missing field "cif_text", '
                             '"cif_content" or "cif"')
        truth = simulate(item.fields["cif_text"]).pattern.ground_truth
        return dumps({"max_peak_hkls": to_convention(truth, item.fields["width"])})
