"""The command run as a user who cannot read every file: root reads a file of mode 000, so tests of
unreadable files drop root's rights (setpriv) when they run as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def open_folder() -> Path:
    """A new folder anyone may write to (pytest's own folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="benchmint-test-", dir="/tmp"))
    os.chmod(folder, 0o777)
    return folder


def open_subfolder(parent: Path, name: str) -> Path:
    folder = parent / name
    folder.mkdir()
    os.chmod(folder, 0o777)  # mkdir's mode passes through the umask
    return folder


def run_cli(argv: list[str], out: Path) -> subprocess.CompletedProcess:
    """``python -m benchmint.cli *argv`` as user nobody when this is root; matplotlib's cache in ``out``."""
    as_nobody = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv to give up the right to read every file")
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run([*as_nobody, sys.executable, "-m", "benchmint.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "MPLCONFIGDIR": str(out)})
