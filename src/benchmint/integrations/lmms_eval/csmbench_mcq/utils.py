"""lmms-eval functions of benchmint's CSMBench caption matching task(s): benchmint.integrations.lmms builds them."""

from benchmint.integrations.lmms import export

export(globals(), "csmbench-mcq", (None,))
