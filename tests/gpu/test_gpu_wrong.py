"""Planted bugs only a GPU can show (tests/wrong_gpu/): each must fail its GPU grade.

Their trap needs GPU-sized inputs (a table of more than 2**31 elements, say), so the interpreter
passes them; tests/test_wrong_solutions.py checks that, so that the GPU failure here can only
come from the planted bug.
"""

from __future__ import annotations

import pytest

from conftest import WRONG_GPU, expected_failures, kata_of_wrong
from grader.grading.runner import grade
from grader.kata.catalog import get_kata

FILES = sorted(WRONG_GPU.glob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_gpu_only_bug_fails_on_the_gpu(path):
    expected = expected_failures(path)
    assert expected, f"{path.name} names no '# expect-fail: CASE' line"
    # Only the cases meant to catch it: a task stops after 3 failing cases, and a GPU-only bug
    # may already fail earlier cases on a GPU (adamw's moments in bf16 do).
    result = grade(get_kata(kata_of_wrong(path)), path, "gpu", only_cases=expected)
    assert result.status in ("fail", "error") and result.score == 0, result.message
    assert result.cheats == [], "an honest bug is never named a cheat"
    failed = {c.name for c in result.cases if c.status in ("fail", "error")}
    # An out-of-range address kills the CUDA context: the grade then stops with a CUDA fault.
    assert failed & set(expected) or "CUDA fault" in result.message, (sorted(failed), result.message)
