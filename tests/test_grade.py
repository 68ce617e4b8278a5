"""benchmint grade: SeePhys's rules -> screen -> judge, judge failures apart, choice benchmarks, summaries."""

import json

import numpy as np
import pytest

from benchmint.cli import main
from benchmint.grade.judge import VerdictError, fill, parse_binary, parse_extracted, parse_scale
from benchmint.grade.summary import _gap, level_name

from chat_server import ChatServer, Reply, Status, prompt_of

ITEMS = [
    {"id": "p1", "question": "An engine does 1.2e5 J of work in 2 min. Its power?", "answer": "1 kW",
     "language": "English", "level": 2, "subject": "mechanics"},
    {"id": "p2", "question": "Which ray leaves the prism?", "answer": "Ray E", "language": "English", "level": 5,
     "subject": "optics"},
    {"id": "p3", "question": "Speed at the bottom?", "answer": "$\\sqrt{2gh}$", "language": "English", "level": 6,
     "subject": "mechanics"},
    {"id": "p4", "question": "The charge on the sphere?", "answer": "1.5e-7 C", "language": "English", "sig_figs": 2,
     "level": 1, "subject": "electricity"},
    {"id": "p5", "question": "求加速度。", "answer": "2 m/s^2", "language": "Chinese", "level": 3, "subject": "mechanics"},
    {"id": "p6", "question": "The period?", "answer": "2.0 s", "language": "English", "level": 7, "subject": "waves"},
    {"id": "p7", "question": "Where is the field zero?", "answer": "Both Regions II and III", "language": "English",
     "level": 4, "subject": "electricity"},
]

PREDS = [
    {"id": "p1", "model": "m", "output": "P = W/t = 1000 W. <answer>1000 W</answer>"},  # screen: units converted
    {"id": "p2", "model": "m", "output": "The final answer is ray e."},  # screen: same words
    {"id": "p3", "model": "m", "output": "so v = \\boxed{(2gh)^{1/2}}"},  # screen: SymPy
    {"id": "p4", "model": "m", "output": "I think it is about 0.15 microcoulomb"},  # no rule: extraction model
    {"id": "p5", "model": "m", "output": "<answer>3 m/s^2</answer>"},  # screen differs: the judge says 0
    {"id": "p6", "model": "m", "output": "<answer>it doubles</answer>"},  # the judge never gives a verdict
    {"id": "p7", "model": "m", "output": "<answer>regions II and III</answer>"},  # the judge says 1
]


def _judge(body):
    prompt = prompt_of(body)
    if prompt.startswith("Read the response"):  # the extraction prompt
        return "Extracted answer: 0.15 \\mu C" if "microcoulomb" in prompt else "None"
    answer = prompt.rsplit("Model Answer:", 1)[1]
    if "regions II and III" in answer:
        return "Judgement: 1"
    if "3 m/s^2" in answer:
        return "**0**"
    return "I think 1 is plausible but 0 is safer"  # a verdict-like digit in prose is no verdict


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def seephys_argv(files, server) -> list[str]:
    """benchmint grade on the SeePhys sample, judged by ``server`` (no retry delay, one symbolic worker)."""
    return ["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark", "seephys",
            "--out", str(files / "out"), "--judge-model", "judge", "--judge-base-url", server.url,
            "--retry-delay", "0", "--workers", "1", "--quiet"]


@pytest.fixture
def files(tmp_path):
    _write(tmp_path / "items.jsonl", ITEMS)
    _write(tmp_path / "preds.jsonl", PREDS)
    return tmp_path


def test_seephys_rules_screen_judge_and_judge_failures(files):
    with ChatServer() as server:
        server.default = Reply(text=_judge)
        argv = seephys_argv(files, server)
        assert main(argv) == 1  # one answer undecided
        asked = server.count
        grades = {g["id"]: g for g in _lines(files / "out" / "grades.jsonl")}
        assert {k: (g["stage"], g["score"]) for k, g in grades.items()} == {
            "p1": ("symbolic", 1.0), "p2": ("rule", 1.0), "p3": ("symbolic", 1.0), "p4": ("symbolic", 1.0),
            "p5": ("judge", 0.0), "p7": ("judge", 1.0)}
        # 0.15 µC is 1.5e-7 C to the 2 figures asked
        assert grades["p4"]["extraction"] == "model" and grades["p4"]["answer"] == ["0.15 \\mu C"]
        assert grades["p7"]["judge_reply"] == "Judgement: 1" and grades["p7"]["attempts"] == 1
        assert grades["p5"]["screen"] == "differs" and grades["p5"]["verdict"] == "0"
        errors = _lines(files / "out" / "errors.jsonl")
        assert [(e["id"], e["kind"], e["cause"]) for e in errors] == [("p6", "undecided", "judge_failed")]
        assert "after 3 answer attempts" in errors[0]["message"]
        summary = json.loads((files / "out" / "summary.json").read_text())
        block = summary["models"][0]
        assert (block["answers"], block["graded"], block["judge_failures"], block["undecided"]) == (7, 6, 1, 1)
        assert block["accuracy"]["mean"] == pytest.approx(5 / 6)  # the failure is not counted wrong ...
        assert block["accuracy_undecided_as_wrong"] == pytest.approx(5 / 7)  # ... except in the lower bound
        assert block["stages"] == {"rule": 1, "symbolic": 3, "judge": 2, "similarity": 0}
        assert block["by"]["subject"]["mechanics"]["n"] == 3  # p1, p3, p5
        assert block["levels"]["theory_memorization"]["n"] == 2  # levels 5 (UG) and 6 (SUG); 7 (MA) undecided
        assert summary["judge"]["model"] == "judge"
        # 1 extraction + 2 decided judge calls + 3 attempts of the failing one
        assert asked == 6
        # A rerun reads every reply from the cache: nothing is asked again, the outputs are the same.
        before = _lines(files / "out" / "grades.jsonl")
        assert main(argv) == 1
        assert server.count == asked
        again = _lines(files / "out" / "grades.jsonl")
        assert [g.pop("cached", None) for g in again if g["stage"] == "judge"] == [True, True]  # marked as such
        assert again == [{k: v for k, v in g.items() if k != "cached"} for g in before]
        assert [(e["id"], e["cause"]) for e in _lines(files / "out" / "errors.jsonl")] == [("p6", "judge_failed")]


def test_without_a_judge_the_undecided_are_listed_not_wrong(files):
    assert main(["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark",
                 "seephys", "--out", str(files / "out"), "--workers", "1", "--quiet"]) == 1
    errors = _lines(files / "out" / "errors.jsonl")
    assert sorted(e["id"] for e in errors) == ["p4", "p5", "p6", "p7"]
    assert {e["cause"] for e in errors} == {"no_judge"}
    summary = json.loads((files / "out" / "summary.json").read_text())
    assert summary["counts"]["no_judge"] == 4 and summary["models"][0]["accuracy"]["mean"] == 1.0


def test_a_judge_server_down_is_a_judge_failure_per_answer(files):
    with ChatServer() as server:
        server.default = Status(503)
        assert main(["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark",
                     "seephys", "--out", str(files / "out"), "--judge-model", "j", "--judge-base-url", server.url,
                     "--retries", "2", "--retry-delay", "0", "--workers", "1", "--quiet"]) == 1
    errors = _lines(files / "out" / "errors.jsonl")
    kinds = sorted((e["id"], e["kind"]) for e in errors)
    # p4's extraction fails (so it stays unread and goes to the judge, which fails too)
    assert kinds == [("p4", "extraction_failed"), ("p4", "undecided"), ("p5", "undecided"), ("p6", "undecided"),
                     ("p7", "undecided")]
    assert all(e["judge"]["status"] == 503 for e in errors if e["kind"] == "undecided")


def test_bad_lines_duplicates_and_unknown_ids_are_listed(files):
    _write(files / "preds.jsonl", [PREDS[0], PREDS[0], {"id": "nope", "model": "m", "output": "1"}, {"model": "m"}])
    assert main(["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark", "seephys",
                 "--out", str(files / "out"), "--workers", "1", "--quiet"]) == 1
    kinds = [(e["kind"], e.get("line")) for e in _lines(files / "out" / "errors.jsonl")]
    # the six items m did not answer are listed (and counted wrong: see test_gold_items_without_an_answer...)
    assert kinds == [("duplicate", 2), ("unknown_id", 3), ("missing_id", 4)] + [("missing_prediction", None)] * 6
    grades = _lines(files / "out" / "grades.jsonl")
    assert [(g["id"], g["verdict"]) for g in grades] == [("p1", "numeric")] + [
        (f"p{k}", "missing") for k in range(2, 8)]


def test_matvqa_reads_the_format_its_prompt_asks_for(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    items = [{"id": str(i), "question": "q", "options": ["a", "b", "c", "d"], "answer": 2, "task": t,
              "image": "fig.png"} for i, t in enumerate(("causal", "causal", "comparative", "quantitative"))]
    preds = [{"id": "0", "model": "m", "output": "Reasoning... The answer is (2)"},  # A.2's regex misses this
             {"id": "1", "model": "m", "output": "The answer is (3)"},
             {"id": "2", "model": "m", "output": "the answer is: （2）"},
             {"id": "3", "model": "m", "output": "I am not sure."}]
    _write(tmp_path / "items.jsonl", items)
    _write(tmp_path / "preds.jsonl", preds)
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "items.jsonl"), "--benchmark",
                 "matvqa", "--out", str(tmp_path / "out"), "--quiet"]) == 0
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    assert [(g["answer"], g["verdict"]) for g in grades] == [([2], "correct"), ([3], "wrong"), ([2], "correct"),
                                                             (None, "unparsed")]
    block = json.loads((tmp_path / "out" / "summary.json").read_text())["models"][0]
    assert block["accuracy"]["mean"] == 0.5 and block["unparsed"] == 1
    assert {k: v["mean"] for k, v in block["by"]["task"].items()} == {"causal": 0.5, "comparative": 1.0,
                                                                     "quantitative": 0.0}


def test_csmbench_mcq_never_reads_the_a_of_answer(tmp_path):
    options = json.dumps([{"label": x, "caption": f"caption {x}"} for x in "ABCD"])
    items = [{"index": i, "file_name": "x.png", "options": options, "correct_answer": c, "scale": s}
             for i, (c, s) in enumerate((("C", "Microscale"), ("B", "AtomScale")))]
    (tmp_path / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    _write(tmp_path / "metadata.jsonl", items)
    _write(tmp_path / "preds.jsonl", [{"id": "0", "model": "m", "output": "The answer is C"},
                                      {"id": "1", "model": "m", "output": "answer: A"}])
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path), "--benchmark", "csmbench-mcq",
                 "--out", str(tmp_path / "out"), "--quiet"]) == 0
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    assert [(g["answer"], g["score"]) for g in grades] == [(["C"], 1.0), (["A"], 0.0)]


def test_settings_gaps_by_hand(files):
    # Model m: TV solves 4 of 7, TO 2 of 7: Δ2 = (4/7 - 2/7) / (4/7) = 0.5, vision gain 2/7.
    rows = []
    for setting, solved in (("TV", 4), ("TO", 2)):
        for k, item in enumerate(ITEMS):
            answer = item["answer"] if k < solved else "no idea at all"
            rows.append({"id": item["id"], "model": "m", "setting": setting, "answer": answer})
    _write(files / "preds.jsonl", rows)
    with ChatServer() as server:
        server.default = Reply(text="0")  # whatever the screen cannot decide is wrong
        assert main(["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark",
                     "seephys", "--out", str(files / "out"), "--judge-model", "j", "--judge-base-url", server.url,
                     "--workers", "1", "--quiet"]) == 0
    gaps = json.loads((files / "out" / "summary.json").read_text())["settings_gaps"]["m"]
    assert gaps["TV"] == pytest.approx(4 / 7) and gaps["TO"] == pytest.approx(2 / 7)
    assert gaps["delta2"]["mean"] == pytest.approx(0.5) and gaps["vision_gain"] == pytest.approx(2 / 7)
    assert gaps["delta2"]["low"] <= 0.5 <= gaps["delta2"]["high"] and "delta1" not in gaps


def test_paired_gap_interval_covers_its_mean():
    rng = np.random.default_rng(0)
    tv = (rng.random(400) < 0.6).astype(float)
    other = tv * (rng.random(400) < 0.7)
    got = _gap(tv, other, 2000, np.random.default_rng(1))
    assert got["mean"] == pytest.approx((tv.mean() - other.mean()) / tv.mean())
    assert got["low"] < got["mean"] < got["high"] and got["high"] - got["low"] < 0.2
    assert _gap(np.zeros(5), np.zeros(5), 1000, rng)["mean"] is None


@pytest.mark.parametrize(("reply", "verdict"), [
    ("1", 1), ("0", 0), ("Judgement: 1", 1), ("judgment:0", 0), ("**1**", 1), ("1.", 1), (" 0 \n", 0),
    ("<think>maybe 0</think>1", 1), ("`1`", 1),
])
def test_binary_verdicts(reply, verdict):
    assert parse_binary(reply) == verdict


@pytest.mark.parametrize("reply", ["", "10", "7/10", "1 is not right, so 0", "The answer is 1", "Judgement:",
                                   "yes", "0 or 1", "<think>1</think>", "2"])
def test_binary_non_verdicts(reply):
    with pytest.raises(VerdictError):
        parse_binary(reply)


@pytest.mark.parametrize(("reply", "low", "score"), [("7/10", 0, 7), ("Score: 8", 0, 8), ("10", 0, 10), ("0", 0, 0),
                                                     ("**9**", 1, 9), ("1", 1, 1)])
def test_scale_verdicts(reply, low, score):
    assert parse_scale(reply, low, 10) == score


@pytest.mark.parametrize(("reply", "low"), [("11", 0), ("7.5", 0), ("0", 1), ("7 out of 10, maybe 8", 0), ("", 0),
                                            ("The score is 7", 0)])
def test_scale_non_verdicts(reply, low):
    with pytest.raises(VerdictError):
        parse_scale(reply, low, 10)


def test_extraction_replies_and_prompt_filling():
    assert parse_extracted("Extracted answer: 3 m/s") == "3 m/s" and parse_extracted("None.") is None
    with pytest.raises(VerdictError):
        parse_extracted("  ")
    # A value holding a placeholder is not filled again; LaTeX braces stay.
    assert fill("Q: {question} G: {gold}", question="{gold} \\frac{a}{b}", gold="1") == "Q: {gold} \\frac{a}{b} G: 1"


def test_levels_by_name_or_number():
    assert [level_name(x) for x in (1, 4, 8, "phd", "UG", 9, 0, True, "Grad")] == [
        "Mid", "AO", "PhD", "PhD", "UG", None, None, None, None]


def test_eval_grade_chains_the_grading_on_one_server(files):
    gold = {item["question"]: item["answer"] for item in ITEMS}

    def model_or_judge(body):
        prompt = prompt_of(body)
        if prompt.startswith("You are a physics professor"):
            return "0"
        question = next(q for q in gold if prompt.startswith(q))
        return f"<answer>{gold[question]}</answer>" if question != ITEMS[4]["question"] else "<answer>5 N</answer>"

    with ChatServer() as server:
        server.default = Reply(text=model_or_judge)
        assert main(["eval", str(files / "items.jsonl"), "--benchmark", "seephys", "--setting", "TO", "--model",
                     "answerer", "--base-url", server.url, "--out", str(files / "run"), "--retry-delay", "0",
                     "--grade", "--judge-model", "judge"]) == 0
    summary = json.loads((files / "run" / "grades" / "summary.json").read_text())
    block = summary["models"][0]
    assert (block["model"], block["setting"], block["answers"], block["graded"]) == ("answerer", "TO", 7, 7)
    assert block["accuracy"]["mean"] == pytest.approx(6 / 7) and block["stages"]["judge"] == 1
    assert summary["judge"]["model"] == "judge"


def test_judge_audit_sheet_and_labels(files):
    import csv

    with ChatServer() as server:
        server.default = Reply(text=_judge)
        base = seephys_argv(files, server)
        main([*base, "--audit-sample", "10"])
        with open(files / "out" / "audit.csv", newline="", encoding="utf-8") as f:
            sheet = list(csv.DictReader(f))
        # the judge decided p5 (0) and p7 (1); the sheet shows what it saw
        assert [(r["id"], r["judge"], r["answer_judged"], r["person"]) for r in sheet] == [
            ("p5", "0", "3 m/s^2", ""), ("p7", "1", "regions II and III", "")]
        sheet[0]["person"], sheet[1]["person"] = "0", "0"  # the person rejects p7
        sheet.append({**sheet[0], "id": "p9", "person": "maybe"})
        with open(files / "labels.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(sheet[0]))
            w.writeheader()
            w.writerows(sheet)
        assert main([*base, "--audit-labels", str(files / "labels.csv")]) == 1
    a = json.loads((files / "out" / "summary.json").read_text())["audit"]
    # 1 of 2 differs; Wilson 95%: centre 0.5, half-width 1.96·sqrt(0.125 + 0.2401)/2.9207 = 0.4054
    assert (a["labelled"], a["disagreements"], a["error_rate"]) == (2, 1, 0.5)
    assert a["low"] == pytest.approx(0.0945, abs=1e-4) and a["high"] == pytest.approx(0.9055, abs=1e-4)
    assert a["disagreeing"] == [{"id": "p7", "model": "m", "setting": None, "judge": 1, "person": 0, "line": 3}]
    bad = [e for e in _lines(files / "out" / "errors.jsonl") if e["kind"] == "bad_label"]
    assert [(e["id"], e["line"]) for e in bad] == [("p9", 4)]


def test_stratified_sample_keeps_every_stratum():
    from benchmint.grade.audit import stratified_sample
    from benchmint.records import Grade

    grades = [Grade(f"a{i}", "a", None, "judge", 1.0, "1") for i in range(8)]
    grades += [Grade(f"b{i}", "a", None, "judge", 0.0, "0") for i in range(2)]
    grades += [Grade("c", "a", None, "symbolic", 1.0, "numeric")]  # not the judge's: never sampled
    got = stratified_sample(grades, 5, seed=3)
    assert sorted(g.verdict for g in got) == ["0", "1", "1", "1", "1"]  # 5·8/10 = 4 and 5·2/10 = 1
    assert got == stratified_sample(grades, 5, seed=3)
    assert len(stratified_sample(grades, 100, 0)) == 10


def test_two_judges_agreement(files):
    def stern(body):  # rejects everything the first judge accepts
        reply = _judge(body)
        return "Judgement: 0" if reply == "Judgement: 1" else reply

    with ChatServer() as first, ChatServer() as second:
        first.default, second.default = Reply(text=_judge), Reply(text=stern)
        assert main(["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark",
                     "seephys", "--out", str(files / "out"), "--judge-model", "j1", "--judge-base-url", first.url,
                     "--second-judge-model", "j2", "--second-judge-base-url", second.url, "--retry-delay", "0",
                     "--workers", "1", "--quiet"]) == 1
    ag = json.loads((files / "out" / "summary.json").read_text())["judge_agreement"]
    # both decide p5 (0, 0) and p7 (1, 0); p6 fails with both. po = 1/2, pe = (1/2)(2/2) + (1/2)(0) = 1/2: κ = 0
    assert (ag["judges"], ag["answers"], ag["agree"], ag["kappa"]) == (["j1", "j2"], 2, 1, 0.0)
    assert ag["disagreeing"] == [{"model": "m", "setting": None, "id": "p7", "first": 1, "second": 0}]
    kinds = [e["kind"] for e in _lines(files / "out" / "errors.jsonl")]
    assert sorted(kinds) == ["second_judge_failed", "undecided"]


def test_cohen_kappa_by_hand():
    from benchmint.grade.audit import cohen_kappa

    # 10 answers: both 1 on 4, both 0 on 3, (1, 0) on 2, (0, 1) on 1. po = 0.7; pe = 0.6·0.5 + 0.4·0.5 = 0.5; κ = 0.4
    a = [1] * 4 + [0] * 3 + [1] * 2 + [0]
    b = [1] * 4 + [0] * 3 + [0] * 2 + [1]
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa([1, 1], [1, 1]) is None and cohen_kappa([], []) is None


def test_human_baselines_mean_of_students_and_union_of_experts(files):
    # Three people answer p1-p3 by hand: ann solves p1, bob p1 and p2, cat nothing.
    sheet = {"ann": ("1 kW", "Ray F", "gh"), "bob": ("1000 W", "Ray E", "gh"), "cat": ("5 W", "Ray F", "gh")}
    rows = [{"id": f"p{k + 1}", "model": who, "answer": a} for who, answers in sheet.items()
            for k, a in enumerate(answers)]
    _write(files / "preds.jsonl", rows)
    with ChatServer() as server:
        server.default = Reply(text="0")
        assert main(["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark",
                     "seephys", "--out", str(files / "out"), "--judge-model", "j", "--judge-base-url", server.url,
                     "--workers", "1", "--quiet", "--human-group", "students=mean:ann,bob,cat",
                     "--human-group", "experts=union:ann,bob,nobody"]) == 1  # p4-p7 unanswered: listed
    missing = [(e["model"], e["id"]) for e in _lines(files / "out" / "errors.jsonl")]
    assert missing == [(who, f"p{k}") for who in ("ann", "bob", "cat") for k in range(4, 8)]
    # a person's baseline is over the items the group answered (the unanswered are not scored for people)
    h = json.loads((files / "out" / "summary.json").read_text())["human_baselines"]
    # students: p1 (1+1+0)/3, p2 (0+1+0)/3, p3 0 -> mean 3/9; experts: p1 1, p2 1, p3 0 -> 2/3
    assert h["students"]["accuracy"]["mean"] == pytest.approx(1 / 3)
    assert h["experts"]["accuracy"]["mean"] == pytest.approx(2 / 3)
    assert h["experts"]["members_found"] == ["ann", "bob"]
    assert h["experts"]["levels"]["High"]["mean"] == 1.0  # p1 is level 2
    with pytest.raises(ValueError, match="--human-group takes"):
        from benchmint.grade.summary import parse_group
        parse_group("experts=best:ann")


def test_error_types_label_the_wrong_answers(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    items = [{"id": str(i), "question": f"q{i}", "options": ["up", "down", "flat"], "answer": 2, "image": "fig.png"}
             for i in range(3)]
    preds = [{"id": "0", "model": "m", "output": "The answer is (2)"},
             {"id": "1", "model": "m", "output": "It rises. The answer is (1)"},
             {"id": "2", "model": "m", "output": "Knowledge says so. The answer is (3)"}]
    _write(tmp_path / "items.jsonl", items)
    _write(tmp_path / "preds.jsonl", preds)
    seen = []

    def labeller(body):
        prompt = prompt_of(body)
        seen.append(prompt)
        return "vp." if "It rises" in prompt else "Material knowledge"  # the second is no code: a failure

    with ChatServer() as server:
        server.default = Reply(text=labeller)
        assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "items.jsonl"), "--benchmark",
                     "matvqa", "--out", str(tmp_path / "out"), "--judge-model", "j", "--judge-base-url", server.url,
                     "--retry-delay", "0", "--error-types", "--quiet"]) == 1
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    assert [g.get("error_type") for g in grades] == [None, "VP", None]
    assert all("(2) down" in p and "Correct option: 2\n" in p for p in seen)
    block = json.loads((tmp_path / "out" / "summary.json").read_text())["models"][0]
    assert block["error_types"] == {"VP": 1}
    assert [e["kind"] for e in _lines(tmp_path / "out" / "errors.jsonl")] == ["error_type_failed"]
    assert len(seen) == 1 + 3  # one call for item 1, three answer attempts for item 2


def _csm_open(tmp_path, n=4):
    (tmp_path / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    scales = ("AtomScale", "Microscale", "Mesoscale", "Macroscale")
    items = [{"index": i, "file_name": "x.png", "image_caption": f"Figure {i}.", "scale": scales[i % 4],
              "describe_paragraph": f"Paragraph {i}: grains of {10 * (i + 1)} nm grow along the rolling direction."}
             for i in range(n)]
    _write(tmp_path / "metadata.jsonl", items)
    return items


def test_csmbench_open_judge_scores_on_the_declared_scale(tmp_path):
    _csm_open(tmp_path)
    preds = [{"id": str(i), "model": "m", "output": f"<think>hmm</think>Description {i}."} for i in range(3)]
    preds.append({"id": "3", "model": "m", "output": "   "})  # nothing described: the lowest score
    _write(tmp_path / "preds.jsonl", preds)
    replies = {"Description 0.": "7/10", "Description 1.": "**10**", "Description 2.": "Score: 0"}

    def judge(body):
        prompt = prompt_of(body)
        return next(r for d, r in replies.items() if d in prompt)

    with ChatServer() as server:
        server.default = Reply(text=judge)
        base = ["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path), "--benchmark", "csmbench-open",
                "--judge-model", "j", "--judge-base-url", server.url, "--retry-delay", "0", "--no-sts", "--quiet"]
        assert main([*base, "--out", str(tmp_path / "out")]) == 0
        grades = _lines(tmp_path / "out" / "grades.jsonl")
        assert [(g.get("judge_score"), g["score"], g["stage"]) for g in grades] == [
            (7, 0.7, "judge"), (10, 1.0, "judge"), (0, 0.0, "judge"), (0, 0.0, "rule")]
        block = json.loads((tmp_path / "out" / "summary.json").read_text())["models"][0]
        assert block["judge_score"]["mean"] == pytest.approx(17 / 4)
        # On the paper's 1-10 scale a reply of 0 is no verdict: a judge failure, not a grade.
        assert main([*base, "--out", str(tmp_path / "out1"), "--judge-scale", "1-10"]) == 1
    errors = _lines(tmp_path / "out1" / "errors.jsonl")
    assert [(e["id"], e["cause"]) for e in errors] == [("2", "judge_failed")]
    assert [g.get("judge_score") for g in _lines(tmp_path / "out1" / "grades.jsonl")] == [7, 10, 1]


def test_pearson_by_hand():
    from benchmint.grade.summary import pearson

    # x = 1, 2, 3; y = 2, 4, 7: deviations (-1, 0, 1) and (-7/3, -1/3, 8/3); r = 5 / sqrt(2 · 38/3)
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / (2 * 38 / 3) ** 0.5)
    assert pearson([1, 2], [3, 4]) is None and pearson([1, 1, 1], [1, 2, 3]) is None


def test_matvqa_ablation_relative_drops(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    raw = [{"id": str(i), "question": f"raw {i}", "options": ["a", "b", "c"], "answer": 1, "image": "fig.png"}
           for i in range(4)]
    # The shortcut-free rewrite moved the right option to 3 for item 0.
    language = [{**r, "question": f"rewritten {r['id']}", "answer": 3 if r["id"] == "0" else 1} for r in raw]
    _write(tmp_path / "raw.jsonl", raw)
    _write(tmp_path / "language.jsonl", language)
    _write(tmp_path / "p_raw.jsonl", [{"id": str(i), "model": "m", "output": "The answer is (1)"} for i in range(4)])
    # On the rewritten set m answers (1) everywhere: right on 1-3, wrong on 0 -> 3/4; raw 4/4; drop 0.25
    _write(tmp_path / "p_language.jsonl",
           [{"id": str(i), "model": "m", "output": "The answer is (1)"} for i in range(4)]
           + [{"id": "9", "model": "m", "output": "The answer is (1)"}])
    assert main(["grade", str(tmp_path / "p_raw.jsonl"), "--gold", str(tmp_path / "raw.jsonl"), "--benchmark",
                 "matvqa", "--out", str(tmp_path / "out"), "--quiet",
                 "--ablation", "language_removed", str(tmp_path / "language.jsonl"),
                 str(tmp_path / "p_language.jsonl")]) == 1  # item 9 exists in neither set
    ab = json.loads((tmp_path / "out" / "summary.json").read_text())["ablation"]["m"]
    assert ab["main"] == {"accuracy": 1.0, "items": 4}
    assert ab["language_removed"]["accuracy"] == 0.75
    assert ab["language_removed"]["relative_drop"]["mean"] == pytest.approx(0.25)
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    assert [(g["id"], g.get("setting"), g["score"]) for g in grades][4:] == [
        ("0", "language_removed", 0.0), ("1", "language_removed", 1.0), ("2", "language_removed", 1.0),
        ("3", "language_removed", 1.0)]


def test_judge_lift_against_sts_ranks():
    from benchmint.grade.summary import _rank_shift
    from benchmint.records import Grade

    # STS orders a > c > b; the judge orders b > c > a: the judge lifts b by two places and drops a by two.
    grades = [Grade("1", m, None, "judge", j / 10, str(j), extra={"sts": s, "judge_score": j})
              for m, s, j in (("a", 0.9, 7), ("b", 0.5, 9), ("c", 0.7, 8))]
    got = _rank_shift(grades)
    assert {m: (v["sts_rank"], v["judge_rank"], v["judge_lift"]) for m, v in got.items()} == {
        "a": (1, 3, -2), "b": (3, 1, 2), "c": (2, 2, 0)}


def test_judge_against_sts_per_family():
    from benchmint.grade.summary import families, family_of

    assert [family_of(m) for m in ("gpt-4o-2024-11-20", "openai/GPT-4.1-mini", "Qwen2.5-VL-72B", "InternVL3-8B",
                                   "my-model")] == ["gpt", "gpt", "qwen", "internvl", "my-model"]
    assert family_of("my-model", {"my-model": "gpt"}) == "gpt"
    rows = {"gpt-4o-mini": {"sts": 0.5, "judge_score": 9.0, "judge_lift": 2.0},
            "gpt-4.1": {"sts": 0.6, "judge_score": 8.0, "judge_lift": 1.0},
            "Qwen2.5-VL-7B": {"sts": 0.8, "judge_score": 6.0, "judge_lift": -1.5},
            "InternVL3-8B": {"sts": 0.7, "judge_score": 5.0, "judge_lift": -1.5}}
    got = families(rows, "gpt-4o-2024-11-20")
    assert got["judge_family"] == "gpt" and got["judge_family_lift"] == 1.5
    assert got["by_family"]["gpt"] == {"models": ["gpt-4o-mini", "gpt-4.1"], "sts": pytest.approx(0.55),
                                       "judge_score": 8.5, "mean_judge_lift": 1.5}
    assert set(got["by_family"]) == {"gpt", "qwen", "internvl"}
    assert families(rows, "claude-3-7-sonnet")["judge_family_lift"] is None  # none of its own family graded


def test_family_option_is_checked(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "p.jsonl"), "--gold", str(tmp_path), "--benchmark", "csmbench-open",
                 "--out", str(tmp_path / "out"), "--family", "no-equals-sign"]) == 2
    assert "--family takes MODEL=FAMILY, got 'no-equals-sign'" in capsys.readouterr().err


def test_csmbench_open_sts_beside_the_judge(tmp_path):
    items = _csm_open(tmp_path, n=4)
    preds = [{"id": str(i), "model": m, "output": text}
             for m, texts in (("close", [it["describe_paragraph"] for it in items]),
                              ("far", ["A cat sat on the mat."] * 4))
             for i, text in enumerate(texts)]
    _write(tmp_path / "preds.jsonl", preds)
    with ChatServer() as server:
        server.default = Reply(text=lambda body: "9" if "Paragraph" in prompt_of(body).split("Model description:")[1]
                               else "1")
        assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path), "--benchmark",
                     "csmbench-open", "--out", str(tmp_path / "out"), "--judge-model", "j", "--judge-base-url",
                     server.url, "--quiet"]) == 0
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    close = [g["sts"] for g in grades if g["model"] == "close"]
    far = [g["sts"] for g in grades if g["model"] == "far"]
    assert close == pytest.approx([1.0] * 4, abs=1e-5) and max(far) < 0.3  # the reference itself, and a cat
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["correlations"]["sts_vs_judge"]["answers"] == 8 and summary["correlations"]["sts_vs_judge"]["r"] > 0.9
    ranks = summary["correlations"]["models_by_metric"]
    assert (ranks["close"]["sts_rank"], ranks["close"]["judge_rank"], ranks["close"]["judge_lift"]) == (1, 1, 0)
    block = {b["model"]: b for b in summary["models"]}
    fam = summary["correlations"]["families"]
    assert fam["judge"] == "j" and fam["judge_family_lift"] is None and set(fam["by_family"]) == {"close", "far"}
    assert block["close"]["judge_score"]["mean"] == 9 and set(block["close"]["sts_by"]["scale"]) == {
        "AtomScale", "Macroscale", "Mesoscale", "Microscale"}
    # Without a judge, STS alone grades (stage "similarity").
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path), "--benchmark", "csmbench-open",
                 "--out", str(tmp_path / "sts"), "--quiet"]) == 0
    assert {g["stage"] for g in _lines(tmp_path / "sts" / "grades.jsonl")} == {"similarity"}


def test_blind_runs_give_every_benchmark_its_vision_gain(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    from PIL import Image

    Image.new("L", (16, 16), 80).save(tmp_path / "fig.png")
    items = [{"id": str(i), "question": f"question {i}", "options": ["a", "b", "c"], "answer": 2, "image": "fig.png"}
             for i in range(4)]
    _write(tmp_path / "items.jsonl", items)
    seen_images = []

    def answer(body):
        content = body["messages"][-1]["content"]
        sees = isinstance(content, list) and any(p.get("type") == "image_url" for p in content)
        seen_images.append(sees)
        return "The answer is (2)" if sees else "The answer is (1)"  # right only when it sees the figure

    with ChatServer() as server:
        server.default = Reply(text=answer)
        for extra, out in (([], "seeing"), (["--blind"], "blind")):
            assert main(["eval", str(tmp_path / "items.jsonl"), "--benchmark", "matvqa", "--model", "m",
                         "--base-url", server.url, "--out", str(tmp_path / out), "--retry-delay", "0", *extra]) == 0
    assert sorted(seen_images) == [False] * 4 + [True] * 4
    assert json.loads((tmp_path / "blind" / "run.json").read_text())["blind"] is True
    assert main(["grade", str(tmp_path / "seeing" / "predictions.jsonl"), str(tmp_path / "blind" / "predictions.jsonl"),
                 "--gold", str(tmp_path / "items.jsonl"), "--benchmark", "matvqa", "--out", str(tmp_path / "g"),
                 "--quiet"]) == 0
    gaps = json.loads((tmp_path / "g" / "summary.json").read_text())["settings_gaps"]["m"]
    assert (gaps["default"], gaps["default-blind"], gaps["vision_gain_default"]) == (1.0, 0.0, 1.0)
    assert gaps["relative_blind_gap_default"]["mean"] == 1.0


def _matvqa_items(tmp_path, n, answer=2, name="items.jsonl"):
    (tmp_path / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    items = [{"id": f"q{i}", "question": f"q{i}", "options": ["a", "b", "c", "d"], "answer": answer,
              "image": "fig.png"} for i in range(n)]
    _write(tmp_path / name, items)
    return items


def test_gold_items_without_an_answer_count_wrong_per_model(tmp_path):
    # 6 gold items; model "few" answers 2 (both right), model "all" answers all 6 (3 right).
    _matvqa_items(tmp_path, 6)
    preds = [{"id": f"q{i}", "model": "few", "output": "The answer is (2)"} for i in range(2)]
    preds += [{"id": f"q{i}", "model": "all", "output": f"The answer is ({2 if i < 3 else 1})"} for i in range(6)]
    _write(tmp_path / "preds.jsonl", preds)
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "items.jsonl"), "--benchmark",
                 "matvqa", "--out", str(tmp_path / "out"), "--quiet"]) == 1
    errors = _lines(tmp_path / "out" / "errors.jsonl")
    assert [(e["kind"], e["model"], e["id"]) for e in errors] == [("missing_prediction", "few", f"q{i}")
                                                                   for i in range(2, 6)]
    assert errors[0]["file"] == str(tmp_path / "items.jsonl") and "counted wrong" in errors[0]["message"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    blocks = {b["model"]: b for b in summary["models"]}
    assert blocks["few"]["accuracy"]["mean"] == pytest.approx(2 / 6)  # out of the gold items, not 2/2
    assert (blocks["few"]["answers"], blocks["few"]["missing"], blocks["few"]["items"]) == (2, 4, 6)
    assert blocks["all"]["accuracy"]["mean"] == 0.5 and blocks["all"]["missing"] == 0
    assert summary["counts"]["missing"] == 4 and summary["counts"]["answers"] == 8
    grades = [(g["model"], g["id"], g["verdict"]) for g in _lines(tmp_path / "out" / "grades.jsonl")]
    assert grades[6:] == [("few", "q0", "correct"), ("few", "q1", "correct")] + [
        ("few", f"q{i}", "missing") for i in range(2, 6)]


def test_ablation_drop_over_the_shared_items_with_their_count(tmp_path):
    # main set q0-q3 (m answers q0, q1: right, right -> 2/4 with the two missing); the caption-removed set holds
    # q0-q4 and m answers all of it, right on q0, q2, q4 -> 3/5. Shared items q0-q3: 2/4 -> 2/4, no drop.
    _matvqa_items(tmp_path, 4, name="main.jsonl")
    _matvqa_items(tmp_path, 5, name="caption.jsonl")
    _write(tmp_path / "p_main.jsonl", [{"id": f"q{i}", "model": "m", "output": "The answer is (2)"}
                                       for i in range(2)])
    _write(tmp_path / "p_caption.jsonl", [{"id": f"q{i}", "model": "m", "output": f"The answer is ({2 - i % 2})"}
                                          for i in range(5)])
    assert main(["grade", str(tmp_path / "p_main.jsonl"), "--gold", str(tmp_path / "main.jsonl"), "--benchmark",
                 "matvqa", "--out", str(tmp_path / "out"), "--quiet", "--ablation", "caption_removed",
                 str(tmp_path / "caption.jsonl"), str(tmp_path / "p_caption.jsonl")]) == 1
    ab = json.loads((tmp_path / "out" / "summary.json").read_text())["ablation"]["m"]
    assert ab["main"] == {"accuracy": 0.5, "items": 4}
    cap = ab["caption_removed"]
    # q4 is not in the main items: its answer is an error row, the set is graded over q0-q3
    assert cap["accuracy"] == 0.5 and cap["items"] == 4
    assert cap["shared"] == {"items": 4, "main_accuracy": 0.5, "accuracy": 0.5}
    assert cap["relative_drop"]["mean"] == 0.0 and cap["relative_drop"]["n"] == 4


def test_ablation_printed_with_the_shared_count(tmp_path, capsys):
    _matvqa_items(tmp_path, 2, name="main.jsonl")
    _matvqa_items(tmp_path, 2, answer=1, name="lang.jsonl")
    for name in ("p_main", "p_lang"):
        _write(tmp_path / f"{name}.jsonl", [{"id": "q0", "model": "m", "output": "The answer is (2)"}])
    main(["grade", str(tmp_path / "p_main.jsonl"), "--gold", str(tmp_path / "main.jsonl"), "--benchmark", "matvqa",
          "--out", str(tmp_path / "out"), "--ablation", "lang", str(tmp_path / "lang.jsonl"),
          str(tmp_path / "p_lang.jsonl")])
    out = capsys.readouterr().out
    # main 1/2, lang 0/2; over the 2 shared items 50% -> 0%: a drop of 100%
    assert "m: main set 50.0%; lang 0.0% (drop 100.0" in out and "over the 2 items both sets hold: 50.0% -> 0.0%" in out


def test_empty_seephys_replies_are_unparsed_and_never_judged(files):
    items = [{**ITEMS[k], "id": f"e{k}"} for k in range(4)]
    _write(files / "items.jsonl", items)
    _write(files / "preds.jsonl", [{"id": "e0", "model": "m", "output": "<answer>1000 W</answer>"},
                                   {"id": "e1", "model": "m", "output": ""},
                                   {"id": "e2", "model": "m", "output": "   \n"},
                                   {"id": "e3", "model": "m", "output": "I cannot solve this."}])
    # without a judge: one right, two empty ones wrong by rule, the refusal undecided
    assert main(["grade", str(files / "preds.jsonl"), "--gold", str(files / "items.jsonl"), "--benchmark",
                 "seephys", "--out", str(files / "out"), "--workers", "1", "--quiet"]) == 1
    block = json.loads((files / "out" / "summary.json").read_text())["models"][0]
    assert block["accuracy"]["mean"] == pytest.approx(1 / 3)
    assert (block["unparsed"], block["no_judge"], block["graded"]) == (2, 1, 3)
    grades = {g["id"]: g for g in _lines(files / "out" / "grades.jsonl")}
    assert [(grades[k]["stage"], grades[k]["verdict"], grades[k]["score"]) for k in ("e1", "e2")] == [
        ("rule", "unparsed", 0.0)] * 2
    # with a judge: only the refusal is sent, never an empty "Model Answer:"
    answers = []

    def judge(body):
        prompt = prompt_of(body)
        if prompt.startswith("Read the response"):
            return "None"
        answers.append(prompt.rsplit("Model Answer:", 1)[1].split("\n")[0].strip())
        return "0"

    with ChatServer() as server:
        server.default = Reply(text=judge)
        assert main(seephys_argv(files, server)) == 0
    assert answers == ["I cannot solve this."]
    block = json.loads((files / "out" / "summary.json").read_text())["models"][0]
    assert block["accuracy"]["mean"] == 0.25 and block["unparsed"] == 2


def test_matvqa_hedges_are_never_credited(tmp_path):
    _matvqa_items(tmp_path, 5)
    outputs = ["The answer is (2) or (3)", "The answer is (1) and (2)", "Answer: (2)", "answer: B",
               "The answer is ２"]
    _write(tmp_path / "preds.jsonl", [{"id": f"q{i}", "model": "m", "output": o} for i, o in enumerate(outputs)])
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "items.jsonl"), "--benchmark",
                 "matvqa", "--out", str(tmp_path / "out"), "--quiet"]) == 0
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    assert [(g["answer"], g["verdict"]) for g in grades] == [(None, "unparsed"), (None, "unparsed"),
                                                             ([2], "correct"), ([2], "correct"), ([2], "correct")]


def test_summary_is_byte_identical_between_identical_runs(files):
    # two runs of the same inputs into two folders, each with its own judge cache: the same summary.json, bytes and
    # all; the run's wall time and the cache's place are in run.json
    with ChatServer() as server:
        server.default = Reply(text=_judge)
        for name in ("a", "b"):
            argv = seephys_argv(files, server)
            argv[argv.index("--out") + 1] = str(files / name)
            main([*argv, "--audit-sample", "5"])
    first, second = ((files / name / "summary.json").read_bytes() for name in ("a", "b"))
    assert first == second
    assert b"seconds" not in first and str(files).encode() not in first.replace(str(files / "items.jsonl").encode(),
                                                                             b"").replace(
        str(files / "preds.jsonl").encode(), b"")
    run = json.loads((files / "a" / "run.json").read_text())
    assert run["seconds"] > 0 and run["judge"]["cache"].startswith(str(files / "a"))


def test_strata_named_as_score_names_them(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    levels = [1, 1.0, "1", "(missing)"]
    items = [{"id": f"q{i}", "question": "q", "options": ["a", "b"], "answer": 2, "image": "fig.png",
              "task": v} for i, v in enumerate(levels)]
    items.append({"id": "q9", "question": "q", "options": ["a", "b"], "answer": 2, "image": "fig.png"})
    _write(tmp_path / "items.jsonl", items)
    _write(tmp_path / "preds.jsonl", [{"id": it["id"], "model": "m", "output": "The answer is (2)"} for it in items])
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "items.jsonl"), "--benchmark",
                 "matvqa", "--out", str(tmp_path / "out"), "--quiet", "--by", "task"]) == 0
    by = json.loads((tmp_path / "out" / "summary.json").read_text())["models"][0]["by"]["task"]
    # 1 and 1.0 are one value, "1" another; an item without the key is apart from a literal "(missing)"
    assert {k: v["n"] for k, v in by.items()} == {"1": 2, '"1"': 1, '"(missing)"': 1, "(missing)": 1}


def test_audit_labels_for_unknown_ids_or_edited_verdicts_are_left_out(files):
    import csv

    with ChatServer() as server:
        server.default = Reply(text=_judge)
        base = seephys_argv(files, server)
        main([*base, "--audit-sample", "10"])
        with open(files / "out" / "audit.csv", newline="", encoding="utf-8") as f:
            sheet = list(csv.DictReader(f))
        assert [(r["id"], r["judge"]) for r in sheet] == [("p5", "0"), ("p7", "1")]
        sheet[0]["person"] = "0"  # agrees with the judge
        sheet[1]["person"], sheet[1]["judge"] = "0", "0"  # the judge's 1 edited to 0: would hide a disagreement
        sheet.append({**sheet[0], "id": "p6", "judge": "1", "person": "1"})  # the judge failed on p6
        sheet.append({**sheet[0], "id": "p99", "judge": "0", "person": "1"})  # not an item of the run
        with open(files / "labels.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(sheet[0]))
            w.writeheader()
            w.writerows(sheet)
        assert main([*base, "--audit-labels", str(files / "labels.csv")]) == 1
    a = json.loads((files / "out" / "summary.json").read_text())["audit"]
    assert (a["labelled"], a["disagreements"], a["error_rate"]) == (1, 0, 0.0)
    bad = [e for e in _lines(files / "out" / "errors.jsonl") if e["kind"] == "bad_label"]
    assert [(e["id"], e["line"]) for e in bad] == [("p7", 3), ("p6", 4), ("p99", 5)]
    assert "the run's judge said 1" in bad[0]["message"] and "no judge decision" in bad[2]["message"]


def test_csmbench_open_items_without_an_answer_score_the_lowest(tmp_path):
    _csm_open(tmp_path)  # items 0-3; m describes 0 and 1 only
    _write(tmp_path / "preds.jsonl", [{"id": str(i), "model": "m", "output": f"Description {i}."} for i in range(2)])
    with ChatServer() as server:
        server.default = Reply(text="8")
        assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path), "--benchmark",
                     "csmbench-open", "--judge-model", "j", "--judge-base-url", server.url, "--retry-delay", "0",
                     "--no-sts", "--quiet", "--out", str(tmp_path / "out")]) == 1
        assert server.count == 2  # nothing is asked for the missing ones
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    assert [(g["id"], g["verdict"], g.get("judge_score"), g["score"]) for g in grades] == [
        ("0", "8", 8, 0.8), ("1", "8", 8, 0.8), ("2", "missing", 0, 0.0), ("3", "missing", 0, 0.0)]
    block = json.loads((tmp_path / "out" / "summary.json").read_text())["models"][0]
    assert block["judge_score"]["mean"] == 4.0 and block["missing"] == 2
