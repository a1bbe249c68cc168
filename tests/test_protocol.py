"""The worker's protocol in one place (grader.sandbox.protocol): the request round-trips, the
forms the parent accepts are the ones the worker writes, and every op and event the worker's code
uses is one the protocol names and the Referee answers."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from grader.sandbox import protocol
from grader.sandbox.referee import Referee

SANDBOX = Path(__file__).resolve().parent.parent / "grader" / "sandbox"


def test_the_request_round_trips_through_its_file(tmp_path):
    request = protocol.Request(kata_dir="k", submission="s.py", mode="interpret", seed=7, results="e.jsonl",
                               plan=[{"key": "t/c/float32"}], grade_dir="g", outputs="o",
                               gpu_memory_fraction=0.9, control_fd=5, progress="p.bin")
    path = request.write(tmp_path / "request.json")
    assert protocol.Request.read(path) == request
    # A compile-ahead helper's request is the grade's, with fields changed (grader.grading.compile_ahead).
    helper = protocol.Request.from_dict(dict(request.to_dict(), warm_up=True, seed=8))
    assert helper.warm_up and helper.seed == 8 and helper.plan == request.plan


def test_a_case_result_in_the_worker_s_form_and_only_that():
    ran = {"task": "t", "name": "c", "dtype": "float32", "shape": [4], "hidden": False, "status": "ran",
           "message": "", "cheat": None, "launches": 1, "outputs": {}}
    assert protocol.result_form(ran)
    assert not protocol.result_form(dict(ran, status="pass"))  # the checker's word alone
    assert not protocol.result_form(dict(ran, launches=True))
    assert not protocol.result_form(dict(ran, speedup=9.0))
    assert not protocol.result_form([ran])


@pytest.mark.parametrize("timing, error, ok", [
    ({"time_ms": 1.0}, None, True),
    (None, {"message": "slow", "cheat": "slow_first_calls"}, True),
    (None, {"message": "boom", "cheat": None}, True),
    ({"time_ms": 1.0}, {"message": "both"}, False),
    (None, {"message": 5}, False),
    (None, None, False),
])
def test_a_timed_case_s_outcome_is_a_timing_or_an_error(timing, error, ok):
    assert protocol.timed_form(timing, error) is ok


def test_a_baseline_s_time_is_a_finite_time():
    assert protocol.baseline_form(0.0) and protocol.baseline_form(0.25) and protocol.baseline_form(3)
    for junk in (-1.0, math.nan, math.inf, True, "0.1", None):
        assert not protocol.baseline_form(junk)


def _strings_in_calls(name: str, module: str) -> set[str]:
    """The first string argument of each call of `.name(...)` in the module, or the "type" of the
    dict passed to it."""
    found = set()
    for node in ast.walk(ast.parse((SANDBOX / module).read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name \
                and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
            elif isinstance(first, ast.Dict):
                found |= {v.value for k, v in zip(first.keys, first.values)
                          if isinstance(k, ast.Constant) and k.value == "type" and isinstance(v, ast.Constant)}
    return found


def test_every_op_the_worker_asks_is_the_protocol_s_and_the_referee_answers_it():
    asked = set().union(*(_strings_in_calls("ask", m) for m in ("worker.py", "case_runner.py", "worker_line.py")))
    assert asked == set(protocol.GRADE_OPS + protocol.CASE_OPS)
    assert all(callable(getattr(Referee, f"_on_{op}", None)) for op in asked)


def test_every_event_the_worker_writes_is_the_protocol_s():
    written = _strings_in_calls("emit", "worker.py")
    assert written == set(protocol.EVENTS)
    # The parent checks the form of each it reads beyond "done" (the case, env and sandbox events
    # are the referee's to hear; the timings are checked as TIMING_TYPES).
    assert set(protocol.EVENT_TYPES) <= written
