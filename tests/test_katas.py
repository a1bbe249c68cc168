"""Every kata is well formed, its reference passes, its stub fails (rustlings-style)."""

from __future__ import annotations

import pytest

from conftest import KATA_NAMES
from grader.kata.catalog import get_kata
from grader.kata.format import MODES


@pytest.mark.parametrize("name", KATA_NAMES)
def test_kata_is_complete(name):
    kata = get_kata(name)
    assert kata.spec_path.is_file() and kata.stub_path.is_file() and kata.reference_path.is_file()
    assert len(kata.hints) == 3 and all(h.strip() for h in kata.hints)
    assert kata.statement.strip()
    for task in kata.tasks:
        hidden = [c for c in task.cases if c.hidden]
        public = [c for c in task.cases if not c.hidden]
        assert public and hidden
        assert any("interpret" in c.modes for c in hidden), "hidden cases must run without a GPU"
        assert any(c.bench for c in task.cases), "at least one case must be timed on a GPU"
        assert all(set(c.modes) <= set(MODES) for c in task.cases)
        for case in task.cases:
            nbytes, _ = task.cost(case, itemsize=2)
            assert nbytes and nbytes > 0


@pytest.mark.parametrize("name", KATA_NAMES)
def test_reference_passes(name, grade_interpret):
    kata = get_kata(name)
    result = grade_interpret(name, kata.reference_path)
    assert result.status == "pass", result.message
    assert result.correct and result.score == 50
    assert result.cheat is None and result.cheats == []  # honest solutions are never flagged
    ran = [c for c in result.cases if c.status != "skipped"]
    assert len(ran) >= 8 and all(c.status == "pass" for c in ran)
    assert all(c.max_abs_err is not None for c in ran)
    # The interpreter report says what it could not run and why.
    assert result.skipped and all(s["reason"] for s in result.skipped)
    assert not result.speed_measured and result.speedup is None
    # No advice on speed for a reference: every case's work in a few launches.
    assert result.advice == [] and all(c.launches for c in ran), result.advice


@pytest.mark.parametrize("name", KATA_NAMES)
def test_stub_fails_with_not_implemented(name, grade_interpret):
    kata = get_kata(name)
    result = grade_interpret(name, kata.stub_path)
    assert result.status != "pass"
    assert result.score == 0
    assert "not implemented" in result.message.lower()
