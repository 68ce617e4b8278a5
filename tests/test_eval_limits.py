"""benchmint eval's budgets and accounting across invocations into one --out, and its budget messages."""

import json

import pytest
from test_eval import read, reply_for, spm_items  # noqa: F401 - the items fixture

from benchmint.cli import main

from chat_server import ChatServer, Reply


@pytest.fixture
def server():
    with ChatServer() as s:
        s.default = Reply(text=reply_for, prompt_tokens=10, completion_tokens=7)
        yield s


@pytest.fixture
def priced(tmp_path):
    # Prompts are free and each output token costs $1: a call's worst case is its max_tokens in dollars whatever
    # its prompt, and a reply of 7 tokens is charged $7.
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"tiny": {"input": 0, "output": 1_000_000}}))
    protocol = tmp_path / "protocol.json"
    protocol.write_text(json.dumps({"max_tokens": 100}))
    return ["--prices", str(prices), "--protocol", str(protocol)]


def run_eval(items, out, server, *extra):
    return main(["eval", str(items), "--benchmark", "spm", "--model", "tiny", "--base-url", server.url,
                 "--out", str(out), "--retry-delay", "0", *extra])


def test_budgets_and_run_json_cover_every_invocation_into_one_out(spm_items, server, tmp_path, priced, capsys):  # noqa: F811
    out = tmp_path / "run"
    assert run_eval(spm_items, out, server, *priced, "--limit", "2", "--max-cost", "1000") == 0
    assert server.count == 2  # q1, q2: $14 charged
    # Given again, $110 covers the $14 spent: a worst case of $100 does not fit, nothing is asked.
    assert run_eval(spm_items, out, server, *priced, "--limit", "4", "--max-cost", "110") == 1
    assert server.count == 2
    budget_rows = [e for e in read(out / "errors.jsonl") if e.get("cause") == "budget"]
    assert [e["id"] for e in budget_rows] == ["q3", "q4"]
    assert "$14.0000 charged over 2 invocations" in budget_rows[0]["message"]
    run = json.loads((out / "run.json").read_text())["engine"]
    assert run["invocations"] == 2 and run["total"]["requests"] == 2 and run["total"]["cost_usd"] == 14.0
    # The user says this invocation's spending alone counts: $7 + $100 fits in $110, and so does the second call.
    capsys.readouterr()
    assert run_eval(spm_items, out, server, *priced, "--limit", "4", "--max-cost", "110",
                    "--budget-per-invocation") == 1  # q4's answer cannot be read (listed), as in test_eval
    assert server.count == 4
    run = json.loads((out / "run.json").read_text())["engine"]
    assert run["invocations"] == 3 and run["total"]["requests"] == 4 and run["total"]["cost_usd"] == 28.0
    assert run["total"]["prompt_tokens"] == 40 and run["this_invocation"]["cost_usd"] == 14.0
    assert run["budget"] == {"max_cost_usd": 110.0, "max_tokens": None, "covers": "invocation",
                             "charged_cost_usd": 14.0, "charged_tokens": 34}
    printed = capsys.readouterr().out
    assert "over 3 invocations: 4 requests" in printed and "tokens 40 in / 28 out; cost $28.0000" in printed
    # A rerun that asks nothing still reports what the run cost.
    assert run_eval(spm_items, out, server, *priced, "--limit", "4") == 1 and server.count == 4
    run = json.loads((out / "run.json").read_text())["engine"]
    assert run["invocations"] == 4 and run["total"]["cost_usd"] == 28.0


def test_replies_without_usage_are_reported_unknown(spm_items, server, tmp_path, priced, capsys):  # noqa: F811
    server.default = Reply(text=reply_for, usage=False)
    assert run_eval(spm_items, tmp_path / "run", server, *priced, "--max-cost", "1000") == 1
    run = json.loads((tmp_path / "run" / "run.json").read_text())["engine"]
    assert run["total"]["unknown_usage"] == 4 and run["total"]["cost_usd"] is None
    assert run["total"]["prompt_tokens"] is None and run["budget"]["charged_cost_usd"] == 400.0
    printed = capsys.readouterr().out
    assert "tokens unknown (4 calls without believable usage" in printed and "cost unknown" in printed
    assert "charged to the budget" in printed and "$400.0000" in printed


def test_a_budget_without_max_tokens_names_protocol_and_leaves_no_files(spm_items, server, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    assert run_eval(spm_items, out, server, "--max-tokens", "20000") == 2
    err = capsys.readouterr().err
    assert "spm's protocol sets no max_tokens" in err and '--protocol FILE holding {"max_tokens": N}' in err
    assert not out.exists() and server.count == 0


def test_a_budget_below_one_requests_worst_case_says_so(spm_items, server, tmp_path, capsys):  # noqa: F811
    protocol = tmp_path / "protocol.json"
    protocol.write_text(json.dumps({"max_tokens": 8192}))
    out = tmp_path / "run"
    assert run_eval(spm_items, out, server, "--protocol", str(protocol), "--max-tokens", "512") == 2
    err = capsys.readouterr().err
    assert ("one request's worst case (max_tokens 8,192 from spm's protocol, plus its prompt) exceeds the whole "
            "token budget (--max-tokens 512)") in err
    assert not out.exists() and server.count == 0
