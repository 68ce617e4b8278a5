"""Answer extraction for embedding: the compiled extractor where it decides, the reference otherwise.

Compiled form ``benchmint._core.extract``; reference ``extract_ref`` (whose
docstring is the specification). The compiled extractor either returns
exactly the reference's answer or says "undecided", and the reference then
reads that output (counted as a fallback).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from benchmint import _dispatch, tasks


def _extract(text: str, kind: tasks.AnswerKind, compiled) -> list | None:
    if compiled is not None:
        found = compiled(text, kind.compiled)
        if not isinstance(found, str):
            return found
        _dispatch.fallback("extract")  # "undecided": the reference decides
    return kind.extract(text)


def _compiled_extractor(kind: tasks.AnswerKind):
    """The compiled extractor when it runs for this kind, else None (counted once per call)."""
    if _dispatch.use_reference("extract", available=kind.compiled is not None):
        return None
    return _dispatch.core().extract.extract


def extractor(kind: tasks.AnswerKind) -> Callable[[str], list | None]:
    """``kind.extract`` by the compiled extractor where it decides, the reference otherwise: the same answers."""
    compiled = _compiled_extractor(kind)
    return lambda text: _extract(text, kind, compiled)


def extract_answer(text: str, task: str) -> list | None:
    """The answer of kind ``task`` (e.g. "mcq" letters, "hkl" Miller-index tuples) in a raw model output.

    None when no answer can be read. Same result as the kind's reference rules,
    faster where the kind has a compiled extractor.
    """
    kind = tasks.get(task)
    if not isinstance(text, str):
        return None
    return _extract(text, kind, _compiled_extractor(kind))


def extract_answers(texts: Iterable[str], task: str) -> list[list | None]:
    kind = tasks.get(task)
    compiled = _compiled_extractor(kind)
    return [_extract(t, kind, compiled) if isinstance(t, str) else None for t in texts]
