"""The score: one formula, documented in docs/SCORING.md and printed in every report."""

from __future__ import annotations

import math

from grader.results.schema import PASS, SKIPPED, ScoreBreakdown, TaskResult

CORRECTNESS_POINTS = 50.0
SPEED_POINTS = 30.0
ROOFLINE_POINTS = 20.0
PASS_CAP = 2.0  # in the pass test, no case's speedup counts for more than twice the threshold

FORMULA = (
    "score = 0 unless every case that ran is correct; otherwise "
    f"{CORRECTNESS_POINTS:g} (correct) + {SPEED_POINTS:g} x speed credit + "
    f"{ROOFLINE_POINTS:g} x roofline credit. A case's speed credit is min(1, speedup / threshold) "
    "and its roofline credit min(1, roofline fraction / roofline target); each credit is the "
    "geometric mean over the timed cases (then over tasks), so every case counts the same and "
    "no case can earn more than full credit to make up for another. Without a GPU, speed is "
    f"not measured and the most a grade can score is {CORRECTNESS_POINTS:g}."
)


def geomean(values) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarise_task(task: TaskResult, roofline_target: float) -> None:
    """Fill a task's correctness, geometric means and credits from its cases."""
    ran = [c for c in task.cases if c.status not in ("skipped",)]
    task.correct = bool(ran) and all(c.status == PASS for c in ran)
    timed = [c for c in task.cases if c.timed and c.speedup]
    for c in timed:
        c.speed_credit = min(1.0, c.speedup / task.threshold)
        c.roofline_credit = min(1.0, c.roofline / roofline_target) if c.roofline else None
    task.speedup = geomean(c.speedup for c in timed)
    task.roofline = geomean(c.roofline for c in timed)
    task.speed_credit = geomean(c.speed_credit for c in timed)
    task.roofline_credit = geomean(c.roofline_credit for c in timed)
    # The pass test: each case's speedup capped at PASS_CAP x threshold, so one very fast case
    # cannot carry slow ones.
    task.pass_speedup = geomean(min(c.speedup, PASS_CAP * task.threshold) for c in timed)


def tasks_correct(tasks: list[TaskResult]) -> bool:
    """Every task that ran a case in this mode is correct, and at least one task did. A task
    whose cases were all skipped here (FP8 on the interpreter, say) is not graded in this mode:
    it neither fails the grade nor counts towards it."""
    graded = [t for t in tasks if any(c.status != SKIPPED for c in t.cases)]
    return bool(graded) and all(t.correct for t in graded)


def score(tasks: list[TaskResult], speed_measured: bool, correct: bool) -> ScoreBreakdown:
    """The breakdown for a grade; `correct` is the gate (every case that ran passed)."""
    max_possible = CORRECTNESS_POINTS + (SPEED_POINTS + ROOFLINE_POINTS if speed_measured else 0.0)
    if not correct:
        return ScoreBreakdown(0.0, 0.0 if speed_measured else None,
                              0.0 if speed_measured else None, 0.0, max_possible, FORMULA)
    if not speed_measured:
        return ScoreBreakdown(CORRECTNESS_POINTS, None, None, CORRECTNESS_POINTS, max_possible, FORMULA)
    speed = SPEED_POINTS * (geomean(t.speed_credit for t in tasks) or 0.0)
    roof = ROOFLINE_POINTS * (geomean(t.roofline_credit for t in tasks) or 0.0)
    total = round(CORRECTNESS_POINTS + speed + roof, 1)
    return ScoreBreakdown(CORRECTNESS_POINTS, round(speed, 1), round(roof, 1), total,
                          max_possible, FORMULA)


def meets_thresholds(tasks: list[TaskResult]) -> bool:
    return all(t.pass_speedup is not None and t.pass_speedup >= t.threshold for t in tasks)


def points_lost(tasks: list[TaskResult]) -> list[tuple[str, float, float]]:
    """(case label, speed points lost, roofline points lost) for each timed case short of full
    credit, worst first: where a candidate's next improvement pays most."""
    n_tasks = len(tasks) or 1
    lost = []
    for t in tasks:
        timed = [c for c in t.cases if c.speed_credit is not None]
        for c in timed:
            # Raising this case to full credit multiplies the task's geomean by (1/credit)^(1/n).
            share = 1.0 / (len(timed) * n_tasks)
            speed = SPEED_POINTS * (geomean(x.speed_credit for x in tasks) or 0) * \
                ((1.0 / c.speed_credit) ** share - 1.0) if c.speed_credit else 0.0
            roof = ROOFLINE_POINTS * (geomean(x.roofline_credit for x in tasks) or 0) * \
                ((1.0 / c.roofline_credit) ** share - 1.0) if c.roofline_credit else 0.0
            if speed > 0.05 or roof > 0.05:
                lost.append((f"{c.task}/{c.name} [{c.dtype}]", round(speed, 1), round(roof, 1)))
    return sorted(lost, key=lambda item: -(item[1] + item[2]))
