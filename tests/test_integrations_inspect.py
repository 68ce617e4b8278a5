"""Inspect AI tasks: `inspect eval` of each benchmark against the scripted server scores as benchmint eval +
score / grade do on the same replies."""

import io
import json
import os
import subprocess
import sys

import pytest
from PIL import Image

from benchmint.cli import main

from chat_server import ChatServer, Reply, prompt_of

pytest.importorskip("inspect_ai")

from benchmint.integrations import inspect as bm_inspect  # noqa: E402 - needs inspect_ai

CIF = """data_rocksalt
_symmetry_space_group_name_H-M 'F m -3 m'
_cell_length_a 5.64
_cell_length_b 5.64
_cell_length_c 5.64
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
_symmetry_Int_Tables_number 225
loop_
_atom_site_label
_atom_site_type_symbol
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
_atom_site_occupancy
Na Na 0 0 0 1
Cl Cl 0.5 0.5 0.5 1
"""
SIX = ["tip convolution", "thermal drift", "feedback ringing", "double tip", "piezo creep", "noise"]
FOUR = ["grain boundary", "twin", "dislocation", "pore"]

# Per benchmark: (setting, items, {marker in the prompt: the model's reply}). Each item's prompt holds its marker.
CASES = {
    "spm": (None, [
        {"id": "s1", "question": "Q-alpha: which artefacts?", "options": SIX, "answer": "A, B", "image": "fig.png",
         "domain": "STM"},
        {"id": "s2", "question": "Q-beta: which artefacts?", "options": SIX, "answer": "A, C, D", "image": "fig.png",
         "domain": "AFM"},
        {"id": "s3", "question": "Q-gamma: which artefacts?", "options": SIX, "answer": "E", "image": "fig.png",
         "domain": "STM"}],
        {"Q-alpha": "Answer: A, B", "Q-beta": "Answer: A, C", "Q-gamma": "Answer: E, F"}),
    "crystalxrd": ("full", [
        {"id": "x1", "formula": "NaCl", "cif_text": CIF, "answer": [[2, 0, 0]], "image": "fig.png"},
        {"id": "x2", "formula": "KCl", "cif_text": CIF, "answer": [[1, 1, 1], [2, 0, 0]], "image": "fig.png"},
        {"id": "x3", "formula": "LiF", "cif_text": CIF, "answer": [[2, 2, 0]], "image": "fig.png"}],
        {"NaCl": '{"max_peak_hkls": [[2, 0, 0]]}', "KCl": '{"max_peak_hkls": [[1, 1, 1], [3, 1, 1]]}',
         "LiF": "I cannot tell."}),
    "seephys": ("TO", [
        {"id": "p1", "question": "An engine does 1.2e5 J of work in 2 min. Its power?", "answer": "1 kW",
         "language": "English", "level": 2, "subject": "CM"},
        {"id": "p2", "question": "Which ray leaves the prism?", "answer": "Ray E", "language": "English", "level": 5,
         "subject": "OPT"},
        {"id": "p3", "question": "Where is the field zero?", "answer": "Both Regions II and III",
         "language": "English", "level": 4, "subject": "EM"},
        {"id": "p4", "question": "求加速度。", "answer": "2 m/s^2", "language": "Chinese", "level": 3, "subject": "CM"}],
        {"power": "P = W/t = 1000 W. <answer>1000 W</answer>", "prism": "The final answer is ray e.",
         "field zero": "<answer>regions II and III</answer>", "加速度": "<answer>3 m/s^2</answer>"}),
    "matvqa": (None, [
        {"id": "m1", "question": "Q-one: why does the grain grow?", "options": FOUR, "answer": 2, "image": "fig.png",
         "task": "causal"},
        {"id": "m2", "question": "Q-two: which is larger?", "options": FOUR, "answer": "(3)", "image": "fig.png",
         "task": "comparative"}],
        {"Q-one": "The answer is (2)", "Q-two": "The answer is (1) or (3)"}),
    "csmbench-mcq": (None, [
        {"index": 0, "options": ["cap-zero", "cap-one", "cap-two", "cap-three"], "answer": "C", "image": "fig.png",
         "scale": "Microscale"},
        {"index": 1, "options": ["cap-four", "cap-five", "cap-six", "cap-seven"], "answer": "A", "image": "fig.png",
         "scale": "AtomScale"}],
        {"cap-zero": "The answer is C", "cap-four": "B"}),
    "csmbench-open": (None, [
        {"index": 0, "caption": "Fig-zero: SEM of a porous film.", "answer": "The film shows open pores of 2 um.",
         "image": "fig.png", "scale": "Microscale"},
        {"index": 1, "caption": "Fig-one: TEM of twins.", "answer": "Twin boundaries cross the grain.",
         "image": "fig.png", "scale": "AtomScale"}],
        {"Fig-zero": "Pores of about 2 um are open in the film.", "Fig-one": "A dog runs in a park."}),
}
JUDGED = {"seephys", "csmbench-open"}
# The primary metric by hand. crystalxrd: x1 exact, x2 {111, 311} against {111, 200}: 1/3, x3 unread: 0.
# seephys: p1 (screen) and p2 (rule) right, p3 right by the judge, p4 wrong by the judge. matvqa: m2 hedges
# between two options (unparsed, wrong). csmbench-mcq: "The answer is C" is C, never the A of "answer".
BY_HAND = {"crystalxrd": ("jaccard", (1 + 1 / 3 + 0) / 3), "seephys": ("accuracy", 3 / 4),
           "matvqa": ("accuracy", 1 / 2), "csmbench-mcq": ("accuracy", 1 / 2), "csmbench-open": ("judge_score", 5.0),
           "spm": ("sip_f1", (1 + 0.6 * 0.8 + 0.6 * 0.25) / 3)}
TASKS = {"spm": "spm", "crystalxrd": "crystalxrd", "seephys": "seephys", "matvqa": "matvqa",
         "csmbench-mcq": "csmbench_mcq", "csmbench-open": "csmbench_open"}


def _reply(replies):
    def reply(body):
        prompt = prompt_of(body)
        if prompt.startswith("You are a physics professor"):  # SeePhys's judge
            return "Judgement: 1" if "regions II and III" in prompt.rsplit("Model Answer:", 1)[1] else "Judgement: 0"
        if prompt.startswith("You are grading a model's description"):  # CSMBench's judge
            return "Score: 8" if "Pores" in prompt else "2/10"
        for marker, text in replies.items():
            if marker in prompt:
                return text
        return "no marker"
    return reply


def _items(tmp_path, rows):
    buf = io.BytesIO()
    Image.new("RGB", (6, 4), "blue").save(buf, format="PNG")
    (tmp_path / "fig.png").write_bytes(buf.getvalue())
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _inspect_eval(benchmark, setting, items, server, tmp_path):
    args = [sys.executable, "-m", "inspect_ai", "eval", f"{bm_inspect.__file__}@{TASKS[benchmark]}",
            "-T", f"items={items}", "--model", "openai-api/local/m", "--log-dir", str(tmp_path / "logs"),
            "--log-format", "json", "--display", "none"]
    if setting:
        args += ["-T", f"setting={setting}"]
    if benchmark in JUDGED:
        args += ["-T", "judge_model=judge", "-T", f"judge_base_url={server.url}",
                 "-T", f"judge_cache={tmp_path / 'judge.sqlite'}"]
    env = {**os.environ, "LOCAL_BASE_URL": server.url, "LOCAL_API_KEY": "none", "INSPECT_LOG_LEVEL": "warning"}
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = (tmp_path / "logs").glob("*.json")
    data = json.loads(log.read_text())
    assert data["status"] == "success", data.get("error")
    metrics = {k: v["value"] for k, v in data["results"]["scores"][0]["metrics"].items()}
    samples = {str(s["id"]): next(iter(s["scores"].values())) for s in data["samples"]}
    return metrics, samples


def _benchmint_eval(benchmark, setting, items, server, tmp_path):
    out = tmp_path / "bm"
    argv = ["eval", str(items), "--benchmark", benchmark, "--model", "m", "--base-url", server.url, "--out", str(out),
            "--retry-delay", "0"]
    if setting:
        argv += ["--setting", setting]
    argv += ["--grade", "--judge-model", "judge", "--judge-base-url", server.url] if benchmark in JUDGED else \
        ["--score"] if benchmark in ("spm", "crystalxrd") else ["--grade"]
    main(argv)  # exit 1 when an answer is undecided; compared below either way
    return out


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("name", list(CASES))
def test_inspect_eval_scores_as_benchmint_eval_and_score_or_grade(name, tmp_path):
    benchmark = name
    setting, rows, replies = CASES[benchmark]
    items = _items(tmp_path, rows)
    with ChatServer() as server:
        server.default = Reply(text=_reply(replies))
        metrics, samples = _inspect_eval(benchmark, setting, items, server, tmp_path)
        out = _benchmint_eval(benchmark, setting, items, server, tmp_path)
    assert len(samples) == len(rows)
    key, value = BY_HAND[benchmark]
    assert metrics[key] == pytest.approx(value)
    if benchmark in ("spm", "crystalxrd"):
        scores = {r["id"]: r for r in _lines(out / "scores" / "scores.jsonl")}
        summary = json.loads((out / "scores" / "summary.json").read_text())["models"]["m"]["metrics"]
        for rid, s in samples.items():
            for k in bm_inspect.SET_METRICS:
                assert s["value"][k] == pytest.approx(scores[rid][k]), (rid, k)
        for k in bm_inspect.SET_METRICS:
            assert metrics[k] == pytest.approx(summary[k]["mean"]), k
        return
    grades = {g["id"]: g for g in _lines(out / "grades" / "grades.jsonl")}
    summary = json.loads((out / "grades" / "summary.json").read_text())["models"][0]
    decided = {rid: s["value"]["score"] for rid, s in samples.items() if "score" in s["value"]}
    assert decided == {rid: g["score"] for rid, g in grades.items()}
    if benchmark == "csmbench-open":
        for key in ("sts", "judge_score"):
            assert metrics[key] == pytest.approx(summary[key]["mean"]), key
    else:
        assert metrics["accuracy"] == pytest.approx(summary["accuracy"]["mean"])
        assert metrics["accuracy_undecided_as_wrong"] == pytest.approx(summary["accuracy_undecided_as_wrong"])


def test_worked_values(tmp_path):
    """The Inspect metrics by hand for two benchmarks (not only equal to benchmint's: right)."""
    # spm: s1 exact (1), s2 {A,C} of {A,C,D}: SPC 2/3, s3 {E,F} of {E}: a wrong option, SPC 0
    setting, rows, replies = CASES["spm"]
    items = _items(tmp_path, rows)
    with ChatServer() as server:
        server.default = Reply(text=_reply(replies))
        metrics, samples = _inspect_eval("spm", setting, items, server, tmp_path)
    assert metrics["em"] == pytest.approx(1 / 3) and metrics["spc"] == pytest.approx((1 + 2 / 3) / 3)
    assert metrics["jaccard"] == pytest.approx((1 + 2 / 3 + 1 / 2) / 3)
    assert metrics["domain=STM"] == pytest.approx(samples["s1"]["value"]["sip_f1"] / 2
                                                  + samples["s3"]["value"]["sip_f1"] / 2)


def test_unreadable_items_are_left_out_and_listed(tmp_path):
    rows = [{"id": "p1", "question": "Q?", "answer": "1 m", "language": "English"},
            {"id": "p2", "question": "Q?", "language": "English"},  # no answer
            {"id": "p3", "question": "Q?", "answer": "2 m", "language": "Klingon"}]
    _, setting, samples, by_id, errors = bm_inspect.load("seephys", _items(tmp_path, rows), "TO")
    assert [s.id for s in samples] == ["p1"] and list(by_id) == ["p1"]
    assert [(e["location"].rsplit(":", 1)[1], e["field"]) for e in errors] == [("2", "answer"), ("3", "language")]


@pytest.mark.slow
def test_inspect_eval_with_the_local_small_model(tmp_path):
    """SeePhys TO through `inspect eval` against SmolLM2-135M (benchmint[local]): each sample's score is the one
    benchmint gives the same reply (score_table on the replies of the log)."""
    pytest.importorskip("llama_cpp")
    from benchmint.integrations.tables import score_table
    from benchmint.models.local import LocalServer

    rows = [{"id": "p1", "question": "A 2.0 kg cart is pushed with 6.0 N. Its acceleration?", "answer": "3.0 m/s^2",
             "language": "English", "sig_figs": 2},
            {"id": "p2", "question": "What is 2 + 2? Give the number.", "answer": "4", "language": "English"}]
    items = _items(tmp_path, rows)
    (tmp_path / "protocol.json").write_text(json.dumps({"max_tokens": 48}))
    with LocalServer(log=tmp_path / "server.log") as server:
        args = [sys.executable, "-m", "inspect_ai", "eval", f"{bm_inspect.__file__}@seephys", "-T", f"items={items}",
                "-T", "setting=TO", "-T", f"protocol={tmp_path / 'protocol.json'}", "--model",
                f"openai-api/local/{server.model}", "--max-retries", "2", "--log-dir", str(tmp_path / "logs"), "--log-format", "json",
                "--display", "none"]
        env = {**os.environ, "LOCAL_BASE_URL": server.base_url, "LOCAL_API_KEY": "none"}
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (log,) = (tmp_path / "logs").glob("*.json")
    data = json.loads(log.read_text())
    replies = {str(s["id"]): s["output"]["choices"][0]["message"]["content"] for s in data["samples"]}
    replies = {k: v if isinstance(v, str) else "".join(p.get("text", "") for p in v) for k, v in replies.items()}
    assert all(r.strip() for r in replies.values())
    table = [{**r, "prediction": replies[r["id"]]} for r in rows]
    own = {r["id"]: r["score"] for r in score_table(table, "seephys", workers=1).rows}
    got = {str(s["id"]): next(iter(s["scores"].values()))["value"].get("score") for s in data["samples"]}
    assert got == own
