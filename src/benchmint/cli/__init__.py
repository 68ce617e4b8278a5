"""The ``benchmint`` command: one module per subcommand (its parser and its ``run``), the demo apart."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
import warnings

# benchmint does no large matrix products; idle BLAS worker threads would only
# compete with its own threads for the cores. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# PyMuPDF 2 imports its ONNX layout model (pymupdf.layout, with onnxruntime: ~0.3 s) and pymupdf4llm (its
# Markdown export, which loads onnxruntime too: ~0.1 s) whenever pymupdf is imported; only Page.get_layout
# and the Markdown functions use them, and no command does. The command's process (and the workers it
# forks) go without them; a program importing benchmint as a library keeps PyMuPDF as it is. (pymupdf4llm
# also turns PyMuPDF's quad corrections off; harvest units read pages under pdf.default_text_switches.)
if "pymupdf" not in sys.modules:
    sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]
    sys.modules.setdefault("pymupdf4llm", None)  # type: ignore[arg-type]

# Subcommand -> its module in this package (the module's add_parser registers it, its run does the work).
COMMANDS = {"score": "score", "eval": "eval", "grade": "grade", "harvest": "harvest", "xrd": "xrd",
            "crop": "crop", "generate": "generate", "build": "build", "serve-local": "serve_local", "report": "report",
            "score-table": "score_table", "demo": "demo"}


def _fields(text: str) -> list[str]:
    """One ``--by`` value: a field, or several separated by commas (``--by ''``: none)."""
    return [f.strip() for f in text.split(",") if f.strip()]


def add_strata_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--by`` as score and grade take it: repeatable, or comma-separated. It takes exactly one value each time,
    so ``--by domain PRED.jsonl`` leaves the file to the positional arguments."""
    parser.add_argument("--by", type=_fields, action="extend", metavar="FIELD[,FIELD...]", help=help)


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    """``--engine`` and ``--ray-address``, as every command that runs units takes them."""
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="where the units run: local (this machine's processes and threads; default) or ray "
                             "(a Ray cluster, same outputs; needs pip install 'benchmint[ray]')")
    parser.add_argument("--ray-address", metavar="auto|ray://HOST:PORT|ADDRESS",
                        help="with --engine ray: the cluster to use, 'auto' for the one this machine belongs to "
                             "(default: start a local Ray instance on 127.0.0.1 with this machine's CPUs for the run)")
    parser.add_argument("--ray-shared-out", action="store_true",
                        help="with --engine ray: every node of the cluster sees --out at the same path (a shared "
                             "file system), so the workers of harvest and xrd build write their results there and "
                             "send back only where (assumed without it only when every node is this machine)")


def engine_session(args: argparse.Namespace):
    """The context the command's units run in: nothing for the local engine, a Ray connection for ``--engine ray``
    (``--ray-address``, or a local instance started and stopped around the run)."""
    if getattr(args, "engine", "local") != "ray":
        return contextlib.nullcontext()
    from benchmint.run.ray_engine import ray_session

    return ray_session(args.ray_address, shared_out=getattr(args, "ray_shared_out", False))


def engine_unavailable(args: argparse.Namespace, command: str) -> bool:
    """True (after one line on stderr saying why) when ``--engine ray`` is asked without Ray installed, or
    ``--ray-address`` or ``--ray-shared-out`` without ``--engine ray`` (it would be ignored)."""
    if getattr(args, "engine", "local") != "ray":
        for option in ("ray_address", "ray_shared_out"):
            if getattr(args, option, None):
                print(f"benchmint {command}: error: --{option.replace('_', '-')} needs --engine ray", file=sys.stderr)
                return True
        return False
    from benchmint.run.ray_engine import RayMissing, require_ray

    try:
        require_ray()
    except RayMissing as exc:
        print(f"benchmint {command}: error: {exc}", file=sys.stderr)
        return True
    return False


def run_on_engine(parser: argparse.ArgumentParser, run, command: str, **defaults) -> None:
    """``--engine`` and ``--ray-address`` on ``parser``, whose function becomes ``run`` held inside the Ray
    connection ``--engine ray`` asks for (started or reached before ``run``, shut down after it if started)."""
    add_engine_option(parser)

    def runner(args: argparse.Namespace) -> int:
        if engine_unavailable(args, command):
            return 2
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(engine_session(args))
            except Exception as exc:  # noqa: BLE001 - a cluster not reachable, a bad address: the run cannot start
                print(f"benchmint {command}: error: Ray could not be started or reached "
                      f"({args.ray_address or 'a local instance'}): {type(exc).__name__}: {exc}", file=sys.stderr)
                return 2
            return run(args)

    parser.set_defaults(func=runner, **defaults)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``only``, just that subcommand (its module alone is imported: a faster start)."""
    from benchmint import __version__

    parser = argparse.ArgumentParser(prog="benchmint", description="Build and score scientific multimodal benchmarks.",
                                     epilog="benchmint COMMAND --help: a command's options. Without a command, "
                                            "this help is printed and the exit status is 2 (a usage error).")
    parser.add_argument("--version", action="version", version=f"benchmint {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"benchmint.cli.{module}").add_parser(sub)
    return parser


def _plain_warning(message, category, filename, lineno, file=None, line=None) -> None:
    # The warnings a command gives (a result file found damaged, say) name what they concern; the line of
    # benchmint's source that raised them means nothing at the command line.
    print(f"warning: {message}", file=file or sys.stderr)


# What a command asked to be left to the operating system at exit (``hold_until_exit``), and the exit status
# ``entry`` got from ``main``; both stay empty when ``main`` is called from a program or a test.
_HELD: list = []
_EXIT_STATUS: list[int] = []
_IN_ENTRY = False


def hold_until_exit(*objects) -> None:
    """Keeps ``objects`` alive until the process ends and has it end without the interpreter's teardown.

    A command calls it once all its outputs are written and closed. At 10M rows ``score`` holds 0.45 GB of
    columns and a gold index of 2.5M ids: freeing them, then the interpreter's own teardown, took some 0.05 s of
    CPU after the work was done, while the OS takes the whole address space back at once. Only in the command's
    own process (``entry``); where ``main`` is called from a program nothing is held.
    """
    if _IN_ENTRY:
        _HELD.extend(objects)


def _leave() -> None:
    """The last exit handler: the other handlers have run and the non-daemon threads were joined before them;
    with something held and the status known, flush the standard streams and end the process here."""
    if not _HELD or not _EXIT_STATUS:
        return
    status = _EXIT_STATUS[0]
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe: the status Python gives when its own flush at exit fails
            status = 120
    os._exit(status)


# Exit handlers run last-registered first: registered as this module is imported, _leave runs after every
# handler of a module imported later (Ray's shutdown, logging's flush, multiprocessing's clean-up).
atexit.register(_leave)


def entry(argv: list[str] | None = None) -> None:
    """The ``benchmint`` command and ``python -m benchmint.cli``: ``main``, then ``sys.exit`` with its status."""
    global _IN_ENTRY
    _IN_ENTRY = True
    status = main(argv)
    _EXIT_STATUS.append(status)
    sys.exit(status)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # no command: the whole help rather than argparse's one-line complaint, as a usage error
        build_parser().print_help(sys.stderr)
        return 2
    only = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(only).parse_args(argv)
    shown, warnings.showwarning = warnings.showwarning, _plain_warning
    try:
        return args.func(args)
    finally:
        warnings.showwarning = shown
