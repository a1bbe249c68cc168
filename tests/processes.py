"""Processes found by the name they gave themselves (prctl PR_SET_NAME), for the tests that
check a grade leaves nothing running: a forked worker does not show its environment in /proc,
so a name is the marker that works for forked and fresh processes alike."""

from __future__ import annotations

import os
import time
from pathlib import Path


def running_named(name: str) -> list[int]:
    """Running processes called `name`. A zombie is dead already: reaping it is the business of
    whoever adopted it (the machine's init, which need not be quick about it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat[stat.find("(") + 1:stat.rfind(")")] == name and stat[stat.rfind(")") + 2:][:1] not in "ZX":
            found.append(int(entry))
    return found


def left_running(name: str, within_s: float = 10.0) -> list[int]:
    """The processes called `name` still running after up to within_s (a kill takes effect
    asynchronously): empty once they are all gone."""
    deadline = time.monotonic() + within_s
    while running_named(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running_named(name)
