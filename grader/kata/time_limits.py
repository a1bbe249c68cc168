"""How long one case may take before the grade stops and names it.

A case's limit comes from the case: an allowance (more for a task's first case, which compiles
the kernels) plus a multiple of the time the kata's baseline takes on the same inputs, capped so
that a hang is reported within a minute. Time spent compiling or autotuning is added to the
limit of whichever case it happens in (grader.sandbox.progress, capped). `--timeout S` sets
every case's limit (and the whole grade's) to S, for kernels that are honestly slow.

These are time limits only; the worker's CPU memory, processes and output are held by the
parent's watchdog (grader.sandbox.watchdog.ResourceLimits).
"""

from __future__ import annotations

COMPILE_ALLOWANCE_S = {"gpu": 30.0, "interpret": 30.0}  # a task's first case compiles its kernels
CASE_ALLOWANCE_S = {"gpu": 10.0, "interpret": 15.0}
BASELINE_MULTIPLE = {"gpu": 2000.0, "interpret": 20000.0}  # the interpreter is that much slower
CASE_CAP_S = 60.0
TIMING_LIMIT_S = 60.0  # the timing of one bench case: about a second for a kernel near the baseline
GRADE_LIMIT_S = {"gpu": 180.0, "interpret": 300.0}


def case_limit_s(mode: str, first_of_task: bool, baseline_s: float, cap_s: float | None) -> float:
    """cap_s: the limit asked for (`--timeout`), which every case then gets, raised or lowered."""
    if cap_s:
        return float(cap_s)
    allowance = COMPILE_ALLOWANCE_S[mode] if first_of_task else CASE_ALLOWANCE_S[mode]
    return min(CASE_CAP_S, allowance + BASELINE_MULTIPLE[mode] * baseline_s)


def timing_limit_s(cap_s: float | None) -> float:
    return cap_s or TIMING_LIMIT_S
