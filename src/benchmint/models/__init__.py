"""Model calls for every stage: one OpenAI-compatible client, a request cache, rate limits, retries, budgets.

A stage builds ``ChatRequest`` records and hands ``(item_id, request)`` pairs to ``Engine.run`` (or
``run_sync``); it gets back a ``ChatReply`` or a ``Failure`` (with its cause) per item and never builds an HTTP
call itself. ``Engine.summary()`` gives tokens, calls and cost per stage and model for the run summary.
"""

from benchmint.models.accounting import Accounting, Budget, Price, PriceTable
from benchmint.models.cache import ReplyCache
from benchmint.models.call import CAUSES, ChatReply, ChatRequest, Failure, ImagePart, Message, request_key
from benchmint.models.engine import Endpoint, Engine
from benchmint.models.limits import RateLimits
from benchmint.models.retry import RetryPolicy
from benchmint.models.structured import parse_json

__all__ = ["Accounting", "Budget", "CAUSES", "ChatReply", "ChatRequest", "Endpoint", "Engine", "Failure",
           "ImagePart", "Message", "Price", "PriceTable", "RateLimits", "ReplyCache", "RetryPolicy", "parse_json",
           "request_key"]
