"""benchmint generate csmbench-mcq: the local perturbations (worked out by hand), their checks, curation by
physical scale, balanced answer letters, and the model's distractors against the scripted chat server (refused
and malformed replies, the bound, reruns and a killed run), with the items through eval and grade."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

import benchmint
from benchmint.cli import main
from benchmint.generate.csmbench import (
    Tables,
    answer_letters,
    balance,
    check_distractor,
    compose,
    curate,
    local_candidates,
    majority_vote,
    plan_slots,
    scale_of,
)
from benchmint.generate.flow import PromptSet

from chat_server import ChatServer, Malformed, Reply, prompt_of

PDF = Path(benchmint.__file__).parent / "samples" / "sample_paper.pdf"


@pytest.fixture(scope="module")
def tables():
    return Tables(PromptSet("csmbench"))


def rows(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


# ---------------------------------------------------------------------------------------------------------------
# Local perturbations, by hand

ZRB2 = "Fig. 3. SEM images of ZrB₂–SiC ceramics sintered at 1050 °C for 2 h; scale bar 500 nm."
AL2O3 = "TEM micrograph of Al2O3 particles annealed at 200–400 °C, ×50k magnification, with Fe3+ doping of 5 wt%."


def test_each_local_distractor_changes_one_axis_as_written(tables):
    cands = local_candidates(tables, ZRB2)
    # The method: SEM's partner in techniques.json, every mention swapped.
    assert cands["method"] == [ZRB2.replace("SEM", "TEM")]
    # The formula's first element, its subscript kept: Zr -> Ti, Hf; then SiC's Si -> Ge (C is in SiC: skipped).
    assert cands["composition"] == [ZRB2.replace("ZrB₂", "TiB₂"), ZRB2.replace("ZrB₂", "HfB₂"),
                                    ZRB2.replace("SiC", "GeC")]
    # Numbers: temperatures by 100 degrees, the rest doubled or halved, units and spacing kept.
    assert cands["number"] == [ZRB2.replace("1050 °C", "1150 °C"), ZRB2.replace("1050 °C", "950 °C"),
                               ZRB2.replace("2 h", "4 h"), ZRB2.replace("2 h", "1 h"),
                               ZRB2.replace("500 nm", "1000 nm"), ZRB2.replace("500 nm", "250 nm")]


def test_ranges_magnifications_and_charges(tables):
    cands = local_candidates(tables, AL2O3)
    # A range moves as a whole; a magnification keeps its "k"; percentages are halved or doubled.
    assert cands["number"] == [AL2O3.replace("200–400", "300–500"), AL2O3.replace("200–400", "100–300"),
                               AL2O3.replace("×50k", "×100k"), AL2O3.replace("×50k", "×25k"),
                               AL2O3.replace("5 wt%", "2 wt%"), AL2O3.replace("5 wt%", "10 wt%")]
    # "Fe3+" is a formula with its charge: Fe -> Co, Mn, the charge kept.
    assert AL2O3.replace("Fe3+", "Co3+") in cands["composition"]
    assert AL2O3.replace("Al2O3", "Fe2O3") in cands["composition"]
    assert cands["method"] == [AL2O3.replace("TEM", "SEM")]
    # Decimals are kept: 2.5 h halves to 1.2 h (rounded to one decimal), doubles to 5.0 h.
    assert local_candidates(tables, "SEM image after 2.5 h.")["number"] == ["SEM image after 5.0 h.",
                                                                           "SEM image after 1.2 h."]


def test_grouped_thousands_and_decimal_commas_keep_their_writing(tables):
    caption = "SEM image after 1,000 °C and 10,000 cycles; scale bar 2,5 µm."
    assert local_candidates(tables, caption)["number"] == [
        caption.replace("1,000 °C", "1,100 °C"), caption.replace("1,000 °C", "900 °C"),
        caption.replace("10,000", "20,000"), caption.replace("10,000", "5,000"),
        caption.replace("2,5 µm", "5,0 µm"), caption.replace("2,5 µm", "1,2 µm")]
    assert scale_of(tables, caption)[:3] == ("Mesoscale", "scale_bar", "2,5 µm")


def test_words_that_look_like_formulas_are_not_formulas(tables):
    assert tables.signature("UV and CO exposure, STEM and HRTEM, SEM at 5 kV", "composition") == ()
    # STEM is not TEM, HRTEM not TEM: each names its own method.
    assert tables.signature("STEM and HRTEM and TEM", "method") == ("STEM", "HRTEM", "TEM")


def test_the_check_refuses_what_changes_nothing_or_too_much(tables):
    ok = ZRB2.replace("SEM", "TEM")
    assert check_distractor(tables, ZRB2, ok, "method", []) is None
    assert "repeats the true caption" in check_distractor(tables, ZRB2, "  " + ZRB2.upper() + " ", "method", [])
    assert "repeats another option" in check_distractor(tables, ZRB2, ok.lower(), "method", [ok])
    assert "changes no characterization method" in check_distractor(
        tables, ZRB2, ZRB2.replace("ceramics", "composites"), "method", [])
    assert "also changes the numerical value" in check_distractor(
        tables, ZRB2, ok.replace("1050", "950"), "method", [])
    assert "changes no numerical value" in check_distractor(tables, ZRB2, ok, "number", [])


def test_a_caption_short_of_an_axis_gives_its_slot_to_the_others():
    assert plan_slots({"method": 1, "composition": 0, "number": 6}) == ["method", "number", "number"]
    assert plan_slots({"method": 2, "composition": 5, "number": 1}) == ["method", "composition", "number"]
    assert plan_slots({"method": 1, "composition": 0, "number": 1}) == ["method", "number"]


# ---------------------------------------------------------------------------------------------------------------
# Curation


@pytest.mark.parametrize("caption, scale, source", [
    (ZRB2, "Microscale", "scale_bar"),  # 500 nm: nanometres
    ("HRTEM image of the interface; scale bar = 2 nm.", "AtomScale", "scale_bar"),
    ("SEM image of the pores (scale bars are 10 µm).", "Mesoscale", "scale_bar"),
    ("Photograph of the 5 mm thick plate after the test.", "Macroscale", "method"),
    ("Cross-section of the plate, 5 mm thick.", "Macroscale", "length"),
    ("HRTEM image of the interface.", "AtomScale", "method"),
    ("Optical micrograph of the weld, 20 µm scale bar.", "Mesoscale", "scale_bar"),
])
def test_the_scale_from_scale_bar_method_or_length(tables, caption, scale, source):
    assert scale_of(tables, caption)[:2] == (scale, source)


def test_curation_drops_schematics_and_bare_statistics_and_labels_hybrids(tables):
    assert curate(tables, "Schematic of the synthesis route.")["reason"] == "schematic_or_flowchart"
    assert curate(tables, "Histogram of grain sizes over 300 grains.")["reason"] == "statistical_chart"
    hybrid = curate(tables, "SEM image (a) and XRD pattern (b) of the film; scale bar 1 µm.")
    assert hybrid["keep"] and hybrid["hybrid"] and hybrid["scale"] == "Mesoscale"
    assert not curate(tables, ZRB2)["hybrid"]


def test_answer_letters_are_balanced_and_seeded():
    for n in (4, 40, 41, 103):
        counts = Counter(answer_letters(n, 7))
        assert max(counts.values()) - min(counts[x] for x in "ABCD") <= 1
    assert answer_letters(40, 7) == answer_letters(40, 7) != answer_letters(40, 8)


# ---------------------------------------------------------------------------------------------------------------
# Runs

CAPTIONS = [
    ZRB2,
    AL2O3,
    "Fig. 4. TEM micrograph of TiO2 nanorods grown at 180 °C for 12 h (scale bar 50 nm).",
    "HRTEM image of the Fe3O4/graphene interface; scale bar 5 nm. Annealed at 600 °C.",
    "Optical micrograph of the Ni3Al weld after 100 cycles; scale bar 200 µm.",
    "Photograph of a Ti6Al4V plate, 20 mm wide, after 3 h at 950 °C.",
    "XRD pattern and SEM image of LiFePO4 calcined at 700 °C; scale bar 2 µm.",
    "AFM topography of MoS2 flakes on SiO2, scan size 5 µm.",
    "Schematic of the synthesis route of the ZnO films.",
    "Fig. 2: TEM micrograph of the sample.",
]


@pytest.fixture
def figures(tmp_path):
    """A figures JSONL of own records: a small PNG each, a caption, a discussion for all but the second."""
    folder = tmp_path / "figs"
    folder.mkdir()
    records = []
    for i, caption in enumerate(CAPTIONS):
        Image.new("RGB", (32, 24), (20 * i, 100, 200)).save(folder / f"f{i}.png")
        rec = {"image": f"f{i}.png", "caption": caption, "label": str(i + 1)}
        if i != 1:
            rec["discussion"] = f"Paragraph {i}: the figure shows the microstructure discussed in the text."
        records.append(rec)
    (folder / "figures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder / "figures.jsonl"


def test_local_run_items_open_items_and_rejections(figures, tmp_path, tables):
    out = tmp_path / "gen"
    assert main(["generate", "csmbench-mcq", str(figures), "--out", str(out), "--seed", "3"]) == 0
    items = rows(out / "items.jsonl")
    rejected = rows(out / "rejected.jsonl")
    # Every figure ends in an item or a rejection with its reason.
    curated = {(r["id"], r["reason"]) for r in rejected if r["stage"] != "open"}
    assert len(items) + len(curated) == len(CAPTIONS) == 10
    assert sorted(r for _, r in curated) == ["schematic_or_flowchart", "too_few_perturbations"]
    assert len(items) == 8
    for item in items:
        truth = next(c for c in CAPTIONS if c in [o["caption"] for o in item["options"]])
        options = [o["caption"] for o in item["options"]]
        assert [o["label"] for o in item["options"]] == list("ABCD") and len(set(options)) == 4
        assert options["ABCD".index(item["answer"])] == truth
        kinds = item["meta"]["option_kinds"]
        assert kinds[item["answer"]] == "truth"
        for letter, kind in kinds.items():
            if kind != "truth":
                text = options["ABCD".index(letter)]
                others = [o for o in options if o not in (text, truth)]
                assert check_distractor(tables, truth, text, kind, others) is None
        assert (out / item["image"]).is_file() and item["scale"] in ("AtomScale", "Microscale", "Mesoscale",
                                                                      "Macroscale")
    run = json.loads((out / "run.json").read_text())
    assert run["answer_letters"] == dict(Counter(i["answer"] for i in items)) == {"A": 2, "B": 2, "C": 2, "D": 2}
    by_id = {i["id"]: i for i in items}
    al2o3 = next(i for i in items if AL2O3 in [o["caption"] for o in i["options"]])
    assert sorted(al2o3["meta"]["option_kinds"].values()) == ["composition", "method", "number", "truth"]
    tem = next(i for i in items if CAPTIONS[2] in [o["caption"] for o in i["options"]])
    assert tem["scale"] == "Microscale" and tem["meta"]["scale_evidence"] == "50 nm"
    # The Ti6Al4V plate names no swappable method: its slot goes to the formula (two substitutes, Ti -> Zr, Hf).
    plate = next(i for i in items if CAPTIONS[5] in [o["caption"] for o in i["options"]])
    assert plate["meta"]["shortfall"] == {"method": 1}
    assert sorted(plate["meta"]["option_kinds"].values()) == ["composition", "composition", "number", "truth"]
    hybrid = next(i for i in items if CAPTIONS[6] in [o["caption"] for o in i["options"]])
    assert hybrid["hybrid"] is True and hybrid["scale"] == "Mesoscale"
    # Open items from the same figures: caption in, discussion as the reference; the second has none.
    opens = rows(out / "open.jsonl")
    assert len(opens) == 7 and all(o["id"] in by_id for o in opens)
    assert [r["id"] for r in rejected if r["stage"] == "open"] == [al2o3["id"]]

    # Two runs with one seed write the same bytes; another seed shuffles differently.
    again = tmp_path / "again"
    assert main(["generate", "csmbench-mcq", str(figures), "--out", str(again), "--seed", "3"]) == 0
    for name in ("items.jsonl", "open.jsonl", "rejected.jsonl"):
        assert (out / name).read_bytes() == (again / name).read_bytes()
    other = tmp_path / "other"
    assert main(["generate", "csmbench-mcq", str(figures), "--out", str(other), "--seed", "4"]) == 0
    assert (out / "items.jsonl").read_bytes() != (other / "items.jsonl").read_bytes()

    # eval runs both kinds of item; grade grades the MCQ answers against the generated key.
    with ChatServer() as server:
        server.default = Reply(text=lambda body: "C")
        ev = tmp_path / "eval"
        assert main(["eval", str(out / "items.jsonl"), "--benchmark", "csmbench-mcq", "--model", "m",
                     "--base-url", server.url, "--out", str(ev), "--retry-delay", "0"]) == 0
        assert server.count == 8
        ev_open = tmp_path / "eval_open"
        assert main(["eval", str(out / "open.jsonl"), "--benchmark", "csmbench-open", "--model", "m",
                     "--base-url", server.url, "--out", str(ev_open), "--retry-delay", "0"]) == 0
        assert server.count == 15
    preds = ev / "predictions.jsonl"
    assert main(["grade", str(preds), "--gold", str(out / "items.jsonl"), "--benchmark", "csmbench-mcq",
                 "--out", str(tmp_path / "grade"), "--quiet"]) == 0
    grades = rows(tmp_path / "grade" / "grades.jsonl")
    assert sorted(g["score"] for g in grades) == [0.0] * 6 + [1.0] * 2  # "C" is right for two items of eight
    # The open items' answers graded by a judge against the discussion paragraphs.
    with ChatServer() as judge:
        judge.default = Reply(text=lambda body: "7/10" if "Paragraph 0:" in prompt_of(body) else "4/10")
        assert main(["grade", str(ev_open / "predictions.jsonl"), "--gold", str(out / "open.jsonl"), "--benchmark",
                     "csmbench-open", "--judge-model", "j", "--judge-base-url", judge.url, "--retry-delay", "0",
                     "--no-sts", "--out", str(tmp_path / "grade_open"), "--quiet"]) == 0
    graded = rows(tmp_path / "grade_open" / "grades.jsonl")
    assert sorted(g["score"] for g in graded) == [0.4] * 6 + [0.7]


def test_a_harvest_figure_rejected_with_its_reason(tmp_path):
    harvest = tmp_path / "harvest"
    assert main(["harvest", str(PDF), "--out", str(harvest)]) == 0
    out = tmp_path / "gen"
    assert main(["generate", "csmbench-mcq", str(harvest), "--out", str(out), "--pdfs", str(PDF.parent)]) == 0
    rejected = rows(out / "rejected.jsonl")
    # Figure 1 names no scale; figure 2 ("TEM micrograph of the sample.") offers only its method.
    assert [(r["figure"]["label"], r["reason"]) for r in rejected] == [("1", "no_scale"),
                                                                        ("2", "too_few_perturbations")]
    assert rejected[1]["offered"] == {"composition": 0, "method": 1, "number": 0}


# ---------------------------------------------------------------------------------------------------------------
# The model's distractors


def caption_of(prompt: str) -> str:
    return prompt.split("The figure's true caption:\n", 1)[1].split("\n", 1)[0]


def kind_of(prompt: str) -> str:
    return prompt.split("Change the caption along this axis only: ", 1)[1].split(".", 1)[0]


GOOD = {"characterization method": lambda c: c.replace("SEM", "TEM").replace("TEM micrograph", "SEM micrograph"),
        "material composition": lambda c: c.replace("ZrB₂", "TiB₂").replace("Al2O3", "Ga2O3"),
        "numerical value": lambda c: c.replace("1050 °C", "950 °C").replace("200–400", "300–500")}


def good_model(body) -> str:
    prompt = prompt_of(body)
    return json.dumps({"distractor": GOOD[kind_of(prompt)](caption_of(prompt))})


def model_args(figures, out, server, *extra) -> list[str]:
    return ["generate", "csmbench-mcq", str(figures), "--out", str(out), "--gen-model", "gen", "--base-url",
            server.url, "--retry-delay", "0", "--concurrency", "1", "--limit", "2", *extra]


WRONG = AL2O3.replace("200–400", "300–500").replace("TEM", "STEM")


def test_model_distractors_refused_replies_asked_again_within_the_bound(figures, tmp_path, tables):
    with ChatServer() as server:
        calls: Counter = Counter()

        def model(body):
            prompt = prompt_of(body)
            caption, kind = caption_of(prompt), kind_of(prompt)
            calls[(caption, kind)] += 1
            n = calls[(caption, kind)]
            if caption == ZRB2 and kind == "characterization method" and n == 1:
                return json.dumps({"distractor": ZRB2.upper()})  # the truth, in capitals
            if caption == ZRB2 and kind == "material composition" and n == 1:
                return json.dumps({"answer": "no"})  # off the schema: the engine asks again
            if caption == ZRB2 and kind == "numerical value" and n == 1:
                return json.dumps({"distractor": ZRB2.replace("SEM", "TEM")})  # the method option, again
            if caption == AL2O3 and kind == "material composition" and n == 1:
                return json.dumps({"distractor": AL2O3.replace("particles", "grains")})  # no formula changed
            if caption == AL2O3 and kind == "numerical value":
                # The number and, beyond its axis, the method too.
                return json.dumps({"distractor": WRONG})
            return good_model(body)

        server.default = Reply(text=model)
        out = tmp_path / "gen"
        assert main(model_args(figures, out, server, "--max-attempts", "2")) == 0
        items = rows(out / "items.jsonl")
        rejected = rows(out / "rejected.jsonl")
        assert len(items) == 1
        options = [o["caption"] for o in items[0]["options"]]
        assert ZRB2 in options and ZRB2.replace("SEM", "TEM") in options
        assert items[0]["meta"]["distractors_by"] == "gen" and items[0]["meta"]["attempts"] == [2, 1, 2]
        # The second figure: its number slot was refused twice (--max-attempts 2), with the reason and the words.
        bad = next(r for r in rejected if r["stage"] == "distractors")
        assert bad["reason"] == "distractor_rejected" and "also changes the characterization method" in bad["detail"]
        assert bad["words"] == WRONG and len(bad["refused"]) == 1
        # The asked-again prompt carries the refused reply and why.
        again = [prompt_of(b) for b in server.bodies if "An earlier reply was refused" in prompt_of(b)]
        reasons = ["repeats the true caption", "repeats another option", "changes no material composition",
                   "also changes the characterization method"]
        assert sorted(next(r for r in reasons if r in p) for p in again) == sorted(reasons)  # in any order
        # Requests: ZrB2 method 2 (refused once), composition 2 (schema), number 2 (refused once); Al2O3 method 1,
        # composition 2 (refused once), number 2 (the bound).
        assert server.count == 11
        # A rerun asks nothing and writes the same files.
        before = {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
        assert main(model_args(figures, out, server, "--max-attempts", "2")) == 0
        assert server.count == 11
        assert {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == before


def test_unusable_replies_and_failed_calls(figures, tmp_path):
    with ChatServer() as server:
        server.when_contains["along this axis only: material composition"] = Malformed()
        server.default = Reply(text=good_model)
        out = tmp_path / "gen"
        assert main(model_args(figures, out, server, "--limit", "1", "--retries", "1")) == 1
        # A malformed HTTP body is a failed call: an error to ask again, not a rejection.
        errors = rows(out / "errors.jsonl")
        assert len(errors) == 1 and errors[0]["kind"] == "model_call"
        assert rows(out / "items.jsonl") == []
        asked = server.count
        # The next run asks only the failed call (and the slot after it), then writes the item.
        del server.when_contains["along this axis only: material composition"]
        assert main(model_args(figures, out, server, "--limit", "1")) == 0
        assert server.count == asked + 2
        assert len(rows(out / "items.jsonl")) == 1 and rows(out / "errors.jsonl") == []


def test_a_refusal_rejects_the_figure_with_the_words(figures, tmp_path):
    with ChatServer() as server:
        server.default = Reply(text=lambda body: "I cannot help with that.")
        out = tmp_path / "gen"
        assert main(model_args(figures, out, server, "--limit", "1", "--answer-attempts", "2")) == 0
        rejected = rows(out / "rejected.jsonl")
        assert [(r["reason"], r["words"]) for r in rejected] == [("generator_failed", "I cannot help with that.")]
        assert server.count == 2


def test_a_killed_run_resumes_without_asking_again(figures, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    with ChatServer() as server:
        server.default = Reply(text=good_model, delay=0.15)
        out = tmp_path / "killed"
        args = [sys.executable, "-m", "benchmint.cli", *model_args(figures, out, server)]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.count < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        assert 3 <= server.count < 6
        subprocess.run(args, check=True, timeout=120, capture_output=True)
        # Six distinct calls (two figures, three slots); only the one in flight at the kill may be asked twice.
        assert len(server.by_prompt) == 6 and server.count <= 7
        whole = tmp_path / "whole"
        server.reset()
        server.default = Reply(text=good_model)
        assert main(model_args(figures, whole, server)) == 0
        assert server.count == 6
        for name in ("items.jsonl", "open.jsonl", "rejected.jsonl", "trace.jsonl", "errors.jsonl"):
            assert (out / name).read_text() == (whole / name).read_text(), name


def test_no_model_mode_is_not_random_across_figures(tables):
    # The local choice depends on the seed and the figure only: the same caption, seed and id pick the same.
    from benchmint.generate.csmbench import pick_local

    a = pick_local(tables, ZRB2, random.Random("1-x"))
    b = pick_local(tables, ZRB2, random.Random("1-x"))
    assert a == b and [k for k, _ in a[0]] == ["method", "composition", "number"]




def test_a_vlm_verdict_drops_or_keeps_each_figure_with_its_reason(figures, tmp_path):
    import base64
    import io

    def vlm(body):
        content = body["messages"][0]["content"]
        image = next(p for p in content if p["type"] == "image_url")["image_url"]["url"]
        size = Image.open(io.BytesIO(base64.b64decode(image.split(",", 1)[1]))).size
        assert size == (32, 24)  # the figure's own file, sent whole
        prompt = prompt_of(body)
        if "Ti6Al4V" in prompt:
            return json.dumps({"kind": "chart", "keep": False, "hybrid": False, "reason": "bars of hardness only"})
        if "Ni3Al" in prompt:
            return "not JSON at all"  # stays unusable: the caption's verdict stands, with the VLM's error
        return json.dumps({"kind": "micrograph", "keep": True, "hybrid": "LiFePO4" in prompt, "reason": "an image"})

    with ChatServer() as server:
        server.default = Reply(text=vlm)
        out = tmp_path / "gen"
        args = ["generate", "csmbench-mcq", str(figures), "--out", str(out), "--vlm-model", "v", "--base-url",
                server.url, "--retry-delay", "0", "--answer-attempts", "1"]
        assert main(args) == 0
        assert server.count == 10  # one verdict per figure
        rejected = {r["figure"]["label"]: r for r in rows(out / "rejected.jsonl") if r["stage"] == "curate"}
        # Figure 6 (the Ti6Al4V plate) dropped by the VLM as a chart; figure 9's schematic the VLM kept, but its
        # caption names no scale.
        assert (rejected["6"]["reason"], rejected["6"]["detail"], rejected["6"]["curated_by"]) == (
            "statistical_chart", "VLM: bars of hardness only", "vlm")
        assert rejected["9"]["reason"] == "no_scale"
        items = {i["meta"]["source"]["label"]: i for i in rows(out / "items.jsonl")}
        assert items["7"]["hybrid"] is True and items["1"]["hybrid"] is False
        assert items["1"]["meta"]["curated_by"] == "vlm" and items["1"]["meta"]["figure_kind"] == "micrograph"
        assert items["5"]["meta"]["curated_by"] == "caption" and "vlm_error" in items["5"]["meta"]
        run = json.loads((out / "run.json").read_text())
        assert {p["name"] for p in run["prompts"]} >= {"csmbench/curate.txt", "csmbench/techniques.json"}
        assert main(args) == 0 and server.count == 10  # a rerun asks nothing


def test_figures_without_an_image_are_rejected_and_bad_records_named(tmp_path):
    folder = tmp_path / "figs"
    folder.mkdir()
    records = [{"image": "missing.png", "caption": ZRB2},
               {"pdf": "sample_paper.pdf", "page": 1, "body_box": None, "caption": AL2O3},
               {"pdf": "sample_paper.pdf", "page": 9, "body_box": [0, 0, 10, 10], "caption": AL2O3},
               {"image": "x.png"}]
    (folder / "figures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + "{broken\n")
    out = tmp_path / "gen"
    assert main(["generate", "csmbench-mcq", str(folder / "figures.jsonl"), "--out", str(out),
                 "--pdfs", str(PDF.parent)]) == 1
    rejected = rows(out / "rejected.jsonl")
    assert [(r["stage"], r["reason"]) for r in rejected] == [("image", "image_missing"), ("image", "crop_failed"),
                                                             ("image", "crop_failed")]
    assert "no figure body" in rejected[1]["detail"] and "page 9 does not exist" in rejected[2]["detail"]
    errors = rows(out / "errors.jsonl")
    assert [(e["line"], e["message"]) for e in errors] == [(4, "a figure record needs a caption"),
                                                           (5, errors[1]["message"])]
    assert "line" in errors[1] and errors[1]["kind"] == "bad_figure"


def test_a_generated_paper_harvested_becomes_an_item_cropped_at_300_dpi(tmp_path):
    import pymupdf

    from pdf_factory import _png

    papers = tmp_path / "papers" / "sub"
    papers.mkdir(parents=True)
    doc = pymupdf.open()
    for cap in ["Figure 1. SEM images of ZrB2-SiC ceramics sintered at 1050 °C for 2 h; scale bar 500 nm.",
                "Figure 2. Schematic of the synthesis route."]:
        page = doc.new_page()
        page.insert_image(pymupdf.Rect(150, 100, 450, 400), stream=_png())
        page.insert_textbox(pymupdf.Rect(150, 410, 460, 450), cap, fontsize=9)
    doc.save(papers / "made.pdf")
    harvest = tmp_path / "harvest"
    assert main(["harvest", str(papers / "made.pdf"), "--out", str(harvest)]) == 0
    out = tmp_path / "gen"
    # The PDF is found by name below --pdfs.
    assert main(["generate", "csmbench-mcq", str(harvest), "--out", str(out), "--pdfs", str(tmp_path / "papers")]) == 0
    items = rows(out / "items.jsonl")
    assert len(items) == 1 and items[0]["scale"] == "Microscale"
    # The body box (150, 100, 450, 400) pt at 300 DPI: x 625-1875 px exactly, y 416.7-1666.7 px rounded outward
    # to 416-1667.
    assert Image.open(out / items[0]["image"]).size == (1250, 1251)
    assert sorted(items[0]["meta"]["option_kinds"].values()) == ["composition", "method", "number", "truth"]
    assert [r["reason"] for r in rows(out / "rejected.jsonl")] == ["schematic_or_flowchart", "no_discussion"]


def test_a_repeated_record_is_one_item_and_a_named_rejection(tmp_path):
    folder = tmp_path / "figs"
    folder.mkdir()
    Image.new("RGB", (8, 8)).save(folder / "a.png")
    rec = json.dumps({"image": "a.png", "caption": ZRB2}) + "\n"
    (folder / "figures.jsonl").write_text(rec + rec)
    out = tmp_path / "gen"
    assert main(["generate", "csmbench-mcq", str(folder / "figures.jsonl"), "--out", str(out)]) == 0
    assert len(rows(out / "items.jsonl")) == 1
    rejected = rows(out / "rejected.jsonl")
    assert [r["reason"] for r in rejected] == ["duplicate_figure", "no_discussion"]
    assert rejected[0]["detail"] == "line 2 repeats an earlier record"
    codes = json.loads((out / "run.json").read_text())["figures"]["codes"]
    assert (codes["ITEM"]["count"], codes["duplicate_figure"]["count"]) == (1, 1)


# ---------------------------------------------------------------------------------------------------------------
# The shortcut of one-axis distractors, and the balanced design that removes it

def test_a_majority_vote_finds_the_paper_designs_answer_and_not_the_balanced_one(tables):
    one_axis = [AL2O3, AL2O3.replace("TEM", "SEM"), AL2O3.replace("Al2O3", "Ga2O3"),
                AL2O3.replace("200–400", "300–500")]
    # Truth: 2 agreeing options on each of 3 axes = 6; each distractor: its own axis 0 + 2 + 2 = 4.
    assert majority_vote(tables, one_axis) == [0]
    # A shortfall (two number changes) still leaves the truth alone: 6 against 5, 5 and 4.
    assert majority_vote(tables, [AL2O3, AL2O3.replace("200–400", "300–500"),
                                  AL2O3.replace("200–400", "100–300"), AL2O3.replace("TEM", "SEM")]) == [0]
    joined, why = balance(tables, AL2O3, [("method", one_axis[1]), ("composition", one_axis[2]),
                                          ("number", one_axis[3])])
    assert why == ""
    assert joined == [("method+composition", AL2O3.replace("TEM", "SEM").replace("Al2O3", "Ga2O3")),
                      ("method+number", AL2O3.replace("TEM", "SEM").replace("200–400", "300–500")),
                      ("composition+number", AL2O3.replace("Al2O3", "Ga2O3").replace("200–400", "300–500"))]
    # Every option agrees with one other per axis: 3 each, a four-way tie.
    assert majority_vote(tables, [AL2O3, *(t for _, t in joined)]) == [0, 1, 2, 3]


def test_joining_changes_that_touch_the_same_characters_is_refused(tables):
    assert compose("TEM at 200 °C", "SEM at 200 °C", "HRTEM at 200 °C") is None
    assert compose("TEM at 200 °C", "SEM at 200 °C", "TEM at 300 °C") == "SEM at 300 °C"
    # Two changes of one axis are not a balanced set.
    _, why = balance(tables, AL2O3, [("number", AL2O3.replace("200–400", "300–500")),
                                     ("number", AL2O3.replace("200–400", "100–300")),
                                     ("method", AL2O3.replace("TEM", "SEM"))])
    assert why == "the caption does not offer one change along each of the three axes"


def test_run_json_measures_the_shortcut_and_the_balanced_design_removes_it(figures, tmp_path, tables):
    paper, balanced = tmp_path / "paper", tmp_path / "balanced"
    assert main(["generate", "csmbench-mcq", str(figures), "--out", str(paper), "--seed", "3"]) == 0
    assert main(["generate", "csmbench-mcq", str(figures), "--out", str(balanced), "--seed", "3",
                 "--distractor-design", "balanced"]) == 0
    vote = json.loads((paper / "run.json").read_text())["shortcut"]["majority_vote"]
    assert vote == {"items": 8, "answer_alone": 8, "expected_accuracy": 1.0}
    run = json.loads((balanced / "run.json").read_text())
    items = rows(balanced / "items.jsonl")
    joined = [i for i in items if i["meta"]["design"] == "balanced"]
    kept = [i for i in items if i["meta"]["design"] == "paper"]
    assert run["designs"] == {"paper": len(kept), "balanced": len(joined)} and len(joined) >= 3
    for item in joined:
        options = [o["caption"] for o in item["options"]]
        truth = options["ABCD".index(item["answer"])]
        assert sorted(item["meta"]["option_kinds"].values()) == ["composition+number", "method+composition",
                                                                  "method+number", "truth"]
        assert majority_vote(tables, options) == [0, 1, 2, 3]
        for letter, kind in item["meta"]["option_kinds"].items():
            if kind != "truth":  # each changed axis differs from the truth, the third is the truth's
                text = options["ABCD".index(letter)]
                for axis in ("method", "composition", "number"):
                    same = tables.signature(text, axis) == tables.signature(truth, axis)
                    assert same == (axis not in kind.split("+"))
    # Captions short of an axis keep the paper's design with the reason; only they leave the answer alone.
    assert all(i["meta"]["design_fallback"] for i in kept)
    vote = run["shortcut"]["majority_vote"]
    assert vote["answer_alone"] == len(kept)
    assert vote["expected_accuracy"] == round((len(kept) + 0.25 * len(joined)) / len(items), 4)
