"""Selftest: every reference must pass its kata and every stub must fail it.

The grades run side by side (correctness needs no quiet GPU), but a grade that times has the
GPU to itself: no case of another grade runs meanwhile (GpuTurns, below).

Side by side on one GPU, the grades share its memory: four checkers holding float64 truths of
the largest cases can exhaust it, and a grade then fails for a reason that is not its own (the
grader's "GPU busy" error, or a checker that dies). A reference that fails side by side on a
GPU is therefore graded again alone, as a learner's grade always runs; the result says so.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from grader.grading.runner import grade
from grader.kata import time_limits
from grader.kata.format import Kata
from grader.results.schema import PASS, GradeResult

# Grades at once: each is a worker, a checker and their compilers (Triton compiles on the CPU).
PARALLEL = max(1, min(4, (os.cpu_count() or 2) // 2))


class GpuTurns:
    """Grades side by side on one GPU: their checked cases may overlap one another, but a grade
    that times has the GPU to itself (no case of another grade runs while it times)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._cases = 0  # checked cases in flight, across grades
        self._timing = False
        self._waiting_to_time = 0

    def case_begin(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._timing and not self._waiting_to_time)
            self._cases += 1

    def case_end(self) -> None:
        with self._cond:
            self._cases -= 1
            self._cond.notify_all()

    def timing_begin(self) -> None:
        with self._cond:
            self._waiting_to_time += 1
            self._cond.wait_for(lambda: not self._timing and self._cases == 0)
            self._waiting_to_time -= 1
            self._timing = True

    def timing_end(self) -> None:
        with self._cond:
            self._timing = False
            self._cond.notify_all()


@dataclass
class SelftestResult:
    kata: str
    reference: GradeResult
    stub: GradeResult
    # The reference's side-by-side grade, when it failed and the reference was graded again alone.
    reference_side_by_side: GradeResult | None = None

    @property
    def ok(self) -> bool:
        return self.reference.status == PASS and self.stub.status != PASS


def selftest(katas: list[Kata], mode: str | None = None, timeout_s: float | None = None,
             parallel: int = PARALLEL) -> list[SelftestResult]:
    turns = GpuTurns()

    def run(kata, path):
        # Waiting for a turn counts against the whole grade's limit: give it room, but keep
        # each case's own limit.
        return grade(kata, path, mode, timeout_s=timeout_s or 20 * 60,
                     case_timeout_s=timeout_s or time_limits.CASE_CAP_S,
                     fail_fast=path == kata.stub_path, turns=turns)

    first = None
    if katas and mode == "gpu":
        # Alone: a worker measures the GPU's ceilings (copy bandwidth, peak FLOP/s) before its
        # first case, outside any turn, and caches them. Measured beside other grades they would
        # be low for every grade after.
        first = run(katas[0], katas[0].reference_path)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [(kata, pool.submit(run, kata, kata.reference_path) if i or first is None else None,
                    pool.submit(run, kata, kata.stub_path)) for i, kata in enumerate(katas)]
        results = [SelftestResult(kata.name, ref.result() if ref else first, stub.result())
                   for kata, ref, stub in futures]
    if mode == "gpu" and parallel > 1:
        for kata, result in zip(katas, results):
            if result.reference.status != PASS and result.reference is not first:
                result.reference_side_by_side = result.reference
                result.reference = run(kata, kata.reference_path)  # alone now: the pool is done
    return results
