"""Stage 3 of open-answer grading: a model judges what the rules and the screen could not decide.

Judges run on the model engine (``benchmint.models.Engine``): every call is
cached, so a rerun or a resumed run never pays a judge twice, and a reply
the parser rejects is asked again up to the engine's ``answer_attempts``.
A judge that never gives a usable verdict is a **judge failure**: counted and
listed as such, never read as a wrong answer.

Prompts are package files (``benchmint/grade/prompts``), filled by plain
replacement of ``{question}``, ``{gold}``, ``{answer}`` and ``{reply}`` (LaTeX
braces stay as they are):

``seephys_judge.txt``
    The scoring prompt of seephys.txt Figure 14: a physics professor's 0/1
    verdict on equivalence, significant figures included. The paper prints
    two of its few-shot examples (the 1 kW power and the SHM acceleration)
    and elides the rest; the two examples judged 0 are this package's, so the
    judge sees both verdicts.
``seephys_extract.txt``
    The model-based extraction used when no rule finds a final answer
    (the role of seephys.txt Figure 13, whose text the paper does not give).
``seephys_error_types.txt`` / ``matvqa_error_types.txt``
    The optional error-type pass over wrong answers: one code of the
    paper's taxonomy (seephys.txt Table 6, nine codes; matvqa.txt §5.3,
    three types), with the codes described in this package's words.
``csmbench_judge_0_10.txt`` / ``csmbench_judge_1_10.txt``
    CSMBench's open-description judge on the scale of its released scorer
    (0–10, the default: the published numbers come from it) or of the paper's
    text (1–10, csmbench.txt §IV-A.2).

Verdicts are parsed strictly. A 0/1 judge must answer the digit alone
(``Judgement: 1``, ``**1**`` and a trailing full stop are accepted); a digit
inside prose ("1 is not right, so 0") is not a verdict. A scale judge must
answer one whole number on its scale; "7/10" reads as 7, never as 10, and
"11" or "7.5" is no verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_BINARY = re.compile(r"(?:judge?ment\s*[:：]?\s*)?([01])\.?", re.IGNORECASE)
_SCALE = re.compile(r"(?:score\s*[:：]?\s*)?(\d{1,2})(?:\s*/\s*10)?\.?", re.IGNORECASE)
_DECORATION = str.maketrans("", "", "*`")


class VerdictError(ValueError):
    """A judge reply that is not a verdict on the declared scale (the engine asks again)."""


def _bare(reply: str) -> str:
    """The reply without reasoning blocks, markdown emphasis and surrounding space."""
    return _THINK.sub("", reply).translate(_DECORATION).strip()


def parse_binary(reply: str) -> int:
    """0 or 1 from a 0/1 judge's reply; VerdictError for anything else."""
    text = _bare(reply)
    m = _BINARY.fullmatch(text)
    if m is None:
        raise VerdictError(f"expected the verdict 0 or 1 alone, got {text[:80]!r}")
    return int(m.group(1))


def parse_scale(reply: str, low: int, high: int) -> int:
    """A whole-number score in [low, high] from a scale judge's reply; VerdictError for anything else."""
    text = _bare(reply)
    m = _SCALE.fullmatch(text)
    if m is None:
        raise VerdictError(f"expected one whole number from {low} to {high}, got {text[:80]!r}")
    score = int(m.group(1))
    if not low <= score <= high:
        raise VerdictError(f"score {score} is outside the scale {low}-{high}")
    return score


_NONE = {"none", "null", "n/a", "无", "没有"}


def parse_extracted(reply: str) -> str | None:
    """The answer a model extracted, None when it found none; VerdictError for an empty reply."""
    text = _bare(reply)
    text = re.sub(r"^extracted\s+answer\s*[:：]\s*", "", text, flags=re.IGNORECASE).strip()
    if not text:
        raise VerdictError("the extraction reply is empty")
    return None if text.casefold().rstrip(".") in _NONE else text


def prompt_text(name: str) -> str:
    """The package prompt file ``name`` (``benchmint/grade/prompts/<name>``)."""
    return files("benchmint.grade").joinpath("prompts", name).read_text(encoding="utf-8")


def fill(template: str, **values: str) -> str:
    """``template`` with each ``{name}`` replaced by its value, in one pass (values are never re-scanned)."""
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return pattern.sub(lambda m: values[m.group(0)[1:-1]], template)


@dataclass(frozen=True)
class JudgeSpec:
    """One judging task: its prompt file, how a reply is read, and the call's settings."""

    name: str
    prompt_file: str
    parse: Callable[[str], Any]
    max_tokens: int
    low: int = 0
    high: int = 1

    def request(self, model: str, template: str, **values: str):
        from benchmint.models import ChatRequest, Message

        return ChatRequest(model, (Message.user(fill(template, **values)),), temperature=0.0,
                           max_tokens=self.max_tokens)


# The judge may think before answering on reasoning servers; the budget leaves room for it.
SEEPHYS_JUDGE = JudgeSpec("seephys_judge", "seephys_judge.txt", parse_binary, 1024)
SEEPHYS_EXTRACT = JudgeSpec("seephys_extract", "seephys_extract.txt", parse_extracted, 1024)
CSMBENCH_JUDGE = {
    "0-10": JudgeSpec("csmbench_judge", "csmbench_judge_0_10.txt", lambda r: parse_scale(r, 0, 10), 1024, 0, 10),
    "1-10": JudgeSpec("csmbench_judge", "csmbench_judge_1_10.txt", lambda r: parse_scale(r, 1, 10), 1024, 1, 10),
}


SEEPHYS_ERROR_CODES = ("VM", "TM", "MF", "FA", "NM", "OS", "SM", "OT", "RO")  # seephys.txt Table 6
MATVQA_ERROR_CODES = ("VP", "MK", "RJ")  # matvqa.txt §5.3


def parse_code(reply: str, codes: tuple[str, ...]) -> str:
    """One of ``codes`` answered alone (case and a trailing full stop aside); VerdictError for anything else."""
    text = _bare(reply).rstrip(".").strip().upper()
    if text not in codes:
        raise VerdictError(f"expected one of {', '.join(codes)} alone, got {_bare(reply)[:80]!r}")
    return text


ERROR_TYPES = {
    "seephys": JudgeSpec("error_types", "seephys_error_types.txt", lambda r: parse_code(r, SEEPHYS_ERROR_CODES),
                         1024),
    "matvqa": JudgeSpec("error_types", "matvqa_error_types.txt", lambda r: parse_code(r, MATVQA_ERROR_CODES), 1024),
}


@dataclass(frozen=True)
class Judged:
    """One judge call's outcome: ``value`` (the parsed verdict) or ``failure`` (an errors.jsonl row)."""

    value: Any
    reply: str | None
    attempts: int
    cached: bool
    failure: dict | None = None


class Judge:
    """A judge model on an engine: ``run(spec, [(key, {placeholder: text})])`` → ``(key, Judged)`` in input order.

    ``prompts`` maps a prompt file name to replacement text (a user's own prompt); ``progress``: show the calls'
    progress on stderr (``benchmint.progress``).
    """

    def __init__(self, engine, model: str, prompts: dict[str, str] | None = None, progress: bool = False) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("the judge needs a model name (--judge-model)")
        self.engine, self.model, self.progress = engine, model, progress
        self._prompts = dict(prompts or {})

    def template(self, spec: JudgeSpec) -> str:
        if spec.prompt_file not in self._prompts:
            self._prompts[spec.prompt_file] = prompt_text(spec.prompt_file)
        return self._prompts[spec.prompt_file]

    def run(self, spec: JudgeSpec, jobs: Iterable[tuple[Any, dict[str, str]]]) -> Iterator[tuple[Any, Judged]]:
        from benchmint.models import ChatReply
        from benchmint.models.shared import SharedCallExecutor
        from benchmint.progress import Progress

        template = self.template(spec)
        jobs = list(jobs)
        requests = [spec.request(self.model, template, **values) for _, values in jobs]
        # Answers whose judge requests coincide share one call; each keeps its own verdict row.
        calls = SharedCallExecutor(self.engine, lambda wanted: ((i, requests[i]) for i, _ in wanted),
                                   stage=spec.name, parse=spec.parse)
        done: list[tuple[Any, Judged] | None] = [None] * len(jobs)
        args = [(self.engine.key(r), i) for i, r in enumerate(requests)]
        with Progress(f"judge {spec.name}", total=len(jobs), unit="answers", enabled=self.progress) as bar:
            for i, outcome in calls.map_unordered(lambda outcome, _i: outcome, args):
                key = jobs[i][0]
                if isinstance(outcome, ChatReply):
                    judged = Judged(outcome.value, outcome.text, outcome.answer_attempt, outcome.cached)
                else:
                    judged = Judged(None, outcome.text, outcome.answer_attempts, False, outcome.row(key))
                done[i] = (key, judged)
                bar.update()
        for got in done:
            assert got is not None  # every job gets a reply or a failure (the budget's, when it stopped the run)
            yield got
