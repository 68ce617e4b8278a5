"""Answer extraction for embedding: the compiled extractor where it decides, the reference otherwise."""

from __future__ import annotations

from collections.abc import Iterable

from benchmint import _dispatch
from benchmint.metrics.encode import check_task
from benchmint.metrics.extract import extract


def extract_answer(text: str, task: str) -> list | None:
    """Letters (``task="mcq"``) or Miller-index tuples (``"hkl"``) read from a raw model output; None if unreadable.

    Same result as ``benchmint.metrics.extract.extract`` (the reference), faster.
    """
    check_task(task)
    if isinstance(text, str) and not _dispatch.use_reference():
        core = _dispatch.core().extract
        found = core.choices(text) if task == "mcq" else core.hkls(text)
        if not isinstance(found, str):  # "undecided" -> the reference decides
            return found
    return extract(text, task)


def extract_answers(texts: Iterable[str], task: str) -> list[list | None]:
    return [extract_answer(t, task) for t in texts]
