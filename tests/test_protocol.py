"""The worker's protocol in one place (grader.sandbox.protocol): the request round-trips, the
forms the parent accepts are the ones the worker writes, and every op and event the worker's code
uses is one the protocol names and the Referee answers."""

from __future__ import annotations

import ast
import inspect
import json
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
    # The worker asks with the ops' records, never with a name and loose fields.
    asks = [c for m in ("worker.py", "case_runner.py", "worker_line.py") for c in _calls("ask", m)]
    records = [c.args[0] for c in asks]
    assert all(isinstance(r, ast.Call) and isinstance(r.func, ast.Attribute) and r.func.attr.endswith("Op")
               for r in records) and not any(c.keywords for c in asks)
    asked = {getattr(protocol, r.func.attr).OP for r in records}
    assert asked == set(protocol.GRADE_OPS + protocol.CASE_OPS) == set(protocol.OPS)
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


KEY = "t/c/float32"
RAN = {"status": "ran", "outputs": {}}


ROUND_TRIPS = [
    (protocol.EnvOp("H200", {"torch": "2"}, {"copy_gbps": 3000.0}, True, gpu_uuid="GPU-1"),
     {"op": "env", "device": "H200", "versions": {"torch": "2"}, "ceilings": {"copy_gbps": 3000.0},
      "ceilings_measured": True, "gpu_uuid": "GPU-1"}),
    (protocol.EnvOp("CPU", {}, None, False, ceilings_note="far below"),
     {"op": "env", "device": "CPU", "versions": {}, "ceilings": None, "ceilings_measured": False,
      "ceilings_note": "far below"}),
    (protocol.SandboxOp({"filesystem_restricted": True}), {"op": "sandbox", "status": {"filesystem_restricted": True}}),
    (protocol.TimeOp(), {"op": "time"}),
    (protocol.StartOp(KEY), {"op": "start", "key": KEY, "phase": "case"}),
    (protocol.StartOp(KEY, "case", baseline_s=0.0), {"op": "start", "key": KEY, "phase": "case", "baseline_s": 0.0}),
    (protocol.StartOp(KEY, "timing"), {"op": "start", "key": KEY, "phase": "timing"}),
    (protocol.CaseOp(KEY, RAN), {"op": "case", "key": KEY, "result": RAN}),
    (protocol.CaseOp(KEY, {"status": "fail", "message": "m", "cheat": "fake_result", "launches": 2}),
     {"op": "case", "key": KEY, "result": {"status": "fail", "message": "m", "cheat": "fake_result", "launches": 2}}),
    (protocol.TimingOp(KEY, 200, 3), {"op": "timing", "key": KEY, "calls": 200, "sets": 3}),
    (protocol.SampleOp(KEY, 0), {"op": "sample", "key": KEY, "call": 0}),
    (protocol.SamplesOp(KEY, [{"call": 4, "set": 1, "file": "f"}], "events", 3),
     {"op": "samples", "key": KEY, "samples": [{"call": 4, "set": 1, "file": "f"}], "method": "events", "sets": 3}),
    (protocol.SamplesOp(KEY, [], "cuda_graph", 2), {"op": "samples", "key": KEY, "samples": [], "method": "cuda_graph", "sets": 2}),
    (protocol.TimedOp(KEY, timing={"time_ms": 1.0}), {"op": "timed", "key": KEY, "timing": {"time_ms": 1.0}}),
    (protocol.TimedOp(KEY, error={"message": "slow", "cheat": None}),
     {"op": "timed", "key": KEY, "error": {"message": "slow", "cheat": None}}),
    (protocol.AnatomyOp(KEY, {"kernels": []}), {"op": "anatomy", "key": KEY, "anatomy": {"kernels": []}}),
    (protocol.AnatomyOp(KEY, None), {"op": "anatomy", "key": KEY, "anatomy": None}),  # switched off
]


@pytest.mark.parametrize("op, sent", ROUND_TRIPS, ids=lambda v: getattr(v, "OP", None) or "")
def test_each_op_is_sent_in_the_form_the_referee_reads_and_reads_back(op, sent):
    assert op.to_dict() == sent
    assert protocol.OPS[sent["op"]].from_dict(sent) == op
    assert protocol.OPS[sent["op"]].from_dict(json.loads(json.dumps(sent))) == op  # as it crosses the line


def test_every_op_has_a_record_tested_above():
    assert {sent["op"] for _, sent in ROUND_TRIPS} == set(protocol.OPS)


MALFORMED = [
    {"op": "env", "device": 1, "versions": {}, "ceilings": None, "ceilings_measured": False},
    {"op": "env", "device": "GPU", "versions": [], "ceilings": None, "ceilings_measured": False},
    {"op": "env", "device": "GPU", "versions": {}, "ceilings": [1.0], "ceilings_measured": False},
    {"op": "env", "device": "GPU", "versions": {}, "ceilings": None, "ceilings_measured": False, "gpu_uuid": 7},
    {"op": "env", "versions": {}, "ceilings": None},
    {"op": "sandbox", "status": {"filesystem_restricted": 1}},
    {"op": "sandbox", "status": [True]},
    {"op": "sandbox"},
    {"op": "start", "key": ["a"], "phase": "case"},
    {"op": "start", "key": KEY, "phase": "timing", "baseline_s": 0.1},
    {"op": "start", "key": KEY, "phase": "again"},  # would restart the case's clock each time
    {"op": "start", "key": KEY, "phase": None},
    {"op": "start", "key": KEY, "phase": "case", "baseline_s": math.nan},
    {"op": "start", "key": KEY, "phase": "case", "baseline_s": -1.0},
    {"op": "start", "key": KEY, "phase": "case", "baseline_s": True},
    {"op": "start", "key": KEY, "phase": "case", "baseline_s": "0.1"},
    {"op": "case", "key": KEY, "result": dict(RAN, status="pass")},
    {"op": "case", "key": KEY, "result": dict(RAN, speedup=9.0)},
    {"op": "case", "key": KEY, "result": [RAN]},
    {"op": "case", "key": KEY},
    {"op": "case", "key": 5, "result": RAN},
    {"op": "timing", "key": KEY, "calls": 0, "sets": 3},
    {"op": "timing", "key": KEY, "calls": 200, "sets": "3"},
    {"op": "timing", "key": KEY, "calls": 2.0, "sets": 3},
    {"op": "sample", "key": KEY, "call": "3"},
    {"op": "sample", "key": KEY, "call": [3]},
    {"op": "sample", "key": KEY},
    {"op": "samples", "key": KEY, "samples": {"call": 1}, "method": "events", "sets": 3},
    {"op": "samples", "key": KEY, "samples": [[1, 0]], "method": "events", "sets": 3},
    {"op": "samples", "key": KEY, "samples": [], "method": "events", "sets": "3"},
    {"op": "timed", "key": KEY, "timing": {"time_ms": 1.0}, "error": {"message": "both"}},
    {"op": "timed", "key": KEY, "error": {"message": 5}},
    {"op": "timed", "key": KEY, "timing": [1.0]},
    {"op": "timed", "key": KEY},
    {"op": "anatomy", "key": KEY, "anatomy": [{"name": "k"}]},
    {"op": "anatomy", "key": KEY, "anatomy": "kernels"},
]


@pytest.mark.parametrize("request_", MALFORMED, ids=lambda r: r["op"])
def test_a_request_not_in_its_op_s_form_is_no_record(request_):
    assert protocol.OPS[request_["op"]].from_dict(request_) is None


def test_a_request_of_another_op_or_none_at_all_is_no_record():
    for cls in protocol.OPS.values():
        assert cls.from_dict({"op": "launch_missiles", "key": KEY}) is None
        assert cls.from_dict([cls.OP, KEY]) is None and cls.from_dict(None) is None
    assert protocol.TimeOp.from_dict({"op": "time"}) == protocol.TimeOp()
    assert protocol.TimeOp.from_dict({"op": ["time"]}) is None
    # Fields an op does not have are ignored, as the Referee always has.
    assert protocol.SampleOp.from_dict({"op": "sample", "key": KEY, "call": 2, "limit_s": 9}) == protocol.SampleOp(KEY, 2)


def test_every_malformed_op_is_tested_above():
    assert {r["op"] for r in MALFORMED} == set(protocol.OPS) - {"time"}  # "time" has no fields


def test_every_record_the_worker_builds_takes_the_arguments_it_is_given():
    # The worker's timing path runs only on a GPU: a record built there with a field it lacks
    # would fail every GPU grade's timing and no CPU grade. Each call site is bound against its
    # record's signature, and each event the worker writes against its event's.
    sites = [c for m in ("worker.py", "case_runner.py", "worker_line.py") for c in _calls("ask", m)]
    sites += _calls("emit", "worker.py")
    built = [c.args[0] for c in sites if isinstance(c.args[0], ast.Call)]
    assert len(built) == len(sites) >= 15
    for call in built:
        cls = getattr(protocol, call.func.attr)
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            continue  # protocol.EnvOp(**env): bound by the round trips above
        inspect.signature(cls).bind(*call.args, **{k.arg: k.value for k in call.keywords})
