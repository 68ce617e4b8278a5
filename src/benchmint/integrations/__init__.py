"""benchmint inside other evaluators: result tables (``tables``), Inspect AI tasks (``inspect``) and lmms-eval
task directories (``lmms_eval/``, package data).

Each is a thin layer over benchmint's own readers, prompts and scoring: a table is scored by the same
``score``/``grade`` flow the commands run, so its numbers are those of the commands on the same rows.
"""

from __future__ import annotations

import os
from pathlib import Path


def judge_cache_path() -> Path:
    """Where the integrations keep judge replies (a rerun pays for none): the user's cache folder, since Inspect
    runs a task file from the file's own folder and lmms-eval from wherever it was started."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchmint"
    root.mkdir(parents=True, exist_ok=True)
    return root / "judge.sqlite"
