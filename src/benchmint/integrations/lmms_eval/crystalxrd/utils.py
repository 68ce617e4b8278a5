"""lmms-eval functions of benchmint's CrystalXRD-Bench task(s): benchmint.integrations.lmms builds them."""

from benchmint.integrations.lmms import export

export(globals(), "crystalxrd", ("full",))
