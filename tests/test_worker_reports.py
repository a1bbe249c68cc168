"""What the parent believes of the worker's reports (grader.grading.verdict, grader.sandbox.protocol): the submission shares
the worker's process and can write what the worker writes, so a timing counts only for a case
whose kept timed outputs reached the referee, only in the form the worker writes it, and the
figures the parent can work out itself (the roofline floor) it works out itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.grading.plan import build_plan
from grader.grading.verdict import WorkerRun, verdict
from grader.kata.catalog import get_kata
from grader.sandbox import watchdog

KATA = get_kata("vector_add")
PLAN = build_plan(KATA, "gpu")
BENCH = next(p for p in PLAN if p.bench and not p.skip_reason and p.dtype == "float32")
CEILINGS = {"copy_gbps": 3000.0, "matmul_tflops": 700.0}
LIMITS = watchdog.ResourceLimits(wall_s=60, memory_bytes=1 << 30, processes=64, output_bytes=1 << 20)


def _passing(planned) -> dict:
    return {"task": planned.task, "name": planned.case, "dtype": planned.dtype, "shape": [1000],
            "hidden": planned.hidden, "status": "pass", "message": "", "cheat": None,
            "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatched": 0, "total": 1000, "mismatches": []}


def _timing(**changes) -> dict:
    timing = {"time_ms": 1.0, "baseline_ms": 1.2, "speedup": 1.2, "timing_method": "events",
              "calls_per_sample": 1, "samples": 10, "round_speedups": [1.2] * 5, "host_syncs": 0,
              "host_sync_at": None}
    timing.update(changes)
    return timing


def _grade(timing_events: list[dict], timed: set, reports: dict | None = None):
    """`timing_events` in the events file; `reports`: each timed case's outcome as the referee
    heard it on the line (by default none: the file's timings alone count for nothing)."""
    verdicts = {p.key: _passing(p) for p in PLAN if not p.skip_reason}
    events = [{"type": "env", "device": "test", "versions": {}, "ceilings": CEILINGS},
              *timing_events, {"type": "done"}]
    run = WorkerRun(events, 0, None, "", 0, [], verdicts, {}, timed=timed, timing_reports=reports or {})
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    case = next(c for t in result.tasks for c in t.cases if (c.name, c.dtype) == (BENCH.case, BENCH.dtype))
    return result, case


def test_a_timing_of_a_case_the_referee_saw_timed_counts_and_its_floor_is_the_parents():
    result, case = _grade([{"type": "timing", "key": BENCH.key, "timing": _timing()}], {BENCH.key},
                          {BENCH.key: {"timing": _timing()}})
    assert result.cheats == [] and case.time_ms == 1.0 and case.speedup == 1.2
    nbytes, _ = next(t for t in KATA.tasks if t.name == BENCH.task).cost(
        next(c for c in KATA.tasks[0].cases if c.name == BENCH.case), itemsize=4)
    assert case.nbytes == nbytes and case.floor_ms == pytest.approx(nbytes / 3e12 * 1e3)
    assert case.roofline == pytest.approx(case.floor_ms / 1.0)


def test_a_timing_of_a_case_whose_timed_outputs_never_reached_the_referee_is_forged():
    result, case = _grade([{"type": "timing", "key": BENCH.key, "timing": _timing(time_ms=0.5, speedup=2.4)}],
                          set())
    assert [c["reason"] for c in result.cheats] == ["fake_result"]
    assert "never handed over" in result.cheats[0]["message"]
    assert not case.timed


@pytest.mark.parametrize("event", [
    {"type": "timing", "key": BENCH.key, "timing": [1.0, 1.2]},
    {"type": "timing", "key": BENCH.key, "timing": _timing(time_ms="0.5")},
    {"type": "timing", "key": BENCH.key, "timing": _timing(speedup=True)},
    {"type": "timing", "key": BENCH.key, "timing": _timing(round_speedups=["fast"])},
    {"type": "timing", "key": BENCH.key, "timing": _timing(status="pass")},
    {"type": "timing", "timing": _timing()},
    {"type": "timing", "key": ["not", "a", "key"], "timing": _timing()},
    {"type": "timing", "key": BENCH.key, "timing": _timing(time_ms=float("nan"))},
    {"type": "timing", "key": BENCH.key, "timing": _timing(time_ms=None, speedup=None)},
    {"type": "timing", "key": BENCH.key, "timing": _timing(speedup=float("inf"))},
    {"type": "timing", "key": BENCH.key, "timing": _timing(baseline_ms=-1.0)},
    {"type": "timing", "key": BENCH.key, "timing": _timing(round_speedups=[1.2, float("nan")])},
    {"type": "timing", "key": BENCH.key, "timing": {k: v for k, v in _timing().items() if k != "samples"}},
    {"type": "timing", "key": BENCH.key, "timing": _timing(floor_ms=1e-9, roofline=99.0)},
], ids=["not_a_dict", "str_time", "bool_speedup", "str_rounds", "unknown_field", "no_key", "list_key",
        "nan_time", "none_time", "inf_speedup", "negative_baseline", "nan_round", "no_samples",
        "worker_floor"])
def test_a_timing_in_a_form_the_worker_never_writes_voids_the_grade_without_a_crash(event):
    result, case = _grade([event], {BENCH.key})
    assert [c["reason"] for c in result.cheats] == ["fake_result"]


def test_the_floor_rests_on_the_environment_the_referee_heard_before_the_import():
    # The events file is open to the submission: a copy_gbps rewritten there moves nothing.
    verdicts = {p.key: _passing(p) for p in PLAN if not p.skip_reason}
    forged_env = {"type": "env", "device": "test", "versions": {}, "ceilings": {"copy_gbps": 1e-3, "matmul_tflops": 1e-3}}
    events = [forged_env, {"type": "timing", "key": BENCH.key, "timing": _timing()}, {"type": "done"}]
    heard = {"device": "test", "versions": {}, "ceilings": CEILINGS, "ceilings_measured": False}
    run = WorkerRun(events, 0, None, "", 0, [], verdicts, {}, timed={BENCH.key}, env=heard,
                    timing_reports={BENCH.key: {"timing": _timing()}})
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    case = next(c for t in result.tasks for c in t.cases if (c.name, c.dtype) == (BENCH.case, BENCH.dtype))
    assert result.cheats == [] and case.status == "pass"
    assert case.floor_ms == pytest.approx(case.nbytes / 3e12 * 1e3)
    assert result.environment["ceilings"] == CEILINGS


def test_whether_writes_were_confined_is_what_the_referee_heard_before_the_import():
    # Without Landlock a write to the results store is the submission's; an events file
    # rewritten to claim Landlock does not excuse it.
    verdicts = {p.key: _passing(p) for p in PLAN if not p.skip_reason}
    events = [{"type": "sandbox", "filesystem_restricted": True}, {"type": "done"}]
    run = WorkerRun(events, 0, None, "", 0, ["results.sqlite"], verdicts, {},
                    sandbox={"filesystem_restricted": False})
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    assert result.cheat == "protected_path_written"


@pytest.mark.parametrize("written", [[], ["results.sqlite"]], ids=["honest", "cheat"])
def test_advice_on_speed_is_for_grades_not_named_a_cheat(written):
    verdicts = {p.key: dict(_passing(p), launches=100) for p in PLAN if not p.skip_reason}
    run = WorkerRun([{"type": "done"}], 0, None, "", 0, written, verdicts, {},
                    sandbox={"filesystem_restricted": False})
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    assert [a["code"] for a in result.advice] == ([] if written else ["many_launches"])


@pytest.mark.parametrize("event", [
    {"type": "internal_error"},
    {"type": "internal_error", "message": 5},
    {"type": "fatal", "message": ["a"]},
    {"type": "fatal", "message": "m", "cheat": ["a"]},
    {"type": "fatal", "message": "m", "code": {"a": 1}},
    {"type": "load_error", "kind": "syntax", "message": None},
    {"type": "start"},
    {"type": "start", "key": BENCH.key, "phase": ["timing"]},
    {"type": "timing_error", "key": BENCH.key, "message": "m", "diagnosis": 5},
    {"type": "timing_error", "key": BENCH.key, "message": "m", "cheat": {"a": 1}},
    {"type": "timing_error", "key": BENCH.key, "message": None},
], ids=["no_message", "int_message", "list_message", "list_cheat", "code", "load_error_none",
        "start_no_key", "list_phase", "diagnosis", "dict_cheat", "timing_error_none"])
def test_an_event_in_a_form_the_worker_never_writes_voids_the_grade_without_a_crash(event):
    result, _ = _grade([event], {BENCH.key})
    assert [c["reason"] for c in result.cheats] == ["fake_result"]
    assert "never writes" in result.cheats[0]["message"]


def test_the_worker_s_own_events_are_no_forgery():
    # A slow-first-calls failure while timing one case, a timing of another, then a CUDA fault.
    other = next(p for p in PLAN if p.bench and not p.skip_reason and p.key != BENCH.key)
    verdicts = {p.key: _passing(p) for p in PLAN if not p.skip_reason}
    events = [{"type": "env", "device": "test", "versions": {}, "ceilings": CEILINGS},
              {"type": "start", "key": other.key}, {"type": "start", "key": BENCH.key, "phase": "timing"},
              {"type": "timing_error", "key": BENCH.key, "message": "slow", "cheat": None},
              {"type": "start", "key": other.key, "phase": "timing"},
              {"type": "timing_error", "key": other.key, "message": "failed while being timed:\nboom"},
              {"type": "fatal", "message": "CUDA fault (the GPU context is lost)"}]
    told = {BENCH.key: {"error": {"message": "slow", "cheat": None}},
            other.key: {"error": {"message": "failed while being timed:\nboom", "cheat": None}}}
    run = WorkerRun(events, 0, None, "", 0, [], verdicts, {}, timed={BENCH.key}, timing_reports=told)
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    assert result.cheats == [] and "CUDA fault" in result.message


@pytest.mark.parametrize("tail, killed, corrupt", [
    ('{"type": "case", "key": "vector_add/sm', True, 0),   # torn by the kill: no forgery
    ('{"type": "case", "key": "vector_add/sm', False, 1),  # the worker was not killed
    ('not an event\n', True, 1),                            # a whole line it never writes
])
def test_a_line_torn_by_killing_the_worker_is_no_forgery(tmp_path, tail, killed, corrupt):
    from grader.sandbox.protocol import read_events

    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "start", "key": "vector_add/small/float32"}\n' + tail)
    events, found = read_events(path, killed)
    assert [e["type"] for e in events] == ["start"] and found == corrupt


def test_timings_are_the_referee_s_copy_not_the_events_file_s():
    # The submission can rewrite an earlier case's timing in the events file, or drop the
    # timing error it got there; the parent reads what the worker told it on the line.
    verdicts = {p.key: _passing(p) for p in PLAN if not p.skip_reason}
    other = next(p for p in PLAN if p.bench and not p.skip_reason and p.key != BENCH.key)
    rewritten = {"type": "timing", "key": BENCH.key, "timing": _timing(time_ms=0.2, speedup=6.0)}
    run = WorkerRun([rewritten, {"type": "done"}], 0, None, "", 0, [], verdicts, {},
                    timed={BENCH.key, other.key}, env={"device": "test", "versions": {}, "ceilings": CEILINGS},
                    timing_reports={BENCH.key: {"timing": _timing()},
                                    other.key: {"error": {"message": "first timed calls 40x slower",
                                                          "cheat": "slow_first_calls"}}})
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    cases = {(c.name, c.dtype): c for t in result.tasks for c in t.cases}
    assert cases[BENCH.case, BENCH.dtype].speedup == 1.2 and cases[BENCH.case, BENCH.dtype].time_ms == 1.0
    assert cases[other.case, other.dtype].cheat == "slow_first_calls"
    # The rewrite itself is evidence: the worker writes the file what it told the line.
    assert {c["reason"] for c in result.cheats} == {"fake_result", "slow_first_calls"}
    assert "other than the one the worker told" in result.message


def test_the_worker_s_own_events_file_timing_matches_what_it_told():
    verdicts = {p.key: _passing(p) for p in PLAN if not p.skip_reason}
    run = WorkerRun([{"type": "timing", "key": BENCH.key, "timing": _timing()}, {"type": "done"}], 0, None,
                    "", 0, [], verdicts, {}, timed={BENCH.key}, timing_reports={BENCH.key: {"timing": _timing()}})
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    assert result.cheats == [] and result.status == "pass"


def test_a_timing_told_on_the_line_in_another_form_is_a_forgery():
    verdicts = {p.key: _passing(p) for p in PLAN if not p.skip_reason}
    run = WorkerRun([{"type": "done"}], 0, None, "", 0, [], verdicts, {}, timed={BENCH.key},
                    timing_reports={BENCH.key: {"timing": _timing(speedup="6")}})
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, PLAN, run, LIMITS)
    assert result.cheat == "fake_result"
