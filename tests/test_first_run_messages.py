"""What a first run prints: each cause said once in words, the files named where they are, progress that logs."""

from __future__ import annotations

import pytest
from test_eval import read, run_eval, server, spm_items  # noqa: F401 - fixtures

from benchmint.models.call import CAUSES, say_failure


def test_an_unreadable_reply_is_said_once_in_words(spm_items, server, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    assert run_eval(spm_items, out, server) == 1
    printed = capsys.readouterr().out.splitlines()
    # q4's reply ("no idea") has no option: the line says so once, without the parser's exception
    assert "  q4: no answer could be read from the reply (after 1 answer attempt)" in printed
    assert not [line for line in printed if "unparseable" in line or "Error" in line]
    # the error row keeps the particulars: the parser's exception, said once
    row = next(e for e in read(out / "errors.jsonl") if e.get("id") == "q4")
    assert row["cause"] == "unparseable"
    assert row["message"].startswith("ValueError: ") and row["message"].count("ValueError") == 1
    assert "unparseable" not in row["message"] and row["message"].endswith("(after 1 answer attempt)")
    # the count of errors names the file it counts
    summary_line = next(line for line in printed if "predictions" in line and "errors" in line)
    assert summary_line.endswith(f"2 errors in {out / 'errors.jsonl'}")


@pytest.mark.parametrize("cause", CAUSES)
def test_every_cause_has_words_and_never_repeats_itself(cause):
    detail = "HTTP 500: scripted failure" if cause == "http_status" else "something particular"
    line = say_failure(cause, detail)
    assert line and not line.startswith(f"{cause}:")
    assert line.count(cause) <= (1 if cause in detail else 0)
