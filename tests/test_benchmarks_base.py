"""What all benchmarks share: the registry, package prompts and protocols, overrides, ids, layouts, messages."""

import base64
import hashlib
import io
import json
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
from PIL import Image

from benchmint import benchmarks, tasks
from benchmint.benchmarks import ImagePart, ItemError, Prompt, PromptError, TextPart, item_file_stem
from benchmint.io import InputError

ROOT = Path(__file__).resolve().parent.parent


def _png():
    buf = io.BytesIO()
    Image.new("RGB", (3, 2), "white").save(buf, format="PNG")
    return buf.getvalue()


PNG = _png()


def test_registry():
    assert benchmarks.names() == ["spm", "crystalxrd", "csmbench-mcq", "csmbench-open", "seephys", "matvqa"]
    kinds = {n: benchmarks.get(n).answer_kind for n in benchmarks.names()}
    assert kinds == {"spm": "mcq", "crystalxrd": "hkl", "csmbench-mcq": "mcq", "csmbench-open": "free_text",
                     "seephys": "quantity", "matvqa": "option_number"}
    assert all(k in tasks.names() for k in kinds.values())
    assert benchmarks.graded() == ["csmbench-mcq", "csmbench-open", "seephys", "matvqa"]
    with pytest.raises(ValueError, match="benchmark must be one of spm, crystalxrd, .*; got 'mmmu'"):
        benchmarks.get("mmmu")


def test_prompts_and_protocols_are_package_data():
    package = files("benchmint.benchmarks")
    for name in benchmarks.names():
        bench = benchmarks.get(name)
        protocol = json.loads(package.joinpath("protocols", f"{name}.json").read_text("utf-8"))
        assert protocol["benchmark"] == name and bench.protocol.source == protocol["source"]
        for setting in bench.settings:
            for entry in bench.prompt_files(setting):
                raw = package.joinpath("prompts", *entry["name"].split("/")).read_bytes()
                assert entry["sha256"] == hashlib.sha256(raw).hexdigest() and entry["origin"] == "package"
    # the wheel ships everything under src/benchmint (as it ships samples/), nothing excluded
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"]
    assert build["wheel"]["packages"] == ["src/benchmint"] and "exclude" not in build["wheel"]
    shipped = {p.relative_to(ROOT / "src/benchmint/benchmarks").as_posix()
               for p in (ROOT / "src/benchmint/benchmarks").rglob("*") if p.suffix in (".txt", ".json")}
    assert "prompts/seephys/TV.zh.txt" in shipped and "protocols/crystalxrd.json" in shipped


def write_items(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def seephys_items(tmp_path):
    (tmp_path / "d.png").write_bytes(PNG)
    return write_items(tmp_path / "items.jsonl", [
        {"id": "e", "question": "Q?", "answer": "1", "language": "English", "sig_figs": 3, "image": "d.png"},
        {"id": "z", "question": "问？", "answer": "1", "language": "Chinese", "image": "d.png"}])


def test_prompt_override_folder(tmp_path, seephys_items):
    folder = tmp_path / "my-prompts" / "seephys"
    folder.mkdir(parents=True)
    raw = "{{! a comment line, not sent }}\nQuestion: {{QUESTION}}\n{{SIG_FIGS_HINT}}\n{{IMAGES}}\n"
    (folder / "TV.txt").write_text(raw)
    (folder / "TV.system.txt").write_text("You are a careful physicist.\n")
    bench = benchmarks.get("seephys", prompts=tmp_path / "my-prompts")
    english, chinese = [it for _, it in bench.read_items(seephys_items)]
    p = bench.prompt(english, "TV")
    assert p.system == "You are a careful physicist."
    assert p.parts == (TextPart("Question: Q?\nGive the final answer to 3 significant figures."),
                       ImagePart(PNG, "image/png"))
    assert bench.prompt(chinese, "TV").text().startswith("问？\n\n请解答")  # no override: the package's file
    files_used = {f["name"]: f for f in bench.prompt_files("TV")}
    assert files_used["seephys/TV.txt"] == {"name": "seephys/TV.txt", "origin": str(folder / "TV.txt"),
                                            "sha256": hashlib.sha256(raw.encode()).hexdigest()}
    assert files_used["seephys/TV.system.txt"]["origin"] == str(folder / "TV.system.txt")
    assert files_used["seephys/TV.zh.txt"]["origin"] == "package"


@pytest.mark.parametrize("text, message", [
    ("{{QUESTION}} {{ANSWER}}\n{{IMAGES}}", r"unknown placeholders \['ANSWER'\]"),
    ("{{QUESTION}}", r"needs \{\{IMAGES\}\} exactly once"),
    ("{{IMAGES}}{{IMAGES}}{{QUESTION}}", r"needs \{\{IMAGES\}\} exactly once \(where the images go\), found 2"),
])
def test_bad_override_templates(tmp_path, seephys_items, text, message):
    (tmp_path / "p" / "seephys").mkdir(parents=True)
    (tmp_path / "p" / "seephys" / "TV.txt").write_text(text)
    bench = benchmarks.get("seephys", prompts=tmp_path / "p")
    item = next(it for _, it in bench.read_items(seephys_items))
    with pytest.raises(PromptError, match=message):
        bench.prompt(item, "TV")
    (tmp_path / "p" / "seephys" / "TO.txt").write_text("{{QUESTION}}\n{{IMAGES}}")
    with pytest.raises(PromptError, match="this setting sends no image"):
        bench.prompt(item, "TO")


def test_protocol_override(tmp_path):
    user = tmp_path / "protocol.json"
    user.write_text(json.dumps({"max_tokens": 2048, "answer_retries": 1, "extra": {"top_p": 0.9}}))
    bench = benchmarks.get("seephys", protocol=user)
    p = bench.protocol
    assert (p.temperature, p.max_tokens, p.answer_retries, p.image_max_side, p.extra) == (0, 2048, 1, 4096,
                                                                                         {"top_p": 0.9})
    assert p.source.endswith(f"(overridden by {user})")
    record = bench.run_record()
    assert record["protocol"]["max_tokens"] == 2048 and record["protocol_file"] == str(user)
    assert record["setting"] == "TV"
    for data, message in [({"max_token": 5}, r"unknown protocol keys \['max_token'\]"),
                          ({"temperature": "hot"}, "'temperature' has the wrong type"),
                          ({"answer_retries": True}, "'answer_retries' has the wrong type"),
                          ({"max_tokens": 0}, "'max_tokens' must be >= 1"),
                          ({"benchmark": "spm"}, "a protocol of 'spm', not of 'seephys'"),
                          ([1], "a protocol is a JSON object")]:
        user.write_text(json.dumps(data))
        with pytest.raises(InputError, match=message):
            benchmarks.get("seephys", protocol=user)
    user.write_text("{")
    with pytest.raises(InputError, match="malformed JSON"):
        benchmarks.get("seephys", protocol=user)
    with pytest.raises(InputError, match="prompt folder not found"):
        benchmarks.get("seephys", prompts=tmp_path / "nope")


HOSTILE = ["../../x", "-rf", "a\0b", "/etc/passwd", ".hidden", "..", "a/../../b", "x" * 300, "é 🙂", 7]


def test_ids_are_data_never_paths(tmp_path):
    (tmp_path / "d.png").write_bytes(PNG)
    rows = [{"id": rid, "question": "Q?", "answer": "1", "language": "English", "image": "d.png"} for rid in HOSTILE]
    items = [it for _, it in benchmarks.get("seephys").read_items(write_items(tmp_path / "items.jsonl", rows))]
    ids = [it.id for it in items]
    assert ids == [str(r) for r in HOSTILE] and items[2].gold()["id"] == "a\0b"
    out = (tmp_path / "out").resolve()
    stems = [item_file_stem(i) for i in ids]
    assert len(set(stems)) == len(stems)
    for stem in stems:
        assert "/" not in stem and "\0" not in stem and stem[0] not in ".-" and len(stem) <= 65
        target = out / f"{stem}.json"
        assert target.resolve().parent == out
    assert stems[0] == "x-" + hashlib.sha256(b"../../x").hexdigest()[:16]


def test_layout_errors(tmp_path):
    bench = benchmarks.get("seephys")
    with pytest.raises(InputError, match="items file not found"):
        list(bench.read_items(tmp_path / "missing.jsonl"))
    (tmp_path / "items.csv").write_text("a,b\n")
    with pytest.raises(InputError, match=r"unknown items layout; expected a \.jsonl, \.json, \.parquet or \.tsv"):
        list(bench.read_items(tmp_path / "items.csv"))
    (tmp_path / "bad.json").write_text('[{"id": 1}, ')
    with pytest.raises(InputError, match=r"bad\.json: malformed JSON"):
        list(bench.read_items(tmp_path / "bad.json"))
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="not a readable parquet file"):
        list(bench.read_items(tmp_path / "bad.parquet"))
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(InputError, match="empty TSV file"):
        list(bench.read_items(tmp_path / "empty.tsv"))
    (tmp_path / "rows.json").write_text('[{"id": "a", "question": "Q", "answer": "1", "language": "en"}, 3]')
    got = list(bench.read_items(tmp_path / "rows.json", "TO"))
    assert [loc for loc, _ in got] == [f"{tmp_path}/rows.json:row 1", f"{tmp_path}/rows.json:row 2"]
    assert got[0][1].id == "a" and str(got[1][1]) == f"{tmp_path}/rows.json:row 2: a row must be a JSON object, " \
                                                      "got int"
    (tmp_path / "gaps.jsonl").write_text('\n{"id": "a", "question": "Q", "answer": "1", "language": "en"}\n\n')
    assert [loc for loc, _ in bench.read_items(tmp_path / "gaps.jsonl", "TO")] == [f"{tmp_path}/gaps.jsonl:2"]


def test_missing_image_file_is_an_item_error(tmp_path):
    path = write_items(tmp_path / "items.jsonl", [
        {"id": "a", "question": "Q?", "answer": "1", "language": "English", "image": "gone.png"}])
    ((loc, err),) = benchmarks.get("seephys").read_items(path)
    assert isinstance(err, ItemError) and err.field == "image"
    assert err.to_json() == {"location": f"{path}:1", "field": "image",
                             "error": f'file of field "image" not found: {tmp_path}/gone.png'}


def test_unreadable_image_is_a_prompt_error(tmp_path):
    (tmp_path / "d.png").write_bytes(b"GIF89a-but-truncated")
    path = write_items(tmp_path / "items.jsonl", [
        {"id": "a", "question": "Q?", "answer": "1", "language": "English", "image": "d.png"}])
    ((_, item),) = benchmarks.get("seephys").read_items(path)
    with pytest.raises(PromptError, match=r"items.jsonl:1: image .*d.png: not a readable image"):
        benchmarks.get("seephys").prompt(item, "TV")


def test_openai_messages():
    p = Prompt("sys", (TextPart("look:"), ImagePart(PNG, "image/png"), TextPart("answer")), "x/y.txt")
    assert p.to_openai_messages() == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [
            {"type": "text", "text": "look:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}},
            {"type": "text", "text": "answer"}]}]
    assert Prompt(None, (TextPart("t"),), "x").to_openai_messages() == [
        {"role": "user", "content": [{"type": "text", "text": "t"}]}]
