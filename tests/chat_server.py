"""A real OpenAI chat-completions server on 127.0.0.1 for tests and benches, with scripted replies and faults.

It speaks HTTP/1.1 with keep-alive over asyncio streams, answers ``POST .../chat/completions`` and counts what
it receives: every request body, requests per prompt (the text of the last user message), arrival times and the
most requests it held at once. What it answers is scripted:

- ``server.script(prompt, action, ...)``: successive requests whose prompt is ``prompt`` get the actions in turn;
  when they are used up the last one repeats.
- ``server.queue(action, ...)``: the next requests, whatever their prompt, in arrival order (before scripts).
- otherwise ``server.default`` (a normal reply echoing the prompt, with ``usage``).
- ``server.when_contains[fragment] = action``: every request whose prompt holds ``fragment`` (after scripts).
- ``server.reject_formats = {"json_schema": 500}``: any request asking for that ``response_format`` gets the status.

Actions: ``Reply`` (text, usage, delay before answering), ``Status`` (an error status with optional Retry-After),
``Close`` (drop the connection without answering), ``Malformed`` (200 with broken JSON), ``EmptyChoices``,
``Trickle`` (a reply sent one byte at a time), ``Raw`` (a 200 with any body).

Run alone (``python tests/chat_server.py [--delay S] [--forget-bodies]``) it prints its port and serves default replies until
stdin closes; ``GET /stats`` returns its counters as JSON and ``POST /reset`` clears them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reply:
    """A normal completion; ``text`` (the message content: a string, or a list of parts) may be a function of the
    request body. ``delay`` seconds before answering."""

    text: str | list | Callable[[dict], str] | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5
    finish_reason: str = "stop"
    usage: bool = True
    delay: float = 0.0


@dataclass(frozen=True)
class Status:
    code: int
    retry_after: str | None = None
    body: dict = field(default_factory=lambda: {"error": {"message": "scripted failure", "type": "server_error"}})


@dataclass(frozen=True)
class Close:
    """Read the request, then close the connection without a response."""


@dataclass(frozen=True)
class Malformed:
    """A 200 whose JSON body is cut off."""


@dataclass(frozen=True)
class Raw:
    """A 200 with this body, whatever it is."""

    body: bytes


@dataclass(frozen=True)
class EmptyChoices:
    """A 200 completion with ``choices: []``."""


@dataclass(frozen=True)
class Trickle:
    """A normal 200 reply whose body is written one byte every ``interval`` seconds."""

    interval: float


REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 408: "Request Timeout", 422: "Unprocessable Entity",
           429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def prompt_of(body: dict) -> str:
    """The text of the last user message (text parts joined by newlines)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(p.get("text", "") for p in content or [] if p.get("type") == "text")
    return ""


class ChatServer:
    def __init__(self, delay: float = 0.0, keep_bodies: bool = True) -> None:
        self.default: Any = Reply(delay=delay)
        self.keep_bodies = keep_bodies  # off for benches whose requests carry megabytes of images each
        self.reject_formats: dict[str, int] = {}
        self.when_contains: dict[str, Any] = {}  # prompt fragment -> the action for every prompt holding it
        self._scripts: dict[str, collections.deque] = {}
        self._queue: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self.reset()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    # ---- scripting and counters (callable from any thread)
    def reset(self) -> None:
        with self._lock:
            self.bodies: list[dict] = []
            self.headers: list[dict] = []  # request headers, lower-case names
            self.by_prompt: collections.Counter = collections.Counter()
            self.arrivals: list[tuple[float, str]] = []  # (time.monotonic(), prompt)
            self.in_flight = 0
            self.max_in_flight = 0
            self.connections = 0
            self._scripts.clear()
            self._queue.clear()

    def script(self, prompt: str, *actions) -> None:
        with self._lock:
            self._scripts[prompt] = collections.deque(actions)

    def queue(self, *actions) -> None:
        with self._lock:
            self._queue.extend(actions)

    @property
    def count(self) -> int:
        return len(self.arrivals)

    def times(self, prompt: str | None = None) -> list[float]:
        """Arrival times (monotonic seconds), of every request or of those with this prompt."""
        with self._lock:
            return [t for t, p in self.arrivals if prompt is None or p == prompt]

    def stats(self) -> dict:
        with self._lock:
            return {"count": len(self.arrivals), "max_in_flight": self.max_in_flight,
                    "connections": self.connections, "by_prompt": dict(self.by_prompt)}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _next_action(self, body: dict, prompt: str):
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            steps = self._scripts.get(prompt)
            if steps:
                return steps.popleft() if len(steps) > 1 else steps[0]
            for fragment, action in self.when_contains.items():
                if fragment in prompt:
                    return action
        kind = (body.get("response_format") or {}).get("type")
        if kind in self.reject_formats:
            return Status(self.reject_formats[kind], body={"error": {"message": f"{kind} is not supported"}})
        return self.default

    # ---- HTTP
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {}
                for line in header_lines:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body_bytes = await reader.readexactly(int(headers.get("content-length", "0")))
                keep = await self._respond(method, path, headers, body_bytes, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return  # the client went away, or the server is shutting down
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _send(self, writer, code: int, payload: bytes, extra: dict | None = None) -> None:
        head = [f"HTTP/1.1 {code} {REASONS.get(code, 'Status')}", "Content-Type: application/json",
                f"Content-Length: {len(payload)}"]
        head += [f"{k}: {v}" for k, v in (extra or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()

    async def _respond(self, method: str, path: str, headers: dict, raw: bytes, writer) -> bool:
        if method == "GET" and path.endswith("/stats"):
            await self._send(writer, 200, json.dumps(self.stats()).encode())
            return True
        if method == "POST" and path.endswith("/reset"):
            self.reset()
            await self._send(writer, 200, b"{}")
            return True
        if not (method == "POST" and path.endswith("/chat/completions")):
            await self._send(writer, 404, b'{"error": {"message": "not found"}}')
            return True
        body = json.loads(raw)
        prompt = prompt_of(body)
        with self._lock:
            if self.keep_bodies:
                self.bodies.append(body)
            self.headers.append(headers)
            self.by_prompt[prompt] += 1
            self.arrivals.append((time.monotonic(), prompt))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._act(self._next_action(body, prompt), body, prompt, writer)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _act(self, action, body: dict, prompt: str, writer) -> bool:
        if isinstance(action, Close):
            writer.transport.abort()
            return False
        if isinstance(action, Raw):
            await self._send(writer, 200, action.body)
            return True
        if isinstance(action, Malformed):
            await self._send(writer, 200, b'{"id": "x", "object": "chat.completion", "choices": [{"ind')
            return True
        if isinstance(action, Status):
            extra = {"Retry-After": action.retry_after} if action.retry_after is not None else None
            await self._send(writer, action.code, json.dumps(action.body).encode(), extra)
            return True
        completion = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model", "")}
        if isinstance(action, Trickle):
            payload = json.dumps({**completion, "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "slowly"}}]}).encode()
            writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}"
                         "\r\n\r\n".encode("latin-1"))
            for i in range(len(payload)):
                writer.write(payload[i:i + 1])
                await writer.drain()
                await asyncio.sleep(action.interval)
            return True
        if isinstance(action, EmptyChoices):
            completion["choices"] = []
        else:
            if action.delay:
                await asyncio.sleep(action.delay)
            text = action.text(body) if callable(action.text) else action.text
            if text is None:
                text = f"echo: {prompt}"
            completion["choices"] = [{"index": 0, "finish_reason": action.finish_reason,
                                      "message": {"role": "assistant", "content": text}}]
            if action.usage:
                completion["usage"] = {"prompt_tokens": action.prompt_tokens,
                                       "completion_tokens": action.completion_tokens,
                                       "total_tokens": action.prompt_tokens + action.completion_tokens}
        await self._send(writer, 200, json.dumps(completion).encode())
        return True

    # ---- lifecycle
    async def serve(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=512)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    def start(self) -> ChatServer:
        """Serve from a daemon thread with its own event loop."""
        ready = threading.Event()

        def main():
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.serve())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._shutdown())
            self._loop.close()

        self._thread = threading.Thread(target=main, name="chat-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


async def _main(delay: float, keep_bodies: bool) -> None:
    server = ChatServer(delay=delay, keep_bodies=keep_bodies)
    await server.serve()
    print(server.port, flush=True)
    # Serve until the parent closes our stdin (or dies).
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server._shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each default reply")
    parser.add_argument("--forget-bodies", action="store_true", help="keep no request bodies (counters only)")
    args = parser.parse_args()
    asyncio.run(_main(args.delay, not args.forget_bodies))
