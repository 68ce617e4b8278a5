"""The command-line options of every command that calls a model, and the engine they describe."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from benchmint.models.structured import MODES

MAX_REPLY_BYTES = 1 << 20  # benchmint.models.engine.MAX_REPLY_BYTES, without importing the engine here

if TYPE_CHECKING:
    from benchmint.models.engine import Engine


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model calls (any OpenAI-compatible chat-completions server)")
    g.add_argument("--base-url", help="the server's base URL, e.g. http://127.0.0.1:8000/v1 or https://api.openai.com/v1 "
                        "(no default)")
    g.add_argument("--api-key-env", metavar="NAME",
                   help="environment variable holding the API key (e.g. OPENAI_API_KEY); default: none, for keyless servers")
    g.add_argument("--timeout", type=_non_negative, default=120.0, metavar="S", help="seconds per call (default 120)")
    g.add_argument("--max-tokens-field", choices=("max_tokens", "max_completion_tokens"), default="max_tokens",
                   help="name of the reply-length field (OpenAI's reasoning models want max_completion_tokens; default "
                        "max_tokens)")
    g.add_argument("--concurrency", type=_positive_int, default=8, help="requests in flight at most (default 8)")
    g.add_argument("--rpm", type=_non_negative, metavar="N", help="client-side limit: requests per minute (default: none)")
    g.add_argument("--tpm", type=_non_negative, metavar="N", help="client-side limit: tokens per minute (default: none)")
    g.add_argument("--retries", type=_positive_int, default=6, metavar="N",
                   help="transport attempts per call, the first included (default 6): HTTP 408/409/429/5xx, timeouts, "
                        "dropped connections, malformed replies")
    g.add_argument("--retry-delay", type=_non_negative, default=1.0, metavar="S",
                   help="first backoff in seconds, doubled per attempt up to 60 s, with seeded jitter (default 1.0)")
    g.add_argument("--max-retry-after", type=_non_negative, default=300.0, metavar="S",
                   help="the longest Retry-After a call waits for; a server asking for longer fails the call at "
                        "once, saying so (default 300)")
    g.add_argument("--max-reply-bytes", type=_positive_int, default=MAX_REPLY_BYTES, metavar="N",
                   help=f"a reply's text over this many bytes is an error row (reply_too_large), never kept "
                        f"(default {MAX_REPLY_BYTES:,})")
    g.add_argument("--answer-attempts", type=_positive_int, default=None, metavar="N",
                   help="answer attempts per item when a reply is empty or cannot be parsed (default: the "
                        "benchmark protocol's retries + 1 in eval, 3 elsewhere)")
    g.add_argument("--cache", metavar="PATH", help="the request cache (SQLite); replies there are never paid again "
                        "(default: requests.sqlite in --out)")
    g.add_argument("--refresh", action="store_true", help="ignore cached replies (new replies are still stored)")
    g.add_argument("--prices", metavar="JSON",
                   help='price table: {"model": {"input": USD, "output": USD}} per million tokens (default: none, cost unknown)')
    g.add_argument("--max-cost", type=_non_negative, metavar="USD",
                   help="stop before the run's cost would exceed this (needs --prices; default: no limit)")
    g.add_argument("--max-tokens", type=_positive_int, metavar="N",
                   help="stop before the run's prompt + completion tokens would exceed this (default: no limit)")
    g.add_argument("--budget-per-invocation", action="store_true",
                   help="--max-cost and --max-tokens count this invocation's calls alone; by default a budget "
                        "given again covers what earlier invocations into the same --out were charged")
    g.add_argument("--structured", choices=MODES, default="auto",
                   help="how a JSON schema is asked for: auto (json_schema, falling back to json_object with the "
                        "schema beside it as llama-cpp-python's server takes it, then plain json_object, then the "
                        "prompt, as the server allows) or one form fixed (default auto)")


def check_budget(args: argparse.Namespace, model: str, max_tokens: int | None, source: str, fix: str = "") -> None:
    """Raise ValueError when the options' budget cannot bound requests for ``model`` with this ``max_tokens``
    (``source``: where that max_tokens comes from; ``fix``: how to change it), before any file is made."""
    from benchmint.models.accounting import Budget, PriceTable, budget_problem

    if args.max_cost is not None and not args.prices:
        raise ValueError("--max-cost needs --prices (a price table of USD per million tokens)")
    prices = PriceTable.load(args.prices) if args.prices else PriceTable()
    problem = budget_problem(Budget(args.max_cost, args.max_tokens), prices, model, max_tokens, source, fix=fix)
    if problem is not None:
        raise ValueError(problem)


def engine_from_arguments(args: argparse.Namespace, default_cache: str | os.PathLike, seed: int = 0,
                          accounts: str | os.PathLike | None = None) -> Engine:
    """The engine the options describe; ValueError or benchmint.io.InputError for a bad combination or file.

    ``accounts``: the run's ``AccountStore`` file (in its output folder), so that its figures and budget cover
    every invocation into that folder.
    """
    from benchmint.models.accounting import Accounting, AccountStore, Budget, PriceTable
    from benchmint.models.engine import Endpoint, Engine
    from benchmint.models.limits import RateLimits
    from benchmint.models.retry import RetryPolicy

    if not args.base_url:
        raise ValueError("--base-url is required (the server's OpenAI-compatible base URL, ending in /v1)")
    if args.max_cost is not None and not args.prices:
        raise ValueError("--max-cost needs --prices (a price table of USD per million tokens)")
    if args.rpm == 0 or args.tpm == 0:
        raise ValueError("--rpm and --tpm must be positive when given")
    prices = PriceTable.load(args.prices) if args.prices else PriceTable()
    endpoint = Endpoint(args.base_url, api_key_env=args.api_key_env, timeout_s=args.timeout,
                        max_tokens_field=args.max_tokens_field)
    endpoint.api_key()  # a missing key is said before any file is made
    accounting = Accounting(prices, Budget(args.max_cost, args.max_tokens),
                            store=AccountStore(accounts) if accounts is not None else None,
                            budget_scope="invocation" if getattr(args, "budget_per_invocation", False) else "run")
    transport = None
    if getattr(args, "engine", "local") == "ray":  # the calls sent by Ray actors, as many as --concurrency
        from benchmint.models.ray_calls import RayCalls

        transport = RayCalls(endpoint.base_url, endpoint.api_key(), endpoint.timeout_s, args.concurrency)
    return Engine(endpoint, cache=args.cache or default_cache, concurrency=args.concurrency, transport=transport,
                  limits=RateLimits(args.rpm, args.tpm), accounting=accounting,
                  retry=RetryPolicy(max_attempts=args.retries, base_delay_s=args.retry_delay,
                                    max_retry_after_s=getattr(args, "max_retry_after", 300.0), seed=seed),
                  answer_attempts=args.answer_attempts if args.answer_attempts is not None else 3,
                  refresh=args.refresh, structured=args.structured,
                  max_reply_bytes=getattr(args, "max_reply_bytes", MAX_REPLY_BYTES))
