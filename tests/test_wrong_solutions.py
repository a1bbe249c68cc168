"""Planted wrong solutions (the bugs candidates really write) must fail, on the case meant to catch them."""

from __future__ import annotations

import pytest

from grader.catalog import get_kata
from conftest import WRONG, WRONG_GPU, expected_failures, kata_of_wrong

WRONG_FILES = sorted(WRONG.glob("*.py"))
WRONG_GPU_FILES = sorted(WRONG_GPU.glob("*.py"))


def test_every_kata_has_planted_bugs():
    from conftest import KATA_NAMES
    per_kata = {name: [p for p in WRONG_FILES if kata_of_wrong(p) == name] for name in KATA_NAMES}
    assert all(len(files) >= 4 for files in per_kata.values()), per_kata


@pytest.mark.parametrize("path", WRONG_FILES, ids=[p.stem for p in WRONG_FILES])
def test_wrong_solution_fails(path, grade_interpret):
    kata = kata_of_wrong(path)
    expected = expected_failures(path)
    assert expected, f"{path.name} names no '# expect-fail: CASE' line"
    result = grade_interpret(kata, path)
    assert result.status in ("fail", "error") and result.score == 0, result.message
    # Honest bugs use PyTorch only as the rule allows: never torch_compute (docs/SCORING.md).
    assert "torch_compute" not in {c["reason"] for c in result.cheats}, result.cheats
    failed = {c.name for c in result.cases if c.status in ("fail", "error")}
    assert failed & set(expected), f"expected one of {expected} to fail; failed: {sorted(failed)}"


@pytest.mark.parametrize("path", WRONG_GPU_FILES, ids=[p.stem for p in WRONG_GPU_FILES])
def test_gpu_only_bug_passes_the_interpreter(path, grade_interpret):
    """A GPU-only planted bug is otherwise a correct solution: the interpreter, whose cases are
    too small to show it, passes it. Its GPU failure (tests/gpu/test_gpu_wrong.py) then comes
    from the planted bug alone."""
    kata = kata_of_wrong(path)
    expected = expected_failures(path)
    assert expected, f"{path.name} names no '# expect-fail: CASE' line"
    case_modes = {c.name: c.modes for t in get_kata(kata).tasks for c in t.cases}
    assert all(case_modes.get(name) == ("gpu",) for name in expected), "expect-fail cases must be GPU-only"
    result = grade_interpret(kata, path)
    assert result.status == "pass", result.message
