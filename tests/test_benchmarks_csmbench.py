"""CSMBench from its Hugging Face ImageFolder configs: caption matching (MCQ) and open description."""

import io
import json

import pytest
from PIL import Image

from benchmint import benchmarks, tasks
from benchmint.benchmarks import ItemError

SCALES = ["AtomScale", "AtomScale", "Microscale", "Microscale", "Mesoscale", "Macroscale"]
KEYS = ["A", "C", "D", "B", "A", "D"]


def png(shade):
    buf = io.BytesIO()
    Image.new("L", (6, 6), shade).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def download(tmp_path_factory):
    """The two configs as the download lays them out; options are a JSON string, as in the release."""
    root = tmp_path_factory.mktemp("CSMBench_Data")
    for config in ("multi_scale", "multi_scale_mcq"):
        folder = root / config / "train"
        folder.mkdir(parents=True)
        rows = []
        for i, scale in enumerate(SCALES):
            name = f"{scale}_{i}.png"
            (folder / name).write_bytes(png(40 * i))
            row = {"file_name": name, "index": i, "scale": scale, "source": "mc",
                   "paper_folder_name": f"paper-{i}_2025_Materials-Chara.pdf-{i:04d}"}
            if i == 2:
                row["hybrid"] = True
            if config == "multi_scale":
                row["image_caption"] = f"Caption of figure {i}."
                row["describe_paragraph"] = [f"Figure {i} shows grains.", "They coarsen."] if i == 1 \
                    else f"Figure {i} shows grains."
            else:
                captions = [f"SEM of sample {i}-{c}" for c in "ABCD"]
                row["options"] = json.dumps([{"label": c, "caption": t} for c, t in zip("ABCD", captions)])
                row["correct_answer"] = KEYS[i]
            rows.append(row)
        (folder / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.mark.parametrize("where", ["", "multi_scale_mcq", "multi_scale_mcq/train",
                                   "multi_scale_mcq/train/metadata.jsonl"])
def test_mcq_items_from_any_level_of_the_download(download, where):
    got = list(benchmarks.get("csmbench-mcq").read_items(download / where))
    assert [loc.rsplit("/", 1)[1] for loc, _ in got] == [f"metadata.jsonl:{k}" for k in range(1, 7)]
    items = [it for _, it in got]
    assert [it.id for it in items] == ["0", "1", "2", "3", "4", "5"]
    assert [it.answer for it in items] == [[k] for k in KEYS]
    assert [it.meta["scale"] for it in items] == SCALES and items[2].meta["hybrid"] is True
    assert "hybrid" not in items[0].meta and items[0].meta["source"] == "mc"
    assert items[3].images[0].read() == png(120)
    tasks.get("mcq").normalize(items[0].answer)  # the gold is of the registered answer kind


def test_mcq_prompt_text_before_the_figure(download):
    bench = benchmarks.get("csmbench-mcq")
    item = dict(bench.read_items(download))[f"{download}/multi_scale_mcq/train/metadata.jsonl:3"]
    p = bench.prompt(item)
    assert [type(x).__name__ for x in p.parts] == ["TextPart", "ImagePart"] and p.parts[1].data == png(80)
    assert p.text() == (
        "You are shown a figure from a materials science article and four candidate captions. "
        "Exactly one of the captions describes the figure correctly.\n\n"
        "A. SEM of sample 2-A\nB. SEM of sample 2-B\nC. SEM of sample 2-C\nD. SEM of sample 2-D\n\n"
        "Which caption is the correct one? Reply with its letter only (A, B, C or D), for example: B")
    assert bench.protocol.max_tokens == 64 and bench.answer_kind == "mcq"


def test_open_prompt_and_gold_paragraph(download):
    bench = benchmarks.get("csmbench-open")
    items = [it for _, it in bench.read_items(download)]
    assert items[1].answer == "Figure 1 shows grains.\nThey coarsen." and items[0].answer == "Figure 0 shows grains."
    p = bench.prompt(items[4])
    assert [type(x).__name__ for x in p.parts] == ["TextPart", "ImagePart"]
    assert p.text() == (
        "You are an expert assistant in materials science. The figure below comes from a research article. "
        "Its caption reads:\nCaption of figure 4.\n\n"
        "Analyse the figure in 100 to 300 words: describe the features that are visible in it and the "
        "scientific conclusions they support.")
    assert bench.answer_kind == "free_text" and bench.protocol.max_tokens == 8000


def test_bad_rows_are_errors_naming_the_line_and_field(tmp_path):
    (tmp_path / "f.png").write_bytes(png(0))
    opts = [{"label": c, "caption": f"cap {c}"} for c in "ABCD"]
    rows = [{"index": 0, "file_name": "f.png", "options": opts, "correct_answer": "B"},
            {"index": 1, "file_name": "missing.png", "options": opts, "correct_answer": "B"},
            {"index": 2, "file_name": "f.png", "options": opts[:3], "correct_answer": "B"},
            {"index": 3, "file_name": "f.png", "options": opts, "correct_answer": "E"},
            {"index": 4, "file_name": "f.png", "options": "[{\"label\": \"A\"", "correct_answer": "A"},
            {"index": 5, "file_name": "f.png", "options": opts},
            {"file_name": "f.png", "options": opts, "correct_answer": "A"},
            {"index": 7, "file_name": "f.png", "options": opts, "correct_answer": "D"}]
    (tmp_path / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = list(benchmarks.get("csmbench-mcq").read_items(tmp_path))
    messages = [(loc.rsplit(":", 1)[1], it.field, it.message) if isinstance(it, ItemError) else it.id
                for loc, it in got]
    assert messages == [
        "0",
        ("2", "file_name", f'file of field "file_name" not found: {tmp_path}/missing.png'),
        ("3", "options", 'field "options" has 3 options, expected 4'),
        ("4", "correct_answer", "field \"correct_answer\" must name one of the options A-D, got 'E'"),
        ("5", "options", 'field "options" holds malformed JSON (Expecting \',\' delimiter at column 15)'),
        ("6", "answer", 'missing field "answer" or "correct_answer"'),
        ("7", "id", 'missing field "id" or "index"'),
        "7",
    ]


def test_a_folder_without_metadata_is_a_clear_input_error(tmp_path):
    from benchmint.io import InputError

    with pytest.raises(InputError, match="no ImageFolder metadata; looked for"):
        list(benchmarks.get("csmbench-open").read_items(tmp_path))
