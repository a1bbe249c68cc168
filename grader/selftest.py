"""Selftest: every reference must pass its kata and every stub must fail it."""

from __future__ import annotations

from dataclasses import dataclass

from grader.kata import Kata
from grader.results import PASS, GradeResult
from grader.runner import grade


@dataclass
class SelftestResult:
    kata: str
    reference: GradeResult
    stub: GradeResult

    @property
    def ok(self) -> bool:
        return self.reference.status == PASS and self.stub.status != PASS


def selftest(katas: list[Kata], mode: str | None = None, timeout_s: float | None = None) -> list[SelftestResult]:
    return [
        SelftestResult(kata.name, grade(kata, kata.reference_path, mode, timeout_s=timeout_s),
                       grade(kata, kata.stub_path, mode, timeout_s=timeout_s))
        for kata in katas
    ]
