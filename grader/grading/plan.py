"""Which cases a grade runs, in which order, and which it skips (and why)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from grader.kata.format import Kata


@dataclass(frozen=True)
class PlannedCase:
    task: str
    case: str
    dtype: str
    hidden: bool
    bench: bool  # timed against the baseline (GPU mode only)
    skip_reason: str | None = None

    @property
    def key(self) -> str:
        return f"{self.task}/{self.case}/{self.dtype}"

    def to_dict(self) -> dict:
        return asdict(self)


def build_plan(kata: Kata, mode: str) -> list[PlannedCase]:
    plan = []
    for task in kata.tasks:
        for case in task.cases:
            for dtype in case.dtypes:
                plan.append(PlannedCase(
                    task=task.name, case=case.name, dtype=dtype, hidden=case.hidden,
                    bench=case.bench and mode == "gpu",
                    skip_reason=task.skip_reason(mode, dtype, case),
                ))
    return plan
