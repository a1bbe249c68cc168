"""What a grade produces: plain dataclasses, serialisable to the documented JSON (docs/RESULTS.md)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

# Case statuses.
PASS, FAIL, ERROR, SKIPPED, NOT_RUN = "pass", "fail", "error", "skipped", "not_run"
# The JSON's schema tag; version 2 added `diagnoses` and counted, deduplicated `cheats`.
GRADE_SCHEMA = "triton-kata/grade/2"


@dataclass
class Mismatch:
    index: list[int]
    got: float | int | str
    expected: float | int | str


@dataclass
class CaseResult:
    task: str
    name: str
    dtype: str
    shape: list[int] | None
    hidden: bool
    status: str
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatched: int | None = None  # elements out of tolerance
    total: int | None = None  # elements compared
    mismatches: list[Mismatch] = field(default_factory=list)
    time_ms: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    roofline: float | None = None  # fraction of the device's roofline reached (0..1)
    floor_ms: float | None = None  # the roofline time for this case on this device
    cheat: str | None = None  # the named reason when the case was rejected as a cheat
    timing_method: str | None = None  # "events" (call by call) or "cuda_graph" (short kernels)
    round_speedups: list[float] | None = None  # one per timing round; the median is `speedup`
    nbytes: float | None = None  # declared bytes moved (the floor's numerator)
    speed_credit: float | None = None  # min(1, speedup / threshold): its share of the speed points
    roofline_credit: float | None = None  # min(1, roofline / target): its share of the roofline points
    flops: float | None = None  # declared FLOPs
    diagnosis: str | None = None  # the diagnosis code when the case failed without a cheat
    # Per output, the worst error as a fraction of what the tolerance allows there (1.0: at the
    # limit) over the checked calls; None where not measured (a property check, an error).
    tolerance_used: dict[str, float] | None = None
    # Operations that made the host wait for the GPU in one untimed call (grader.timing.host_syncs),
    # and where the first was called ("file.py:LINE"); None where not watched.
    host_syncs: int | None = None
    host_sync_at: str | None = None
    launches: int | None = None  # Triton kernels launched by the second checked call
    # The anatomy of one profiled call, on a GPU (grader.judge.kernel_anatomy): per kernel, and
    # the call's summary (or a note saying why there is none). Advice only.
    kernels: list[dict[str, Any]] | None = None
    anatomy: dict[str, Any] | None = None

    @property
    def timed(self) -> bool:
        return self.time_ms is not None


@dataclass
class TaskResult:
    name: str
    threshold: float
    baseline: str
    cases: list[CaseResult]
    correct: bool
    speedup: float | None = None  # geometric mean over the timed cases
    roofline: float | None = None  # geometric mean over the timed cases
    speed_credit: float | None = None  # geometric mean of the cases' speed credits
    roofline_credit: float | None = None  # geometric mean of the cases' roofline credits
    pass_speedup: float | None = None  # geomean with each case capped at 2x the threshold


@dataclass
class ScoreBreakdown:
    correctness: float
    speed: float | None
    roofline: float | None
    total: float
    max_possible: float
    formula: str


@dataclass
class GradeResult:
    kata: str
    title: str
    submission: str
    submission_sha256: str | None
    mode: str  # gpu | interpret
    status: str  # pass | fail | error
    correct: bool
    score: float
    speedup: float | None
    threshold: float
    roofline: float | None
    tasks: list[TaskResult]
    message: str = ""  # one paragraph: why the grade failed or errored, when it did
    score_breakdown: ScoreBreakdown | None = None
    skipped: list[dict[str, str]] = field(default_factory=list)
    output: str = ""  # what the submission printed (trimmed)
    device: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    duration_s: float | None = None
    # Where duration_s went: start_up, checked_cases, timing (grader.grading.runner.phases).
    phases_s: dict[str, float] = field(default_factory=dict)
    # Seconds of it the worker spent in Triton's compiler and autotuners, as it reported them
    # (within checked_cases and timing; the compile-ahead helpers' compiling is not counted).
    compile_s: float | None = None
    speed_measured: bool = False
    cheat: str | None = None  # the first named cheat reason, when the grade was rejected as one
    # Once per reason: {reason, count (cases), first_case (None: the whole grade), message}.
    cheats: list[dict[str, Any]] = field(default_factory=list)
    # What went wrong, once per code: {code, count, first_case, message, advice}.
    diagnoses: list[dict[str, Any]] = field(default_factory=list)
    # How to be faster, once per code, in the same shape; it never changes the verdict.
    advice: list[dict[str, Any]] = field(default_factory=list)
    sandbox: dict[str, Any] = field(default_factory=dict)  # the limits the submission ran under
    # The cases this grade was limited to (`kata grade --case`): a partial grade, never recorded.
    only_cases: list[str] | None = None
    # Set when the GPU was shared while this grade ran: {processes: [{pid, name, used_mib, when}],
    # unsteady_cases: [{case, spread}]}. Its speed is unreliable, no timing-based cheat is named,
    # and leaderboards do not rank it (docs/RESULTS.md).
    gpu_shared: dict[str, Any] | None = None
    # Timings that looked like a cheat and were not named: {case, reason, message, outcome}.
    timings_disturbed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cases(self) -> list[CaseResult]:
        return [c for t in self.tasks for c in t.cases]

    def to_dict(self) -> dict[str, Any]:
        data = json_safe(asdict(self))
        data["schema"] = GRADE_SCHEMA
        return data


# JSON has no NaN or infinity (an output full of NaN has a NaN max_abs_err, an infinite error an
# infinite tolerance_used): they are written as the names JavaScript and Python give them, as
# strings, so `--json`, the store and its exports stay strict JSON that any parser reads.
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_safe(value: Any) -> Any:
    """value with every non-finite float, however deep, replaced by its name (NON_FINITE)."""
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE[repr(value)]
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
