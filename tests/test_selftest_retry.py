"""Selftest on a GPU: a reference that fails beside other grades is graded again alone.

Side by side, the grades share the GPU's memory, and a reference can fail for a reason that is
not its own (measured on an H100: four checkers of the largest cases filled the GPU, and two
references came back as grader errors). The grade function is replaced here by a script of
results, so the test runs without a GPU."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from grader.grading import selftest as selftest_module
from grader.results.schema import PASS


def _kata(name):
    return SimpleNamespace(name=name, reference_path=f"{name}/reference.py", stub_path=f"{name}/stub.py")


@pytest.fixture
def scripted_grades(monkeypatch):
    """grade() answers from a script: {path: [status of the 1st call, of the 2nd, ...]}."""
    calls, lock = [], threading.Lock()

    def install(script):
        calls.clear()

        def fake_grade(kata, path, mode, **_):
            with lock:
                n = sum(1 for c in calls if c == path)
                calls.append(path)
            statuses = script.get(path, ["fail"])
            return SimpleNamespace(status=statuses[min(n, len(statuses) - 1)], message=f"{path} #{n}")
        monkeypatch.setattr(selftest_module, "grade", fake_grade)
        return calls
    return install


def test_a_reference_failing_side_by_side_is_graded_again_alone(scripted_grades):
    katas = [_kata("a"), _kata("b"), _kata("c")]
    calls = scripted_grades({"a/reference.py": ["pass"], "b/reference.py": ["error", "pass"],
                             "c/reference.py": ["pass"]})
    results = selftest_module.selftest(katas, "gpu", parallel=2)
    by_name = {r.kata: r for r in results}
    assert by_name["b"].reference.status == PASS and by_name["b"].ok
    assert by_name["b"].reference_side_by_side.status == "error"
    # The second grade of b's reference came after every other grade (alone, the pool done).
    assert calls[-1] == "b/reference.py" and calls.count("b/reference.py") == 2
    assert by_name["a"].reference_side_by_side is None and by_name["c"].reference_side_by_side is None


def test_a_reference_that_fails_alone_too_stays_failed(scripted_grades):
    katas = [_kata("a"), _kata("b")]
    calls = scripted_grades({"a/reference.py": ["pass"], "b/reference.py": ["fail", "fail"]})
    results = selftest_module.selftest(katas, "gpu", parallel=2)
    b = next(r for r in results if r.kata == "b")
    assert not b.ok and b.reference.status == "fail" and b.reference_side_by_side.status == "fail"
    assert calls.count("b/reference.py") == 2


def test_no_second_grade_for_the_first_kata_or_on_the_interpreter(scripted_grades):
    # The first kata's reference already ran alone (it measures the ceilings); the interpreter
    # shares no GPU.
    calls = scripted_grades({"a/reference.py": ["fail"], "b/reference.py": ["error", "pass"]})
    results = selftest_module.selftest([_kata("a"), _kata("b")], "gpu", parallel=2)
    assert calls.count("a/reference.py") == 1 and results[0].reference_side_by_side is None
    calls = scripted_grades({"a/reference.py": ["pass"], "b/reference.py": ["error", "pass"]})
    results = selftest_module.selftest([_kata("a"), _kata("b")], "interpret", parallel=2)
    assert calls.count("b/reference.py") == 1 and results[1].reference.status == "error"
    assert results[1].reference_side_by_side is None


def test_the_command_says_which_reference_was_graded_again(monkeypatch):
    from click.testing import CliRunner

    from grader.cli.main import main

    def grade_result(status, message=""):
        return SimpleNamespace(status=status, score=100.0 if status == PASS else 0.0, speedup=None,
                               roofline=None, message=message, to_dict=lambda: {"status": status})

    result = selftest_module.SelftestResult(
        "vector_add", grade_result(PASS), grade_result("fail"),
        reference_side_by_side=grade_result("error", "Internal grader error (not your fault)\nmore"))
    monkeypatch.setattr(selftest_module, "selftest", lambda katas, mode: [result])
    out = CliRunner().invoke(main, ["selftest", "vector_add", "--interpret"])
    assert out.exit_code == 0, out.output
    assert ("vector_add reference: failed beside other grades (Internal grader error (not your "
            "fault)); graded alone, it passed.") in out.output
    as_json = CliRunner().invoke(main, ["selftest", "vector_add", "--interpret", "--json"])
    assert '"reference_side_by_side": {' in as_json.output
