"""Model calls for every stage: one OpenAI-compatible client, a request cache, rate limits, retries, budgets.

A stage builds ``ChatRequest`` records and hands ``(item_id, request)`` pairs to ``Engine.run`` (or
``run_sync``); it gets back a ``ChatReply`` or a ``Failure`` (with its cause) per item and never builds an HTTP
call itself. ``Engine.summary()`` gives tokens, calls and cost per stage and model for the run summary.

    engine = Engine(Endpoint("http://127.0.0.1:8000/v1"), cache="out/requests.sqlite", concurrency=16,
                    accounting=Accounting(PriceTable.load("prices.json"), Budget(max_cost_usd=5.0)))
    items = ((item["id"], ChatRequest("my-model", (Message.user(item["question"], ImagePart.from_file(item["image"])),),
                                      max_tokens=512, temperature=0.0)) for item in items_of_the_benchmark)
    for item_id, outcome in engine.run_sync(items, stage="answer"):
        if isinstance(outcome, ChatReply):
            ...  # outcome.text, outcome.value, outcome.cached
        else:
            errors.append(outcome.row(item_id))  # a row of errors.jsonl: cause, status, attempts
    summary = engine.summary()  # engine.stop_reason is set when the budget ended the run
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The names load on first use: the engine pulls in the openai SDK (~0.5 s), which a command that only
# parses its options, or a stage that only builds requests, should not pay for.
_HOMES = {
    "Accounting": "accounting", "AccountStore": "accounting", "Budget": "accounting", "Price": "accounting", "PriceTable": "accounting",
    "ReplyCache": "cache", "CAUSES": "call", "ChatReply": "call", "ChatRequest": "call", "Failure": "call",
    "ImagePart": "call", "Message": "call", "request_key": "call", "Endpoint": "engine", "Engine": "engine",
    "CallExecutor": "engine", "RateLimits": "limits", "RetryPolicy": "retry", "parse_json": "structured",
}

if TYPE_CHECKING:
    from benchmint.models.accounting import Accounting, AccountStore, Budget, Price, PriceTable
    from benchmint.models.cache import ReplyCache
    from benchmint.models.call import CAUSES, ChatReply, ChatRequest, Failure, ImagePart, Message, request_key
    from benchmint.models.engine import CallExecutor, Endpoint, Engine
    from benchmint.models.limits import RateLimits
    from benchmint.models.retry import RetryPolicy
    from benchmint.models.structured import parse_json


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'benchmint.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"benchmint.models.{home}"), name)
    globals()[name] = value
    return value


__all__ = ["AccountStore", "Accounting", "Budget", "CAUSES", "CallExecutor", "ChatReply", "ChatRequest", "Endpoint", "Engine", "Failure",
           "ImagePart", "Message", "Price", "PriceTable", "RateLimits", "ReplyCache", "RetryPolicy", "parse_json",
           "request_key"]
