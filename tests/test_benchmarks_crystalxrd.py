"""CrystalXRD-Bench: release JSON rows and benchmint's own xrd build items, prompts, ablations, baseline."""

import io
import json

import pytest
from PIL import Image
from pymatgen.core import Lattice, Structure
from pymatgen.io.cif import CifWriter

from benchmint import benchmarks, tasks
from benchmint.benchmarks import ItemError
from benchmint.metrics import score_batch
from benchmint.xrd.build import BuildConfig, build

HEAD = ("You are a materials science expert specializing in X-ray diffraction (XRD) analysis. You are given:\n")
TASK3 = ("Task: Identify ALL Miller indices (hkl) for the HIGHEST peak. It may result from superposition of "
         "multiple crystallographic planes.\nReturn JSON:\n{\"max_peak_hkls\": [[h,k,l], ...]}")
TASK4 = ("Task: Identify ALL Miller-Bravais indices (hkil) for the HIGHEST peak. It may result from superposition "
         "of multiple crystallographic planes. Write each plane with 4 indices [h,k,i,l], where i = -(h+k).\n"
         "Return JSON:\n{\"max_peak_hkls\": [[h,k,i,l], ...]}")
CIF = "data_x\n_cell_length_a 3.6\n"


def png():
    buf = io.BytesIO()
    Image.new("L", (8, 4), 255).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """Rows as the release ships them: gt_hkls as a JSON string, file_name a path to a PNG in the repo."""
    root = tmp_path_factory.mktemp("crystalxrd")
    rows = [
        {"file_name": "images/cantor_hea/bel1.png", "sample_id": "bel1", "dataset": "cantor_hea",
         "material_type": "HEA", "formula": "MnFe3Co2Ni3", "cif_content": CIF, "task_name": "xrd_max_peak_hkl",
         "hkl_convention": "3-index", "prompt": "Ready-made prompt of bel1.", "gt_theta_argmax": 43.5,
         "gt_hkls": "[[3, 0, -3], [3, -3, 0], [0, 3, -3]]", "gt_union_size": 3, "gt_nearest_hkl": "[3, 0, -3]",
         "gt_nearest_distance_deg": 5.5e-05, "gt_method": "contributors_union_within_tolerance",
         "properties": "{}"},
        {"file_name": "images/mp/mp-2.png", "sample_id": "mp-2", "dataset": "mp", "material_type": "Inorganic",
         "formula": "ZnO", "cif_content": CIF, "hkl_convention": "4-index", "prompt": "Ready-made prompt of mp-2.",
         "gt_theta_argmax": 36.25, "gt_hkls": "[[1, 0, -1, 1]]"},
    ]
    for row in rows:
        (root / row["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        (root / row["file_name"]).write_bytes(png())
    (root / "rows.json").write_text(json.dumps(rows))  # a JSON array ...
    (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))  # ... or JSON lines
    return root


@pytest.mark.parametrize("name", ["rows.json", "rows.jsonl"])
def test_release_rows(release, name):
    items = [it for _, it in benchmarks.get("crystalxrd").read_items(release / name)]
    assert [it.id for it in items] == ["bel1", "mp-2"]
    assert items[0].answer == [[0, 3, -3], [3, -3, 0], [3, 0, -3]] and items[1].answer == [[1, 0, -1, 1]]
    assert items[0].meta == {"union_size": "Triple+", "db": "cantor_hea", "material_type": "HEA",
                             "angle_range": "high"}
    assert items[1].meta["angle_range"] == "mid" and items[1].meta["union_size"] == "Single"
    assert items[0].images[0].read() == png()
    tasks.get("hkl").normalize(items[0].answer)


def test_full_prompt_is_the_papers_and_switches_to_four_indices(release):
    bench = benchmarks.get("crystalxrd")
    cubic, hexagonal = [it for _, it in bench.read_items(release / "rows.json")]
    p = bench.prompt(cubic, "full")
    assert p.template == "crystalxrd/full.txt" and [type(x).__name__ for x in p.parts] == ["ImagePart", "TextPart"]
    assert p.text() == (HEAD + "1. An XRD pattern image (intensity vs. 2theta)\n"
                        "2. The CIF of the material: data_x\n_cell_length_a 3.6\n\n"
                        "3. The chemical formula: MnFe3Co2Ni3\n\n" + TASK3)
    p4 = bench.prompt(hexagonal, "full")
    assert p4.template == "crystalxrd/full.hkil.txt"
    assert p4.text() == (HEAD + "1. An XRD pattern image (intensity vs. 2theta)\n"
                         "2. The CIF of the material: data_x\n_cell_length_a 3.6\n\n"
                         "3. The chemical formula: ZnO\n\n" + TASK4)


def test_input_ablations_and_the_release_prompt(release):
    bench = benchmarks.get("crystalxrd")
    cubic, hexagonal = [it for _, it in bench.read_items(release / "rows.json")]
    image_only = bench.prompt(cubic, "image_only")
    assert len(image_only.images()) == 1
    assert image_only.text() == (HEAD + "1. An XRD pattern image (intensity vs. 2theta)\n"
                                 "2. The chemical formula: MnFe3Co2Ni3\n\n" + TASK3)
    cif_only = bench.prompt(hexagonal, "cif_only")
    assert cif_only.images() == [] and cif_only.template == "crystalxrd/cif_only.hkil.txt"
    assert cif_only.text() == (HEAD + "1. The CIF of the material: data_x\n_cell_length_a 3.6\n\n"
                               "2. The chemical formula: ZnO\n\n"
                               "Consider the powder XRD pattern of this material (Cu K-alpha radiation, 2theta "
                               "from 2 to 90 degrees).\n" + TASK4)
    own = bench.prompt(cubic, "release")
    assert [type(x).__name__ for x in own.parts] == ["ImagePart", "TextPart"]
    assert own.text() == "Ready-made prompt of bel1."


def test_missing_and_inconsistent_fields(tmp_path):
    (tmp_path / "p.png").write_bytes(png())
    good = {"sample_id": "a", "formula": "Si", "cif_content": CIF, "file_name": "p.png", "gt_hkls": "[[1,1,1]]"}
    rows = [good,
            {**good, "sample_id": "b", "gt_hkls": "[[1,1,1]"},
            {**good, "sample_id": "c", "hkl_convention": "4-index"},
            {k: v for k, v in {**good, "sample_id": "d"}.items() if k != "formula"},
            {k: v for k, v in {**good, "sample_id": "e"}.items() if k != "cif_content"},
            {**good, "sample_id": "f", "gt_hkls": [[1, 1, 1], [1, 0, -1, 0]]},
            {**good, "sample_id": "g", "cif_content": None, "cif": "missing.cif"},
            {**good, "sample_id": "h", "gt_hkls": "[[0,0,0]]"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = list(benchmarks.get("crystalxrd").read_items(path, "full"))
    assert [(loc.rsplit(":", 1)[1], it.field, it.message) if isinstance(it, ItemError) else it.id
            for loc, it in got] == [
        "a",
        ("2", "gt_hkls", 'field "gt_hkls" holds malformed JSON (Expecting \',\' delimiter at column 9)'),
        ("3", "gt_hkls", 'field "gt_hkls" has 3-index reflections but "hkl_convention" is 4-index'),
        ("4", "formula", 'missing field "formula"'),
        ("5", "cif_text", 'full needs the CIF: missing field "cif_text", "cif_content" or "cif"'),
        ("6", "gt_hkls", 'field "gt_hkls" mixes 3- and 4-index reflections'),
        ("7", "cif", f'file of field "cif" not found: {tmp_path}/missing.cif'),
        ("8", "gt_hkls", 'field "gt_hkls" has no answer'),
    ]
    # the image-only ablation does not need the CIF
    image_only = dict(benchmarks.get("crystalxrd").read_items(path, "image_only"))
    assert not isinstance(image_only[f"{path}:5"], ItemError)


def test_protocol_no_answer_retry_and_reasoning_settings():
    p = benchmarks.get("crystalxrd").protocol
    assert p.answer_retries == 0 and p.reasoning_effort == "high" and p.thinking_budget == 8192
    assert p.temperature is None and "§3.1" in p.source


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A real xrd build over two CIFs: rock salt (cubic) and magnesium (hexagonal)."""
    root = tmp_path_factory.mktemp("xrd")
    cifs = root / "cifs"
    cifs.mkdir()
    nacl = Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    mg = Structure.from_spacegroup("P6_3/mmc", Lattice.hexagonal(3.21, 5.21), ["Mg"], [[1 / 3, 2 / 3, 0.25]])
    # a slightly orthorhombic rock salt: (200), (020) and (002) fall within the 0.30° window of the strongest peak
    ortho = Structure.from_spacegroup("Fmmm", Lattice.orthorhombic(5.64, 5.65, 5.66), ["Na", "Cl"],
                                      [[0, 0, 0], [0.5, 0.5, 0.5]])
    CifWriter(nacl).write_file(cifs / "nacl.cif")
    CifWriter(mg).write_file(cifs / "mg.cif")
    CifWriter(ortho).write_file(cifs / "ortho.cif")
    out = root / "bench"
    build([cifs], out, BuildConfig(per_db=1))
    return out


def test_xrd_build_items_carry_the_cif_and_the_convention(built):
    rows = {r["id"]: r for r in map(json.loads, (built / "items.jsonl").read_text().splitlines())}
    assert rows["nacl"]["cif"] == "../cifs/nacl.cif" and rows["nacl"]["hkl_convention"] == "3-index"
    assert rows["mg"]["hkl_convention"] == "4-index" and all(len(h) == 4 for h in rows["mg"]["answer"])
    bench = benchmarks.get("crystalxrd")
    items = {it.id: it for _, it in bench.read_items(built / "items.jsonl", allowed=[built.parent / "cifs"])}
    assert items["nacl"].answer == [[2, 0, 0]] and items["nacl"].meta == rows["nacl"]["meta"]
    assert items["nacl"].gold()["laue_rotations"] == rows["nacl"]["laue_rotations"]
    assert items["nacl"].fields["cif_text"] == (built.parent / "cifs" / "nacl.cif").read_text()
    nacl, mg = bench.prompt(items["nacl"]), bench.prompt(items["mg"])
    assert nacl.template == "crystalxrd/full.txt" and mg.template == "crystalxrd/full.hkil.txt"
    assert "The chemical formula: NaCl\n" in nacl.text() and "[h,k,i,l], where i = -(h+k)" in mg.text()
    assert nacl.images()[0].data == (built / rows["nacl"]["image"]).read_bytes()


def test_baseline_answers_equal_the_ground_truth(built):
    bench = benchmarks.get("crystalxrd")
    items = [it for _, it in bench.read_items(built / "items.jsonl", allowed=[built.parent / "cifs"])]
    assert [it.id for it in items] == ["mg", "nacl", "ortho"]
    assert items[2].answer == [[0, 0, 2], [0, 2, 0], [2, 0, 0]]
    replies = [bench.baseline_reply(it) for it in items]
    kind = tasks.get("hkl")
    assert [kind.extract(r) for r in replies] == [[tuple(h) for h in it.answer] for it in items]
    assert [json.loads(r)["max_peak_hkls"] for r in replies] == [it.answer for it in items]
    # scored through the same path as a model: Jaccard 1.0 on every item
    scores = score_batch([kind.extract(r) for r in replies], [it.answer for it in items], task="hkl")
    assert list(scores["jaccard"]) == [1.0, 1.0, 1.0] and bench.has_baseline
    with pytest.raises(ValueError, match="no deterministic baseline"):
        benchmarks.get("seephys").baseline_reply(items[0])


def test_to_convention():
    from benchmint.benchmarks.crystalxrd import to_convention

    assert to_convention([(1, 0, 1), (1, 1, 0)], 4) == [[1, 0, -1, 1], [1, 1, -2, 0]]
    assert to_convention([(1, 1, -2, 0), (1, 0, -1, 1)], 3) == [[1, 0, 1], [1, 1, 0]]
    assert to_convention([(2, 0, 0)], 3) == [[2, 0, 0]]
