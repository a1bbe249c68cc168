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


def _calls(name: str, module: str) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse((SANDBOX / module).read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name
            and node.args]


def test_every_op_the_worker_asks_is_the_protocol_s_and_the_referee_answers_it():
    asked = {c.args[0].value for m in ("worker.py", "case_runner.py", "worker_line.py") for c in _calls("ask", m)
             if isinstance(c.args[0], ast.Constant)}
    assert asked == set(protocol.GRADE_OPS + protocol.CASE_OPS)
    assert all(callable(getattr(Referee, f"_on_{op}", None)) for op in asked)


def test_the_worker_writes_every_event_of_the_protocol_and_only_those():
    written = {c.args[0].func.attr for c in _calls("emit", "worker.py")
               if isinstance(c.args[0], ast.Call) and isinstance(c.args[0].func, ast.Attribute)}
    assert written == {cls.__name__ for cls in protocol.EVENT_CLASSES}


@pytest.mark.parametrize("event, written", [
    (protocol.Env({"device": "H200", "versions": {}}), {"type": "env", "device": "H200", "versions": {}}),
    (protocol.Sandbox({"filesystem_restricted": True}), {"type": "sandbox", "filesystem_restricted": True}),
    (protocol.LoadError("syntax", "m"), {"type": "load_error", "kind": "syntax", "message": "m"}),
    (protocol.Start("k"), {"type": "start", "key": "k"}),
    (protocol.Start("k", "timing"), {"type": "start", "key": "k", "phase": "timing"}),
    (protocol.Case("k", {"status": "ran"}), {"type": "case", "key": "k", "result": {"status": "ran"}}),
    (protocol.Timing("k", {"time_ms": 1.0}), {"type": "timing", "key": "k", "timing": {"time_ms": 1.0}}),
    (protocol.TimingError("k", "boom"), {"type": "timing_error", "key": "k", "message": "boom", "cheat": None}),
    (protocol.Fatal("fault"), {"type": "fatal", "message": "fault"}),
    (protocol.Fatal("patched", cheat="tampering"), {"type": "fatal", "message": "patched", "cheat": "tampering"}),
    (protocol.InternalError("tb"), {"type": "internal_error", "message": "tb"}),
    (protocol.Done(), {"type": "done"}),
], ids=lambda v: getattr(v, "TYPE", None) or "")
def test_each_event_is_written_in_the_form_the_parent_reads_and_reads_back(event, written):
    assert event.to_dict() == written and not protocol.malformed(written)
    assert protocol.event_from_dict(written) == event


@pytest.mark.parametrize("data", [
    {"type": "fatal", "message": "m", "cheat": None},  # the worker leaves out a fatal's missing cheat
    {"type": "start"},
    {"type": "case", "key": "k"},
    {"type": "done", "extra": 1},
    {"type": "promotion", "key": "k"},
    {"message": "no type"},
])
def test_an_event_in_another_form_is_not_one(data):
    with pytest.raises(ValueError):
        protocol.event_from_dict(data)
