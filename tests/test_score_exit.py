"""How the ``benchmint score`` command ends: once every output is written and closed, its process leaves its
columns and gold index to the OS (no interpreter teardown), with the same exit status, the same output on
stdout and the exit handlers run; and what ``score --quiet`` imports, each in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmint.metrics.synthetic import mcq_dataset

# `python -m benchmint.cli ARGS` with an object whose finaliser says when the interpreter tears down, an exit
# handler registered after the command's module, and the modules loaded when the handlers run.
COMMAND = """
    import atexit, json, os, runpy, sys

    class Teardown:
        def __del__(self):
            os.write(1, b"torn down\\n")

    sentinel = Teardown()
    import benchmint.cli
    atexit.register(lambda: (print("exit handler ran"),
                             open(os.environ["MODULES_AT_EXIT"], "w").write(json.dumps(sorted(sys.modules)))))
    sys.argv = ["benchmint", *sys.argv[1:]]
    runpy.run_module("benchmint.cli", run_name="__main__", alter_sys=True)
"""


def command(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    env_modules = tmp / "modules.json"
    return subprocess.run([sys.executable, "-c", textwrap.dedent(COMMAND), *args], capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "MODULES_AT_EXIT": str(env_modules)})


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("exit")
    records = list(mcq_dataset(3000, ["wise-model", "cautious-model"], seed=3))
    gold, pred = root / "gold.jsonl", root / "pred.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for kind, r in records if kind == "gold"), encoding="utf-8")
    lines = [json.dumps(r) + "\n" for kind, r in records if kind == "pred"]
    lines.insert(10, "{not json\n")  # one bad record: exit status 1, listed in errors.jsonl
    pred.write_text("".join(lines), encoding="utf-8")
    return gold, pred


def outputs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_the_command_leaves_its_columns_to_the_os_with_status_output_and_handlers(data, tmp_path):
    from benchmint.cli import main

    gold, pred = data
    args = ["score", str(pred), "--gold", str(gold), "--task", "mcq", "--by", "domain", "--workers", "2"]
    done = command([*args, "--out", str(tmp_path / "cmd")], tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    # the table and the closing line reach the pipe whole; the handler registered after the command's module ran;
    # the interpreter did not tear down
    assert "wise-model" in done.stdout and done.stdout.rstrip().endswith("exit handler ran")
    assert f"wrote {tmp_path / 'cmd'}/scores.jsonl, summary.json, errors.jsonl" in done.stdout
    assert "torn down" not in done.stdout
    # the same files as the command called in process
    assert main([*args, "--out", str(tmp_path / "lib"), "--quiet"]) == 1
    assert outputs(tmp_path / "cmd") == outputs(tmp_path / "lib")


def test_a_clean_run_exits_0_and_a_run_that_cannot_start_2(data, tmp_path):
    gold, pred = data
    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(line for line in pred.read_text().splitlines(keepends=True) if line != "{not json\n"))
    done = command(["score", str(clean), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o"),
                    "--quiet"], tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "exit handler ran\n", "")
    # a missing gold file: the message and status 2; nothing was held, so the interpreter tears down as usual
    done = command(["score", str(clean), "--gold", str(tmp_path / "none.jsonl"), "--task", "mcq", "--out",
                    str(tmp_path / "o2"), "--quiet"], tmp_path)
    assert done.returncode == 2 and "benchmint score: error:" in done.stderr
    assert "torn down" in done.stdout


def test_score_quiet_imports_neither_the_table_nor_the_reference_stream(data, tmp_path):
    gold, pred = data
    done = command(["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "o"),
                    "--quiet"], tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    modules = set(json.loads((tmp_path / "modules.json").read_text()))
    assert "benchmint.metrics.pipeline" in modules
    assert {"benchmint.metrics.report", "benchmint.metrics.pipeline_ref"} & modules == set()


def test_main_called_from_a_program_holds_nothing(data, tmp_path):
    gold, pred = data
    code = f"""
        import json
        from benchmint import cli
        status = cli.main(["score", {str(pred)!r}, "--gold", {str(gold)!r}, "--task", "mcq", "--out",
                           {str(tmp_path / "o")!r}, "--quiet"])
        print(json.dumps([status, len(cli._HELD)]))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [1, 0]
