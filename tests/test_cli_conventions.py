"""The command line's conventions, checked over every command the parser has (commands added later included)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import benchmint
from benchmint.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
# Actions that carry no value of their own: a flag is off unless given, so it has no default to state.
_NO_VALUE = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
             argparse._AppendConstAction, argparse._CountAction, argparse._HelpAction, argparse._VersionAction,
             argparse.BooleanOptionalAction)


def _commands(parser: argparse.ArgumentParser, prefix: str = "benchmint"):
    """(command path, its parser) for the root and every subcommand, at any depth."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, f"{prefix} {name}")


def _problems(parser: argparse.ArgumentParser) -> list[str]:
    problems = []
    for command, p in _commands(parser):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction | argparse._HelpAction | argparse._VersionAction):
                continue
            name = f"{command} {'/'.join(a.option_strings) or a.dest}"
            if not a.help or a.help == argparse.SUPPRESS:
                problems.append(f"{name}: no help")
            elif a.option_strings and not a.required and not isinstance(a, _NO_VALUE) \
                    and not re.search(r"\bdefault\b", a.help):
                problems.append(f"{name}: the help does not state the default")
    return problems


def test_every_option_of_every_command_has_help_stating_its_default():
    assert _problems(build_parser()) == []


def test_the_walk_finds_what_it_checks():
    # The check itself: an option without help and one without its default are both reported, in a nested command.
    parser = argparse.ArgumentParser(prog="benchmint")
    nested = parser.add_subparsers().add_parser("x").add_subparsers().add_parser("y")
    nested.add_argument("--quiet-one")
    nested.add_argument("--n", type=int, default=3, help="how many")
    nested.add_argument("--flag", action="store_true", help="a flag")
    nested.add_argument("--m", type=int, default=3, help="how many (default 3)")
    assert _problems(parser) == ["benchmint x y --quiet-one: no help",
                                 "benchmint x y --n: the help does not state the default"]


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert capsys.readouterr().out.strip() == f"benchmint {project['version']}" == f"benchmint {benchmint.__version__}"


def test_bare_command_prints_the_help_as_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "benchmint.cli"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("usage: benchmint")
    # the whole help, with every command listed, not argparse's one-line error
    assert "the following arguments are required" not in done.stderr
    for command in ("score", "eval", "grade", "generate", "build", "serve-local", "demo"):
        assert f"    {command}" in done.stderr


def test_eval_usage_says_model_or_baseline(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    assert "(--model NAME --base-url URL | --baseline)" in " ".join(usage.split())


@pytest.mark.parametrize("argv, message", [
    (["--benchmark", "crystalxrd", "--out", "o"], "one of the arguments --model --baseline is required"),
    (["--benchmark", "crystalxrd", "--out", "o", "--model", "m"], "--base-url is required"),
    (["--benchmark", "crystalxrd", "--out", "o", "--model", "m", "--baseline"], "not allowed with argument"),
])
def test_eval_refuses_a_run_without_a_model_or_baseline(tmp_path, capsys, argv, message):
    items = tmp_path / "items.jsonl"
    items.write_text("", encoding="utf-8")
    argv = [a if a != "o" else str(tmp_path / "o") for a in argv]
    try:
        status = main(["eval", str(items), *argv])
    except SystemExit as exit_:  # refused by the parser
        status = exit_.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_by_before_the_predictions_leaves_them_to_score(tmp_path, capsys):
    from importlib.resources import files

    samples = files("benchmint") / "samples"
    pred, gold = str(samples / "mcq_pred.jsonl"), str(samples / "mcq_gold.jsonl")
    forms = {"repeated, before the file": ["--by", "domain", "--by", "level", pred],
             "comma-separated, before the file": ["--by", "domain,level", pred],
             "after the file": [pred, "--by", "domain", "--by", "level"]}
    summaries = {}
    for name, args in forms.items():
        out = tmp_path / name.replace(" ", "_").replace(",", "")
        assert main(["score", "--task", "mcq", *args, "--gold", gold, "--out", str(out), "--quiet",
                     "--bootstrap", "1000", "--workers", "1"]) == 0, name
        summaries[name] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    first = summaries["repeated, before the file"]
    assert sorted(first["models"]["bold-model"]["by"]) == ["domain", "level"]
    for name, summary in summaries.items():
        assert summary["models"] == first["models"], name


@pytest.mark.parametrize("command", ["score", "grade"])
def test_by_reads_the_same_in_score_and_grade(command):
    fixed = {"score": ["--task", "mcq"], "grade": ["--benchmark", "matvqa"]}[command]
    parser = build_parser(command)
    for by, expected in ((["--by", "a", "--by", "b"], ["a", "b"]), (["--by", "a,b"], ["a", "b"]),
                         (["--by", "a, b", "--by", "c"], ["a", "b", "c"]), (["--by", ""], [])):
        args = parser.parse_args([command, *by, "P.jsonl", "--gold", "G", "--out", "O", *fixed])
        assert (args.pred, args.by) == (["P.jsonl"], expected)
