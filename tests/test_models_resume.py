"""A run killed with SIGKILL and run again asks no answered request a second time (beyond those in flight)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from chat_server import ChatServer, Reply

CONCURRENCY = 4
N = 200

WORKER = """
import sys
from benchmint.models import ChatRequest, Endpoint, Engine, Message
url, cache, n, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
engine = Engine(Endpoint(url), cache=cache, concurrency=concurrency)
items = ((f"q{i}", ChatRequest("m", (Message.user(f"q{i}"),), max_tokens=5)) for i in range(n))
for item_id, outcome in engine.run_sync(items):
    print(item_id, "cached" if outcome.cached else "new", flush=True)
"""


def children_of(pid):
    """Live processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_killed_run_resumes_without_asking_answered_requests_again(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with ChatServer() as server:
        server.default = Reply(delay=0.01)
        args = [sys.executable, "-c", WORKER, server.url, str(cache), str(N), str(CONCURRENCY)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        answered = {proc.stdout.readline().split()[0] for _ in range(40)}
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        proc.stdout.close()
        asked_before = dict(server.by_prompt)
        assert 40 <= len(asked_before) < N

        rerun = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120)
        lines = [line.split() for line in rerun.stdout.splitlines()]
        assert sorted(item for item, _ in lines) == sorted(f"q{i}" for i in range(N))
        asked_twice = {p for p, n in server.by_prompt.items() if n > 1}
        # Only requests in flight at the kill are asked again; nothing answered before it is.
        assert len(asked_twice) <= CONCURRENCY and not asked_twice & answered
        assert all(n <= 2 for n in server.by_prompt.values())
        cached = {item for item, how in lines if how == "cached"}
        assert answered <= cached and len(cached) >= len(asked_before) - CONCURRENCY
        assert server.count == N + len(asked_twice)
    assert children_of(os.getpid()) == []  # the killed run was reaped; nothing else was left running
