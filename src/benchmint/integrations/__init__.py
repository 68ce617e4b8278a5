"""benchmint inside other evaluators: result tables (``tables``), Inspect AI tasks (``inspect``) and lmms-eval
task directories (``lmms_eval/``, package data).

Each is a thin layer over benchmint's own readers, prompts and scoring: a table is scored by the same
``score``/``grade`` flow the commands run, so its numbers are those of the commands on the same rows.
"""
