"""benchmint generate spm against the scripted chat server: llbox boxes in each convention, the Q&A and the
advisory loop, malformed and refused replies, 429s and dropped connections, a bounded loop, identical crops,
and the items through eval and score. Requests and images are checked at the server."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

import benchmint
from benchmint.cli import main
from benchmint.generate.schema import SchemaError, validate
from benchmint.generate.spm import figure_key, iou, to_thumbnail_box

from chat_server import ChatServer, Close, Reply, Status, prompt_of

PDF = Path(benchmint.__file__).parent / "samples" / "sample_paper.pdf"

QUESTION = {
    "step1_reasoning": "The line profile in (a) gives the period; the dI/dV map in (b) follows it, so the contrast "
                       "is electronic as well as topographic.",
    "step2_question": "Which statements about the superlattice shown in panels (a)-(d) agree with the data?",
    "step3_options": ["The period is about 1.2 nm.", "The dI/dV map follows the topography.",
                      "The lattice is square.", "The FFT shows two-fold spots.", "The heights are uniform.",
                      "The map shows no modulation."],
    "step4_answer": ["A", "B"],
    "step5_rubric": [{"competency": "Moiré Period Reading", "criterion": "reads the period from the profile"}],
    "step6_labels": {"domain": "Electronic Structure and Surface States", "bloom_level": 4, "question_type": "EU",
                     "level": "PhD", "discipline": "Surface Science", "technique": "STM",
                     "topic": "Moiré superlattice"},
}
DIMS = ["scientific_consistency", "distractor_plausibility", "logical_depth", "visual_dependence",
        "answer_key_validity", "clarity"]


def critique(verdict: str, score: int) -> str:
    return json.dumps({"scores": dict.fromkeys(DIMS, score), "critiques": dict.fromkeys(DIMS, "fine"),
                       "verdict": verdict})


def stage_of(body: dict) -> str:
    prompt = prompt_of(body)
    if prompt.startswith("This is one page of a scientific paper"):
        return "llbox"
    return "advise" if prompt.startswith("You audit") else "qa"


@pytest.fixture(scope="module")
def harvest(tmp_path_factory):
    out = tmp_path_factory.mktemp("harvest")
    assert main(["harvest", str(PDF), "--out", str(out)]) == 0
    return out


def body_boxes(harvest) -> dict:
    """Each figure's harvest body box and its page size, in points."""
    doc = pymupdf.open(PDF)
    out = {}
    for line in (harvest / "figures.jsonl").read_text().splitlines():
        fig = json.loads(line)
        rect = doc[fig["page"] - 1].rect
        out[fig["label"]] = (fig["body_box"], rect.width, rect.height, fig["thumb"])
    return out


class Model:
    """The scripted models: replies by stage, each counted."""

    def __init__(self, harvest, box_format="norm1000", shift=0.0, verdicts=("pass",), panels=None) -> None:
        self.boxes = body_boxes(harvest)
        self.harvest = harvest
        self.box_format, self.shift, self.verdicts = box_format, shift, list(verdicts)
        self.panels = panels or {"1": 4, "2": 1}
        self.audits = self.drafts = 0

    def vlm_box(self, label: str) -> list[float]:
        (x0, y0, x1, y1), w, h, thumb = self.boxes[label]
        x0, x1 = x0 + self.shift * w, x1 + self.shift * w
        if self.box_format == "pixels":
            tw, th = Image.open(self.harvest / thumb).size
            return [x0 / w * tw, y0 / h * th, x1 / w * tw, y1 / h * th]
        n = [x0 / w * 1000, y0 / h * 1000, x1 / w * 1000, y1 / h * 1000]
        return [n[1], n[0], n[3], n[2]] if self.box_format == "gemini" else n

    def __call__(self, body: dict) -> str:
        stage = stage_of(body)
        if stage == "llbox":
            prompt = prompt_of(body)
            figs = []
            for label in self.boxes:
                if f"- {label}:" in prompt:
                    box = self.vlm_box(label)
                    figs.append({"label": f"Figure {label}", "box": box, "panels": [box] * self.panels[label],
                                 "modality": "STM"})
            return json.dumps({"figures": figs})
        if stage == "qa":  # each revision reads differently, so that its audit is a new request
            self.drafts += 1
            return json.dumps({**QUESTION, "step2_question": QUESTION["step2_question"] + " " * (self.drafts - 1)})
        verdict = self.verdicts[min(self.audits, len(self.verdicts) - 1)]
        self.audits += 1
        return critique(verdict, 5 if verdict == "pass" else 2)


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def gen_args(harvest, out, server, *extra) -> list[str]:
    return ["generate", "spm", str(harvest), "--out", str(out), "--pdfs", str(PDF.parent), "--base-url", server.url,
            "--vlm-model", "vlm", "--gen-model", "gen", "--advisor-model", "adv", "--retry-delay", "0",
            "--concurrency", "2", *extra]


def stages(server) -> list[str]:
    return [stage_of(b) for b in server.bodies]


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_harvest_becomes_items_that_eval_runs_and_score_scores(harvest, server, tmp_path):
    server.default = Reply(text=Model(harvest))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server)) == 0
    # Two pages boxed, one question written and audited once (it passed).
    assert sorted(stages(server)) == ["advise", "llbox", "llbox", "qa"]
    # The VLM saw each page's thumbnail byte for byte, at its 1024-px size.
    for body in server.bodies:
        if stage_of(body) == "llbox":
            url = [p for p in body["messages"][0]["content"] if p["type"] == "image_url"][0]["image_url"]["url"]
            sent = base64.b64decode(url.split(",", 1)[1])
            page = 1 if "- 1:" in prompt_of(body) else 2
            thumb = next((harvest / "thumbs").glob(f"*-p{page:04d}.png")).read_bytes()
            assert sent == thumb
            assert max(Image.open(io.BytesIO(sent)).size) == 1024
    # The generator saw the 300-DPI crop of figure 1's body, (324, 116, 552, 344) pt: x 1350-2300 px exactly,
    # y 483.3-1433.3 px rounded outward to 483-1434.
    qa = next(b for b in server.bodies if stage_of(b) == "qa")
    url = [p for p in qa["messages"][0]["content"] if p["type"] == "image_url"][0]["image_url"]["url"]
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (950, 951)
    # Servers that enforce the schema write its properties in order: the reasoning path first, the answer after
    # the options (the request's schema travels with sorted keys).
    assert list(qa["response_format"]["json_schema"]["schema"]["properties"]) == [
        "step1_reasoning", "step2_question", "step3_options", "step4_answer", "step5_rubric", "step6_labels"]
    items = rows(out / "items.jsonl")
    assert len(items) == 1
    item = items[0]
    assert item["answer"] == "A, B" and len(item["options"]) == 6 and item["domain"] == QUESTION["step6_labels"]["domain"]
    assert item["meta"]["outcome"] == "PASSED_FIRST" and item["meta"]["box_source"] == "vlm"
    assert (out / item["image"]).is_file()
    rejected = rows(out / "rejected.jsonl")
    assert [(r["stage"], r["reason"], r["figure"]["label"]) for r in rejected] == [("llbox", "too_few_panels", "2")]
    run = json.loads((out / "run.json").read_text())
    assert run["questions"]["codes"]["PASSED_FIRST"] == {"count": 1, "share": 1.0}
    assert run["figures"]["codes"]["too_few_panels"]["count"] == 1
    assert {p["name"] for p in run["prompts"]} >= {"spm/qa.txt", "spm/advise.txt", "spm/llbox.txt",
                                                    "spm/taxonomy.json", "spm/critique.json", "spm/tech_lib.txt"}
    by_stage = {r["stage"]: r["requests"] for r in run["calls"]["by_stage_model"]}
    assert by_stage == {"llbox": 2, "qa": 1, "advise": 1}
    trace = rows(out / "trace.jsonl")
    assert [s["step"] for s in trace[0]["steps"]] == ["draft", "advise"]

    # A rerun of the finished run asks nothing and writes the same files.
    before = {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
    count = server.count
    assert main(gen_args(harvest, out, server)) == 0
    assert server.count == count
    assert {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == before

    # eval runs the items and score scores them.
    server.default = Reply(text="Answer: A, B\nConfidence: 0.9\nDifficulty: 0.5")
    ev = tmp_path / "eval"
    assert main(["eval", str(out / "items.jsonl"), "--benchmark", "spm", "--model", "m", "--base-url", server.url,
                 "--out", str(ev), "--score"]) == 0
    summary = json.loads((ev / "scores" / "summary.json").read_text())
    assert json.dumps(summary).count('"em"') >= 1
    scores = rows(ev / "scores" / "scores.jsonl")
    assert [(s["id"], s["em"]) for s in scores] == [(item["id"], 1.0)]


@pytest.mark.parametrize("box_format", ["norm1000", "pixels", "gemini"])
def test_vlm_boxes_in_each_convention_map_to_the_figure_body(harvest, server, tmp_path, box_format):
    server.default = Reply(text=Model(harvest, box_format))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--box-format", box_format, "--min-panels", "1")) == 0
    figs = {f["label"]: f for f in rows(out / "figures.jsonl")}
    for label, (body, *_rest) in body_boxes(harvest).items():
        assert figs[label]["box_source"] == "vlm"
        # Pixel boxes round to whole thumbnail pixels of a 612-pt page at 1024 px: within 0.6 pt.
        assert figs[label]["page_box"] == pytest.approx(body, abs=0.6)
        assert figs[label]["iou_with_harvest"] > 0.99 and figs[label]["low_iou"] is False
    assert len(rows(out / "items.jsonl")) == 2


def test_a_vlm_box_far_from_the_harvest_body_is_flagged(harvest, server, tmp_path):
    server.default = Reply(text=Model(harvest, shift=-0.15))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--min-panels", "1")) == 0
    fig = {f["label"]: f for f in rows(out / "figures.jsonl")}["1"]
    # Figure 1's body is 228 pt wide; moved left by 0.15 x 612 = 91.8 pt: IoU (228 - 91.8) / (228 + 91.8) = 0.4259.
    assert fig["iou_with_harvest"] == pytest.approx(136.2 / 319.8, abs=1e-3) and fig["low_iou"] is True
    assert fig["box_source"] == "vlm"


def test_without_a_vlm_the_harvest_boxes_are_cropped(harvest, server, tmp_path):
    server.default = Reply(text=Model(harvest))
    out = tmp_path / "gen"
    args = [a for a in gen_args(harvest, out, server) if a not in ("--vlm-model", "vlm")]
    assert main(args) == 0
    assert "llbox" not in stages(server)
    fig = {f["label"]: f for f in rows(out / "figures.jsonl")}["1"]
    assert fig["box_source"] == "harvest" and fig["note"] == "no VLM"


def test_malformed_and_refused_replies_are_asked_again_within_the_bound(harvest, server, tmp_path):
    model = Model(harvest)

    def reply(body):
        return model(body)

    server.default = Reply(text=reply)
    draft = 0

    def generator(body):
        nonlocal draft
        draft += 1
        if draft == 1:
            return '{"reasoning": "cut off'
        if draft == 2:
            return "I'm sorry, I can't help with that."
        return json.dumps(QUESTION)

    server.default = Reply(text=lambda b: generator(b) if stage_of(b) == "qa" else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server)) == 0
    assert stages(server).count("qa") == 3
    assert rows(out / "items.jsonl")[0]["meta"]["outcome"] == "PASSED_FIRST"


def test_a_generator_that_never_gives_a_valid_question_is_rejected_with_its_words(harvest, server, tmp_path):
    model = Model(harvest)
    five = json.dumps({**QUESTION, "step3_options": QUESTION["step3_options"][:5]})
    server.default = Reply(text=lambda b: five if stage_of(b) == "qa" else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--answer-attempts", "2")) == 0
    assert stages(server).count("qa") == 2 and "advise" not in stages(server)
    rejected = [r for r in rows(out / "rejected.jsonl") if r["stage"] == "qa"]
    assert len(rejected) == 1 and rejected[0]["reason"] == "generator_failed"
    assert "5 items, at least 6 needed" in rejected[0]["detail"] and rejected[0]["words"] == five
    run = json.loads((out / "run.json").read_text())
    assert run["questions"]["codes"]["GENERATOR_FAILED"]["count"] == 1 and not rows(out / "items.jsonl")


def test_an_advisor_that_never_passes_stops_at_the_bound(harvest, server, tmp_path):
    model = Model(harvest, verdicts=["revise"])
    server.default = Reply(text=model)
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--max-rounds", "3")) == 0
    # Draft, audit, revision, audit, revision, audit: three audits, two revisions, then the bound.
    assert stages(server).count("advise") == 3 and stages(server).count("qa") == 3
    rejected = [r for r in rows(out / "rejected.jsonl") if r["stage"] == "advise"]
    assert len(rejected) == 1 and rejected[0]["reason"] == "rejected_at_bound"
    assert rejected[0]["scores"] == dict.fromkeys(DIMS, 2)
    run = json.loads((out / "run.json").read_text())
    assert run["questions"]["codes"]["REJECTED_AT_BOUND"] == {"count": 1, "share": 1.0}
    trace = rows(out / "trace.jsonl")[0]
    assert [(s["step"], s["round"]) for s in trace["steps"]] == [
        ("draft", 0), ("advise", 1), ("revise", 1), ("advise", 2), ("revise", 2), ("advise", 3)]
    # The revision was asked with the advisor's critique.
    revise = [b for b in server.bodies if prompt_of(b).startswith("You wrote the multiple-select question")]
    assert len(revise) == 2 and "- clarity: 2. fine" in prompt_of(revise[0])


def test_a_question_that_passes_after_revision_says_how_many_audits(harvest, server, tmp_path):
    server.default = Reply(text=Model(harvest, verdicts=["revise", "pass"]))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server)) == 0
    item = rows(out / "items.jsonl")[0]
    assert item["meta"]["outcome"] == "PASSED_REVISED" and item["meta"]["audits"] == 2


def test_429s_and_dropped_connections_are_retried(harvest, server, tmp_path):
    server.default = Reply(text=Model(harvest))
    server.queue(Status(429, retry_after="0"), Close(), Status(503))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--concurrency", "1")) == 0
    assert server.count == 4 + 3 and len(rows(out / "items.jsonl")) == 1


def test_a_call_that_keeps_failing_is_an_error_and_the_next_run_asks_again(harvest, server, tmp_path):
    model = Model(harvest)
    server.default = Reply(text=lambda b: model(b))
    server.when_contains["You audit"] = Status(500)
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--retries", "2")) == 1
    errors = rows(out / "errors.jsonl")
    assert [(e["kind"], e["stage"], e["cause"]) for e in errors] == [("model_call", "advise", "http_status")]
    assert not rows(out / "items.jsonl") and not [r for r in rows(out / "rejected.jsonl") if r["stage"] != "llbox"]
    del server.when_contains["You audit"]
    count = server.count
    assert main(gen_args(harvest, out, server)) == 0
    assert stages(server)[count:] == ["advise"]  # nothing else asked again
    assert len(rows(out / "items.jsonl")) == 1


def test_identical_crops_are_asked_once_and_every_figure_keeps_its_record(harvest, server, tmp_path):
    copy = tmp_path / "harvest"
    shutil.copytree(harvest, copy)
    lines = (copy / "figures.jsonl").read_text().splitlines()
    twin = {**json.loads(lines[0]), "label": "3"}  # the same body on the same page: the same crop
    (copy / "figures.jsonl").write_text("\n".join([lines[0], json.dumps(twin), lines[1], "{broken"]) + "\n")
    server.default = Reply(text=Model(harvest))
    out = tmp_path / "gen"
    args = [a for a in gen_args(copy, out, server) if a not in ("--vlm-model", "vlm")]
    assert main(args) == 1  # the broken line is an error row
    assert stages(server).count("qa") == 1
    figs = rows(out / "figures.jsonl")
    assert [(f["label"], f["status"]) for f in figs] == [("1", "question"), ("3", "duplicate_crop"),
                                                         ("2", "rejected")]
    assert figs[0]["id"] == figs[1]["id"] and figs[0]["crop_sha256"] == figs[1]["crop_sha256"]
    item = rows(out / "items.jsonl")[0]
    assert [f["label"] for f in item["meta"]["figures"]] == ["1", "3"]
    errors = rows(out / "errors.jsonl")
    assert errors[0]["kind"] == "bad_figure" and errors[0]["line"] == 4


def test_a_missing_pdf_rejects_its_figures(harvest, server, tmp_path):
    server.default = Reply(text=Model(harvest))
    out = tmp_path / "gen"
    args = gen_args(harvest, out, server)
    args[args.index("--pdfs") + 1] = str(tmp_path)
    assert main(args) == 0
    assert {r["reason"] for r in rows(out / "rejected.jsonl")} == {"pdf_not_found"} and server.count == 0


# ---- the pieces, by hand


def test_box_conventions_and_iou_by_hand():
    assert to_thumbnail_box([100, 200, 300, 400], "gemini") == ([200, 100, 400, 300], "norm1000")
    assert to_thumbnail_box([1, 2, 3, 4], "pixels") == ([1, 2, 3, 4], "pixels")
    assert iou([0, 0, 2, 2], [1, 1, 3, 3]) == pytest.approx(1 / 7)
    assert iou([0, 0, 1, 1], [2, 2, 3, 3]) == 0.0
    assert [figure_key(x) for x in ("Figure 2", "FIG. 2:", "Fig 2", "2", "Figure S1.", "Extended Data Fig. 3")] == [
        "2", "2", "2", "2", "s1", "3"]


def test_schema_checks_by_hand():
    schema = {"type": "object", "additionalProperties": False, "required": ["a"],
              "properties": {"a": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2}}}
    validate({"a": [1, 2]}, schema)
    for value, message in (({"a": [1]}, "$.a: 1 items, at least 2 needed"), ({"a": [1, 0]}, "$.a[1]: 0 is below"),
                           ({"a": [1, True]}, "$.a[1]: expected integer, got bool"), ({}, "$: missing ['a']"),
                           ({"a": [1, 2], "b": 1}, "unexpected keys ['b']")):
        with pytest.raises(SchemaError, match=re.escape(message)):
            validate(value, schema)
    with pytest.raises(ValueError, match="does not know"):
        validate(1, {"pattern": "x"})


# ---- a killed loop resumes


def stateless_model(harvest):
    """Replies that depend on the request alone (a resumed run must get the same ones): each revision appends
    "+" to the question, and the advisor passes a question ending in "++" (the third version)."""
    vlm = Model(harvest)

    def reply(body):
        stage, prompt = stage_of(body), prompt_of(body)
        if stage == "llbox":
            return vlm(body)
        if stage == "qa":
            if not prompt.startswith("You wrote"):
                return json.dumps(QUESTION)
            draft = json.loads(prompt.split("Your question, as JSON:\n", 1)[1].split("\n", 1)[0])
            return json.dumps({**draft, "step2_question": draft["step2_question"] + "+"})
        draft = json.loads(prompt.split("as JSON:\n", 1)[1].split("\n", 1)[0])
        return critique("pass", 5) if draft["step2_question"].endswith("++") else critique("revise", 3)

    return reply


def test_a_killed_multi_round_loop_resumes_without_asking_again(harvest, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    with ChatServer() as server:
        server.default = Reply(text=stateless_model(harvest), delay=0.15)
        out = tmp_path / "killed"
        args = [sys.executable, "-m", "benchmint.cli", *gen_args(harvest, out, server, "--concurrency", "1")]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.count < 5 and time.monotonic() < deadline:  # two pages, the draft, an audit, a revision
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        asked_before = server.count
        assert 5 <= asked_before < 8
        subprocess.run(args, check=True, timeout=120, capture_output=True)
        # The whole loop: 2 llbox, draft, audit, revision, audit, revision, audit (passed) = 8 distinct calls;
        # only the one in flight at the kill may have been asked twice.
        assert len(server.by_prompt) == 8 and server.count <= 8 + 1
        assert sum(n - 1 for n in server.by_prompt.values()) == server.count - 8
        item = rows(out / "items.jsonl")[0]
        assert item["meta"]["outcome"] == "PASSED_REVISED" and item["meta"]["audits"] == 3
        assert item["question"].endswith("++")

        # The same files as a run that was never interrupted (against a server that forgot nothing it was asked).
        whole = tmp_path / "whole"
        server.reset()
        server.default = Reply(text=stateless_model(harvest))
        assert main(gen_args(harvest, whole, server, "--concurrency", "1")) == 0
        assert server.count == 8
        for name in ("items.jsonl", "rejected.jsonl", "trace.jsonl", "figures.jsonl", "errors.jsonl"):
            assert (out / name).read_text() == (whole / name).read_text(), name


def test_text_only_sends_the_generator_and_advisor_no_image(harvest, server, tmp_path):
    server.default = Reply(text=Model(harvest))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--text-only")) == 0
    for body in server.bodies:
        content = body["messages"][0]["content"]
        if stage_of(body) == "llbox":
            assert any(p["type"] == "image_url" for p in content)
        else:  # plain text, the form chat templates of text-only models take
            assert isinstance(content, str) and "Line profile across the superlattice" in content
    assert len(rows(out / "items.jsonl")) == 1


def test_a_generator_that_refuses_is_rejected_with_the_refusal(harvest, server, tmp_path):
    from chat_server import Raw

    refusal = {"id": "x", "object": "chat.completion", "created": 0, "model": "gen",
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."}}]}
    server.default = Reply(text=Model(harvest))
    server.when_contains["PhD-level multiple-select question"] = Raw(json.dumps(refusal).encode())
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--answer-attempts", "2")) == 0
    assert stages(server).count("qa") == 2
    row = [r for r in rows(out / "rejected.jsonl") if r["stage"] == "qa"][0]
    assert row["reason"] == "generator_failed" and "refusal: I can't help with that." in row["detail"]


def test_prompt_files_can_be_replaced_and_their_hashes_are_recorded(harvest, server, tmp_path):
    import hashlib

    from benchmint.generate.flow import PromptSet

    package = PromptSet("spm")._file("qa.txt")
    own = tmp_path / "prompts" / "spm"
    own.mkdir(parents=True)
    text = "{{IMAGES}}\nMy own question prompt for {{LABEL}}: {{CAPTION}}\n"
    (own / "qa.txt").write_text(text)
    (own / "tech_lib.txt").write_text("# mine\nmoiré superlattice\n")
    server.default = Reply(text=Model(harvest))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--prompts", str(tmp_path / "prompts"))) == 0
    qa = next(b for b in server.bodies if stage_of(b) == "qa")
    assert prompt_of(qa) == "My own question prompt for 1: " + rows(harvest / "figures.jsonl")[0]["caption"]
    prompts = {p["name"]: p for p in json.loads((out / "run.json").read_text())["prompts"]}
    assert prompts["spm/qa.txt"] == {"name": "spm/qa.txt", "origin": str(own / "qa.txt"),
                                     "sha256": hashlib.sha256(text.encode()).hexdigest()}
    assert prompts["spm/qa.txt"]["sha256"] != package.sha256 and prompts["spm/advise.txt"]["origin"] == "package"
    # An override with a placeholder the stage does not fill is refused before any call.
    (own / "qa.txt").write_text("{{IMAGES}}\n{{NOPE}}\n")
    count = server.count
    assert main(gen_args(harvest, tmp_path / "gen2", server, "--prompts", str(tmp_path / "prompts"))) == 2
    assert server.count == count


def test_an_unusable_vlm_reply_falls_back_to_the_harvest_box(harvest, server, tmp_path):
    model = Model(harvest)
    server.default = Reply(text=lambda b: '{"figures": [{"label": "1", "box": [10, 20' if stage_of(b) == "llbox"
                           else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--answer-attempts", "2")) == 0
    assert stages(server).count("llbox") == 4  # two pages, two answer attempts each
    fig = {f["label"]: f for f in rows(out / "figures.jsonl")}["1"]
    assert fig["box_source"] == "harvest" and fig["note"] == "the VLM's reply was unusable"
    assert "no JSON object in the reply" in fig["vlm_error"] and fig["vlm_words"].startswith('{"figures"')
    assert fig["page_box"] == rows(harvest / "figures.jsonl")[0]["body_box"]


# ---- questions the checks refuse, repaired with the reason

TWIN = json.dumps({**QUESTION, "step3_options": [*QUESTION["step3_options"][:2], " the period is about 1.2  NM. ",
                                                 *QUESTION["step3_options"][3:]]})


def is_repair(body) -> bool:
    return prompt_of(body).startswith("You wrote the multiple-select question below about the figure shown above, "
                                      "and it cannot be used")


def test_a_question_with_two_same_options_is_repaired_with_the_reason(harvest, server, tmp_path):
    model = Model(harvest)
    # The draft's option C repeats A (case and spaces aside); the repair request is answered with a good question.
    server.default = Reply(text=lambda b: model(b) if stage_of(b) != "qa" or is_repair(b) else TWIN)
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--seed", "7")) == 0
    qa = [b for b in server.bodies if stage_of(b) == "qa"]
    assert [is_repair(b) for b in qa] == [False, True]  # asked once as it was, never again the same way
    repair = prompt_of(qa[1])
    assert ("cannot be used as it is: options A and C are the same (\'the period is about 1.2  NM.\'); all six must "
            "differ.") in repair
    assert json.loads(repair.split("Your question, as JSON:\n", 1)[1].split("\n", 1)[0]) == json.loads(TWIN)
    assert qa[0]["seed"] == 7 and qa[1]["seed"] == 8  # its own seed
    item = rows(out / "items.jsonl")[0]
    assert item["meta"]["outcome"] == "PASSED_FIRST" and item["meta"]["repairs"] == 1
    assert item["options"] == QUESTION["step3_options"]
    run = json.loads((out / "run.json").read_text())
    assert run["repairs"] == {"questions": 1, "requests": 1, "fixed": 1}
    assert {r["stage"]: r["requests"] for r in run["calls"]["by_stage_model"]} == {
        "llbox": 2, "qa": 1, "repair": 1, "advise": 1}
    steps = rows(out / "trace.jsonl")[0]["steps"]
    assert [(s["step"], s.get("repair"), "refused" in s) for s in steps] == [
        ("draft", None, True), ("repair", 1, False), ("advise", None, False)]
    # The repair is a unit of the ledger like any round: a rerun asks nothing.
    count = server.count
    assert main(gen_args(harvest, out, server, "--seed", "7")) == 0
    assert server.count == count


def test_a_question_still_refused_after_the_repairs_is_rejected_with_the_reason(harvest, server, tmp_path):
    model = Model(harvest)
    twice = json.dumps({**QUESTION, "step4_answer": ["B", "A", "B"]})
    server.default = Reply(text=lambda b: twice if stage_of(b) == "qa" else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--max-repairs", "2")) == 0
    qa = [b for b in server.bodies if stage_of(b) == "qa"]
    assert [is_repair(b) for b in qa] == [False, True, True] and "advise" not in stages(server)
    row = [r for r in rows(out / "rejected.jsonl") if r["stage"] == "qa"][0]
    assert row["reason"] == "generator_failed" and json.loads(row["words"]) == json.loads(twice)
    assert row["detail"] == ("the correct set names B more than once; name each correct letter once (still so after "
                             "2 repairs, --max-repairs 2)")
    run = json.loads((out / "run.json").read_text())
    assert run["repairs"] == {"questions": 1, "requests": 2, "fixed": 0}
    assert run["questions"]["codes"]["GENERATOR_FAILED"]["count"] == 1

    # --max-repairs 0: refused at once, as a reply the checks refuse was before repairs existed.
    server.reset()
    server.default = Reply(text=lambda b: twice if stage_of(b) == "qa" else model(b))
    out0 = tmp_path / "gen0"
    assert main(gen_args(harvest, out0, server, "--max-repairs", "0")) == 0
    assert stages(server).count("qa") == 1
    assert "(still so after 0 repairs, --max-repairs 0)" in rows(out0 / "rejected.jsonl")[-1]["detail"]


def test_a_revision_the_checks_refuse_is_repaired_before_its_audit(harvest, server, tmp_path):
    model = Model(harvest, verdicts=["revise", "pass"])

    def reply(body):
        if stage_of(body) == "qa" and prompt_of(body).startswith("You wrote the multiple-select question below about "
                                                                 "the figure shown above. An advisor"):
            return TWIN
        return model(body)

    server.default = Reply(text=reply)
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server)) == 0
    steps = rows(out / "trace.jsonl")[0]["steps"]
    assert [(s["step"], s["round"]) for s in steps] == [("draft", 0), ("advise", 1), ("revise", 1), ("repair", 1),
                                                        ("advise", 2)]
    item = rows(out / "items.jsonl")[0]
    assert item["meta"]["outcome"] == "PASSED_REVISED" and item["meta"]["audits"] == 2 and item["meta"]["repairs"] == 1


def test_the_schema_holds_every_rule_it_can_express(harvest, tmp_path):
    """Six options, letters A-F, a non-empty correct set and every label from its list are the schema's, so a
    server that enforces it by grammar cannot break them; the Bloom level and the advisor's scores are enums of
    integers, which llama.cpp's grammar enforces (it writes a bounded integer as any integer)."""
    from benchmint.generate.spm import SPMConfig, SPMGenerator

    gen = SPMGenerator(harvest, tmp_path / "g", SPMConfig("gen", "adv"), {})
    for change, message in (({"step3_options": QUESTION["step3_options"][:5]}, "5 items, at least 6"),
                            ({"step4_answer": []}, "0 items, at least 1"), ({"step4_answer": ["G"]}, "'G' is not one"),
                            ({"step6_labels": {**QUESTION["step6_labels"], "bloom_level": 6}}, "6 is not one of [1, 2, 3, 4, 5]"),
                            ({"step6_labels": {**QUESTION["step6_labels"], "question_type": "XX"}}, "'XX' is not one")):
        with pytest.raises(SchemaError, match=re.escape(message)):
            validate({**QUESTION, **change}, gen.s_qa)
    with pytest.raises(SchemaError, match=re.escape("$.scores.clarity: 0 is not one of [1, 2, 3, 4, 5]")):
        validate({**json.loads(critique("pass", 5)), "scores": {**dict.fromkeys(DIMS, 5), "clarity": 0}}, gen.s_crit)
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="benchmint[local] is not installed")
    rules = dict(line.split(" ::= ", 1) for line in
                 llama_grammar.json_schema_to_gbnf(json.dumps(gen.s_qa)).splitlines() if " ::= " in line)
    bloom = next(v for k, v in rules.items() if k.endswith("bloom-level-kv"))
    assert rules[bloom.rsplit(" ", 1)[1]] == '"1" | "2" | "3" | "4" | "5"'
    crit = dict(line.split(" ::= ", 1) for line in
                llama_grammar.json_schema_to_gbnf(json.dumps(gen.s_crit)).splitlines() if " ::= " in line)
    assert '"1" | "2" | "3" | "4" | "5"' in crit.values()


# ---- prompts and replies bounded for small models


def test_bounded_discussion_by_hand():
    from benchmint.generate.evidence import bounded_discussion

    s1 = "The grain size grows with annealing."  # 7 tokens (words and punctuation)
    s2 = "Grain boundaries pin the growth."  # 6
    s3 = "As Fig. 3 shows, the oxide layer is thin."  # 12, cites the figure
    s4 = "Fig. 4 shows the grain size."  # 8, cites another
    text = " ".join([s1, s2, s3, s4, s1])  # a sentence repeated counts once when cut
    assert bounded_discussion(text, "3", "Grain size after annealing.", 40) == (text, 40, 40)
    # Ranked: s3 (cites figure 3), then by BM25 against the caption: s1 (grain, size, annealing), s4 (grain, size),
    # s2 (grain). Budget 26: s3 (12) + s1 (7) = 19; s4 would make 27, skipped; s2 makes 25. In the text's order.
    assert bounded_discussion(text, "3", "Grain size after annealing.", 26) == (" ".join([s1, s2, s3]), 25, 40)
    assert bounded_discussion(text, "3", "Grain size after annealing.", 19) == (" ".join([s1, s3]), 19, 40)
    assert bounded_discussion(text, "3", "Grain size after annealing.", 5) == ("", 0, 40)


def test_context_tokens_and_reply_tokens_per_role_reach_the_requests(harvest, server, tmp_path):
    model = Model(harvest, verdicts=["revise", "pass"])
    first = [True]

    def reply(body):  # the first draft has two options the same: one call of each role's
        if stage_of(body) == "qa" and first[0]:
            first[0] = False
            return TWIN
        return model(body)

    server.default = Reply(text=reply)
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--context-tokens", "50", "--vlm-reply-tokens", "100",
                         "--gen-reply-tokens", "300", "--advisor-reply-tokens", "200")) == 0
    by_stage = {}
    for b in server.bodies:
        by_stage.setdefault("repair" if is_repair(b) else stage_of(b), set()).add(b["max_tokens"])
    assert by_stage == {"llbox": {100}, "qa": {300}, "repair": {300}, "advise": {200}}
    # Figure 1's discussion is one paragraph three times: "Scanning ... about 1.2 nm." (17 tokens) and "As seen in
    # Fig. 1(b), ... hexagonal lattice." (40), 171 in all. Within 50 tokens the sentence citing the figure is kept.
    for b in server.bodies:
        if stage_of(b) != "llbox":
            discussion = prompt_of(b).split("What the authors write about it:\n", 1)[1].split("\n", 1)[0]
            assert discussion.startswith("As seen in Fig. 1(b)") and discussion.endswith("of a hexagonal lattice.")
            assert "Scanning" not in discussion
    assert rows(out / "trace.jsonl")[0]["discussion_cut"] == {"tokens": 40, "of": 171}
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert (settings["context_tokens"], settings["vlm_max_tokens"], settings["gen_max_tokens"],
            settings["advisor_max_tokens"], settings["max_repairs"]) == (50, 100, 300, 200, 2)


def test_pass_score_sets_the_advisors_bar(harvest, server, tmp_path):
    model = Model(harvest)
    three = critique("pass", 3)  # verdict pass, every dimension 3 of 5: below critique.json's 4
    server.default = Reply(text=lambda b: three if stage_of(b) == "advise" else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--max-rounds", "1")) == 0
    assert not rows(out / "items.jsonl") and rows(out / "rejected.jsonl")[-1]["reason"] == "rejected_at_bound"
    lowered = tmp_path / "lowered"
    assert main(gen_args(harvest, lowered, server, "--max-rounds", "1", "--pass-score", "3")) == 0
    assert rows(lowered / "items.jsonl")[0]["meta"]["outcome"] == "PASSED_FIRST"
    assert json.loads((lowered / "run.json").read_text())["settings"]["pass_score"] == 3
    assert main(gen_args(harvest, tmp_path / "x", server, "--pass-score", "6")) == 2
