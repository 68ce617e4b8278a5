"""Answer extraction for embedding: the compiled extractor where it decides, the reference otherwise."""

from __future__ import annotations

from collections.abc import Iterable

from benchmint import _dispatch, tasks


def extract_answer(text: str, task: str) -> list | None:
    """The answer of kind ``task`` (e.g. "mcq" letters, "hkl" Miller-index tuples) in a raw model output.

    None when no answer can be read. Same result as the kind's reference rules,
    faster where the kind has a compiled extractor.
    """
    kind = tasks.get(task)
    if not isinstance(text, str):
        return None
    if kind.compiled is not None and not _dispatch.use_reference():
        found = _dispatch.core().extract.extract(text, kind.compiled)
        if not isinstance(found, str):  # "undecided" -> the reference decides
            return found
    return kind.extract(text)


def extract_answers(texts: Iterable[str], task: str) -> list[list | None]:
    return [extract_answer(t, task) for t in texts]
