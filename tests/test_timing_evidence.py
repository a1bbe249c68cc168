"""Evidence from timings must reproduce (docs/SCORING.md, "Evidence from timings"): ceilings that
cannot be poisoned, a suspect timing timed again before anything is named, and a shared GPU that
is noticed, said, and never turned into an accusation (issue 31, points 1-3)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from grader.grading import gpu_sharing, timing_evidence
from grader.grading.plan import build_plan
from grader.grading.runner import keep_ceilings
from grader.grading.verdict import WorkerRun, verdict
from grader.kata.catalog import get_kata
from grader.sandbox import watchdog
from grader.sandbox.referee import Referee
from grader.sandbox.worker_line import ParentLine, ParentSampler
from grader.timing import ceilings

H200 = "NVIDIA H200"
POISONED = {"device": H200, "copy_gbps": 1900.0, "matmul_tflops": 264.0}  # measured beside a matmul loop
IDLE = {"device": H200, "copy_gbps": 4100.0, "matmul_tflops": 708.0}


# -- ceilings -----------------------------------------------------------------------------------

def test_a_measurement_can_only_raise_a_cached_ceiling(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_CACHE_DIR", str(tmp_path))
    key = ceilings.cache_key(H200, {"torch": "2.11", "triton": "3.6"})
    ceilings.save(key, IDLE)
    ceilings.save(key, POISONED)  # a later grade measured beside another process
    assert ceilings.load_all()[key]["matmul_tflops"] == 708.0 and ceilings.load_all()[key]["copy_gbps"] == 4100.0
    ceilings.save(key, dict(IDLE, matmul_tflops=720.0))
    assert ceilings.load_all()[key]["matmul_tflops"] == 720.0


def test_an_old_cache_file_still_reads_and_merges(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_CACHE_DIR", str(tmp_path))
    key = ceilings.cache_key(H200, {"torch": "2.11", "triton": "3.6"})
    (tmp_path / "ceilings.json").write_text(json.dumps({key: POISONED}))
    ceilings.save(key, IDLE)
    assert ceilings.load_all()[key] == IDLE


def test_the_physical_ceilings_are_never_below_the_datasheet():
    physical = ceilings.physical(POISONED, H200)
    assert physical["matmul_tflops"] == 989.5 and physical["copy_gbps"] == 4800.0
    assert ceilings.physical(POISONED, "Some Future GPU") == POISONED  # unknown: the measured ones
    assert ceilings.datasheet("NVIDIA H100 80GB HBM3")["copy_gbps"] == 3350.0
    assert ceilings.datasheet("NVIDIA H100 PCIe")["matmul_tflops"] == 756.5


def test_cached_ceilings_far_below_the_datasheet_are_called_off():
    assert any("264 TFLOP/s" in s for s in ceilings.far_off(POISONED, H200))
    assert ceilings.far_off(IDLE, H200) == []
    assert ceilings.far_off(POISONED, "Some Future GPU") == []
    # A device not listed: against the best measured on it under another software stack.
    cache = {"Some Future GPU|torch 2.10|triton 3.5": dict(IDLE, device="Some Future GPU")}
    assert any("measured here before: 708" in s for s in ceilings.far_off(POISONED, "Some Future GPU", cache))
    assert ceilings.far_off(IDLE, "Some Future GPU", cache) == []


def test_the_issue_s_matmul_reference_is_not_below_the_physical_floor():
    # "measured 0.1895 ms, below the physical floor of 0.5199 ms ... 137.4 GFLOP at the measured
    # matmul rate of 264 TFLOP/s": against the H200's physical peak the floor is 0.139 ms.
    assert timing_evidence.impossible(0.1895, None, 137.4e9, POISONED)
    assert timing_evidence.impossible(0.1895, None, 137.4e9, ceilings.physical(POISONED, H200)) is None
    # A time no H200 can reach is still impossible.
    assert timing_evidence.impossible(0.05, None, 137.4e9, ceilings.physical(POISONED, H200))


# -- the referee times a suspect case again -----------------------------------------------------

PLAN = [{"key": f"t/c{i}/float32", "task": "t", "case": f"c{i}", "dtype": "float32"} for i in range(2)]


class Judge:
    def __init__(self):
        self.samples, self.measured = [], 0

    def check_case(self, planned, result):
        return dict(result, status="pass")

    def check_samples(self, planned, samples, method, n_sets, change_keys=None):
        self.samples.append((planned["key"], change_keys))
        return None

    def measure_ceilings(self):
        self.measured += 1
        return dict(IDLE)


@pytest.fixture()
def referee_line():
    made = []

    def make(suspect):
        ours, theirs = socket.socketpair()
        judge = Judge()
        referee = Referee(ours, judge, PLAN)
        referee.suspect = suspect
        looked = []
        referee.look_at_gpu = looked.append
        referee.start()
        made.append((ours, referee))
        return ParentLine(theirs.detach()), referee, judge, looked

    yield make
    for ours, referee in made:
        ours.shutdown(socket.SHUT_RDWR)
        referee.join(timeout=5)
        ours.close()


def _time_once(line, key, time_ms):
    sampler = ParentSampler(line, key)
    sampler.begin(20, 2)
    kept = []
    for call in range(20):
        sampler.change_key()
        if (s := sampler.keep(call)) is not None:
            kept.append({"call": call, "set": call % 2, "file": ""})
    line.ask("samples", key=key, samples=kept, method="events", sets=2)
    return line.ask("timed", key=key, timing={"time_ms": time_ms, "speedup": 1.0})


@pytest.mark.parametrize("reason", ["below_physical_floor", "slow_first_calls"])
def test_a_suspect_timing_is_timed_again_from_a_fresh_choice_of_kept_calls(referee_line, reason):
    suspect = lambda key, timing: (reason, "too fast") if timing["time_ms"] < 1 else None  # noqa: E731
    line, referee, judge, looked = referee_line(suspect)
    key = PLAN[0]["key"]
    line.ask("start", key=key, phase="timing")
    assert _time_once(line, key, 0.1) == {"again": True}
    assert key not in referee.timing_reports and referee.retimed[key]["reason"] == reason
    # A floor in question: the ceilings were measured again in the (trusted) checker first.
    assert judge.measured == (1 if reason == "below_physical_floor" else 0)
    assert referee.remeasured == ([IDLE] if reason == "below_physical_floor" else [])
    assert referee.current["key"] == key  # the second timing runs under the case's limit again
    assert _time_once(line, key, 2.0) == {}
    assert referee.timing_reports[key] == {"timing": {"time_ms": 2.0, "speedup": 1.0}}
    assert referee.forgeries == []
    # New input changes for the second timing: nothing of the first carries over.
    assert len(judge.samples) == 2 and not set(judge.samples[0][1]) & set(judge.samples[1][1])
    assert looked.count("timed") == 2


def test_a_timing_is_timed_again_only_once_and_an_honest_one_never(referee_line):
    line, referee, judge, _ = referee_line(lambda key, timing: ("slow_first_calls", "slow"))
    key = PLAN[0]["key"]
    line.ask("start", key=key, phase="timing")
    assert _time_once(line, key, 0.1) == {"again": True}
    assert _time_once(line, key, 0.1) == {}  # still suspect: the parent names it at the end
    assert referee.timing_reports[key]["timing"]["time_ms"] == 0.1
    line, referee, judge, _ = referee_line(lambda key, timing: None)
    line.ask("start", key=key, phase="timing")
    assert _time_once(line, key, 0.1) == {} and referee.retimed == {}


def test_ceilings_that_cannot_be_measured_again_leave_the_second_timing_to_decide(referee_line):
    line, referee, judge, _ = referee_line(lambda key, timing: ("below_physical_floor", "too fast"))
    judge.measure_ceilings = lambda: 1 / 0
    key = PLAN[0]["key"]
    line.ask("start", key=key, phase="timing")
    assert _time_once(line, key, 0.1) == {"again": True}
    assert referee.errors == [] and "ZeroDivisionError" in referee.retimed[key]["ceilings_not_remeasured"]


def test_a_suspect_judge_that_fails_times_nothing_again(referee_line):
    line, referee, _, _ = referee_line(lambda key, timing: 1 / 0)
    key = PLAN[0]["key"]
    line.ask("start", key=key, phase="timing")
    assert _time_once(line, key, 0.1) == {} and referee.errors


# -- the parent names only what reproduced -------------------------------------------------------

KATA = get_kata("vector_add")
GPU_PLAN = build_plan(KATA, "gpu")
BENCH = next(p for p in GPU_PLAN if p.bench and not p.skip_reason and p.dtype == "float32")
LIMITS = watchdog.ResourceLimits(wall_s=60, memory_bytes=1 << 30, processes=64, output_bytes=1 << 20)
ENV = {"device": H200, "versions": {}, "ceilings": IDLE, "ceilings_measured": False}


def _timing(**changes) -> dict:
    timing = {"time_ms": 1.0, "baseline_ms": 1.2, "speedup": 1.2, "timing_method": "events",
              "calls_per_sample": 1, "samples": 10, "round_speedups": [1.2] * 5, "warmup_ms": [1.0, 1.0, 1.0]}
    timing.update(changes)
    return timing


def _grade(timing: dict, *, retimed=None, processes=(), env=ENV, keep=False):
    verdicts = {p.key: {"task": p.task, "name": p.case, "dtype": p.dtype, "shape": [1], "hidden": p.hidden,
                        "status": "pass", "message": "", "cheat": None} for p in GPU_PLAN if not p.skip_reason}
    run = WorkerRun([{"type": "done"}], 0, None, "", 0, [], verdicts, {}, timed={BENCH.key}, env=env,
                    timing_reports={BENCH.key: {"timing": timing}}, retimed=retimed or {},
                    gpu_processes=list(processes))
    result = verdict(KATA, Path("/nonexistent/solution.py"), "gpu", 1, GPU_PLAN, run, LIMITS)
    if keep:  # what the grade's flow does next (the verdict itself writes nothing)
        keep_ceilings(run, result)
    case = next(c for c in result.cases if c.name == BENCH.case and c.dtype == BENCH.dtype)
    return result, case


SLOW_FIRST = _timing(warmup_ms=[40.0, 1.0, 1.0])


def _first(reason="slow_first_calls"):
    return {BENCH.key: {"reason": reason, "message": "the first timed calls took up to 40 ms",
                        "timing": SLOW_FIRST}}


def test_slow_first_calls_seen_twice_on_a_quiet_gpu_are_named():
    result, case = _grade(SLOW_FIRST, retimed=_first())
    assert result.cheat == "slow_first_calls" and case.status == "fail" and result.gpu_shared is None


def test_slow_first_calls_seen_once_are_no_cheat_and_the_grade_says_the_timings_were_disturbed():
    result, case = _grade(_timing(), retimed=_first())
    assert result.cheats == [] and case.status == "pass" and case.time_ms == 1.0
    assert [d["case"] for d in result.timings_disturbed] == [BENCH.key]
    assert "did not show it" in result.timings_disturbed[0]["outcome"]


def test_evidence_of_another_kind_the_second_time_is_no_evidence():
    nbytes, _ = timing_evidence.cost(KATA, BENCH)
    impossible = nbytes / 4800e9 * 1e3 * 0.5
    result, case = _grade(_timing(time_ms=impossible, speedup=50.0), retimed=_first("slow_first_calls"))
    assert result.cheats == [] and case.status == "pass" and not case.timed


def test_a_suspect_timing_the_referee_never_timed_again_is_no_evidence():
    result, case = _grade(SLOW_FIRST)
    assert result.cheats == [] and case.status == "pass" and result.timings_disturbed


OTHER = {"pid": 4242, "name": "python", "used_mib": 30000, "when": "time"}


def test_on_a_shared_gpu_nothing_timing_based_is_named_and_the_json_says_what_was_seen():
    result, case = _grade(SLOW_FIRST, retimed=_first(), processes=[OTHER])
    assert result.cheats == [] and case.status == "pass"
    assert result.gpu_shared == {"processes": [OTHER], "unsteady_cases": []}
    assert "shared" in result.timings_disturbed[0]["outcome"]
    assert json.loads(json.dumps(result.to_dict()))["gpu_shared"]["processes"][0]["pid"] == 4242


def test_an_impossible_time_on_a_shared_gpu_is_not_counted_nor_named():
    nbytes, _ = timing_evidence.cost(KATA, BENCH)
    impossible = nbytes / 4800e9 * 1e3 * 0.5  # twice the H200's bandwidth
    result, case = _grade(_timing(time_ms=impossible, speedup=50.0), retimed=_first("below_physical_floor"),
                          processes=[OTHER])
    assert result.cheats == [] and case.status == "pass" and not case.timed and case.speedup is None
    assert "not counted" in case.message
    # The same twice on a quiet GPU is named.
    result, case = _grade(_timing(time_ms=impossible, speedup=50.0), retimed=_first("below_physical_floor"))
    assert result.cheat == "below_physical_floor" and "4800 GB/s" in case.message


def test_the_floor_is_physical_and_the_credit_uses_the_best_measured_ceilings():
    # A poisoned measurement (264 TFLOP/s, 1900 GB/s) gives a floor an honest kernel beats.
    nbytes, _ = timing_evidence.cost(KATA, BENCH)
    honest = nbytes / 3000e9 * 1e3  # faster than the poisoned 1900 GB/s allows, slower than the H200's peak
    result, case = _grade(_timing(time_ms=honest), retimed=_first("below_physical_floor"),
                          env=dict(ENV, ceilings=POISONED))
    assert result.cheats == [] and case.status == "pass" and case.timed
    assert result.environment["physical_ceilings"] == {"copy_gbps": 4800.0, "matmul_tflops": 989.5}
    assert case.floor_ms == pytest.approx(nbytes / 1900e9 * 1e3)  # credit: measured (only rises)


def test_rounds_that_disagree_mark_the_gpu_shared():
    result, case = _grade(_timing(round_speedups=[1.2, 0.4, 1.2, 1.1, 1.2]))
    assert result.gpu_shared["unsteady_cases"] == [{"case": BENCH.key, "spread": 3.0}]
    assert result.gpu_shared["processes"] == [] and result.cheats == []


def test_nothing_measured_beside_another_process_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_CACHE_DIR", str(tmp_path))
    measured = dict(ENV, ceilings=POISONED, ceilings_measured=True, device="Some Future GPU")
    _grade(_timing(), env=measured)  # the verdict alone writes nothing
    assert ceilings.load_all() == {}
    _grade(_timing(), processes=[OTHER], env=measured, keep=True)
    assert ceilings.load_all() == {}
    _grade(_timing(), env=measured, keep=True)
    assert list(ceilings.load_all().values()) == [POISONED]


# -- who else is on the GPU -----------------------------------------------------------------------

SMI = """4242, GPU-aaaa-1111, 30000, python
{ours}, GPU-aaaa-1111, 900, python
5151, GPU-bbbb-2222, 1000, python
[N/A], GPU-aaaa-1111, [N/A], [Not Found]
"""


def test_other_processes_are_those_on_our_gpu_the_grader_did_not_start():
    listed = gpu_sharing.parse_nvidia_smi(SMI.format(ours=os.getpid()))
    assert [p["pid"] for p in listed] == [4242, os.getpid(), 5151]
    found = gpu_sharing.others(listed, "aaaa-1111", gpu_sharing.ours())
    assert [p["pid"] for p in found] == [4242] and found[0]["used_mib"] == 30000
    assert [p["pid"] for p in gpu_sharing.others(listed, None, gpu_sharing.ours())] == [4242, 5151]
    # A uuid the driver spells otherwise: the GPU our own processes are on.
    assert [p["pid"] for p in gpu_sharing.others(listed, "uuid-0f-another-form", gpu_sharing.ours())] == [4242]
    gpu_sharing.register(4242)  # a worker of another grade of this process (selftest)
    try:
        assert gpu_sharing.others(listed, "GPU-AAAA-1111", gpu_sharing.ours()) == []
    finally:
        gpu_sharing.unregister(4242)


def test_process_ids_of_another_namespace_are_counted_not_matched():
    listed = [{"pid": 9001, "gpu_uuid": "a"}, {"pid": 9002, "gpu_uuid": "a"}]
    holding = {11, 12}.__contains__  # our worker and checker hold the GPU; this process does not
    assert gpu_sharing.others(listed, "a", {os.getpid(), 11, 12}, holding) == []
    assert len(gpu_sharing.others(listed + [{"pid": 9003, "gpu_uuid": "a"}], "a", {os.getpid(), 11, 12},
                                  holding)) == 3
    assert gpu_sharing.holds_gpu(os.getpid()) is False  # no GPU here


def test_the_watch_remembers_each_other_process_once_with_when_it_was_seen():
    calls = iter([([{"pid": 4242, "gpu_uuid": "a", "name": "python", "used_mib": 1}], "nvidia-smi"),
                  ([{"pid": 4242, "gpu_uuid": "a", "name": "python", "used_mib": 2}], "nvidia-smi"),
                  (None, "unavailable")])
    watch = gpu_sharing.Watch(gpu_uuid=lambda: "a", lister=lambda: next(calls))
    for when in ("env", "time", "timed"):
        watch.look(when)
    assert watch.processes == [{"pid": 4242, "name": "python", "used_mib": 1, "when": "env"}]
    assert watch.method == "unavailable"


# -- said in the reports, kept out of the leaderboards ---------------------------------------------

SHARED = {"processes": [OTHER], "unsteady_cases": [{"case": "vector_add/bench/float32", "spread": 2.1}]}


def test_every_report_marks_the_speed_of_a_shared_gpu_unreliable():
    from grade_factory import make_grade

    from grader.cli.main import format_result
    from grader.results.report import render_report

    result = make_grade(gpu_shared=SHARED)
    for text in (render_report(result, "md"), render_report(result, "html"), format_result(result)):
        assert "Speed unreliable" in text and "pid 4242" in text and "2.1x apart" in text
    quiet = make_grade()
    for text in (render_report(quiet, "md"), render_report(quiet, "html"), format_result(quiet)):
        assert "unreliable" not in text


def test_disturbed_timings_are_said_in_the_report():
    from grade_factory import make_grade

    from grader.results.report import render_report

    result = make_grade(timings_disturbed=[{"case": "vector_add/bench/float32", "reason": "slow_first_calls",
                                            "message": "40 ms", "outcome": "timed again: not shown again"}])
    assert "Timings disturbed in vector_add/bench/float32" in render_report(result, "md")


def test_a_grade_on_a_shared_gpu_is_stored_and_exported_but_never_ranked(tmp_path):
    from grade_factory import make_grade

    from grader.store import database as store
    from grader.store.exchange import export_document, parse_document
    from grader.store.leaderboard import build_leaderboard

    db = tmp_path / "r.sqlite"
    # A NaN in a stored grade (an error of NaN outputs), and a submission that printed the key.
    nan = make_grade(speedup=1.1, output='"gpu_shared": {"processes": []}')
    nan.tasks[0].cases[0].max_abs_err = float("nan")
    store.record_grade(nan, db, handle="cal")
    store.record_grade(make_grade(speedup=9.0, gpu_shared=SHARED), db, handle="ann")
    store.record_grade(make_grade(speedup=1.5), db, handle="bea")
    store.record_grade(make_grade(speedup=1.2), db, handle="ann")
    rows = store.attempts(db, everyone=True)
    assert [a.gpu_shared for a in rows] == [False, True, False, False]
    board = build_leaderboard(rows).boards[0].katas[0]
    assert [(e.handle, e.speedup) for e in board.entries] == [("bea", 1.5), ("ann", 1.2), ("cal", 1.1)]
    # An export carries the field; a store that imports it ranks it no more than this one.
    document = json.loads(json.dumps(export_document(store.stored_grades(db, everyone=True), "ann")))
    other = tmp_path / "other.sqlite"
    store.import_grades(other, parse_document(document, "export.json"))
    assert [a.gpu_shared for a in store.attempts(other, everyone=True)] == [False, True, False, False]


def test_a_store_written_before_gpu_shared_existed_reads_as_not_shared(tmp_path):
    import sqlite3

    from grade_factory import make_grade

    from grader.store import database as store

    db = tmp_path / "r.sqlite"
    store.record_grade(make_grade(), db, handle="ann")
    with sqlite3.connect(db) as conn:  # the JSON of an older grader: no gpu_shared at all
        text = conn.execute("SELECT result_json FROM grades").fetchone()[0]
        old = {k: v for k, v in json.loads(text).items() if k not in ("gpu_shared", "timings_disturbed")}
        conn.execute("UPDATE grades SET result_json = ?", (json.dumps(old),))
    assert [a.gpu_shared for a in store.attempts(db, everyone=True)] == [False]
