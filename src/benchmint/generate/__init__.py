"""Figures -> questions (flow 3): the generators, as bounded, cached, resumable model stages.

Every generator runs its stages as keyed units on ``benchmint.run.run_units`` with the model engines as the
executor (``generate.executor.RoleExecutor``: one engine per role, "vlm", "gen", "advisor", ...), and a loop's
next round as the follow-up unit of the round before (``run_units(then=...)``): a killed run resumes round by
round and asks no call that was answered; a rerun of a finished run asks nothing. Prompts, term lists and
taxonomies are package files under ``generate/prompts/<generator>/`` (replaceable with ``--prompts DIR``, hashed
in run.json); structured replies are asked for by JSON schema and checked (``generate.schema``), an invalid one
asked again within the engine's answer-attempt bound and then rejected with its reason. The outputs every
generator writes are listed in ``generate.flow``.

Generators: ``generate.spm`` (SPM-Bench: llbox, Q&A, advisory loop), ``generate.matvqa`` (MatVQA: reasoning
path with its evidence check, question, language and caption shortcut removal).
"""
