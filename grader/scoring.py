"""The score: one formula, documented in docs/SCORING.md and printed in every report."""

from __future__ import annotations

import math

from grader.results import PASS, ScoreBreakdown, TaskResult

CORRECTNESS_POINTS = 50.0
SPEED_POINTS = 30.0
ROOFLINE_POINTS = 20.0

FORMULA = (
    "score = 0 unless every case that ran is correct; otherwise "
    f"{CORRECTNESS_POINTS:g} (correct) + {SPEED_POINTS:g} x min(1, speedup / threshold) "
    f"+ {ROOFLINE_POINTS:g} x min(1, roofline fraction / roofline target), where speedup and "
    "roofline fraction are geometric means over the timed cases (speed is per task, capped at "
    "the threshold before averaging tasks). Without a GPU, speed is not measured and the most "
    f"a grade can score is {CORRECTNESS_POINTS:g}."
)


def geomean(values) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarise_task(task: TaskResult) -> None:
    """Fill a task's correctness and geometric means from its cases."""
    ran = [c for c in task.cases if c.status not in ("skipped",)]
    task.correct = bool(ran) and all(c.status == PASS for c in ran)
    task.speedup = geomean(c.speedup for c in task.cases if c.timed)
    task.roofline = geomean(c.roofline for c in task.cases if c.timed)


def score(tasks: list[TaskResult], speed_measured: bool, roofline_target: float,
          correct: bool) -> ScoreBreakdown:
    """The breakdown for a grade; `correct` is the gate (every case that ran passed)."""
    max_possible = CORRECTNESS_POINTS + (SPEED_POINTS + ROOFLINE_POINTS if speed_measured else 0.0)
    if not correct:
        return ScoreBreakdown(0.0, 0.0 if speed_measured else None,
                              0.0 if speed_measured else None, 0.0, max_possible, FORMULA)
    if not speed_measured:
        return ScoreBreakdown(CORRECTNESS_POINTS, None, None, CORRECTNESS_POINTS, max_possible, FORMULA)
    speed_ratio = geomean(min(1.0, t.speedup / t.threshold) for t in tasks if t.speedup)
    speed = SPEED_POINTS * (speed_ratio or 0.0)
    roofline = geomean(t.roofline for t in tasks if t.roofline)
    roof = ROOFLINE_POINTS * min(1.0, roofline / roofline_target) if roofline else 0.0
    total = round(CORRECTNESS_POINTS + speed + roof, 1)
    return ScoreBreakdown(CORRECTNESS_POINTS, round(speed, 1), round(roof, 1), total,
                          max_possible, FORMULA)


def meets_thresholds(tasks: list[TaskResult]) -> bool:
    return all(t.speedup is not None and t.speedup >= t.threshold for t in tasks)
