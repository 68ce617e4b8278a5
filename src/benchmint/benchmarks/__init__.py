"""The benchmarks ``benchmint eval`` runs: items in, prompts out, each as its paper ran it.

``get(name)`` gives a benchmark object that reads items from every layout the
benchmark ships in (``read_items``), builds each item's prompt in a setting
(``prompt``), carries the protocol of its paper (``protocol``) and describes
itself for run.json (``run_record``). Prompts are the package files
``benchmint/benchmarks/prompts/<benchmark>/<setting>.txt`` and protocols
``benchmint/benchmarks/protocols/<benchmark>.json``; ``get(name, prompts=DIR,
protocol=FILE)`` replaces them by the user's.
"""

from __future__ import annotations

from pathlib import Path

from benchmint.benchmarks.base import (
    Benchmark,
    EvalItem,
    ImagePart,
    ImageRef,
    ItemError,
    Prompt,
    PromptError,
    Protocol,
    TextPart,
    item_file_stem,
)
from benchmint.benchmarks.crystalxrd import CrystalXRD
from benchmint.benchmarks.csmbench import CSMBenchMCQ, CSMBenchOpen
from benchmint.benchmarks.matvqa import MatVQA
from benchmint.benchmarks.seephys import SeePhys
from benchmint.benchmarks.spm import SPMBench

_CLASSES: dict[str, type[Benchmark]] = {cls.name: cls for cls in (SPMBench, CrystalXRD, CSMBenchMCQ, CSMBenchOpen,
                                                                    SeePhys, MatVQA)}


def names() -> list[str]:
    """The benchmark names ``get`` takes."""
    return list(_CLASSES)


def graded() -> list[str]:
    """The benchmarks ``benchmint grade`` takes."""
    return [name for name, cls in _CLASSES.items() if cls.graded]


def get(name: str, prompts: str | Path | None = None, protocol: str | Path | None = None) -> Benchmark:
    """The benchmark called ``name``; ``prompts`` a folder of replacement prompt files, ``protocol`` a JSON
    file of protocol keys to replace. ValueError listing the names for an unknown one."""
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"benchmark must be one of {', '.join(names())}; got {name!r}")
    return cls(prompts=prompts, protocol=protocol)


__all__ = ["Benchmark", "EvalItem", "ImagePart", "ImageRef", "ItemError", "Prompt", "PromptError", "Protocol",
           "TextPart", "get", "graded", "item_file_stem", "names"]
