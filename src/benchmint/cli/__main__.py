"""``python -m benchmint.cli``."""

import sys

from benchmint.cli import main

sys.exit(main())
