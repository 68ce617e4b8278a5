"""lmms-eval functions of benchmint's MatVQA task(s): benchmint.integrations.lmms builds them."""

from benchmint.integrations.lmms import export

export(globals(), "matvqa", (None,))
