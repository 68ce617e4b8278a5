"""benchmint generate matvqa against the scripted chat server: source selection, reasoning path and question,
both shortcut-removal stages of Algorithm 1 with their bounds, malformed and refused replies, a rewrite that
changes the answer, kill and resume, and the three item sets through eval and grade --ablation."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

import benchmint
from benchmint.cli import main
from benchmint.generate.matvqa import MatVQAConfig, calls_bound

from chat_server import ChatServer, Raw, Reply, Status, prompt_of

PDF = Path(benchmint.__file__).parent / "samples" / "sample_paper.pdf"
PATH = {"steps": [{"component": "S", "statement": "a moire superlattice of period 1.2 nm"},
                  {"component": "P", "statement": "the dI/dV map follows the topography"}]}
PATH2 = {"steps": [{"component": "S", "statement": "grains of a few tens of nanometres with sharp boundaries"},
                   {"component": "P", "statement": "a low density of extended defects"}]}
OPTIONS = ["The contrast is purely topographic.", "The contrast is electronic as well (true).",
           "The lattice is square.", "The period is 12 nm."]


def step_of(body: dict) -> str:
    prompt = prompt_of(body)
    for start, step in (("You read a figure's caption", "path"), ("Below are claims", "confirm"), ("You write one multiple-choice", "mcq"),
                        ("The following is a multiple choice question (with answers).", "eval1"),
                        ("The following is a multiple choice question (with answers) about", "eval2"),
                        ("A model answered", "reflect"), ("Rewrite this", "rewrite"),
                        ("Are these two", "check1"), ("Does this multiple-choice", "check2")):
        if prompt.startswith(start):
            return step
    raise AssertionError(f"unknown prompt: {prompt[:80]}")


def question_of(prompt: str, step: str) -> tuple[str, list[str]]:
    """The question and options a prompt shows (the rewrite under check, for a checker)."""
    if step.startswith("check"):
        head = "Rewritten question:\n" if step == "check1" else "Question:\n"
        q, rest = prompt.split(head, 1)[1].split("\nOptions:\n", 1)
    elif step == "rewrite":
        q, rest = prompt.split("Question:\n", 1)[1].split("\n\nOptions:\n", 1)
    else:
        q, rest = prompt.split("\n\nOptions:\n", 1)
        q = q.rsplit("\n\n", 1)[1]
    options = re.findall(r"^\((\d)\): (.*)$", rest.split("\n\n", 1)[0], re.M)
    return q, [text for _, text in options]


class Model:
    """Replies that depend on the request alone (a resumed run gets the same ones). Rewrites append " r" (stage 1)
    or " c" (stage 2) to the question, and after a refusal one "!" more than the refused one had;
    the right option is the one saying "(true)".

    ``right(step, question)``: whether the evaluator finds the answer without the figure;
    ``consistent(step, prompt)``: the checker's verdict; ``bad_answer``: the first rewrite of each stage names a
    wrong option as correct."""

    def __init__(self, right=lambda step, q: False, consistent=None, bad_answer=False) -> None:
        self.right, self.bad_answer = right, bad_answer
        self.consistent = consistent or self.same_answer

    @staticmethod
    def same_answer(step: str, prompt: str) -> bool:
        if step == "check2":
            return True
        original = prompt.split("Its correct answer: ", 1)[1].split("\n", 1)[0]
        new = prompt.rsplit("Its correct answer: ", 1)[1].split("\n", 1)[0]
        return original.split(") ", 1)[1] == new.split(") ", 1)[1]

    def __call__(self, body: dict) -> str:
        step, prompt = step_of(body), prompt_of(body)
        if step == "path":
            return json.dumps(PATH if "Figure 1 caption" in prompt else PATH2)
        if step == "confirm":
            return json.dumps({"verdicts": ["supported"] * prompt.count("\nClaim ")})
        if step == "mcq":
            label = re.search(r"Figure (\S+) caption", prompt).group(1)
            return json.dumps({"step1_task": "causal", "step2_question": f"What does figure {label} show?",
                               "step3_options": OPTIONS, "step4_answer": 2})
        if step == "reflect":
            return json.dumps({"strategy": "the option that mentions electronic contrast is the only specific one"})
        q, options = question_of(prompt, step)
        true = next(k for k, o in enumerate(options, 1) if "(true)" in o)
        if step.startswith("eval"):
            pick = true if self.right(step, q) else true % 4 + 1
            return f"Reading the options, the second fits best. The answer is ({pick})"
        if step == "rewrite":
            refused = "A rewrite was refused" in prompt
            # one "!" more than the refused rewrite had, so that each retry reads differently
            bangs = prompt.split("The refused rewrite: ", 1)[1].split("\n", 1)[0].count("!") + 1 if refused else 0
            mark = " r" if "Keep its meaning" in prompt else " c"
            answer = true % 4 + 1 if self.bad_answer and not refused else true
            return json.dumps({"step1_question": q + mark + "!" * bangs, "step2_options": options,
                               "step3_answer": answer})
        ok = self.consistent(step, prompt)
        return json.dumps({"step1_reason": "same question" if ok else "the correct answer changed",
                           "step2_verdict": "consistent" if ok else "inconsistent"})


@pytest.fixture(scope="module")
def harvest(tmp_path_factory):
    out = tmp_path_factory.mktemp("harvest")
    assert main(["harvest", str(PDF), "--out", str(out)]) == 0
    return out


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def gen_args(harvest, out, server, *extra) -> list[str]:
    return ["generate", "matvqa", str(harvest), "--out", str(out), "--pdfs", str(PDF.parent), "--base-url",
            server.url, "--gen-model", "gen", "--eval-model", "ev", "--checker-model", "chk", "--retry-delay", "0",
            "--concurrency", "2", *extra]


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def steps(server) -> list[str]:
    return [step_of(b) for b in server.bodies]


def codes(out, stage) -> dict:
    run = json.loads((out / "run.json").read_text())
    return {k: v["count"] for k, v in run[stage]["codes"].items() if v["count"]}


def test_a_harvest_becomes_three_item_sets_that_eval_and_grade_ablation_run(harvest, server, tmp_path):
    # Stage 1: the evaluator answers the first version without the figure, not the rewrite; stage 2: the
    # caption does not give the rewrite away.
    server.default = Reply(text=Model(right=lambda step, q: step == "eval1" and not q.endswith(" r")))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server)) == 0
    # Per figure (two): path, its evidence check, question, eval, reflect, rewrite, check, eval (wrong), caption
    # eval (wrong).
    assert sorted(steps(server)) == sorted(["path", "confirm", "mcq", "eval1", "reflect", "rewrite", "check1", "eval1",
                                            "eval2"] * 2)
    # Only the question writer sees the figure; the evaluators see no image, the caption only in stage 2.
    for body in server.bodies:
        content = body["messages"][-1]["content"]
        has_image = isinstance(content, list) and any(p.get("type") == "image_url" for p in content)
        assert has_image == (step_of(body) == "mcq")
        if step_of(body) == "eval2":
            assert "Caption: Figure 1. (a) Line profile" in prompt_of(body) or "Caption: Fig. 2: TEM" in \
                prompt_of(body)
    assert codes(out, "stage1") == {"REWRITTEN": 2} and codes(out, "stage2") == {"NO_SHORTCUT": 2}
    sets = {name: rows(out / f"items.{name}.jsonl") for name in ("raw", "lanrem", "caprem")}
    ids = [i["id"] for i in sets["raw"]]
    assert len(ids) == 2 and all([i["id"] for i in s] == ids for s in sets.values())
    assert (out / "items.jsonl").read_text() == (out / "items.caprem.jsonl").read_text()
    assert [i["question"] for i in sets["raw"]] == ["What does figure 1 show?", "What does figure 2 show?"]
    assert [i["question"] for i in sets["lanrem"]] == ["What does figure 1 show? r", "What does figure 2 show? r"]
    assert sets["caprem"] == sets["lanrem"]
    item = sets["raw"][0]
    assert item["options"] == OPTIONS and item["answer"] == 2 and item["task"] == "causal"
    assert (out / item["image"]).read_bytes().startswith(b"\x89PNG")
    assert item["meta"]["stage1"] == {"code": "REWRITTEN", "rewrites": 1, "refused": 0, "evaluations": 2}
    assert item["meta"]["reasoning_path"] == PATH["steps"]
    evidence = [s for s in rows(out / "trace.jsonl")[0]["steps"] if s["step"] == "confirm"][0]["evidence"]
    assert evidence[0][0]["sentence"] == ("Scanning tunnelling microscopy of the moire superlattice reveals a "
                                          "periodicity of about 1.2 nm.")

    # One eval per set (the model answers (2) everywhere: right on every set) and one grade --ablation.
    preds = {}
    for name in ("raw", "lanrem", "caprem"):
        ev = tmp_path / f"eval-{name}"
        server.default = Reply(text="The answer is (2)")
        assert main(["eval", str(out / f"items.{name}.jsonl"), "--benchmark", "matvqa", "--model", "m",
                     "--base-url", server.url, "--out", str(ev)]) == 0
        preds[name] = next(ev.rglob("predictions.jsonl"))
    assert main(["grade", str(preds["raw"]), "--gold", str(out / "items.raw.jsonl"), "--benchmark", "matvqa",
                 "--out", str(tmp_path / "graded"), "--quiet",
                 "--ablation", "language_removed", str(out / "items.lanrem.jsonl"), str(preds["lanrem"]),
                 "--ablation", "caption_removed", str(out / "items.caprem.jsonl"), str(preds["caprem"])]) == 0
    ab = json.loads((tmp_path / "graded" / "summary.json").read_text())["ablation"]["m"]
    assert ab["main"] == {"accuracy": 1.0, "items": 2}
    assert ab["caption_removed"]["accuracy"] == 1.0


def test_an_evaluator_that_always_finds_the_shortcut_ends_each_stage_at_its_bound(harvest, server, tmp_path):
    server.default = Reply(text=Model(right=lambda step, q: True))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--max-iterations", "2", "--limit", "1")) == 0
    # Per stage: 3 evaluations (T + 1), 2 reflections, 2 rewrites, 2 checks.
    got = steps(server)
    assert [got.count(s) for s in ("eval1", "reflect", "rewrite", "check1", "eval2", "check2")] == [3, 4, 4, 2, 3, 2]
    assert codes(out, "stage1") == {"FAIL_ITERATIONS": 1} and codes(out, "stage2") == {"FAIL_ITERATIONS": 1}
    # The last accepted rewrite stands: two " r" then two " c".
    assert rows(out / "items.jsonl")[0]["question"] == "What does figure 1 show? r r c c"


def test_a_checker_that_always_refuses_ends_with_fail_rewrite(harvest, server, tmp_path):
    server.default = Reply(text=Model(right=lambda step, q: True, consistent=lambda step, prompt: False))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--max-rewrite-failures", "3", "--limit", "1")) == 0
    got = steps(server)
    # Per stage: one evaluation, one reflection, then three rewrites the checker refuses (K = 3).
    assert [got.count(s) for s in ("eval1", "reflect", "rewrite", "check1", "eval2", "check2")] == [1, 2, 6, 3, 1, 3]
    assert codes(out, "stage1") == {"FAIL_REWRITE": 1} and codes(out, "stage2") == {"FAIL_REWRITE": 1}
    item = rows(out / "items.jsonl")[0]
    assert item["question"] == "What does figure 1 show?"  # no rewrite accepted: the raw question stands
    assert item["meta"]["stage1"] == {"code": "FAIL_REWRITE", "rewrites": 0, "refused": 3, "evaluations": 1}
    # Each retry is told why the last one was refused, so it is a new request.
    rewrites = [prompt_of(b) for b in server.bodies if step_of(b) == "rewrite"]
    assert len(set(rewrites)) == 6 and sum("A rewrite was refused: the correct answer changed" in p
                                           for p in rewrites) == 4


def test_a_rewrite_that_changes_the_answer_is_caught_by_the_checker(harvest, server, tmp_path):
    server.default = Reply(text=Model(right=lambda step, q: step == "eval1" and "r" not in q.split("?")[1],
                                      bad_answer=True))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--limit", "1")) == 0
    trace = rows(out / "trace.jsonl")[0]["steps"]
    checks = [s for s in trace if s["step"] == "check"]
    # The first rewrite named option 3 as correct: refused; the second keeps option 2 and passes.
    assert [c["new"]["answer"] for c in checks] == [3, 2]
    assert [c["value"]["step2_verdict"] for c in checks] == ["inconsistent", "consistent"]
    item = rows(out / "items.lanrem.jsonl")[0]
    assert item["question"] == "What does figure 1 show? r!" and item["answer"] == 2
    assert item["meta"]["stage1"] == {"code": "REWRITTEN", "rewrites": 1, "refused": 1, "evaluations": 2}


def test_malformed_and_refused_replies(harvest, server, tmp_path):
    model = Model()
    refusal = {"id": "x", "object": "chat.completion", "created": 0, "model": "gen",
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."}}]}
    # Figure 1's path: broken JSON, then a valid path; figure 2's: a refusal every time.
    server.when_contains["Figure 2 caption"] = Raw(json.dumps(refusal).encode())
    broken = iter(['{"steps": [', json.dumps(PATH)])
    server.default = Reply(text=lambda b: next(broken) if step_of(b) == "path" else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--answer-attempts", "2")) == 0
    assert steps(server).count("path") == 2 + 2
    rejected = rows(out / "rejected.jsonl")
    assert [(r["reason"], r["figure"]["label"]) for r in rejected] == [("generator_failed", "2")]
    assert "refusal: I can't help with that." in rejected[0]["detail"]
    run = json.loads((out / "run.json").read_text())
    assert run["figures"]["codes"]["GENERATOR_FAILED"]["count"] == 1 and run["figures"]["codes"]["RAW"]["count"] == 1
    assert len(rows(out / "items.raw.jsonl")) == 1


def test_an_evaluator_whose_answer_cannot_be_read_ends_the_stage_and_the_question_goes_on(harvest, server,
                                                                                            tmp_path):
    model = Model()
    server.default = Reply(text=lambda b: "I think it is the second one." if step_of(b) == "eval1" else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--answer-attempts", "2", "--limit", "1")) == 0
    assert steps(server).count("eval1") == 2
    assert codes(out, "stage1") == {"EVALUATOR_FAILED": 1} and codes(out, "stage2") == {"NO_SHORTCUT": 1}
    assert [len(rows(out / f"items.{n}.jsonl")) for n in ("raw", "lanrem", "caprem")] == [1, 1, 1]


@pytest.mark.parametrize("seed", range(6))
def test_requests_per_figure_never_exceed_the_bound(harvest, server, tmp_path, seed):
    """Evaluator and checker verdicts drawn at random per request (stateless: a hash of the prompt and seed)."""
    rng = random.Random(seed)
    t, k = rng.randint(1, 3), rng.randint(1, 3)
    p_right, p_ok = rng.random(), rng.random()

    def coin(text: str, p: float) -> bool:
        return random.Random(f"{seed}:{text}").random() < p

    server.default = Reply(text=Model(right=lambda step, q: coin(step + q, p_right),
                                      consistent=lambda step, prompt: coin(prompt, p_ok)))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--max-iterations", str(t), "--max-rewrite-failures", str(k),
                         "--answer-attempts", "1")) == 0
    bound = calls_bound(MatVQAConfig("gen", "ev", "chk", max_iterations=t, max_rewrite_failures=k))
    per_figure = {}
    for body in server.bodies:
        prompt = prompt_of(body)
        figure = "2" if ("figure 2" in prompt or "Fig. 2" in prompt or "grains" in prompt) else "1"
        per_figure[figure] = per_figure.get(figure, 0) + 1
    assert per_figure and max(per_figure.values()) <= bound == 3 + 2 * (4 * t + 1 + 2 * k)
    run = json.loads((out / "run.json").read_text())
    assert run["stage1"]["total"] == run["stage2"]["total"] == 2


def test_source_selection_by_vocabulary_and_metadata(harvest, server, tmp_path):
    server.default = Reply(text=Model())
    # Figure 1's caption and discussion name one vocabulary term ("lattice"), figure 2's four (listed in the vocabulary's order).
    out = tmp_path / "terms"
    assert main(gen_args(harvest, out, server, "--min-terms", "2")) == 0
    rejected = rows(out / "rejected.jsonl")
    assert [(r["reason"], r["figure"]["label"]) for r in rejected] == [("no_terms", "1")]
    figs = rows(out / "figures.jsonl")
    assert figs[0]["terms"] == ["lattice"] and figs[1]["terms"] == ["structure", "phase", "grain", "diffraction"]

    meta = tmp_path / "meta.jsonl"
    meta.write_text(json.dumps({"pdf": "sample_paper.pdf", "published": "2024-03-05",
                                "categories": ["cond-mat.mtrl-sci"]}) + "\n")
    for extra, reason in ((["--from", "2024-01-01", "--to", "2024-12-31", "--category", "cond-mat.mtrl-sci"], None),
                          (["--from", "2024-04-01"], "outside_dates"), (["--category", "cs.CL"], "other_category")):
        out = tmp_path / f"meta-{reason}"
        assert main(gen_args(harvest, out, server, "--metadata", str(meta), *extra)) == 0
        got = {r["reason"] for r in rows(out / "rejected.jsonl")}
        assert got == ({reason} if reason else set())
    out = tmp_path / "no-meta"
    assert main(gen_args(harvest, out, server, "--from", "2024-01-01")) == 0
    assert {r["reason"] for r in rows(out / "rejected.jsonl")} == {"no_metadata"}
    # A paper whose date cannot be read: its figures are left out with the reason, the run goes on.
    meta.write_text(json.dumps({"pdf": "sample_paper.pdf", "published": "March 2024"}) + "\n")
    out = tmp_path / "bad-date"
    assert main(gen_args(harvest, out, server, "--metadata", str(meta), "--from", "2024-01-01")) == 0
    got = rows(out / "rejected.jsonl")
    assert {r["reason"] for r in got} == {"no_metadata"} and "not a date YYYY-MM-DD: 'March 2024'" in got[0]["detail"]


def test_a_killed_run_resumes_without_asking_again(harvest, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    model = Model(right=lambda step, q: not q.endswith(" r r") and step == "eval1")
    with ChatServer() as server:
        server.default = Reply(text=model, delay=0.1)
        out = tmp_path / "killed"
        args = [sys.executable, "-m", "benchmint.cli", *gen_args(harvest, out, server, "--concurrency", "1",
                                                                  "--limit", "1")]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.count < 7 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        assert 7 <= server.count < 13
        subprocess.run(args, check=True, timeout=120, capture_output=True)
        # path, confirm, mcq, then stage 1: eval, reflect, rewrite, check, eval, reflect, rewrite, check, eval
        # (wrong); stage 2: eval (wrong) = 13 distinct calls; only the one in flight at the kill may be asked twice.
        assert len(server.by_prompt) == 13 and server.count <= 13 + 1
        assert sum(n - 1 for n in server.by_prompt.values()) == server.count - 13

        whole = tmp_path / "whole"
        server.reset()
        server.default = Reply(text=model)
        assert main(gen_args(harvest, whole, server, "--concurrency", "1", "--limit", "1")) == 0
        assert server.count == 13
        for name in ("items.raw.jsonl", "items.lanrem.jsonl", "items.jsonl", "rejected.jsonl", "trace.jsonl",
                     "figures.jsonl", "errors.jsonl"):
            assert (out / name).read_text() == (whole / name).read_text(), name
        # A rerun of a finished run asks nothing.
        server.reset()
        server.default = Reply(text=model)
        assert main(gen_args(harvest, whole, server, "--concurrency", "1", "--limit", "1")) == 0
        assert server.count == 0


def test_bm25_and_sentences_by_hand():
    from benchmint.generate.evidence import BM25, sentences

    assert sentences("Fig. 2 shows grains. The grains are small. Fig. 2 shows grains.", None,
                     "A second text (b) here.") == ["Fig. 2 shows grains.", "The grains are small.",
                                                    "A second text (b) here."]
    # Tokens without stop words: [grain size grows] (3), [grain boundaries pin grain growth] (5), [oxide layer] (2);
    # avgdl 10/3; idf(grain) = ln(1 + 1.5/2.5) = ln 1.6.
    # d1: ln1.6 * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 0.9)) = 0.4700036 * 2.5 / 2.3875 = 0.4921504
    # d2: ln1.6 * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 1.5)) = 0.4700036 * 5 / 4.0625 = 0.5784660
    index = BM25(["The grain size grows.", "Grain boundaries pin the grain growth.", "An oxide layer."])
    top = index.top("grain", 3)
    assert [s for s, _ in top] == ["Grain boundaries pin the grain growth.", "The grain size grows."]
    assert [score for _, score in top] == [pytest.approx(0.578466, abs=1e-6), pytest.approx(0.492150, abs=1e-6)]
    assert index.top("quantum spin liquid", 3) == []


def test_unsupported_steps_are_dropped_and_a_path_left_too_short_rejects_the_figure(harvest, server, tmp_path):
    model = Model()
    path = {"steps": [*PATH["steps"], {"component": "Pe", "statement": "a quantum spin liquid ground state"}]}
    verdicts = json.dumps({"verdicts": ["supported", "unsupported"]})

    def reply(body):
        return {"path": json.dumps(path), "confirm": verdicts}.get(step_of(body)) or model(body)

    server.default = Reply(text=reply)
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--limit", "1")) == 0
    assert steps(server) == ["path", "confirm"]
    confirm = prompt_of(server.bodies[1])
    # The third step matches no sentence: dropped without asking; the checker is asked about two.
    assert confirm.count("\nClaim ") == 2 and "spin liquid" not in confirm
    assert "- Scanning tunnelling microscopy of the moire superlattice reveals a periodicity of about 1.2 nm." \
        in confirm
    assert server.bodies[1]["response_format"]["json_schema"]["schema"]["properties"]["verdicts"]["maxItems"] == 2
    rejected = rows(out / "rejected.jsonl")
    assert [(r["reason"], r["figure"]["label"]) for r in rejected] == [("path_unsupported", "1")]
    step = [s for s in rows(out / "trace.jsonl")[0]["steps"] if s["step"] == "confirm"][0]
    assert step["evidence"][2] == [] and step["asked"] == [0, 1]
    assert not rows(out / "items.raw.jsonl")
    run = json.loads((out / "run.json").read_text())
    assert run["figures"]["codes"]["PATH_UNSUPPORTED"]["count"] == 1


def test_a_call_that_keeps_failing_is_an_error_and_the_next_run_asks_again(harvest, server, tmp_path):
    model = Model(right=lambda step, q: step == "eval1" and not q.endswith(" r"))
    server.default = Reply(text=model)
    server.when_contains["Are these two"] = Status(500)  # the stage-1 checker's server fails
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--retries", "1", "--limit", "1")) == 1
    errors = rows(out / "errors.jsonl")
    assert [(e["kind"], e["stage"], e["cause"]) for e in errors] == [("model_call", "check", "http_status")]
    # Unfinished: in none of the sets, and not rejected.
    assert [len(rows(out / f"items.{n}.jsonl")) for n in ("raw", "lanrem", "caprem")] == [0, 0, 0]
    assert not rows(out / "rejected.jsonl")
    del server.when_contains["Are these two"]
    count = server.count
    assert main(gen_args(harvest, out, server, "--limit", "1")) == 0
    assert steps(server)[count:] == ["check1", "eval1", "eval2"]  # the rest of the question only
    assert rows(out / "items.lanrem.jsonl")[0]["question"] == "What does figure 1 show? r"


def test_a_checker_that_refuses_to_answer_ends_the_stage_with_its_code(harvest, server, tmp_path):
    refusal = {"id": "x", "object": "chat.completion", "created": 0, "model": "chk",
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": None, "refusal": "I can't judge that."}}]}
    server.when_contains["Does this multiple-choice"] = Raw(json.dumps(refusal).encode())
    server.default = Reply(text=Model(right=lambda step, q: step == "eval2"))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--answer-attempts", "2", "--limit", "1")) == 0
    assert steps(server).count("check2") == 2
    assert codes(out, "stage1") == {"NO_SHORTCUT": 1} and codes(out, "stage2") == {"CHECKER_FAILED": 1}
    item = rows(out / "items.caprem.jsonl")[0]
    assert item["question"] == "What does figure 1 show?"  # the refused rewrite's check: nothing accepted
    check = [s for s in rows(out / "trace.jsonl")[0]["steps"] if s["step"] == "check"][0]
    assert "I can't judge that." in check["error"]


def test_replaced_prompts_are_sent_and_hashed_and_bad_options_stop_the_run(harvest, server, tmp_path, capsys):
    import hashlib

    server.default = Reply(text=Model(right=lambda step, q: step == "eval1" and not q.endswith(" r")))
    over = tmp_path / "prompts" / "matvqa"
    over.mkdir(parents=True)
    text = ("A model answered the multiple-choice question below correctly without seeing the figure{{SEEN}}. "
            "Say how.\n{{QUESTION}}\n{{CHOICES}}\n{{REASONING}}\n")
    (over / "reflect.txt").write_text(text)
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--limit", "1", "--prompts", str(tmp_path / "prompts"))) == 0
    assert any(prompt_of(b).startswith("A model answered") and "Say how." in prompt_of(b) for b in server.bodies)
    files = {p["name"]: p for p in json.loads((out / "run.json").read_text())["prompts"]}
    assert files["matvqa/reflect.txt"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert files["matvqa/vocabulary.txt"]["origin"] == "package"

    count = server.count
    (over / "reflect.txt").write_text(text + "{{FIGURE}}\n")
    assert main(gen_args(harvest, tmp_path / "bad", server, "--prompts", str(tmp_path / "prompts"))) == 2
    assert "unknown placeholders ['FIGURE']" in capsys.readouterr().err
    assert main(gen_args(harvest, tmp_path / "bad", server, "--from", "2024-13-01")) == 2
    assert "--from: not a date YYYY-MM-DD: '2024-13-01'" in capsys.readouterr().err
    assert server.count == count



def test_bad_records_and_uncroppable_figures_are_named_and_the_rest_go_on(harvest, server, tmp_path):
    import shutil

    copy = tmp_path / "harvest"
    shutil.copytree(harvest, copy)
    lines = (copy / "figures.jsonl").read_text().splitlines()
    fig2 = json.loads(lines[1])
    lines[1] = json.dumps({**fig2, "page": 9})  # the article has two pages
    (copy / "figures.jsonl").write_text("\n".join([lines[0], "{not json", lines[1]]) + "\n")
    server.default = Reply(text=Model())
    out = tmp_path / "gen"
    assert main(gen_args(copy, out, server)) == 1
    errors = rows(out / "errors.jsonl")
    assert [(e["kind"], e["line"]) for e in errors] == [("bad_figure", 2)]
    rejected = rows(out / "rejected.jsonl")
    assert [(r["reason"], r["figure"]["page"]) for r in rejected] == [("crop_failed", 9)]
    assert "page 9" in rejected[0]["detail"]
    assert len(rows(out / "items.jsonl")) == 1
    # A rerun asks nothing.
    count = server.count
    assert main(gen_args(copy, out, server)) == 1 and server.count == count


def test_review_sheets_number_the_options_as_the_answer_does(harvest, server, tmp_path):
    import csv

    server.default = Reply(text=Model())
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--limit", "1")) == 0
    assert main(["generate", "review", "export", str(out / "items.jsonl"), "--out", str(tmp_path / "sheets"),
                 "--benchmark", "matvqa", "--sample", "1", "--reviewers", "1"]) == 0
    with open(tmp_path / "sheets" / "reviewer1.csv", newline="") as fh:
        row = list(csv.DictReader(fh))[0]
    assert row["answer"] == "2"
    assert row["options"].splitlines() == [f"({k}) {text}" for k, text in enumerate(OPTIONS, 1)]


@pytest.mark.parametrize("paper_text", [False, True])
def test_the_path_is_checked_against_the_whole_paper_with_paper_text(harvest, server, tmp_path, paper_text):
    model = Model()
    # The third step is said in figure 2's discussion, not in figure 1's caption or discussion.
    third = {"component": "Pe", "statement": "the grain size agrees with the width of the diffraction peaks"}
    path = json.dumps({"steps": [*PATH["steps"], third]})
    server.default = Reply(text=lambda b: path if step_of(b) == "path" else model(b))
    out = tmp_path / "gen"
    assert main(gen_args(harvest, out, server, "--limit", "1", *(["--paper-text"] if paper_text else []))) == 0
    confirm = next(prompt_of(b) for b in server.bodies if step_of(b) == "confirm")
    assert confirm.count("\nClaim ") == (3 if paper_text else 2)
    # The PDF's line breaks are joined: the sentence reads as in the paper.
    sentence = ("- The contrast varies smoothly inside each grain, which points to a low density of extended defects, "
                "and the grain size agrees with the width of the diffraction peaks measured on the same batch.")
    assert (sentence in confirm) == paper_text
    item = rows(out / "items.raw.jsonl")[0]
    assert len(item["meta"]["reasoning_path"]) == (3 if paper_text else 2)
