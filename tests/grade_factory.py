"""Consistent GradeResult objects built by hand, so store and leaderboard tests need no grading."""

from __future__ import annotations

from grader.results.schema import CaseResult, GradeResult, ScoreBreakdown, TaskResult
from grader.results.scoring import FORMULA

H100 = "NVIDIA H100 80GB HBM3"
INTERPRETER = "CPU (Triton interpreter)"


def make_grade(kata: str = "vector_add", *, mode: str = "gpu", correct: bool = True,
               score: float | None = None, speedup: float | None = 1.5, roofline: float | None = 0.8,
               device: str | None = None, threshold: float = 1.2, passing: bool | None = None,
               cases: int = 3, **extra) -> GradeResult:
    """A grade as the runner would make it. On a GPU and correct: the given speedup, roofline and
    score (default 50 + 30 + 20 scaled); under the interpreter: correctness only (50 or 0)."""
    gpu = mode == "gpu"
    speedup = speedup if (gpu and correct) else None
    roofline = roofline if (gpu and correct) else None
    if score is None:
        score = 0.0 if not correct else 50.0 if not gpu else round(
            50 + 30 * min(1.0, (speedup or 0) / threshold) + 20 * min(1.0, (roofline or 0) / 0.8), 1)
    if passing is None:
        passing = correct and (not gpu or (speedup or 0) >= threshold)
    case_results = [
        CaseResult(task=kata, name=f"case{i}", dtype="float32", shape=[1000 + i], hidden=True,
                   status="pass" if correct or i else "fail",
                   message="" if correct or i else "1 of 1000 elements differ",
                   max_abs_err=0.0, mismatched=0, total=1000 + i,
                   time_ms=0.01 if speedup else None, baseline_ms=0.015 if speedup else None,
                   speedup=speedup, roofline=roofline)
        for i in range(cases)]
    case_results.append(CaseResult(task=kata, name="bf16_case", dtype="bfloat16", shape=[64],
                                   hidden=True, status="skipped", message="not under the interpreter"))
    task = TaskResult(name=kata, threshold=threshold, baseline="torch eager", cases=case_results,
                      correct=correct, speedup=speedup, roofline=roofline)
    max_possible = 100.0 if gpu else 50.0
    breakdown = ScoreBreakdown(50.0 if correct else 0.0, None, None, score, max_possible, FORMULA)
    return GradeResult(
        kata=kata, title=kata.replace("_", " ").title(), submission=f"/home/u/{kata}/solution.py",
        submission_sha256="ab" * 32, mode=mode, status="pass" if passing else "fail",
        correct=correct, score=score, speedup=speedup, threshold=threshold, roofline=roofline,
        tasks=[task], message="" if passing else "not fast enough" if correct else "a case failed",
        score_breakdown=breakdown, device=device or (H100 if gpu else INTERPRETER),
        environment={"python": "3.11.7", "torch": "2.13.0", "triton": "3.9.0", "grader": "0.1.0"},
        seed=1234, duration_s=3.5, speed_measured=speedup is not None, **extra)
