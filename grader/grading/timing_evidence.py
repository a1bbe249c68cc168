"""What a timed case's timing would accuse the submission of, judged in the grading parent.

Timing evidence is named only when it reproduces (docs/SCORING.md, "Evidence from timings"):
the referee asks this of each first timing, has a suspect case timed again, and the runner asks
it again of the second; the floor rests on the physical ceilings (grader.timing.ceilings), never
on one measurement.
"""

from __future__ import annotations

from grader.grading.plan import PlannedCase
from grader.kata.format import ITEMSIZE, Kata
from grader.timing.ceilings import floor_ms, physical
from grader.timing.evidence import slow_first

FLOOR_MARGIN = 0.9  # a time below 90% of the roofline floor is impossible, not fast


def cost(kata: Kata, planned: PlannedCase) -> tuple[float | None, float | None]:
    """The case's declared (bytes, FLOPs) at its dtype."""
    if planned.dtype not in ITEMSIZE:
        return None, None
    task = next(t for t in kata.tasks if t.name == planned.task)
    return task.cost(task.case(planned.case), itemsize=ITEMSIZE[planned.dtype])


def impossible(time_ms: float, nbytes: float | None, flops: float | None, ceilings: dict | None) -> str | None:
    """Why `time_ms` is below the floor the ceilings allow (by more than the margin), or None."""
    if not ceilings or not isinstance(time_ms, (int, float)):
        return None
    try:
        floor = floor_ms(nbytes, flops, ceilings)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):  # ceilings of another shape
        return None
    if not floor or time_ms >= FLOOR_MARGIN * floor:
        return None
    parts = []
    if nbytes:
        parts.append(f"moving {nbytes / 1e6:.4g} MB at {ceilings['copy_gbps']:.0f} GB/s takes "
                     f"{nbytes / ceilings['copy_gbps'] / 1e6:.4g} ms")
    if flops:
        parts.append(f"{flops / 1e9:.4g} GFLOP at {ceilings['matmul_tflops']:.0f} TFLOP/s take "
                     f"{flops / ceilings['matmul_tflops'] / 1e9:.4g} ms")
    return (f"measured {time_ms:.4g} ms, below the physical floor of {floor:.4g} ms "
            f"({'; '.join(parts)}): impossible, so the time is rejected")


def suspicion(kata: Kata, planned: PlannedCase, timing: dict, ceilings: dict | None,
              device: str | None) -> tuple[str, str] | None:
    """(reason, message) when the timing would name a cheat, else None. `ceilings`: the best
    measured this grade; the floor uses them raised to the device's datasheet peaks."""
    if not isinstance(timing, dict):
        return None
    slow = slow_first(timing.get("warmup_ms"), timing.get("time_ms"))
    if slow:
        return "slow_first_calls", slow
    nbytes, flops = cost(kata, planned)
    below = impossible(timing.get("time_ms"), nbytes, flops, physical(ceilings, device))
    return ("below_physical_floor", below) if below else None
