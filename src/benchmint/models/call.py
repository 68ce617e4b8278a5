"""A model call as a record: the request (whose content hash is the cache key), its reply, or its failure.

A ``ChatRequest`` holds everything that shapes the reply: model, messages (text and images), sampling settings,
seed, JSON schema, extra body fields. Images enter the key by the SHA-256 of their bytes together with the
longest side they are sent at, never by the bytes themselves. Unset settings are left out of the key, so adding
a field later does not change the keys of existing requests.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from benchmint.io import InputError, dumps
from benchmint.models import images

KEY_VERSION = 1
# benchmint.io.dumps's form (sorted keys, compact, UTF-8 kept) with the encoder built once: keys are computed per
# request, and building an encoder per call costs more than encoding a short request.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# The same form without sorting, for the key: key_form builds its dicts in key order and user mappings are stored
# in key order, so the output is byte for byte _CANONICAL's, a third faster.
_PRESORTED = json.JSONEncoder(sort_keys=False, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
ROLES = ("system", "developer", "user", "assistant")
# Body fields the request sets itself; extra_body may not override them.
MANAGED = frozenset({"model", "messages", "response_format", "temperature", "top_p", "max_tokens",
                     "max_completion_tokens", "seed", "reasoning_effort", "stream", "n"})


@dataclass(frozen=True, eq=False)
class ImagePart:
    """An image in a message: its file bytes and the longest side it is sent at (``None``: as it is)."""

    data: bytes
    max_side: int | None = 1024
    sha256: str = field(init=False)
    format: str = field(init=False)
    width: int = field(init=False)
    height: int = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.data, (bytes, bytearray)) or not self.data:
            raise ValueError("ImagePart.data must be non-empty image bytes")
        if self.max_side is not None and (not isinstance(self.max_side, int) or self.max_side < 1):
            raise ValueError(f"ImagePart.max_side must be a positive integer or None, got {self.max_side!r}")
        fmt, w, h = images.inspect(bytes(self.data))
        object.__setattr__(self, "data", bytes(self.data))
        object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())
        object.__setattr__(self, "format", fmt)
        object.__setattr__(self, "width", w)
        object.__setattr__(self, "height", h)

    @classmethod
    def from_file(cls, path: str | Path, max_side: int | None = 1024) -> ImagePart:
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read image {p}: {exc.strerror or exc}") from None
        try:
            return cls(data, max_side)
        except ValueError as exc:
            raise InputError(f"{p}: {exc}") from None

    def key_form(self) -> dict:
        return {"encoding": images.ENCODING, "max_side": self.max_side, "sha256": self.sha256, "type": "image"}

    def sent_size(self) -> tuple[int, int]:
        return images.target_size(self.width, self.height, self.max_side)

    def data_url(self) -> str:
        return images.data_url(self.data, self.max_side)


Part = str | ImagePart


@dataclass(frozen=True)
class Message:
    """One chat message: plain text, or a sequence of text and image parts."""

    role: str
    content: str | tuple[Part, ...]

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"message role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if isinstance(self.content, str):
            return
        if not isinstance(self.content, Sequence) or not self.content:
            raise ValueError("message content must be a string or a non-empty sequence of str and ImagePart")
        for part in self.content:
            if not isinstance(part, (str, ImagePart)):
                raise ValueError(f"message parts must be str or ImagePart, got {type(part).__name__}")
        object.__setattr__(self, "content", tuple(self.content))

    @classmethod
    def user(cls, text: str, *image_parts: ImagePart) -> Message:
        return cls("user", (text, *image_parts) if image_parts else text)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", text)

    def key_form(self) -> dict:
        if isinstance(self.content, str):
            return {"content": self.content, "role": self.role}
        return {"content": [{"text": p, "type": "text"} if isinstance(p, str) else p.key_form() for p in self.content],
                "role": self.role}

    def has_images(self) -> bool:
        return not isinstance(self.content, str) and any(isinstance(p, ImagePart) for p in self.content)

    def payload(self, extra_text: str | None = None) -> dict:
        """The OpenAI message (images as data URLs); ``extra_text`` is appended as a last text part."""
        if isinstance(self.content, str) and extra_text is None:
            return {"role": self.role, "content": self.content}
        parts = [self.content] if isinstance(self.content, str) else self.content
        out = [{"type": "text", "text": p} if isinstance(p, str) else
               {"type": "image_url", "image_url": {"url": p.data_url()}} for p in parts]
        if extra_text is not None:
            out.append({"type": "text", "text": extra_text})
        return {"role": self.role, "content": out}


def _number(name: str, value, low: float, high: float) -> float | None:
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not low <= value <= high):
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def _json_mapping(name: str, value) -> dict | None:
    """A JSON object as plain JSON values with every object's keys in sorted order (see _PRESORTED)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a JSON object (dict), got {type(value).__name__}")
    try:
        return json.loads(_CANONICAL.encode(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} is not JSON-serialisable: {exc}") from None


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call. ``schema`` asks for a JSON answer conforming to that JSON Schema."""

    model: str
    messages: tuple[Message, ...]
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    schema: Mapping[str, Any] | None = None
    schema_name: str = "answer"
    reasoning_effort: str | None = None
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("ChatRequest.model must be a non-empty string")
        msgs = self.messages
        if type(msgs) is not tuple:
            msgs = (msgs,) if isinstance(msgs, Message) else tuple(msgs)
            object.__setattr__(self, "messages", msgs)
        if not msgs or not all(isinstance(m, Message) for m in msgs):
            raise ValueError("ChatRequest.messages must be a non-empty sequence of Message")
        if self.temperature is not None:
            object.__setattr__(self, "temperature", _number("temperature", self.temperature, 0.0, 2.0))
        if self.top_p is not None:
            object.__setattr__(self, "top_p", _number("top_p", self.top_p, 0.0, 1.0))
        for name in ("max_tokens", "seed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.reasoning_effort is not None and not isinstance(self.reasoning_effort, str):
            raise ValueError(f"reasoning_effort must be a string, got {self.reasoning_effort!r}")
        if not isinstance(self.schema_name, str) or not self.schema_name:
            raise ValueError("schema_name must be a non-empty string")
        if self.schema is not None:
            object.__setattr__(self, "schema", _json_mapping("schema", self.schema))
        if self.extra_body is not None:
            extra = _json_mapping("extra_body", self.extra_body) or {}
            if MANAGED & extra.keys():
                raise ValueError(f"extra_body may not set {sorted(MANAGED & extra.keys())}: use the ChatRequest "
                                 "fields (streaming and n > 1 are not supported)")
            object.__setattr__(self, "extra_body", extra)

    def key_form(self) -> dict:
        """Everything that determines the reply, as plain JSON; unset fields are omitted. Keys in sorted order."""
        form: dict[str, Any] = {}
        if self.extra_body is not None:
            form["extra_body"] = self.extra_body
        if self.max_tokens is not None:
            form["max_tokens"] = self.max_tokens
        form["messages"] = [m.key_form() for m in self.messages]
        form["model"] = self.model
        if self.reasoning_effort is not None:
            form["reasoning_effort"] = self.reasoning_effort
        if self.schema is not None:
            form["schema"] = {"name": self.schema_name, "schema": self.schema}
        if self.seed is not None:
            form["seed"] = self.seed
        if self.temperature is not None:
            form["temperature"] = self.temperature
        if self.top_p is not None:
            form["top_p"] = self.top_p
        return form

    def has_images(self) -> bool:
        return any(m.has_images() for m in self.messages)

    def estimate_prompt_tokens(self) -> int:
        """An upper estimate of the prompt's tokens before any reply is seen.

        Text: its UTF-8 bytes (a byte-level token covers at least one byte) plus 8 per message for the chat
        template; images: one token per 28x28 pixels of the size sent, plus 16. The accounting raises it when a
        server reports more.
        """
        total = 0
        for m in self.messages:
            total += 8
            for p in (m.content,) if isinstance(m.content, str) else m.content:
                if isinstance(p, str):
                    total += len(p.encode("utf-8"))
                else:
                    w, h = p.sent_size()
                    total += math.ceil(w / 28) * math.ceil(h / 28) + 16
        if self.schema is not None:
            total += len(dumps(self.schema).encode("utf-8")) + 64
        return total


def request_key(endpoint: str, request: ChatRequest) -> str:
    """The cache key of ``request`` sent to ``endpoint`` (its base URL)."""
    form = {"endpoint": endpoint, "request": request.key_form(), "v": KEY_VERSION}
    return hashlib.sha256(_PRESORTED.encode(form).encode("utf-8")).hexdigest()


def attempt_key(key: str, attempt: int) -> str:
    """The key of answer attempt ``attempt`` (0-based) of the request keyed ``key``: each attempt is its own call."""
    return key if attempt == 0 else hashlib.sha256(f"{key}/{attempt}".encode("ascii")).hexdigest()


class ChatReply(NamedTuple):
    """A usable reply. ``value`` is what the stage's parser made of ``text`` (the text itself without one).

    ``cached``: served from the request cache (no request made in this run). ``requests``: HTTP requests made
    for the item in this run (retries and answer attempts included). ``answer_attempt``: which answer attempt
    (1-based) produced it. ``latency_s``: seconds of the successful request (0 when cached).
    A named tuple, so that a warm run can make tens of thousands per second.
    """

    key: str
    text: str
    value: Any
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    model: str | None
    cached: bool
    requests: int
    answer_attempt: int
    latency_s: float
    structured_mode: str | None = None

    def row(self) -> dict:
        return {"key": self.key, "text": self.text, "finish_reason": self.finish_reason,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "model": self.model, "cached": self.cached, "requests": self.requests,
                "answer_attempt": self.answer_attempt, "latency_s": round(self.latency_s, 6),
                "structured_mode": self.structured_mode}


# Causes of a failed item.
HTTP_STATUS = "http_status"
TIMEOUT = "timeout"
CONNECTION = "connection"
BAD_RESPONSE = "bad_response"
EMPTY_REPLY = "empty_reply"
UNPARSEABLE = "unparseable"
BUDGET = "budget"
BAD_REQUEST = "bad_request"  # the request could not be built (an image that does not decode)
REPLY_TOO_LARGE = "reply_too_large"  # a reply's text over the engine's cap
CAUSES = (HTTP_STATUS, TIMEOUT, CONNECTION, BAD_RESPONSE, EMPTY_REPLY, UNPARSEABLE, BUDGET, BAD_REQUEST,
          REPLY_TOO_LARGE)
# Each cause in words, as a printed line says it (the error row's detail keeps the particulars).
CAUSE_WORDS = {HTTP_STATUS: "the server refused the request", TIMEOUT: "the call timed out",
               CONNECTION: "the server could not be reached", BAD_RESPONSE: "the server's reply was malformed",
               EMPTY_REPLY: "the reply was empty", UNPARSEABLE: "no answer could be read from the reply",
               BUDGET: "not sent: the budget would be exceeded", BAD_REQUEST: "the request could not be built",
               REPLY_TOO_LARGE: "the reply was longer than --max-reply-bytes"}


def attempts_phrase(n: int) -> str:
    return f"{n} answer attempt{'s' if n != 1 else ''}"


def say_failure(cause: str, detail: str) -> str:
    """One line for a failed call: the cause once, in words. A reply that could not be read says so and how often
    it was asked (the parser's exception stays in the error row); the other causes' details say them already
    (the HTTP status and the server's words, the budget left)."""
    words = CAUSE_WORDS.get(cause, cause)
    if cause in (UNPARSEABLE, EMPTY_REPLY):
        return words + (detail[detail.rfind(" (after "):] if " (after " in detail else "")
    return detail or words


@dataclass(frozen=True, slots=True)
class Failure:
    """An item that got no usable reply, with its cause (one of ``CAUSES``), never cached as an answer.

    ``status``: the last HTTP status when the cause is one; ``requests``: HTTP requests made for the item in this
    run; ``answer_attempts``: answer attempts used; ``text``: the last reply text when there was one.
    """

    key: str
    cause: str
    detail: str
    status: int | None = None
    requests: int = 0
    answer_attempts: int = 0
    text: str | None = None
    stage: str = ""
    model: str = ""

    def row(self, item_id: Any = None) -> dict:
        """A row of ``errors.jsonl``."""
        row = {"id": item_id, "stage": self.stage, "model": self.model, "key": self.key, "cause": self.cause,
               "detail": self.detail, "status": self.status, "requests": self.requests,
               "answer_attempts": self.answer_attempts}
        if self.text is not None:
            row["text"] = self.text
        return row
