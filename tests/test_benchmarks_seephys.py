"""SeePhys items from the Hugging Face parquet, the VLMEvalKit TSV and own JSONL; prompts in TV/TC/TO/VO."""

import base64
import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from benchmint import benchmarks
from benchmint.benchmarks import ItemError, PromptError

EN_TAIL = ("Solve this physics problem. Reason step by step inside <think> </think> tags, "
           "then write only the final answer inside <answer> </answer> tags.")
ZH_TAIL = "请解答这道物理题。先在 <think> </think> 标签内逐步推理，再在 <answer> </answer> 标签内只写出最终答案。"


def png(color, size=(5, 4)):
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


RED, BLUE, GREEN = png("red"), png("blue"), png("green")

# The six release items: English and Chinese, sig_figs valid, empty and missing, one item with two diagrams.
ITEMS = [
    {"index": 1, "question": "A ball is dropped from 20 m. How long does it fall?", "answer": "$2.0 \\mathrm{s}$",
     "subject": "CM", "level": 2, "img_category": "linear_motion", "vision_relevance": "optional",
     "language": "English", "sig_figs": "2", "caption": "A ball above the ground, height 20 m.", "images": [RED]},
    {"index": 2, "question": "如图所示，求电路中的电流。", "answer": "0.50 A", "subject": "EM", "level": 1,
     "img_category": "circuit_diagram", "vision_relevance": "essential", "language": "Chinese", "sig_figs": "2",
     "caption": "电源与两个电阻串联。", "images": [BLUE]},
    {"index": 3, "question": "Find the potential at the centre.", "answer": "\\(\\frac{q}{4\\pi\\varepsilon_0 R}\\)",
     "subject": "EM", "level": 5, "img_category": "charge_distribution", "vision_relevance": "essential",
     "language": "English", "sig_figs": "", "caption": "A ring of charge q, radius R.", "images": [GREEN]},
    {"index": 4, "question": "Which transition emits the photon in the second figure?", "answer": "Transition C",
     "subject": "AMONP", "level": 4, "img_category": "atomic_physics", "vision_relevance": "essential",
     "language": "English", "sig_figs": None, "caption": "Two level diagrams.", "images": [RED, BLUE]},
    {"index": 5, "question": "求物块的加速度。", "answer": "$2.5 \\mathrm{m/s^2}$", "subject": "CM", "level": 3,
     "img_category": "static_force_analysis", "vision_relevance": "essential", "language": "Chinese",
     "sig_figs": None, "caption": "斜面上的物块。", "images": [GREEN]},
    {"index": 6, "question": "Line one of the question.\nLine two, with a \"quote\" and a\ttab.", "answer": "6.0",
     "subject": "OPT", "level": 6, "img_category": "optical_path", "vision_relevance": "optional",
     "language": "English", "sig_figs": "3", "caption": "A lens.", "images": [BLUE]},
]

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema([("index", pa.int64()), ("question", pa.string()), ("answer", pa.string()),
                    ("subject", pa.string()), ("level", pa.int64()), ("img_category", pa.string()),
                    ("vision_relevance", pa.string()), ("language", pa.string()), ("sig_figs", pa.string()),
                    ("caption", pa.string()), ("images", pa.list_(IMAGE))])


def write_parquet(path, items):
    columns = {name: [it[name] for it in items] for name in SCHEMA.names if name != "images"}
    columns["images"] = [[{"bytes": b, "path": f"{it['index']}_{k}.png"} for k, b in enumerate(it["images"])]
                         for it in items]
    hf = {"info": {"features": {"images": {"feature": {"_type": "Image"}, "_type": "Sequence"}}}}
    table = pa.table(columns, schema=SCHEMA.with_metadata({"huggingface": json.dumps(hf)}))
    pq.write_table(table, path)


def write_tsv(path, items):
    """The VLMEvalKit layout: base64 images, several as the str() of a Python list; NaN written as empty."""
    header = ["index", "image", "question", "answer", "subject", "level", "img_category", "vision_relevance",
              "language", "sig_figs", "caption"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(header)
        for it in items:
            b64 = [base64.b64encode(b).decode() for b in it["images"]]
            cell = b64[0] if len(b64) == 1 else str(b64)
            w.writerow([it["index"], cell, it["question"], it["answer"], it["subject"], it["level"],
                        it["img_category"], it["vision_relevance"], it["language"], it["sig_figs"] or "",
                        it["caption"]])


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("seephys")
    write_parquet(root / "seephys.parquet", ITEMS)
    write_tsv(root / "seephys.tsv", ITEMS)
    return root


def items_of(path, setting=None):
    return dict(benchmarks.get("seephys").read_items(path, setting))


@pytest.mark.parametrize("name", ["seephys.parquet", "seephys.tsv"])
def test_both_release_layouts_read_the_same_items(release, name):
    got = items_of(release / name)
    assert len(got) == 6 and all(not isinstance(it, ItemError) for it in got.values())
    items = list(got.values())
    assert [it.id for it in items] == ["1", "2", "3", "4", "5", "6"]
    assert [len(it.images) for it in items] == [1, 1, 1, 2, 1, 1]
    assert [ref.read() for ref in items[3].images] == [RED, BLUE]  # the 2-image item keeps its order
    assert items[0].answer == "$2.0 \\mathrm{s}$" and items[5].answer == "6.0"  # gold kept as its text
    assert items[0].meta == {"language": "English", "subject": "CM", "level": 2, "img_category": "linear_motion",
                             "vision_relevance": "optional", "sig_figs": 2}
    assert [it.fields["sig_figs"] for it in items] == [2, 2, None, None, None, 3]
    assert items[5].fields["question"] == "Line one of the question.\nLine two, with a \"quote\" and a\ttab."
    # the TSV's first item starts on line 2; its sixth, after two one-line rows per item, on line 7
    if name.endswith(".tsv"):
        assert list(got)[0].endswith("seephys.tsv:2") and list(got)[5].endswith("seephys.tsv:7")
    else:
        assert list(got)[5].endswith("seephys.parquet:row 6")


def test_tv_prompt_english_with_sig_figs(release):
    item = items_of(release / "seephys.parquet")[f"{release}/seephys.parquet:row 1"]
    p = benchmarks.get("seephys").prompt(item, "TV")
    assert p.system is None and p.template == "seephys/TV.txt"
    assert [type(x).__name__ for x in p.parts] == ["ImagePart", "TextPart"]
    assert p.parts[0].data == RED and p.parts[0].mime == "image/png"
    assert p.text() == ("A ball is dropped from 20 m. How long does it fall?\n\n" + EN_TAIL
                        + "\nGive the final answer to 2 significant figures.")


def test_chinese_items_get_the_chinese_prompt(release):
    item = items_of(release / "seephys.tsv")[f"{release}/seephys.tsv:3"]
    p = benchmarks.get("seephys").prompt(item, "TV")
    assert p.template == "seephys/TV.zh.txt"
    assert p.text() == "如图所示，求电路中的电流。\n\n" + ZH_TAIL + "\n最终答案保留2位有效数字。"
    no_sig = items_of(release / "seephys.tsv")[f"{release}/seephys.tsv:6"]
    assert benchmarks.get("seephys").prompt(no_sig, "TO").text() == "求物块的加速度。\n\n" + ZH_TAIL


@pytest.mark.parametrize("sig_figs", ["", None, float("nan"), "nan"])
def test_no_sig_figs_sentence_without_a_valid_count(tmp_path, sig_figs):
    row = {"id": "x", "question": "Q?", "answer": "1", "language": "English", "sig_figs": sig_figs}
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(row, allow_nan=True) + "\n")
    (item,) = items_of(path, "TO").values()
    text = benchmarks.get("seephys").prompt(item, "TO").text()
    assert text == "Q?\n\n" + EN_TAIL and "significant" not in text


def test_two_images_in_tv_and_none_in_to_and_tc(release):
    bench = benchmarks.get("seephys")
    item = items_of(release / "seephys.tsv")[f"{release}/seephys.tsv:5"]
    tv = bench.prompt(item, "TV")
    assert [x.data for x in tv.images()] == [RED, BLUE] and tv.parts[2].text.startswith("Which transition")
    to = bench.prompt(item, "TO")
    assert to.images() == [] and to.text() == "Which transition emits the photon in the second figure?\n\n" + EN_TAIL
    tc = bench.prompt(item, "TC")
    assert tc.images() == []
    assert tc.text() == ("Which transition emits the photon in the second figure?\n\n"
                         "Description of the diagram: Two level diagrams.\n\n" + EN_TAIL)


def test_vo_sends_only_the_composite(tmp_path):
    (tmp_path / "composite.png").write_bytes(GREEN)
    (tmp_path / "diagram.png").write_bytes(RED)
    rows = [{"id": "own", "question": "Q?", "answer": "1", "language": "English", "sig_figs": 2,
             "images": ["diagram.png"], "composite_image": "composite.png"},
            {"id": "vo-row", "question": "", "answer": "1", "language": "Chinese", "image": "composite.png"},
            {"id": "tv-row", "question": "Q?", "answer": "1", "language": "English", "image": "diagram.png"}]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = list(items_of(path, "VO").values())
    bench = benchmarks.get("seephys")
    own = bench.prompt(got[0], "VO")
    assert [type(x).__name__ for x in own.parts] == ["ImagePart", "TextPart"] and own.parts[0].data == GREEN
    assert own.text() == ("The image shows a physics problem: its text and its diagrams. Solve it. Reason step by "
                          "step inside <think> </think> tags, then write only the final answer inside <answer> "
                          "</answer> tags.\nGive the final answer to 2 significant figures.")
    assert "Q?" not in own.text()
    vo_row = bench.prompt(got[1], "VO")
    assert [x.data for x in vo_row.images()] == [GREEN] and vo_row.template == "seephys/VO.zh.txt"
    # a row with a question and no composite cannot be sent as VO: an error naming the file, line and field
    assert isinstance(got[2], ItemError) and got[2].field == "composite_image"
    assert str(got[2]).startswith(f"{path}:3: VO needs the composite image")
    assert [type(v).__name__ for v in items_of(path, "TV").values()] == ["EvalItem", "ItemError", "EvalItem"]


def test_missing_fields_are_errors_naming_file_line_and_field_and_reading_goes_on(tmp_path):
    rows = ['{"id": "ok", "question": "Q?", "answer": "1", "language": "English", "caption": "c"}',
            '{"id": "no-answer", "question": "Q?", "language": "English"}',
            'not json',
            '{"id": "bad-lang", "question": "Q?", "answer": "1", "language": "French"}',
            '{"id": "bad-sig", "question": "Q?", "answer": "1", "language": "English", "sig_figs": "two"}',
            '["a list"]',
            '{"id": "no-caption", "question": "Q?", "answer": "1", "language": "English"}',
            '{"id": "ok", "question": "Q?", "answer": "2", "language": "English", "caption": "c"}',
            '{"id": "last", "question": "Q?", "answer": "1", "language": "English", "caption": "c"}']
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(rows) + "\n")
    got = list(benchmarks.get("seephys").read_items(path, "TC"))
    errors = [(loc.rsplit(":", 1)[1], it.field, it.message) for loc, it in got if isinstance(it, ItemError)]
    assert errors == [
        ("2", "answer", 'missing field "answer"'),
        ("3", None, "malformed JSON (Expecting value at column 1)"),
        ("4", "language", "field \"language\" must be English or Chinese, got 'French'"),
        ("5", "sig_figs", "field \"sig_figs\" must be a whole number, got 'two'"),
        ("6", None, "a row must be a JSON object, got list"),
        ("7", "caption", 'TC needs the diagram caption: missing field "caption"'),
        ("8", "id", f"duplicate id 'ok' (first at {path}:1)"),
    ]
    assert [it.id for _, it in got if not isinstance(it, ItemError)] == ["ok", "last"]
    assert str(got[1][1]) == f'{path}:2: missing field "answer"'


def test_bad_tsv_image_cells_are_per_row_errors(tmp_path):
    path = tmp_path / "s.tsv"
    good = base64.b64encode(RED).decode()
    path.write_text("index\timage\tquestion\tanswer\tlanguage\n"
                    f"1\t{good}\tQ?\t1\tEnglish\n"
                    "2\tnot base64!\tQ?\t1\tEnglish\n"
                    f"3\t['{good}', 42]\tQ?\t1\tEnglish\n"
                    f"4\t{base64.b64encode(b'plain text').decode()}\tQ?\t1\tEnglish\n"
                    "5\ttoo\tfew\n"
                    f"6\t['{good}', '{good}']\t\"Q on\nthree\nlines?\"\t1\tEnglish\n"
                    f"7\t{good}\tQ?\t1\tEnglish\n")
    got = list(benchmarks.get("seephys").read_items(path))
    # a quoted cell spanning lines moves the next row's line number on
    assert [loc.rsplit(":", 1)[1] for loc, _ in got] == ["2", "3", "4", "5", "6", "7", "10"]
    assert got[5][1].fields["question"] == "Q on\nthree\nlines?"
    assert [it.message if isinstance(it, ItemError) else len(it.images) for _, it in got] == [
        1,
        'field "image" is not base64 image data (11 characters)',
        'field "image" must list base64 images as strings',
        'field "image" is not image data',
        "3 cells, the header has 5",
        2,
        1,
    ]


def test_images_larger_than_the_protocol_bound_are_scaled_down(tmp_path):
    big = png("white", (5000, 2500))
    path = tmp_path / "items.jsonl"
    (tmp_path / "big.png").write_bytes(big)
    path.write_text(json.dumps({"id": "big", "question": "Q?", "answer": "1", "language": "English",
                                "image": "big.png"}) + "\n")
    (item,) = items_of(path).values()
    part = benchmarks.get("seephys").prompt(item, "TV").images()[0]
    with Image.open(io.BytesIO(part.data)) as img:
        assert img.size == (4096, 2048)  # seephys.txt D.1: images up to 4096x4096
    assert part.mime == "image/png"


def test_seephys_protocol_and_run_record():
    bench = benchmarks.get("seephys")
    p = bench.protocol
    assert (p.temperature, p.max_tokens, p.image_max_side, p.answer_retries) == (0, 8192, 4096, 0)
    record = bench.run_record("TC")
    assert record["benchmark"] == "seephys" and record["setting"] == "TC" and record["answer_kind"] == "quantity"
    assert [f["name"] for f in record["prompts"]] == ["seephys/TC.txt", "seephys/TC.zh.txt", "seephys/sig_figs.txt",
                                                      "seephys/sig_figs.zh.txt"]
    assert all(len(f["sha256"]) == 64 and f["origin"] == "package" for f in record["prompts"])
    with pytest.raises(ValueError, match="seephys settings are TV, TC, TO, VO; got 'XX'"):
        bench.prompt_files("XX")


def test_prompt_error_for_an_item_missing_what_the_setting_needs(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "t", "question": "Q?", "answer": "1", "language": "English"}\n')
    (item,) = items_of(path, "TO").values()
    with pytest.raises(PromptError, match=r"items.jsonl:1: TV needs the diagram\(s\)"):
        benchmarks.get("seephys").prompt(item, "TV")
