"""A developer's view of where a grade's process spends its time: run under cProfile, the top
functions appended to a file (KATA_CHECKER_PROFILE for the checker, KATA_WORKER_PROFILE for the
worker; docs/PERFORMANCE.md has what they found)."""

from __future__ import annotations

import cProfile
import os
import pstats


def profiled(run, path: str, top: int = 45) -> int:
    """run() under cProfile; its top functions by cumulative time appended to `path`."""
    profile = cProfile.Profile()
    try:
        return profile.runcall(run)
    finally:
        with open(path, "a") as f:
            pstats.Stats(profile, stream=f).sort_stats("cumulative").print_stats(top)


def run_maybe_profiled(run, variable: str) -> int:
    """run(), profiled into the file the environment variable names when it is set."""
    path = os.environ.get(variable)
    return profiled(run, path) if path else run()
