"""lmms-eval functions of benchmint's SeePhys task(s): benchmint.integrations.lmms builds them."""

from benchmint.integrations.lmms import export

export(globals(), "seephys", ("TV", "TC", "TO"))
