"""What a timing can say against a submission, without torch (the grading parent judges it).

A timing is evidence only when it holds again on a fresh measurement (docs/SCORING.md, "Evidence
from timings"): these rules say what to look at; the parent re-times before it names anything.
"""

from __future__ import annotations

SLOW_FIRST_FACTOR, SLOW_FIRST_MIN_MS = 20.0, 2.0
# Rounds of one timing whose submission/baseline ratios differ by more than this factor were
# disturbed (the two sides alternate within a round, so a steady GPU gives steady ratios).
UNSTEADY_SPREAD = 1.5


def slow_first(warmup_ms, time_ms) -> str | None:
    """A cheat's tell: first calls far slower than the rest, long after compilation finished."""
    if not warmup_ms or not time_ms:
        return None
    first = max(warmup_ms)
    if first > SLOW_FIRST_FACTOR * time_ms and first - time_ms > SLOW_FIRST_MIN_MS:
        return (f"the first timed calls took up to {first:.3g} ms against a median of "
                f"{time_ms:.3g} ms, although the kernel was compiled and run before timing "
                "began: slowing the first calls down is a known trick against timers that size "
                "their runs from them")
    return None


def spread(round_speedups) -> float | None:
    """Largest over smallest per-round speedup (1.0: every round agreed)."""
    ratios = [r for r in round_speedups or () if isinstance(r, (int, float)) and r > 0]
    return max(ratios) / min(ratios) if len(ratios) > 1 else None


def unsteady(round_speedups) -> bool:
    found = spread(round_speedups)
    return found is not None and found > UNSTEADY_SPREAD
