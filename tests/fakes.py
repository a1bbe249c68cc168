"""Fake grades for the learner's-loop and interview tests: real GradeResult objects, no worker.

A real interpreter grade takes seconds; these tests need dozens of grades with chosen outcomes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from grader.results.schema import GradeResult, ScoreBreakdown, TaskResult
from grader.results.scoring import FORMULA

PASS_MARK = "# fake: pass"  # a solution containing this line passes fake_grade


def fake_result(kata: str = "vector_add", status: str = "pass", mode: str = "interpret",
                score: float | None = None, speedup: float | None = None,
                roofline: float | None = None, threshold: float = 0.9, message: str = "",
                submission: str = "solution.py", sha: str = "0" * 64) -> GradeResult:
    speed_measured = mode == "gpu" and speedup is not None
    max_possible = 100.0 if speed_measured else 50.0
    correct = status == "pass" or (speed_measured and score)
    if score is None:
        score = 50.0 if status == "pass" else 0.0
    if status != "pass" and not message:
        message = "1 case(s) failed; first: vector_add/odd_tail [float32]: 3 of 1023 elements differ"
    breakdown = ScoreBreakdown(50.0 if correct else 0.0, None, None, score, max_possible, FORMULA)
    return GradeResult(
        kata=kata, title=kata, submission=submission, submission_sha256=sha, mode=mode,
        status=status, correct=bool(correct), score=score, speedup=speedup, threshold=threshold,
        roofline=roofline, tasks=[TaskResult(kata, threshold, "PyTorch eager", [], bool(correct))],
        message=message, score_breakdown=breakdown, speed_measured=speed_measured, seed=1)


def fake_grade(kata, solution, mode=None, *, seed=None, timeout_s=None, memory_gib=None,
               protected=(), **options) -> GradeResult:
    """Stands in for grader.grading.runner.grade: passes when the file holds PASS_MARK."""
    text = Path(solution).read_text()
    status = "pass" if PASS_MARK in text else "fail"
    return fake_result(kata.name, status, mode or "interpret", submission=str(solution),
                       sha=hashlib.sha256(text.encode()).hexdigest())
