"""Progress of a long step on stderr, the one form every command uses.

On a terminal it is tqdm's bar. Anywhere else (a log file, CI, a pipe) a bar's carriage returns make one
unreadable line, so a plain line is written every ``interval`` seconds instead, by a timer of its own (a unit
may take longer than the interval): what is running, done/total, the rate and the time left at that rate.
A step shorter than one interval prints nothing, and one that printed lines ends with a line saying it
finished. ``BENCHMINT_PROGRESS_SECONDS`` sets the interval (default 5).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO

MIN_INTERVAL_S = 0.01  # the timer's floor: an interval of 0 would write lines as fast as it can


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("BENCHMINT_PROGRESS_SECONDS", "5")))
    except ValueError:
        return 5.0


class Progress:
    """``update(n)`` as work finishes, ``add_total(n)`` when more turns up, ``close()`` at the end (or ``with``).

    ``enabled``: False shows nothing (--quiet); ``total``: None when not known in advance.
    """

    def __init__(self, desc: str, total: int | None = None, unit: str = "items", enabled: bool = True,
                 stream: IO[str] | None = None, interval: float | None = None) -> None:
        self.desc, self.total, self.unit = desc, total, unit
        self.interval = max(MIN_INTERVAL_S, _interval() if interval is None else interval)
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.done = 0
        self.start = time.monotonic()
        self.lines = 0
        self.bar = None
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=f" {unit}", file=self.stream, mininterval=0.25,
                            leave=False)
        elif enabled:
            self._timer = threading.Thread(target=self._tick, name=f"progress {desc}", daemon=True)
            self._timer.start()

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._line(time.monotonic())

    def add_total(self, n: int) -> None:
        if self.total is not None:
            self.total += n
            if self.bar is not None:
                self.bar.total = self.total
                self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self._timer is not None:
            self._stop.set()
            self._timer.join()
            self._timer = None
            if self.lines:  # a step long enough to report says when it ended
                self._line(time.monotonic(), final=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _line(self, now: float, final: bool = False) -> None:
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        of = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        parts = [f"{self.desc}: {self.done}{of} {self.unit}{pct}", f"{_rate(rate)} {self.unit}/s",
                 f"{elapsed:.0f} s elapsed"]
        if final:
            parts[-1] = f"done in {elapsed:.0f} s"
        elif self.total is not None and rate > 0 and self.done < self.total:
            parts.append(f"about {(self.total - self.done) / rate:.0f} s left")
        self.stream.write(", ".join(parts) + "\n")
        self.stream.flush()
        self.lines += 1


def _rate(rate: float) -> str:
    return f"{rate:.2f}" if rate < 10 else f"{rate:.0f}"


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or stream-like object without a terminal
        return False
