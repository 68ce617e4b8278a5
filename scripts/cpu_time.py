"""CPU seconds (user + system) of this process or of its finished children: the measuring scripts' one clock."""

from __future__ import annotations

import resource

SELF, CHILDREN = resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN


def cpu(who: int = SELF) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime
