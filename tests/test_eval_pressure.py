"""benchmint eval under pressure, against a real chat-completions server on 127.0.0.1: unreadable images, items
files that name files outside their folder, a budget stop, Ctrl-C, and the options a rerun must honour."""

import io
import json
import os
import struct
import zlib

import pytest
from killing import wait_until_recorded
from PIL import Image

from benchmint import benchmarks
from benchmint.benchmarks.base import ItemError
from benchmint.cli import main

from chat_server import ChatServer, Reply, prompt_of


def png_bytes(shade, size=(32, 24)):
    buf = io.BytesIO()
    Image.new("L", size, shade).save(buf, format="PNG")
    return buf.getvalue()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def huge_png() -> bytes:
    """A PNG whose header says 20000x20000 (400 Mpixel: past Pillow's decompression-bomb limit)."""
    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b"")


def corrupt_png() -> bytes:
    """A valid PNG header (IHDR, right CRC) over image data that is not zlib: opens, does not decode."""
    ihdr = struct.pack(">IIBBBBB", 32, 24, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"garbage, not deflate data" * 4)
            + chunk(b"IEND", b""))


def write_items(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


OPTIONS = ["one", "two", "three", "four"]
CIF = """data_NaCl
_symmetry_space_group_name_H-M 'F m -3 m'
_cell_length_a 5.64
_cell_length_b 5.64
_cell_length_c 5.64
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
_symmetry_Int_Tables_number 225
loop_
_symmetry_equiv_pos_as_xyz
x,y,z
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

# one row per benchmark with its image in ``image``: (benchmark, setting, row builder, a reply it can read)
ROWS = {
    "spm": (None, lambda i, img: {"id": i, "question": f"Q {i}?", "options": OPTIONS, "answer": "A", "image": img},
            "Answer: A"),
    "matvqa": (None, lambda i, img: {"id": i, "question": f"Q {i}?", "options": OPTIONS, "answer": 1,
                                     "images": [img]}, "The answer is (1)"),
    "csmbench-mcq": (None, lambda i, img: {"id": i, "image": img, "answer": "A", "options": [
        {"label": k, "caption": f"caption {k} of {i}"} for k in "ABCD"]}, "A"),
    "csmbench-open": (None, lambda i, img: {"id": i, "image": img, "caption": f"A figure {i}.",
                                            "answer": "The reference paragraph."}, "An analysis."),
    "seephys": ("TV", lambda i, img: {"id": i, "question": f"Q {i}?", "answer": "1 m", "language": "English",
                                      "images": [img]}, "<answer>1 m</answer>"),
    "crystalxrd": ("full", lambda i, img: {"id": i, "answer": [[2, 0, 0]], "formula": f"NaCl ({i})", "cif_text": CIF,
                                           "hkl_convention": "3-index", "image": img},
                   '{"max_peak_hkls": [[2, 0, 0]]}'),
}


def run_eval(bench, items, out, server, *extra):
    setting = ROWS[bench][0]
    return main(["eval", str(items), "--benchmark", bench, "--model", "m", "--base-url", server.url, "--out", str(out),
                 "--retry-delay", "0", *(["--setting", setting] if setting else []), *extra])


@pytest.mark.parametrize("bench", sorted(ROWS))
def test_an_unreadable_image_is_that_items_bad_prompt_row_in_every_benchmark(tmp_path, bench):
    (tmp_path / "ok.png").write_bytes(png_bytes(90))
    (tmp_path / "huge.png").write_bytes(huge_png())
    (tmp_path / "corrupt.png").write_bytes(corrupt_png())
    row = ROWS[bench][1]
    items = write_items(tmp_path / "items.jsonl", [row("good", "ok.png"), row("huge", "huge.png"),
                                                    row("corrupt", "corrupt.png"), row("good2", "ok.png")])
    with ChatServer() as server:
        server.default = Reply(text=ROWS[bench][2])
        assert run_eval(bench, items, tmp_path / "out", server) == 1
        assert server.count == 2  # the corrupt image never reached the server
    assert [p["id"] for p in read(tmp_path / "out" / "predictions.jsonl")] == ["good", "good2"]
    errors = read(tmp_path / "out" / "errors.jsonl")
    assert [(e["kind"], e["id"]) for e in errors] == [("bad_prompt", "huge"), ("bad_prompt", "corrupt")]
    assert all("not a readable image" in e["message"] and e["location"].startswith(str(items)) for e in errors)


# ---- paths in items files stay inside the items file's folder


@pytest.fixture
def hostile(tmp_path):
    """An items folder, a secret beside it, and a symlink inside pointing at the secret."""
    folder = tmp_path / "items"
    outside = tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "ok.png").write_bytes(png_bytes(90))
    (outside / "secret.png").write_bytes(png_bytes(10))
    (outside / "secret.txt").write_text("TOP SECRET API KEY sk-12345")
    (outside / "secret.cif").write_text(CIF)
    (folder / "link.png").symlink_to(outside / "secret.png")
    (folder / "link.txt").symlink_to(outside / "secret.txt")
    os.mkfifo(folder / "fifo.png")
    os.mkfifo(folder / "fifo.txt")
    return folder, outside


def errors_of(bench, path, setting=None, allowed=()):
    out = {}
    for _, item in benchmarks.get(bench).read_items(path, setting, allowed=allowed):
        if isinstance(item, ItemError):
            out[item.location.rsplit(":", 1)[1]] = (item.field, item.message)
    return out


# (benchmark, setting, field, row with the path in that field)
PATH_FIELDS = [
    ("spm", None, "image", lambda p: ROWS["spm"][1]("x", p)),
    ("matvqa", None, "images", lambda p: ROWS["matvqa"][1]("x", p)),
    ("matvqa", "full_context", "context_file", lambda p: {**ROWS["matvqa"][1]("x", "ok.png"), "context_file": p}),
    ("csmbench-mcq", None, "image", lambda p: ROWS["csmbench-mcq"][1]("x", p)),
    ("csmbench-open", None, "file_name", lambda p: {**ROWS["csmbench-open"][1]("x", "ok.png"), "image": None,
                                                    "file_name": p}),
    ("seephys", "TV", "images", lambda p: ROWS["seephys"][1]("x", p)),
    ("seephys", "VO", "composite_image", lambda p: {**ROWS["seephys"][1]("x", "ok.png"), "composite_image": p}),
    ("crystalxrd", "full", "image", lambda p: ROWS["crystalxrd"][1]("x", p)),
    ("crystalxrd", "full", "file_name", lambda p: {**ROWS["crystalxrd"][1]("x", "ok.png"), "image": None,
                                                   "file_name": p}),
    ("crystalxrd", "cif_only", "cif", lambda p: {**ROWS["crystalxrd"][1]("x", "ok.png"), "cif_text": None,
                                                 "cif": p}),
]


@pytest.mark.parametrize("bench,setting,field,row", PATH_FIELDS, ids=[f"{b}-{f}" for b, _, f, _ in PATH_FIELDS])
def test_every_path_field_stays_inside_the_items_folder(hostile, bench, setting, field, row):
    folder, outside = hostile
    text = field in ("context_file", "cif")
    secret = "secret.cif" if field == "cif" else "secret.txt" if text else "secret.png"
    link, fifo = ("link.txt", "fifo.txt") if text else ("link.png", "fifo.png")
    paths = [f"../outside/{secret}", str(outside / secret), link, fifo, "/dev/zero"]
    items = write_items(folder / "items.jsonl", [{**row(p), "id": f"x{k}"} for k, p in enumerate(paths)])
    got = errors_of(bench, items, setting)
    assert sorted(got) == ["1", "2", "3", "4", "5"]
    assert {f for f, _ in got.values()} == {field}
    for line in ("1", "2", "3", "5"):  # ../, absolute, a symlink inside to a file outside, a device
        assert "is outside the items folder" in got[line][1] and "--allow-paths-outside" in got[line][1]
    assert f"resolves to {(folder / link).resolve()}" in got["3"][1]
    assert "is a FIFO, not a regular file" in got["4"][1]
    # allowed by name: the files outside are taken; a FIFO or a device never is
    got = errors_of(bench, items, setting, allowed=[outside])
    assert sorted(got) == ["4", "5"]
    assert "FIFO" in got["4"][1] and "outside the items folder" in got["5"][1]
    got = errors_of(bench, items, setting, allowed=[outside, "/dev"])
    assert "a character device, not a regular file" in got["5"][1]


def test_a_context_file_outside_the_folder_never_reaches_the_server(hostile, tmp_path):
    folder, outside = hostile
    row = ROWS["matvqa"][1]
    items = write_items(folder / "items.jsonl", [
        {**row("q1", "ok.png"), "context_file": "../outside/secret.txt"},
        {**row("q2", "ok.png"), "context_file": "link.txt"},
        {**row("q3", "../outside/secret.png"), "context": "Inline text."},
        {**row("q4", "ok.png"), "context": "Inline text."}])
    with ChatServer() as server:
        server.default = Reply(text="The answer is (1)")
        argv = ["eval", str(items), "--benchmark", "matvqa", "--setting", "full_context", "--model", "m",
                "--base-url", server.url, "--retry-delay", "0"]
        assert main([*argv, "--out", str(tmp_path / "a")]) == 1
        assert "sk-12345" not in json.dumps(server.bodies) and server.count == 1
        assert [e["id"] if "id" in e else e["location"].rsplit(":", 1)[1] for e in
                read(tmp_path / "a" / "errors.jsonl")] == ["1", "2", "3"]
        assert main([*argv, "--out", str(tmp_path / "b"), "--allow-paths-outside", str(outside)]) == 0
        assert "sk-12345" in json.dumps(server.bodies)  # allowed by name, it is sent


# ---- a budget stop, Ctrl-C


def spm_items(tmp_path, n, prefix="Q"):
    (tmp_path / "fig.png").write_bytes(png_bytes(90))
    return write_items(tmp_path / "items.jsonl", [
        {"id": f"q{i:02d}", "question": f"{prefix} {i}: which?", "options": OPTIONS, "answer": "A",
         "image": "fig.png"} for i in range(n)])


def test_a_budget_stop_writes_every_finished_item_and_lists_the_others_as_budget(tmp_path, capsys):
    items = spm_items(tmp_path, 20)
    (tmp_path / "protocol.json").write_text(json.dumps({"max_tokens": 1000}))
    out = tmp_path / "out"
    argv = ["eval", str(items), "--benchmark", "spm", "--model", "m", "--out", str(out), "--retry-delay", "0",
            "--protocol", str(tmp_path / "protocol.json"), "--concurrency", "1", "--max-tokens", "3500"]
    with ChatServer() as server:
        server.default = Reply(text="Answer: A", prompt_tokens=10, completion_tokens=1000)  # the whole max_tokens
        assert main([*argv, "--base-url", server.url]) == 1
        asked = dict(server.by_prompt)
        assert "Traceback" not in capsys.readouterr().err
        preds = read(out / "predictions.jsonl")
        errors = read(out / "errors.jsonl")
        assert 1 <= len(preds) < 20 and len(preds) == len(asked)
        assert [e["cause"] for e in errors] == ["budget"] * (20 - len(preds))
        # every item has exactly one row, in item order: the answered first, then those the budget left
        assert [p["id"] for p in preds] + [e["id"] for e in errors] == [f"q{i:02d}" for i in range(20)]
        run = json.loads((out / "run.json").read_text())
        assert run["engine"]["stop_reason"] == "max_tokens" and run["counts"]["predictions"] == len(preds)
        # the budget covers every invocation into this --out: a plain rerun has nothing left to spend
        server.reset()
        server.default = Reply(text="Answer: A", prompt_tokens=10, completion_tokens=1000)
        assert main([*argv, "--base-url", server.url]) == 1
        assert server.count == 0 and read(out / "predictions.jsonl") == preds
        # a fresh budget for this invocation asks only what the first did not get: nothing answered is paid again
        main([*argv, "--base-url", server.url, "--budget-per-invocation"])
        assert server.count and not set(server.by_prompt) & set(asked)
    again = read(out / "predictions.jsonl")
    assert again[:len(preds)] == preds and len(again) > len(preds)


def test_ctrl_c_writes_the_finished_items_and_says_how_to_resume(tmp_path):
    import signal
    import sqlite3
    import subprocess
    import sys

    items = spm_items(tmp_path, 60)
    out = tmp_path / "out"
    with ChatServer() as server:
        server.default = Reply(text="Answer: A", delay=0.05)
        cmd = [sys.executable, "-m", "benchmint.cli", "eval", str(items), "--benchmark", "spm", "--model", "m",
               "--base-url", server.url, "--concurrency", "2", "--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until_recorded(out / "ledger.sqlite", 8)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "rerun the same command to resume" in lines[0], err
        with sqlite3.connect(out / "ledger.sqlite") as db:
            recorded = db.execute("SELECT COUNT(*) FROM units WHERE ok = 1").fetchone()[0]
        preds = read(out / "predictions.jsonl")
        assert len(preds) == recorded and 8 <= recorded < 60, (len(preds), recorded, err)
        assert len({p["id"] for p in preds}) == len(preds)
        asked = server.count
        assert subprocess.run(cmd, capture_output=True).returncode == 0
        assert server.count - asked <= 60 - recorded + 2  # only what was not done (and what was in flight)
    assert [p["id"] for p in read(out / "predictions.jsonl")] == [f"q{i:02d}" for i in range(60)]


# ---- options a rerun into the same --out must honour


def spm_argv(items, out, server, *extra):
    return ["eval", str(items), "--benchmark", "spm", "--model", "m", "--base-url", server.url, "--out", str(out),
            "--retry-delay", "0", *extra]


def answer_by_question(body):
    text = prompt_of(body)
    return "no idea" if text.startswith("Q 3:") else "Answer: A"


def test_refresh_asks_again_on_a_rerun_into_the_same_out(tmp_path):
    items = spm_items(tmp_path, 4)
    with ChatServer() as server:
        server.default = Reply(text="Answer: A")
        assert main(spm_argv(items, tmp_path / "out", server)) == 0
        assert main(spm_argv(items, tmp_path / "out", server)) == 0
        assert server.count == 4  # a plain rerun asks nothing
        server.default = Reply(text="Answer: B")
        assert main(spm_argv(items, tmp_path / "out", server, "--refresh")) == 0
        assert server.count == 8
    assert [p["output"] for p in read(tmp_path / "out" / "predictions.jsonl")] == ["Answer: B"] * 4


def test_more_answer_attempts_on_a_rerun_ask_again_what_ran_out_of_attempts(tmp_path):
    items = spm_items(tmp_path, 4)
    with ChatServer() as server:
        server.default = Reply(text=answer_by_question)
        assert main(spm_argv(items, tmp_path / "out", server)) == 1  # SPM-Bench's protocol asks once
        assert server.count == 4
        assert main(spm_argv(items, tmp_path / "out", server, "--answer-attempts", "3")) == 1
        assert server.count == 6  # q03 twice more; the others were answered
        assert main(spm_argv(items, tmp_path / "out", server, "--answer-attempts", "3")) == 1
        assert server.count == 6
    q3 = [p for p in read(tmp_path / "out" / "predictions.jsonl") if p["id"] == "q03"]
    assert q3[0]["attempts"] == 3


def test_a_seed_is_sent_and_keyed_with_one_repeat(tmp_path):
    items = spm_items(tmp_path, 2)
    with ChatServer() as server:
        server.default = Reply(text="Answer: A")
        assert main(spm_argv(items, tmp_path / "out", server)) == 0
        assert [b.get("seed") for b in server.bodies] == [None, None]  # none given, none sent
        assert main(spm_argv(items, tmp_path / "out", server, "--seed", "7")) == 0
        assert [b.get("seed") for b in server.bodies[2:]] == [7, 7]
        assert main(spm_argv(items, tmp_path / "out", server, "--seed", "7")) == 0
        assert server.count == 4  # the same seed: answered already
        assert main(spm_argv(items, tmp_path / "out", server, "--seed", "8")) == 0
        assert [b.get("seed") for b in server.bodies[4:]] == [8, 8]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (run["seed"], run["seeds_sent"]) == (8, [8])


def test_a_second_model_into_a_used_out_is_refused_and_the_first_kept(tmp_path, capsys):
    items = spm_items(tmp_path, 2)
    out = tmp_path / "out"
    with ChatServer() as server:
        server.default = Reply(text="Answer: A")
        assert main(spm_argv(items, out, server)) == 0
        first = (out / "predictions.jsonl").read_bytes()
        capsys.readouterr()
        argv = spm_argv(items, out, server)
        argv[argv.index("m")] = "other"
        assert main(argv) == 2
        assert server.count == 2
    err = capsys.readouterr().err
    assert "holds the run of spm with model 'm'" in err and "give this run its own --out" in err
    assert (out / "predictions.jsonl").read_bytes() == first


def test_repeats_are_scored_with_their_mean_and_spread(tmp_path, capsys):
    items = spm_items(tmp_path, 4)

    def by_seed(body):  # seed 0 answers everything right, seed 1 half of it, seed 2 nothing
        right = {0: 4, 1: 2, 2: 0}[body["seed"]]
        return "Answer: A" if int(prompt_of(body).split()[1].rstrip(":")) < right else "Answer: B"

    with ChatServer() as server:
        server.default = Reply(text=by_seed)
        assert main(spm_argv(items, tmp_path / "out", server, "--repeats", "3", "--score")) == 0
    spread = json.loads((tmp_path / "out" / "scores" / "repeats.json").read_text())
    em = spread["metrics"]["em"]
    assert spread["model"] == "m" and spread["repeats"] == 3
    # exact match per repeat: 1, 0.5, 0 -> mean 0.5, sample standard deviation 0.5
    assert (em["mean"], em["sd"], em["min"], em["max"]) == (0.5, 0.5, 0.0, 1.0)
    assert "across 3 repeats of m" in capsys.readouterr().out


def test_a_second_eval_into_an_out_in_use_is_refused(tmp_path):
    import subprocess
    import sys

    items = spm_items(tmp_path, 30)
    out = tmp_path / "out"
    with ChatServer() as server:
        server.default = Reply(text="Answer: A", delay=0.1)
        cmd = [sys.executable, "-m", "benchmint.cli", *spm_argv(items, out, server, "--concurrency", "1")]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_recorded(out / "ledger.sqlite", 1)
        second = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.wait(60) == 0
        assert server.count == 30  # every item asked once
    assert second.returncode == 2
    assert f"{out} is in use by another benchmint eval (pid {proc.pid})" in second.stderr


def test_allowed_folders_carry_over_to_the_chained_grading(hostile, tmp_path):
    folder, outside = hostile
    items = write_items(folder / "items.jsonl", [ROWS["matvqa"][1](f"q{i}", "../outside/secret.png")
                                                 for i in range(2)])
    with ChatServer() as server:
        server.default = Reply(text="The answer is (1)")
        argv = ["eval", str(items), "--benchmark", "matvqa", "--model", "m", "--base-url", server.url,
                "--retry-delay", "0", "--allow-paths-outside", str(outside), "--grade"]
        assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "grades" / "summary.json").read_text())
    assert summary["models"][0]["graded"] == 2 and summary["models"][0]["accuracy"]["mean"] == 1.0


def test_a_budget_stop_over_coinciding_prompts_gives_each_item_one_row(tmp_path):
    (tmp_path / "fig.png").write_bytes(png_bytes(90))
    items = write_items(tmp_path / "items.jsonl", [
        {"id": f"q{i:02d}", "question": f"Q {i // 2}: which?", "options": OPTIONS, "answer": "A", "image": "fig.png"}
        for i in range(12)])
    (tmp_path / "protocol.json").write_text(json.dumps({"max_tokens": 1000}))
    out = tmp_path / "out"
    with ChatServer() as server:
        server.default = Reply(text="Answer: A", prompt_tokens=10, completion_tokens=1000)
        assert main(spm_argv(items, out, server, "--protocol", str(tmp_path / "protocol.json"), "--concurrency", "1",
                             "--max-tokens", "3500")) == 1
        asked = server.count
    preds, errors = read(out / "predictions.jsonl"), read(out / "errors.jsonl")
    assert len(preds) == 2 * asked and {e["cause"] for e in errors} == {"budget"}
    assert [p["id"] for p in preds] + [e["id"] for e in errors] == [f"q{i:02d}" for i in range(12)]
