"""lmms-eval functions of benchmint's CSMBench open description task(s): benchmint.integrations.lmms builds them."""

from benchmint.integrations.lmms import export

export(globals(), "csmbench-open", (None,))
