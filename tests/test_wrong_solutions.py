"""Planted wrong solutions (the bugs candidates really write) must fail, on the case meant to
catch them, with a diagnosis of what went wrong and never a cheat: an honest bug is not gaming
the grade. Every file under tests/wrong/ is checked, those of katas added later too."""

from __future__ import annotations

import json
import re

import pytest

from conftest import WRONG, WRONG_GPU, expected_failures, kata_of_wrong
from grader.judge.failure_codes import ADVICE
from grader.kata.catalog import get_kata
from grader.results.report import render_report

WRONG_FILES = sorted(WRONG.glob("*.py"))
WRONG_GPU_FILES = sorted(WRONG_GPU.glob("*.py"))


def expected_diagnoses(path) -> list[str]:
    """'# expect-diagnosis: CODE' lines: at least one of them must be named."""
    return re.findall(r"^# expect-diagnosis:\s*(\S+)", path.read_text(), flags=re.M)


def test_every_kata_has_planted_bugs():
    from conftest import KATA_NAMES
    per_kata = {name: [p for p in WRONG_FILES if kata_of_wrong(p) == name] for name in KATA_NAMES}
    assert all(len(files) >= 4 for files in per_kata.values()), per_kata


def test_expected_diagnoses_are_known_codes():
    for path in WRONG_FILES:
        unknown = set(expected_diagnoses(path)) - set(ADVICE)
        assert not unknown, f"{path.name} expects unknown diagnosis code(s) {unknown}"


@pytest.mark.parametrize("path", WRONG_FILES, ids=[p.stem for p in WRONG_FILES])
def test_wrong_solution_fails_with_a_diagnosis_and_no_cheat(path, grade_interpret):
    kata = kata_of_wrong(path)
    expected = expected_failures(path)
    assert expected, f"{path.name} names no '# expect-fail: CASE' line"
    # Only the cases meant to catch it (`kata grade --case`, as a learner reruns a failing
    # case), with --fail-fast: seconds per file, however many cases the kata has.
    result = grade_interpret(kata, path, fail_fast=True, only_cases=expected)
    assert result.status == "fail" and result.score == 0, result.message
    failed = {c.name for c in result.cases if c.status in ("fail", "error")}
    assert failed & set(expected), f"expected one of {expected} to fail; failed: {sorted(failed)}"

    # Named as a bug, not a cheat, in the result, the JSON and the report.
    assert result.cheat is None and result.cheats == [], result.cheats
    assert result.diagnoses, "a failing grade must say what went wrong"
    assert all(c.cheat is None for c in result.cases)
    assert all(c.diagnosis for c in result.cases if c.status in ("fail", "error"))
    codes = [d["code"] for d in result.diagnoses]
    assert len(codes) == len(set(codes)), "each diagnosis is listed once per code"
    # A planted bug errs far beyond the honest-error envelope: never excused as rounding.
    assert "near_miss" not in codes, result.diagnoses
    assert all(d["count"] >= 1 and d["message"] and d["advice"] for d in result.diagnoses)
    wanted = expected_diagnoses(path)
    if wanted and not set(wanted) & set(codes):  # named on a later case than the one that stopped it
        full = grade_interpret(kata, path)  # e.g. hidden_cases_fail: needs the public cases too
        assert full.cheats == [], full.cheats
        assert set(wanted) & {d["code"] for d in full.diagnoses}, f"expected one of {wanted}; got {full.diagnoses}"
    data = json.loads(json.dumps(result.to_dict(), default=str))
    assert data["cheat"] is None and data["cheats"] == [] and data["diagnoses"] == result.diagnoses
    report = render_report(result, "md")
    assert "## What went wrong" in report and "Rejected" not in report
    assert f"`{codes[0]}`" in report


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
