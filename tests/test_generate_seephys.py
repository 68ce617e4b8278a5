"""benchmint generate seephys: answer rules and sig_figs worked out by hand, the VO composites rendered and
checked (bound, diagram pixels, text, determinism), the model stages against the scripted chat server (a repair
that alters a number, a caption that states the answer, malformed JSON, a rerun that asks nothing), and the built
items through eval in all four settings and grade."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from benchmint.cli import main
from benchmint.generate.seephys import compose, numbers_in, png_bytes, sentences_of, sig_figs_of, states_answer

from chat_server import ChatServer, Malformed, Reply, prompt_of


def rows(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def diagram(w: int, h: int, seed: int = 0) -> Image.Image:
    """A diagram whose every pixel is known: coloured stripes and a frame."""
    rng = np.random.default_rng(seed)
    arr = np.full((h, w, 3), 255, np.uint8)
    arr[::7] = rng.integers(0, 255, (len(range(0, h, 7)), w, 3), dtype=np.uint8)
    img = Image.fromarray(arr)
    ImageDraw.Draw(img).rectangle([2, 2, w - 3, h - 3], outline=(0, 0, 200), width=3)
    return img


# ---------------------------------------------------------------------------------------------------------------
# Answer rules, by hand


@pytest.mark.parametrize("answer, expected", [
    (r"$1.5 \times 10^{-7} \mathrm{C}$", 2),  # the mantissa counts, not the exponent
    ("10.1", 3),  # the paper's own example
    ("6.0", 2),  # a trailing zero after the point counts
    ("0.0250 m", 3),  # leading zeros do not
    (r"\(v_{1} = 2.50\ \mathrm{m/s^2}\)", 3),  # subscripts and the unit's power are not the answer's numbers
    ("1.2e-3 J", 2),
    ("120 N", None),  # an integer does not say its precision
    (r"$$\theta=2 k \pi \mp \frac{\pi}{2}$$", None),  # a formula
    ("Ray E", None),
    ("1.5 m and 2.5 m", None),  # two numbers
])
def test_sig_figs_from_the_reference_answer(answer, expected):
    assert sig_figs_of(answer) == expected


def test_sentences_are_not_ended_by_decimals_math_or_abbreviations():
    assert sentences_of("2.5 m/s") == 1
    assert sentences_of(r"It is $v = 2.5$. It rises, e.g. by 1.5 m. Then it stops.") == 3
    assert sentences_of("One. Two! Three? Four.") == 4
    assert sentences_of("向上。速度不变。加速度为零。方向向下。") == 4


def test_caption_answer_leak_and_number_check():
    assert states_answer("A block on a 30° incline; the acceleration is 4.9 m/s^2.", "4.9 m/s^2") is not None
    assert states_answer("A block of mass $m$ on an incline of angle $30^\\circ$.", r"$4.9\ \mathrm{m/s^2}$") is None
    assert states_answer("Rays A to E leave the lens; Ray E is dashed.", "Ray E") is not None
    assert numbers_in("$m_1 = 2.0$ kg, 10^{-3} s") == ["1", "2.0", "10", "3"]


# ---------------------------------------------------------------------------------------------------------------
# VO composites

QUESTION = (r"A block of mass $m = 2.0\ \mathrm{kg}$ rests on an incline of angle $\theta = 30^\circ$. "
            r"Find its acceleration $a = g \sin\theta$ when released, with $g = 9.8\ \mathrm{m/s^2}$.")


def test_composite_keeps_the_diagram_pixels_and_is_deterministic():
    d = diagram(500, 300)
    img, layout = compose(QUESTION, [d], seed=1, fid="p1")
    x0, y0, x1, y1 = layout["diagram_boxes"][0]
    assert layout["diagram_scale"] == 1.0
    assert np.array_equal(np.asarray(img.crop((x0, y0, x1, y1))), np.asarray(d))
    again, _ = compose(QUESTION, [diagram(500, 300)], seed=1, fid="p1")
    assert png_bytes(img) == png_bytes(again)
    # Text is drawn in the text box (dark pixels), and nowhere between the text and the diagram.
    tx0, ty0, tx1, ty1 = layout["text_box"]
    text = np.asarray(img.convert("L").crop((tx0, ty0, tx1, ty1)))
    assert (text < 100).sum() > 500
    assert (np.asarray(img.convert("L").crop((0, ty1, img.width, y0))) == 255).all()
    # Other seeds draw the text in other styles; the diagram stays as it is.
    styles = {(lay["font"], lay["math_font"], lay["font_size"])
              for lay in (compose(QUESTION, [d], seed=s, fid="p1")[1] for s in range(6))}
    assert len(styles) > 1


def test_the_text_is_the_question_rendered():
    # The same question over another diagram of the same width: the same text pixels; another question: others.
    a, la = compose(QUESTION, [diagram(500, 300)], seed=2, fid="p")
    b, lb = compose(QUESTION, [diagram(500, 200, seed=5)], seed=2, fid="p")
    c, lc = compose(QUESTION.replace("2.0", "3.0"), [diagram(500, 300)], seed=2, fid="p")
    assert la["text_box"] == lb["text_box"] == lc["text_box"]
    box = la["text_box"]
    assert np.array_equal(np.asarray(a.crop(box)), np.asarray(b.crop(box)))
    assert not np.array_equal(np.asarray(a.crop(box)), np.asarray(c.crop(box)))


def test_words_are_spaced_as_the_text_spaces_them():
    from benchmint.generate.seephys import render_text

    # A comma or full stop written right after a math segment stays next to it (it was drawn after a space)
    _, lines = render_text("Let $x = 2$, then find $y$.", 600, 14, "DejaVu Sans", "dejavusans")
    assert lines == ["Let $x = 2$, then find $y$."]


def test_composite_bound_spacing_and_several_diagrams():
    big = diagram(5000, 3000)
    img, layout = compose(QUESTION, [big, diagram(800, 2500)], seed=0, fid="big", max_side=4096)
    assert img.width <= 4096 and img.height <= 4096
    assert layout["diagram_scale"] < 1.0 and len(layout["diagram_boxes"]) == 2
    # A diagram wider than the bound is scaled to fit the width, never cut off.
    wide, wide_layout = compose(QUESTION, [diagram(5000, 300)], seed=0, fid="wide")
    x0, y0, x1, y1 = wide_layout["diagram_boxes"][0]
    assert wide.width <= 4096 and 0 <= x0 and x1 <= wide.width and wide_layout["diagram_scale"] < 1.0
    assert x1 - x0 == round(5000 * wide_layout["diagram_scale"])
    small, small_layout = compose(QUESTION, [diagram(300, 200)], seed=0, fid="big")
    # Spacing and the font follow the diagram's size.
    assert layout["gap"] > small_layout["gap"] and layout["font_size"] > small_layout["font_size"]
    # A text that cannot fit is an error, not an unreadable image.
    with pytest.raises(ValueError, match="do not fit"):
        compose(" ".join(["word"] * 4000), [diagram(200, 200)], seed=0, fid="x", max_side=300)


# ---------------------------------------------------------------------------------------------------------------
# The build, through eval and grade


def problems(tmp_path: Path, extra: list[dict] | None = None) -> Path:
    folder = tmp_path / "raw"
    folder.mkdir(exist_ok=True)
    diagram(400, 300, 1).save(folder / "incline.png")
    diagram(300, 300, 2).save(folder / "circuit.png")
    diagram(200, 100, 3).save(folder / "scale.png")
    (folder / "broken.png").write_bytes(b"not a png")
    recs = [
        {"id": "incline", "question": QUESTION, "answer": r"$4.9\ \mathrm{m/s^2}$", "images": ["incline.png"],
         "subject": "CM", "level": "High", "vision_relevance": "optional", "img_category": "static_force_analysis",
         "caption": "A block on an incline of angle $30^\\circ$."},
        {"id": "circuit", "question": "Two resistors of $2\\,\\Omega$ and $3\\,\\Omega$ are in series with a "
                                      "$10\\,\\mathrm{V}$ battery as shown. Find the current.",
         "answer": "2.00 A", "images": ["circuit.png", "scale.png"], "subject": "EM", "level": 2, "sig_figs": "2"},
        {"id": "long", "question": "Explain the motion shown.", "images": ["incline.png"],
         "answer": "It slides. It speeds up. Friction slows it. It stops at the bottom."},
        {"id": "noimage", "question": "Find x.", "answer": "1.0", "images": ["missing.png"]},
        {"id": "badlevel", "question": "Find x.", "answer": "1.0", "images": ["incline.png"], "level": "Expert"},
        {"id": "notpng", "question": "Find y.", "answer": "1.0", "images": ["broken.png"]},
        *(extra or []),
    ]
    path = folder / "problems.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + "{not json\n")
    return path


def test_build_without_a_model_then_eval_in_four_settings_and_grade(tmp_path):
    src = problems(tmp_path)
    out = tmp_path / "built"
    assert main(["generate", "seephys", str(src), "--out", str(out), "--seed", "4"]) == 0
    items = rows(out / "items.jsonl")
    assert [i["id"] for i in items] == ["incline", "circuit"]
    incline, circuit = items
    assert incline["sig_figs"] == "2" and incline["level"] == 2 and incline["vision_relevance"] == "optional"
    assert circuit["sig_figs"] == "2" and len(circuit["images"]) == 2  # the given 2 kept over the answer's 3
    assert all((out / i["composite_image"]).is_file() and (out / p).is_file() for i in items for p in i["images"])
    with Image.open(out / circuit["composite_image"]) as im:
        assert max(im.size) <= 4096
        boxes = circuit["meta"]["composite"]["layout"]["diagram_boxes"]
        assert np.array_equal(np.asarray(im.crop(boxes[1])), np.asarray(diagram(200, 100, 3)))
    rejected = {r["id"]: r for r in rows(out / "rejected.jsonl")}
    assert {k: r["reason"] for k, r in rejected.items()} == {
        "long": "long_answer", "noimage": "image_missing", "badlevel": "bad_record", "notpng": "image_unreadable",
        "line7": "bad_record"}
    assert "4 sentences" in rejected["long"]["detail"] and "Expert" in rejected["badlevel"]["detail"]
    assert "problems.jsonl:7" in rejected["line7"]["detail"]
    flags = {(f["id"], f["flag"]) for f in rows(out / "flagged.jsonl")}
    assert flags == {("circuit", "sig_figs_mismatch"), ("circuit", "no_caption")}
    run = json.loads((out / "run.json").read_text())
    assert run["problems"]["codes"]["ITEM"]["count"] == 2 and run["problems"]["total"] == 7

    # The same seed writes the same bytes, under either name of the command; a rerun renders nothing again.
    again = tmp_path / "again"
    assert main(["build", "seephys", str(src), "--out", str(again), "--seed", "4"]) == 0
    assert (out / "items.jsonl").read_bytes() == (again / "items.jsonl").read_bytes()
    assert (out / incline["composite_image"]).read_bytes() == (again / incline["composite_image"]).read_bytes()

    gold = {"incline": r"$4.9\ \mathrm{m/s^2}$", "circuit": "2.00 A"}
    seen: dict[str, list] = {}

    def answer(body):
        prompt = prompt_of(body)
        images = [p for m in body["messages"] for p in (m["content"] if isinstance(m["content"], list) else [])
                  if p.get("type") == "image_url"]
        key = "circuit" if ("resistors" in prompt or len(images) == 2) else "incline"
        seen.setdefault(key, []).append((prompt, len(images)))
        return f"<think>ok</think><answer>{gold[key] if key == 'incline' else '3.0 A'}</answer>"

    with ChatServer() as server:
        server.default = Reply(text=answer)
        for setting in ("TV", "TO", "VO"):
            assert main(["eval", str(out / "items.jsonl"), "--benchmark", "seephys", "--setting", setting,
                         "--model", "m", "--base-url", server.url, "--out", str(tmp_path / setting),
                         "--retry-delay", "0"]) == 0
        # TC needs a caption: the circuit has none and is named as such.
        assert main(["eval", str(out / "items.jsonl"), "--benchmark", "seephys", "--setting", "TC", "--model",
                     "m", "--base-url", server.url, "--out", str(tmp_path / "TC"), "--retry-delay", "0"]) == 1
    vo = [p for p in seen["incline"] if p[1] == 1 and "block" not in p[0]]
    assert vo, "VO sends the composite and no question text"
    assert len(rows(tmp_path / "TC" / "predictions.jsonl")) == 1
    with ChatServer() as judge:
        judge.default = Reply(text="0")
        assert main(["grade", str(tmp_path / "TV" / "predictions.jsonl"), "--gold", str(out / "items.jsonl"),
                     "--benchmark", "seephys", "--out", str(tmp_path / "grade"), "--judge-model", "j",
                     "--judge-base-url", judge.url, "--retry-delay", "0", "--workers", "1", "--quiet"]) == 0
    grades = {g["id"]: g["score"] for g in rows(tmp_path / "grade" / "grades.jsonl")}
    assert grades == {"incline": 1.0, "circuit": 0.0}  # 3.0 A, not 2.00 A: the judge says 0

    # The leak check: the TO answers graded, given back; what was solved without the diagram is flagged, kept.
    with ChatServer() as judge:
        judge.default = Reply(text="0")
        assert main(["grade", str(tmp_path / "TO" / "predictions.jsonl"), "--gold", str(out / "items.jsonl"),
                     "--benchmark", "seephys", "--out", str(tmp_path / "leak"), "--judge-model", "j",
                     "--judge-base-url", judge.url, "--retry-delay", "0", "--workers", "1", "--quiet"]) == 0
    leak = tmp_path / "leak" / "grades.jsonl"
    assert main(["generate", "seephys", str(src), "--out", str(out), "--seed", "4", "--leak-grades", str(leak)]) == 0
    flags = {(f["id"], f["flag"]) for f in rows(out / "flagged.jsonl")}
    assert ("incline", "solved_without_diagram") in flags and ("circuit", "solved_without_diagram") not in flags
    assert [i["id"] for i in rows(out / "items.jsonl")] == ["incline", "circuit"]
    assert rows(out / "items.jsonl")[0]["meta"]["leak"]["solved"] is True
    # Grades of answers that saw the diagram are no leak check.
    tv = tmp_path / "grade" / "grades.jsonl"
    assert main(["generate", "seephys", str(src), "--out", str(out), "--leak-grades", str(tv)]) == 2


# ---------------------------------------------------------------------------------------------------------------
# Model stages against the scripted server

CIRCUIT_CAPTION = "Two resistors, $R_1$ and $R_2$, in series with a battery $\\varepsilon$; the current $I$ flows clockwise."


def text_of(prompt: str) -> str:
    return prompt.split("Text:\n", 1)[1].split("\n\nReply with JSON", 1)[0]


def scripted(calls: dict):
    """OCR repairs and captions: the incline's first repair changes 2.0 to 2.5, the refusal problem is refused
    in words, the circuit's first caption states the answer."""
    def model(body):
        prompt = prompt_of(body)
        stage = "repair" if "clean up the physics problem text" in prompt else "caption"
        text = text_of(prompt) if stage == "repair" else prompt
        key = (stage, "incline" if "block" in text else "circuit" if "resistors" in text else "refuse")
        calls[key] = calls.get(key, 0) + 1
        if key[1] == "refuse":
            return "I cannot help with that."
        if stage == "repair":
            fixed = text.replace("rests on", "rests upon")
            if key[1] == "incline" and calls[key] == 1:
                fixed = fixed.replace("2.0", "2.5")
            return json.dumps({"text": fixed})
        if calls[key] == 1:
            return json.dumps({"caption": CIRCUIT_CAPTION + " The current is 2.00 A."})
        return json.dumps({"caption": CIRCUIT_CAPTION})
    return model


def model_args(src, out, server, *more, labels=False):
    """The build with the scripted model; the label stage (tested on its own) left out unless ``labels``."""
    return ["generate", "seephys", str(src), "--out", str(out), "--model", "m", "--base-url", server.url,
            "--retry-delay", "0", "--answer-attempts", "2", *([] if labels else ["--no-labels"]), *more]


def test_repairs_that_change_numbers_and_captions_that_leak_are_asked_again(tmp_path):
    refuse = {"id": "refuse", "question": "A lens of focal length 5.0 cm.", "answer": "10 cm",
              "images": ["scale.png"], "caption": "A lens."}
    src = problems(tmp_path, [refuse])
    out = tmp_path / "built"
    calls: dict = {}
    with ChatServer() as server:
        server.default = Reply(text=scripted(calls))
        assert main(model_args(src, out, server)) == 0
        items = {i["id"]: i for i in rows(out / "items.jsonl")}
        assert sorted(items) == ["circuit", "incline"]
        # The incline: the repair that made 2.0 into 2.5 was refused and asked again with the reason.
        assert items["incline"]["question"] == QUESTION.replace("rests on", "rests upon")
        assert items["incline"]["meta"]["ocr_text"] == QUESTION
        again = [prompt_of(b) for b in server.bodies if "An earlier reply was refused" in prompt_of(b)]
        assert any("changed the numbers" in p and "2.5" in p for p in again)
        # The circuit: its first caption stated the answer's 2.00; the second is kept and eval's TC reads it.
        assert items["circuit"]["caption"] == CIRCUIT_CAPTION and items["circuit"]["meta"]["caption_by"] == "m"
        assert any("the caption contains the answer '2.00 A'" in p for p in again)
        # The refusal: unusable through its answer attempts, rejected with the model's words.
        rejected = {r["id"]: r for r in rows(out / "rejected.jsonl")}
        assert rejected["refuse"]["reason"] == "repair_failed"
        assert rejected["refuse"]["words"] == "I cannot help with that."
        trace = rows(out / "trace.jsonl")
        assert [len(t["steps"]) for t in trace if t["id"] == "incline"] == [2]
        # incline: repair 2 (one refused); circuit: repair 1, caption 2 (one refused); refuse: repair 2 (attempts)
        assert calls == {("repair", "incline"): 2, ("repair", "circuit"): 1, ("caption", "circuit"): 2,
                         ("repair", "refuse"): 2}
        asked = server.count
        assert asked == 7
        # Every call is accounted under its stage in run.json.
        by_stage = {row["stage"]: row["requests"] for row in json.loads((out / "run.json").read_text())["calls"]
                    ["by_stage_model"]}
        assert by_stage == {"repair": 5, "caption": 2}
        before = {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
        assert main(model_args(src, out, server)) == 0
        assert server.count == asked  # a rerun asks nothing
        assert {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == before
        assert main(["eval", str(out / "items.jsonl"), "--benchmark", "seephys", "--setting", "TC", "--model", "m",
                     "--base-url", server.url, "--out", str(tmp_path / "TC"), "--retry-delay", "0"]) == 0


def test_a_repair_that_always_changes_a_number_rejects_the_problem(tmp_path):
    src = problems(tmp_path)
    out = tmp_path / "built"
    with ChatServer() as server:
        def model(body):
            prompt = prompt_of(body)
            if "clean up the physics problem text" in prompt:
                return json.dumps({"text": text_of(prompt).replace("2.0", "20")})
            return json.dumps({"caption": CIRCUIT_CAPTION})
        server.default = Reply(text=model)
        assert main(model_args(src, out, server, "--max-attempts", "2")) == 0
    rejected = {r["id"]: r for r in rows(out / "rejected.jsonl")}
    assert rejected["incline"]["reason"] == "repair_changed_number"
    assert "['2.0', '30', '9.8', '2'] to ['20', '30', '9.8', '2']" in rejected["incline"]["detail"]
    assert [i["id"] for i in rows(out / "items.jsonl")] == ["circuit"]


def test_a_failed_call_is_an_error_and_the_next_run_asks_only_it(tmp_path):
    src = problems(tmp_path)
    out = tmp_path / "built"
    calls: dict = {}
    with ChatServer() as server:
        server.when_contains["resistors"] = Malformed()
        server.default = Reply(text=scripted(calls))
        assert main(model_args(src, out, server, "--retries", "1")) == 1
        errors = rows(out / "errors.jsonl")
        assert {(e["id"], e["kind"]) for e in errors} == {("circuit", "model_call")}
        assert [i["id"] for i in rows(out / "items.jsonl")] == ["incline"]
        asked = server.count
        del server.when_contains["resistors"]
        assert main(model_args(src, out, server)) == 0
        # Only the circuit's stages are asked: its repair, and its caption twice (the first states the answer).
        assert server.count == asked + 3
        assert [i["id"] for i in rows(out / "items.jsonl")] == ["incline", "circuit"]
        assert rows(out / "errors.jsonl") == []


# ---------------------------------------------------------------------------------------------------------------
# Multi-part and multiple-choice problems

PARTS = {"id": "spring", "question": "A mass of $0.50\\,\\mathrm{kg}$ hangs from a spring of constant "
                                     "$k = 200\\,\\mathrm{N/m}$, as shown.",
         "parts": [{"question": "(1) Find the extension.", "answer": "2.5 cm"},
                   {"question": "(2) Find the period of small oscillations.", "answer": "0.31 s", "sig_figs": 2}],
         "images": ["incline.png"], "caption": "A mass on a vertical spring."}
MCQ = {"id": "lens", "question": "A lens of focal length 10 cm forms an image of an object 15 cm away. "
                                 "Which of the following is the image distance?",
       "choices": ["20 cm", "30 cm", "6 cm", "25 cm"], "answer": "B", "images": ["scale.png"],
       "caption": "A converging lens and an arrow."}


def test_parts_become_self_contained_items_and_mcq_needs_a_model(tmp_path):
    src = problems(tmp_path, [PARTS, MCQ, {**PARTS, "id": "badpart", "parts": [PARTS["parts"][0]]}])
    out = tmp_path / "built"
    assert main(["generate", "seephys", str(src), "--out", str(out)]) == 0
    items = {i["id"]: i for i in rows(out / "items.jsonl")}
    one, two = items["spring-1"], items["spring-2"]
    assert one["question"] == PARTS["question"] + "\n\n(1) Find the extension."
    assert two["question"].startswith(PARTS["question"]) and two["question"].endswith("period of small oscillations.")
    assert (one["answer"], one["sig_figs"], two["answer"], two["sig_figs"]) == ("2.5 cm", "2", "0.31 s", "2")
    assert one["images"] == two["images"] and one["caption"] == two["caption"]
    assert one["composite_image"] != two["composite_image"]  # each renders its own sub-question
    assert one["meta"]["problem"] == "spring" and two["meta"]["part"] == 2
    rejected = {r["id"]: r for r in rows(out / "rejected.jsonl")}
    assert rejected["lens"]["reason"] == "mcq_not_rewritten"
    assert rejected["badpart"]["reason"] == "bad_record" and "two sub-questions" in rejected["badpart"]["detail"]


OCR_PARTS = {"id": "spring", "question": PARTS["question"], "images": ["incline.png"], "caption": "A mass on a spring.",
             "parts": [{"question": "(1) Find the extensoin.", "answer": "2.5 cm"},
                       {"question": "(2) Find the peroid for an amplitude of 1.5 cm.", "answer": "0.31 s"}]}
STUCK = {"id": "stuck", "question": "A charge of $3.0\\,\\mathrm{nC}$ sits at the origin, as shown.",
         "images": ["circuit.png"], "caption": "A point charge.",
         "parts": [{"question": "(1) Find the feild at 2.0 m.", "answer": "6.7 N/C"},
                   {"question": "(2) Find the potentail at 4.0 m.", "answer": "6.7 V"}]}


def part_repairs(calls: dict):
    """Repairs that fix the typos; the spring's part 2 is first given with 1.5 made into 15, the stuck
    problem's part 2 always with 4.0 made into 40."""
    def model(body):
        text = text_of(prompt_of(body))
        calls[text] = calls.get(text, 0) + 1
        fixed = (text.replace("extensoin", "extension").replace("peroid", "period").replace("feild", "field")
                 .replace("potentail", "potential"))
        if "amplitude of 1.5" in text and calls[text] == 1:
            fixed = fixed.replace("1.5", "15")
        if "potentail" in text:
            fixed = fixed.replace("4.0", "40")
        return json.dumps({"text": fixed})
    return model


def test_given_parts_have_their_own_texts_repaired_and_checked(tmp_path):
    src = problems(tmp_path, [OCR_PARTS, STUCK])
    out = tmp_path / "built"
    calls: dict = {}
    with ChatServer() as server:
        server.default = Reply(text=part_repairs(calls))
        assert main(model_args(src, out, server, "--no-caption", "--max-attempts", "2")) == 0
        # incline, circuit: 1 each; spring: its shared text, part 1, part 2 twice (the first reply refused);
        # stuck: its shared text, part 1, part 2 twice (both refused, --max-attempts 2)
        assert server.count == 10
        assert calls["(2) Find the peroid for an amplitude of 1.5 cm."] == 2
        assert calls["(2) Find the potentail at 4.0 m."] == 2
        again = [prompt_of(b) for b in server.bodies if "An earlier reply was refused" in prompt_of(b)]
        assert any("changed the numbers ['2', '1.5'] to ['2', '15']" in p for p in again)
        items = {i["id"]: i for i in rows(out / "items.jsonl")}
        assert sorted(items) == ["circuit", "incline", "spring-1", "spring-2"]
        one, two = items["spring-1"], items["spring-2"]
        assert one["question"] == PARTS["question"] + "\n\n(1) Find the extension."
        assert two["question"] == PARTS["question"] + "\n\n(2) Find the period for an amplitude of 1.5 cm."
        assert one["meta"]["part_ocr_text"] == "(1) Find the extensoin."
        assert two["meta"]["part_ocr_text"] == OCR_PARTS["parts"][1]["question"]
        # The stuck problem: rejected, the part named in the row and its detail
        rejected = {r["id"]: r for r in rows(out / "rejected.jsonl")}
        stuck = rejected["stuck"]
        assert (stuck["reason"], stuck["stage"], stuck["part"]) == ("repair_changed_number", "repair", 2)
        assert stuck["detail"] == ("part 2: the repair changed the numbers ['2', '4.0'] to ['2', '40'] "
                                   "(2 replies refused, --max-attempts)")
        assert stuck["words"] == "(2) Find the potential at 40 m."
        assert json.loads((out / "run.json").read_text())["problems"]["codes"]["repair_changed_number"]["count"] == 1
        steps = {(t["id"], t.get("part")): len(t["steps"]) for t in rows(out / "trace.jsonl")}
        assert steps == {("incline", None): 1, ("circuit", None): 1, ("spring", None): 1, ("spring", 1): 1,
                         ("spring", 2): 2, ("stuck", None): 1, ("stuck", 1): 1, ("stuck", 2): 2}
        by_stage = {row["stage"]: row["requests"] for row in json.loads((out / "run.json").read_text())["calls"]
                    ["by_stage_model"]}
        assert by_stage == {"repair": 10}
        # A rerun asks nothing and writes the same files.
        before = {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
        assert main(model_args(src, out, server, "--no-caption", "--max-attempts", "2")) == 0
        assert server.count == 10
        assert {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == before


def test_a_failed_call_on_a_part_is_an_error_naming_it_and_the_next_run_asks_only_it(tmp_path):
    src = problems(tmp_path, [OCR_PARTS])
    out = tmp_path / "built"
    calls: dict = {}
    with ChatServer() as server:
        server.when_contains["extensoin"] = Malformed()
        server.default = Reply(text=part_repairs(calls))
        assert main(model_args(src, out, server, "--no-caption", "--retries", "1")) == 1
        errors = rows(out / "errors.jsonl")
        assert [(e["id"], e["stage"], e.get("part")) for e in errors] == [("spring", "repair", 1)]
        assert errors[0]["message"].startswith("part 1: ")
        assert sorted(i["id"] for i in rows(out / "items.jsonl")) == ["circuit", "incline"]
        asked = server.count
        del server.when_contains["extensoin"]
        assert main(model_args(src, out, server, "--no-caption")) == 0
        # Only part 1 is asked again: the shared text's and part 2's repairs are read from the ledger.
        assert server.count == asked + 1
        assert sorted(i["id"] for i in rows(out / "items.jsonl")) == ["circuit", "incline", "spring-1", "spring-2"]
        assert rows(out / "errors.jsonl") == []


def test_mcq_rewritten_as_an_open_question_whose_answer_is_the_option(tmp_path):
    src = problems(tmp_path, [MCQ])
    out = tmp_path / "built"
    calls: list[str] = []
    open_q = "A lens of focal length 10 cm forms an image of an object 15 cm away. Find the image distance."
    with ChatServer() as server:
        def model(body):
            prompt = prompt_of(body)
            if "Rewrite it as an open question" in prompt:
                calls.append(prompt)
                if len(calls) == 1:  # still lettered, and the 15 cm dropped
                    return json.dumps({"question": "A lens of focal length 10 cm. Choose (B) 30 cm or another."})
                if len(calls) == 2:
                    return json.dumps({"question": "A lens of focal length 10 cm forms an image of an object "
                                                   "15 cm away; the image is 30 cm from the lens. Confirm."})
                return json.dumps({"question": open_q})
            if "clean up the physics problem text" in prompt:
                return json.dumps({"text": text_of(prompt)})
            return json.dumps({"caption": CIRCUIT_CAPTION})
        server.default = Reply(text=model)
        assert main(model_args(src, out, server)) == 0
    items = {i["id"]: i for i in rows(out / "items.jsonl")}
    assert (items["lens"]["question"], items["lens"]["answer"]) == (open_q, "30 cm")
    assert items["lens"]["meta"]["mcq"]["letter"] == "B"
    assert "(A) 20 cm" in calls[0] and "Correct option: (B) 30 cm" in calls[0]
    assert "drops the stem's numbers ['15']" in calls[1]
    assert "states option(s) B" in calls[2]


ZH = {"id": "zh", "question": "如图所示，质量为 $m$ 的物块静止在斜面上。求摩擦力。", "answer": "$mg\\sin\\theta$",
      "images": ["incline.png"], "caption": "斜面上的物块。"}


def _ink(image: Image.Image) -> np.ndarray:
    return 255.0 - np.asarray(image.convert("L"), dtype=float)


def glyph(font: str, char: str, px: float) -> np.ndarray:
    """One character drawn by Pillow's FreeType binding (not matplotlib's), cropped to its ink."""
    from PIL import ImageFont

    im = Image.new("L", (4 * int(px), 2 * int(px)), 0)
    ImageDraw.Draw(im).text((int(px), int(px) // 2), char, fill=255, font=ImageFont.truetype(font, size=px))
    a = np.asarray(im, dtype=float)
    ys, xs = np.nonzero(a)
    return a[ys.min():ys.max() + 1, xs.min():xs.max() + 1]


def best_match(region: np.ndarray, template: np.ndarray) -> float:
    """The highest normalised cross-correlation of ``template`` over ``region`` (1: the same pixels)."""
    windows = np.lib.stride_tricks.sliding_window_view(region, template.shape)
    w = windows - windows.mean(axis=(-1, -2), keepdims=True)
    t = template - template.mean()
    score = (w * t).sum(axis=(-1, -2)) / (np.sqrt((w ** 2).sum(axis=(-1, -2)) * (t ** 2).sum()) + 1e-9)
    return float(score.max())


def test_a_chinese_question_is_drawn_with_a_cjk_font(tmp_path):
    from benchmint.generate.seephys import find_cjk_font

    font = find_cjk_font()
    assert font is not None, "no CJK font installed: scripts/setup.sh installs fonts-wqy-microhei"
    src = problems(tmp_path, [ZH])
    out = tmp_path / "built"
    assert main(["generate", "seephys", str(src), "--out", str(out)]) == 0
    item = next(i for i in rows(out / "items.jsonl") if i["id"] == "zh")
    assert item["language"] == "Chinese" and "zh" not in {f["id"] for f in rows(out / "flagged.jsonl")
                                                          if f["flag"] == "no_composite"}
    layout = item["meta"]["composite"]["layout"]
    assert layout["cjk_font"]["file"] == Path(font).name
    with Image.open(out / item["composite_image"]) as im:
        text = _ink(im.crop(layout["text_box"]))
    # Render and compare: each character of the question, drawn on its own by another renderer at the
    # composite's size, is found in the text box; characters the question lacks are not (a box drawn in place
    # of every glyph would match none of them, or all alike).
    px = layout["font_size"] * 100 / 72
    present = {c: best_match(text, glyph(font, c, px)) for c in "斜摩物块"}
    absent = {c: best_match(text, glyph(font, c, px)) for c in "电磁波"}
    assert min(present.values()) > 0.7 and max(absent.values()) < 0.6, (present, absent)


def test_chinese_lines_break_between_characters_and_keep_math_whole():
    from benchmint.generate.seephys import find_cjk_font, render_text

    font = find_cjk_font()
    assert font is not None, "no CJK font installed: scripts/setup.sh installs fonts-wqy-microhei"
    question = "一个质量为 $m = 2.0\\,\\mathrm{kg}$ 的小球从高处落下，求它落地时的速度大小。" * 3
    image, lines = render_text(question, 300, 14, "DejaVu Sans", "dejavusans", font)
    assert len(lines) > 3 and image.width == 300
    assert "".join(lines).replace(" ", "") == question.replace(" ", "")
    assert all(line.count("$") % 2 == 0 for line in lines)  # a math segment is never cut
    assert not any(line.startswith(("，", "。")) for line in lines)  # nor does a line open with a closing mark


def test_a_chinese_question_without_a_cjk_font_is_flagged_then_drawn_once_one_is_there(tmp_path, monkeypatch):
    from benchmint.generate import seephys

    src = problems(tmp_path, [ZH])
    out = tmp_path / "built"
    with monkeypatch.context() as m:
        m.setattr(seephys, "_font_candidates", lambda: [])  # a machine with no CJK font
        assert main(["generate", "seephys", str(src), "--out", str(out)]) == 0
    item = next(i for i in rows(out / "items.jsonl") if i["id"] == "zh")
    assert item["language"] == "Chinese" and "composite_image" not in item
    flags = [f for f in rows(out / "flagged.jsonl") if f["id"] == "zh"]
    assert [f["flag"] for f in flags] == ["no_composite"] and "no CJK font was found" in flags[0]["detail"]
    assert json.loads((out / "run.json").read_text())["cjk_font"] == "none found"
    # With the font there the rerun draws it: the composite's key holds the font it was drawn with.
    assert main(["generate", "seephys", str(src), "--out", str(out)]) == 0
    item = next(i for i in rows(out / "items.jsonl") if i["id"] == "zh")
    assert (out / item["composite_image"]).is_file()
    assert "zh" not in {f["id"] for f in rows(out / "flagged.jsonl")}


def test_a_font_is_checked_before_the_run(tmp_path, capsys):
    from matplotlib import font_manager

    from benchmint.generate.seephys import CompositeError, compose, find_cjk_font

    src = problems(tmp_path, [ZH])
    for font, message in ((tmp_path / "none.ttf", "no such font file"), (src, "not a font file"),
                          (font_manager.findfont("DejaVu Sans"), "has no CJK glyphs")):
        assert main(["generate", "seephys", str(src), "--out", str(tmp_path / "o"), "--font", str(font)]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # A character neither font has is named, not drawn as a box.
    with pytest.raises(CompositeError, match="no glyph for"):
        compose("质量为\U000f0000的物块", [diagram(100, 100)], seed=0, fid="x", cjk_font=find_cjk_font())


def test_a_killed_run_resumes_without_asking_again(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    many = [{"id": f"q{k}", "question": f"A ball is thrown at {k + 2}.0 m/s from the edge shown. Find its range.",
             "answer": f"{k + 1}.5 m", "images": ["incline.png"], "caption": "A ball at a cliff's edge."}
            for k in range(6)]
    src = problems(tmp_path, many)

    def repair(body):
        return json.dumps({"text": text_of(prompt_of(body)).replace("thrown", "launched")})

    with ChatServer() as server:
        server.default = Reply(text=repair, delay=0.15)
        out = tmp_path / "killed"
        args = [sys.executable, "-m", "benchmint.cli", *model_args(src, out, server, "--concurrency", "1",
                                                                   "--no-caption")]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.count < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        assert 3 <= server.count < 8
        subprocess.run(args, check=True, timeout=120, capture_output=True)
        # Eight repairs (the six problems, incline and circuit); only the one in flight at the kill is asked twice.
        assert len(server.by_prompt) == 8 and server.count <= 9
        server.reset()
        server.default = Reply(text=repair)
        whole = tmp_path / "whole"
        assert main(model_args(src, whole, server, "--no-caption")) == 0
        assert server.count == 8
    for name in ("items.jsonl", "rejected.jsonl", "trace.jsonl", "errors.jsonl", "flagged.jsonl"):
        assert (out / name).read_text() == (whole / name).read_text(), name
    assert [i["question"].split(" at ")[0] for i in rows(out / "items.jsonl")][2:] == ["A ball is launched"] * 6


def test_composites_of_other_seeds_in_one_folder_do_not_overwrite_each_other(tmp_path):
    src = problems(tmp_path)
    out, fresh = tmp_path / "built", tmp_path / "fresh"
    for seed in ("0", "1", "0"):
        assert main(["generate", "seephys", str(src), "--out", str(out), "--seed", seed]) == 0
    assert main(["generate", "seephys", str(src), "--out", str(fresh), "--seed", "0"]) == 0
    for item in rows(fresh / "items.jsonl"):
        again = next(i for i in rows(out / "items.jsonl") if i["id"] == item["id"])
        assert (out / again["composite_image"]).read_bytes() == (fresh / item["composite_image"]).read_bytes()


MULTI = {"id": "cart", "multi_part": True, "images": ["incline.png"], "caption": "A cart on a track.",
         "question": "A cart of mass 4.0 kg starts from rest and is pushed by a force of 10 N for 2.0 s, as shown. "
                     "(1) Find its acceleration. (2) Find its speed at 2.0 s.",
         "answer": "(1) 2.5 m/s^2 (2) 5.0 m/s"}


def test_a_multi_part_problem_split_by_the_model_with_its_numbers_checked(tmp_path):
    src = problems(tmp_path, [MULTI])
    assert main(["generate", "seephys", str(src), "--out", str(tmp_path / "plain")]) == 0
    assert {r["id"]: r["reason"] for r in rows(tmp_path / "plain" / "rejected.jsonl")}["cart"] == "split_not_done"
    context = "A cart of mass 4.0 kg starts from rest and is pushed by a force of 10 N for 2.0 s, as shown."
    good = {"context": context, "parts": [{"question": "Find its acceleration.", "answer": "2.5 m/s^2"},
                                          {"question": "Find its speed at 2.0 s.", "answer": "5.0 m/s"}]}
    asked: list[str] = []
    with ChatServer() as server:
        def model(body):
            prompt = prompt_of(body)
            if "Split it:" in prompt:
                asked.append(prompt)
                if len(asked) == 1:  # the 10 N left out of the shared text
                    return json.dumps({**good, "context": context.replace(" by a force of 10 N", "")})
                return json.dumps(good)
            if "clean up the physics problem text" in prompt:
                return json.dumps({"text": text_of(prompt)})
            return json.dumps({"caption": CIRCUIT_CAPTION})
        server.default = Reply(text=model)
        out = tmp_path / "built"
        assert main(model_args(src, out, server)) == 0
        # A rerun asks nothing: the refused split's follow-up is found in the ledger from the words kept there.
        asked_before, files = server.count, {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
        assert main(model_args(src, out, server)) == 0
        assert server.count == asked_before and {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == files
    items = {i["id"]: i for i in rows(out / "items.jsonl")}
    assert items["cart-1"]["question"] == context + "\n\nFind its acceleration."
    assert (items["cart-1"]["answer"], items["cart-2"]["answer"]) == ("2.5 m/s^2", "5.0 m/s")
    assert (items["cart-1"]["sig_figs"], items["cart-2"]["sig_figs"]) == ("2", "2")
    assert items["cart-2"]["meta"]["unsplit"] == MULTI["question"]
    assert len(asked) == 2 and "drop the problem's numbers ['10']" in asked[1]
    # The split was asked for in the shape its check wants (parts a list of {question, answer}), not as text.
    sent = [b["response_format"]["json_schema"]["schema"] for b in server.bodies if "Split it:" in prompt_of(b)]
    assert sent and all(s["properties"]["parts"]["type"] == "array" for s in sent)


def test_a_diagram_type_outside_the_release_is_flagged_and_kept(tmp_path):
    odd = {"id": "odd", "question": "Find the tension.", "answer": "12 N", "images": ["incline.png"],
           "img_category": "Free Body Diagram", "caption": "A hanging mass."}
    src = problems(tmp_path, [odd])
    out = tmp_path / "built"
    assert main(["generate", "seephys", str(src), "--out", str(out)]) == 0
    assert "odd" in {i["id"] for i in rows(out / "items.jsonl")}
    flags = {(f["id"], f["flag"]) for f in rows(out / "flagged.jsonl")}
    assert ("odd", "unknown_img_category") in flags and ("incline", "unknown_img_category") not in flags


# ---------------------------------------------------------------------------------------------------------------
# Labels written by the model

LABELLED = [
    {"id": "lens2", "question": "A thin lens forms the image shown of an arrow 12 cm in front of it. Find its focal "
                                "length.", "answer": "8.0 cm", "images": ["scale.png"], "caption": "A lens."},
    {"id": "odd", "question": "Rank the blocks shown by the tension in the string above each.", "answer": "A, B, C",
     "images": ["incline.png"], "caption": "Blocks."},
    {"id": "zh", "question": "如图所示，求小球在最高点的速度。", "answer": "$\\sqrt{gR}$", "images": ["incline.png"],
     "caption": "竖直圆轨道。"},
    {"id": "garbled", "question": "The gas shown expands at constant pressure. Find the work done.",
     "answer": "$p\\Delta V$", "images": ["incline.png"], "caption": "A piston."},
    {"id": "given", "question": "Find the charge on the capacitor shown.", "answer": "12 \\mu C",
     "images": ["circuit.png"], "caption": "An RC circuit.", "subject": "EM", "level": "Mid", "language": "English",
     "img_category": "capacitance_resistance", "vision_relevance": "essential"},
]
LABEL_REPLIES = {
    "thin lens": {"subject": "OPT", "level": "UG", "img_category": "Optical Path", "vision_relevance": "essential",
                  "language": "English"},
    "Rank the blocks": {"subject": "Mechanics", "level": 9, "img_category": "free body diagram",
                        "vision_relevance": "Vision-Optional", "language": "French"},
    "小球": {"subject": "CM", "level": "High", "img_category": "circular_motion", "vision_relevance": "essential",
           "language": "English"},
    "resistors": {"img_category": "circuit_diagram"},  # vision_relevance and language not given
    "block of mass": {"language": "English"},
}


def test_labels_a_problem_lacks_are_written_by_the_model_and_checked_against_the_taxonomies(tmp_path):
    src = problems(tmp_path, LABELLED)
    out = tmp_path / "built"
    asked: list[dict] = []
    with ChatServer() as server:
        def model(body):
            prompt = prompt_of(body)
            asked.append(body)
            if "gas shown expands" in prompt:
                return "subject: TSM, level: UG"  # never JSON: the labels stay empty, the problem is kept
            return json.dumps(next(v for k, v in LABEL_REPLIES.items() if k in prompt))
        server.default = Reply(text=model)
        args = model_args(src, out, server, "--no-repair", "--no-caption", labels=True)
        assert main(args) == 0
        run = json.loads((out / "run.json").read_text())
        # A rerun asks nothing and writes the same files.
        count, files = server.count, {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
        assert main(args) == 0
        assert server.count == count and {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == files
    items = {i["id"]: i for i in rows(out / "items.jsonl")}
    flags = sorted((f["id"], f["flag"]) for f in rows(out / "flagged.jsonl") if f["flag"].startswith("label"))
    # Valid labels, in the release's forms (the level by its number, the diagram type in snake_case)
    assert {k: items["lens2"][k] for k in ("subject", "level", "img_category", "vision_relevance", "language")} == {
        "subject": "OPT", "level": 5, "img_category": "optical_path", "vision_relevance": "essential",
        "language": "English"}
    assert items["lens2"]["meta"]["labelled"] == {"model": "m", "labels": ["subject", "level", "img_category",
                                                                          "vision_relevance", "language"]}
    # Outside the taxonomies: each such label left empty and flagged, the one that fits kept, the item kept
    odd = items["odd"]
    assert odd["vision_relevance"] == "optional"
    assert not {"subject", "level", "img_category"} & set(odd)
    assert odd["language"] == "English"  # 'French' refused; eval needs a language, so the script's stays
    detail = {f["detail"] for f in rows(out / "flagged.jsonl") if f["id"] == "odd"}
    assert "the model's subject 'Mechanics' is none of ['CM', 'EM', 'ACG', 'OPT', 'AMONP', 'QMIT', 'TSM']; left " \
           "empty" in detail
    # A language the text's script contradicts is refused (the script's kept); the other labels are set
    assert items["zh"]["language"] == "Chinese" and items["zh"]["subject"] == "CM" and items["zh"]["level"] == 2
    assert items["zh"]["meta"]["labelled"]["labels"] == ["subject", "level", "img_category", "vision_relevance"]
    # Labels not given by the model are flagged; given ones are never asked
    assert items["circuit"]["img_category"] == "circuit_diagram" and items["circuit"]["subject"] == "EM"
    assert items["incline"]["language"] == "English"
    assert flags == [("circuit", "label_not_given"), ("circuit", "label_not_given"),
                     ("garbled", "labels_failed"),
                     ("odd", "label_off_taxonomy"), ("odd", "label_off_taxonomy"), ("odd", "label_off_taxonomy"),
                     ("odd", "label_off_taxonomy"), ("zh", "label_contradicts_text")]
    garbled = next(f for f in rows(out / "flagged.jsonl") if f["flag"] == "labels_failed")
    assert garbled["words"] == "subject: TSM, level: UG"
    assert "subject left empty, level left empty" in garbled["detail"]
    assert "language the script's English kept" in garbled["detail"]
    assert "subject" not in items["garbled"] and items["garbled"]["language"] == "English"
    assert not any("capacitor" in prompt_of(b) for b in asked)  # every label given: no call
    # Each request asks only the labels the problem lacks, listing their values, with a schema of those values
    circuit = next(b for b in asked if "resistors" in prompt_of(b))
    schema = circuit["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["img_category", "vision_relevance", "language"]
    assert schema["properties"]["language"]["enum"] == ["English", "Chinese"]
    assert "- subject:" not in prompt_of(circuit) and "- vision_relevance: essential, optional" in prompt_of(circuit)
    by_stage = {row["stage"]: row["requests"] for row in run["calls"]["by_stage_model"]}
    # six problems lack labels; the garbled one is asked twice (--answer-attempts 2)
    assert by_stage == {"label": 7}
    assert any(p["name"] == "seephys/label.txt" for p in run["prompts"])
    # Every item, refused labels and all, runs in eval (which needs each item's language)
    with ChatServer() as server:
        server.default = Reply(text="<answer>1</answer>")
        assert main(["eval", str(out / "items.jsonl"), "--benchmark", "seephys", "--setting", "TO", "--model", "m",
                     "--base-url", server.url, "--out", str(tmp_path / "TO"), "--retry-delay", "0"]) == 0
    assert len(rows(tmp_path / "TO" / "predictions.jsonl")) == len(items)


def test_labels_of_a_text_only_model_and_a_failed_call(tmp_path):
    src = problems(tmp_path, LABELLED[:1])
    out = tmp_path / "built"
    with ChatServer() as server:
        server.when_contains["thin lens"] = Malformed()
        server.default = Reply(text=lambda body: json.dumps(next(v for k, v in LABEL_REPLIES.items()
                                                                 if k in prompt_of(body))))
        args = model_args(src, out, server, "--no-repair", "--no-caption", "--text-only", "--retries", "1",
                          labels=True)
        assert main(args) == 1  # the call that failed is an error; the problem waits for the next run
        assert [e["id"] for e in rows(out / "errors.jsonl")] == ["lens2"]
        assert "lens2" not in {i["id"] for i in rows(out / "items.jsonl")}
        assert all(isinstance(b["messages"][-1]["content"], str) for b in server.bodies)  # no image sent
        del server.when_contains["thin lens"]
        assert main(args) == 0
        assert next(i for i in rows(out / "items.jsonl") if i["id"] == "lens2")["subject"] == "OPT"
    assert main(model_args(src, tmp_path / "o", server, "--text-only", labels=True)) == 2  # captions need images
