"""``python -m benchmint.cli``."""

from benchmint.cli import entry

entry()
