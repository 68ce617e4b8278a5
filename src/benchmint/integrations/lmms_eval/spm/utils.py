"""lmms-eval functions of benchmint's SPM-Bench task(s): benchmint.integrations.lmms builds them."""

from benchmint.integrations.lmms import export

export(globals(), "spm", (None,))
