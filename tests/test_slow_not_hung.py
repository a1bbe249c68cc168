"""Slow is not hung (issue 31, points 4 and 5): a slow kernel's timing shrinks to a bounded run
(grader.timing.sizing), compiling lengthens a case's limit wherever it happens, and a time limit
says how far the call had got, so that a slow kernel is told from a hang
(grader.sandbox.progress)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import kernel_sources
from cpu_timing import KeepAt, cpu_timing
from grader.grading import runner
from grader.kata.catalog import get_kata
from grader.kata.time_limits import case_limit_s
from grader.sandbox import progress, watchdog
from grader.timing import sizing

# -- the timing's size ---------------------------------------------------------------------------


@pytest.mark.parametrize("baseline_ms", [0.002, 0.05, 0.7, 5.0])
def test_a_kernel_near_the_baseline_is_timed_as_before(baseline_ms):
    # The count comes from the baseline alone: the submission cannot size its own run.
    run = sizing.plan_run(baseline_ms, call_ms=baseline_ms * 1.3)
    assert (run.rounds, run.warmup) == (sizing.ROUNDS, sizing.WARMUP)
    assert run.samples == sizing.baseline_samples(baseline_ms)
    assert sizing.plan_run(baseline_ms) == run  # the checked calls' time unknown: the same


@pytest.mark.parametrize("call_ms", [30.0, 100.0, 300.0, 1000.0, 5000.0])
def test_a_slow_kernel_is_timed_in_bounded_time(call_ms):
    baseline_ms = 0.7
    run = sizing.plan_run(baseline_ms, call_ms)
    spent = run.calls * (call_ms + baseline_ms)
    floor = sizing.FLOOR[0] * (sizing.FLOOR[1] + sizing.FLOOR[2])
    assert spent <= sizing.BUDGET_MS or run.calls == floor
    assert run.calls >= floor and run.samples >= 1 and run.warmup >= 1


def test_a_grade_of_many_bench_cases_shares_one_budget():
    assert sizing.case_budget_ms(2) == sizing.BUDGET_MS
    assert sizing.case_budget_ms(24) * 24 == pytest.approx(sizing.GRADE_BUDGET_MS)
    # A kernel of a second a call, in a kata of 24 bench cases: the floor, two calls a side.
    run = sizing.plan_run(0.7, 1000.0, budget_ms=sizing.case_budget_ms(24))
    assert run.calls == 2 and (run.rounds, run.warmup, run.samples) == sizing.FLOOR


def test_slower_never_means_more_calls_and_a_graph_replay_counts_its_calls():
    runs = [sizing.plan_run(0.7, ms) for ms in (1, 10, 30, 60, 120, 250, 500, 1000)]
    assert all(a.calls >= b.calls for a, b in zip(runs, runs[1:]))
    # 25 calls per replay cost 25 times as much as one.
    assert sizing.plan_run(0.01, 2.0, calls_per_sample=25).calls < sizing.plan_run(0.01, 2.0).calls


def _timed(monkeypatch, kernel_ms, call_ms):
    timing = cpu_timing(monkeypatch)  # every call "takes" kernel_ms on the faked events
    monkeypatch.setattr(timing, "_elapsed", lambda start, end: kernel_ms)
    calls, sampler = [], KeepAt({})

    def submission(x, y):
        calls.append(1)
        return x + y

    result = timing.time_pair(submission, lambda x, y: x + y, lambda salt: (torch.ones(8), torch.ones(8)),
                              seed=1, use_graph=False, sampler=sampler, call_ms=call_ms)
    return result, sampler, calls


def test_the_timer_runs_as_sized_for_a_slow_kernel(monkeypatch):
    result, sampler, calls = _timed(monkeypatch, 400.0, 450.0)
    run = sizing.plan_run(400.0, 400.0)
    assert run.calls < sizing.plan_run(400.0).calls
    assert sampler.calls == run.calls  # what the parent chooses its kept calls from
    assert len(calls) == run.calls + 1  # and the untimed call that measured the kernel
    assert len(result.round_speedups) == run.rounds and result.samples == run.samples
    assert len(result.warmup_ms) == run.warmup


def test_a_checked_call_slowed_by_the_guards_alone_does_not_shrink_the_run(monkeypatch):
    # 400 ms in its checked call (the op recorder on hundreds of launches, say), 1 ms a call
    # as the timer takes it: timed as any kernel near the baseline.
    result, sampler, calls = _timed(monkeypatch, 1.0, 400.0)
    assert sampler.calls == sizing.plan_run(1.0).calls == len(calls) - 1


# -- the case limits -----------------------------------------------------------------------------


def test_timeout_sets_every_cases_limit_raised_or_lowered():
    assert case_limit_s("gpu", False, 0.001, None) == pytest.approx(12.0)
    assert case_limit_s("gpu", False, 0.001, 300.0) == 300.0  # raised: it was capped at 12 s
    assert case_limit_s("interpret", True, 1.0, 5.0) == 5.0


# -- the progress record ---------------------------------------------------------------------------


@pytest.fixture()
def recorder(tmp_path):
    path = progress.create(tmp_path / "progress.bin")
    rec = progress.Recorder()
    rec.open(str(path))
    return rec, path


def test_the_record_round_trips(recorder):
    rec, path = recorder
    rec.begin(progress.BASELINE)
    rec.call()
    rec.launched("add_kernel")
    rec.grid(8)
    for _ in range(3):
        rec.program()
    snap = progress.read(path)
    assert (snap.launches, snap.programs, snap.grid, snap.calls, snap.stage, snap.name) == \
        (1, 3, 8, 1, progress.CALL, "add_kernel")
    rec.returned()  # every program has run: no grid in flight
    snap = progress.read(path)
    assert (snap.launches, snap.programs, snap.grid) == (1, 0, 0)
    rec.begin(progress.TIMING)  # a new case or phase counts afresh
    assert progress.read(path).launches == 0


def test_compile_time_is_credited_capped_and_nested_sections_count_once(recorder, monkeypatch):
    rec, path = recorder
    clock = [100.0]
    monkeypatch.setattr(progress, "now", lambda: clock[0])
    rec.begin(progress.BASELINE)
    with rec.compiling():  # an autotuner's benchmark compiling its config
        with rec.compiling():
            clock[0] += 7.0
        clock[0] += 1.0
    assert progress.read(path).compile_credit(clock[0]) == pytest.approx(8.0)
    with rec.compiling():
        clock[0] += 5.0
        # One in progress counts too.
        assert progress.read(path).compile_credit(clock[0]) == pytest.approx(13.0)
    # The submission shares the worker's process and could write any figure: the credit is capped.
    forged = progress.Snapshot(0, 0, 0, 0, progress.CALL, 1e9, 0.0, 0.0, 0.0, "")
    assert forged.compile_credit(0.0) == progress.COMPILE_CREDIT_CAP_S


def test_the_grade_s_compiling_lengthens_its_limit_up_to_the_limit_and_is_named_past_that(recorder, monkeypatch):
    """FlagGems' mm autotunes every new shape (about 12 s each on an H200): a whole grade ran out
    of its 180 s in the autotuner, and the time limit said only "compiling for 1 s", the section
    then in progress. The grade's compiling now lengthens its limit, as a case's does, up to the
    limit itself; past that, the message says compiling took it."""
    rec, path = recorder
    clock = [100.0]
    monkeypatch.setattr(progress, "now", lambda: clock[0])
    for _ in range(12):  # twelve cases, each autotuning a new shape for 12 s
        rec.begin(progress.BASELINE)
        rec.call()
        with rec.compiling():
            clock[0] += 12.0
    rec.begin(progress.BASELINE)
    rec.call()
    with rec.compiling():
        clock[0] += 3.0
        snap = progress.read(path)
        assert snap.compile_credit(clock[0]) == pytest.approx(3.0)  # a case's credit is its own
        assert snap.grade_compiling(clock[0]) == pytest.approx(147.0)
        # All of it lengthens the grade's 180 s: the kernels and checks still get their 180 s.
        assert snap.grade_compile_credit(clock[0], 180.0) == pytest.approx(147.0)
        assert progress.describe_grade(snap, clock[0], 180.0) == ""
        clock[0] += 40.0  # the same autotuning section goes on, past the limit's worth
        snap = progress.read(path)
        # Capped at the limit itself: the submission could write any figure.
        assert snap.grade_compile_credit(clock[0], 180.0) == pytest.approx(180.0)
        said = progress.describe_grade(snap, clock[0], 180.0)
    assert said.startswith("187 s of the grade went to Triton compiling and autotuning, more than "
                           "the 180 s by which its 180 s limit is lengthened for them"), said
    assert "key=['M', 'N', 'K']" in said and "--timeout" in said
    # A longer limit lengthens further, and no record says nothing.
    assert progress.describe_grade(snap, clock[0], 1000.0) == ""
    assert progress.describe_grade(None, clock[0], 180.0) == ""
    forged = progress.Snapshot(0, 0, 0, 0, progress.CALL, 0.0, 0.0, 0.0, 0.0, "", 1e9)
    assert forged.grade_compile_credit(0.0, 180.0) == 180.0


def test_the_watchdog_lengthens_the_wall_time_only_by_what_it_is_told():
    limits = watchdog.ResourceLimits(wall_s=0.4, memory_bytes=1 << 34, processes=64, output_bytes=1 << 20)
    for more, at_least in ((0.0, 0.4), (2.0, 2.4)):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            started = time.monotonic()
            breach = watchdog.watch(proc, limits, Path(os.devnull), {}, lengthen=lambda: more)
            waited = time.monotonic() - started
        finally:
            proc.kill()
            proc.wait()
        assert breach.kind == "time" and at_least <= waited < at_least + 5, (more, waited)
        if more:
            assert "more than 2 s (its limit, 0.4 s, and 2 s more for compiling)" in breach.message
        else:
            assert breach.message.endswith("ran for more than 0.4 s")


def test_a_record_that_makes_no_sense_is_not_read(tmp_path):
    import struct

    path = tmp_path / "progress.bin"
    path.write_bytes(struct.pack(progress._FORMAT, 1, 0, 0, 0, 2, math.nan, 0.0, 0.0, 0.0, b"k", 0.0))
    assert progress.read(path) is None
    path.write_bytes(b"short")
    assert progress.read(path) is None
    assert progress.describe(None, 0.0) == ("", None)


def _snapshot(**fields):
    base = dict(launches=1, programs=0, grid=0, calls=1, stage=progress.CALL, compile_s=0.0,
                compiling_since=0.0, launch_at=100.0, last_at=100.0, name="k")
    return progress.Snapshot(**dict(base, **fields))


def test_how_far_tells_a_slow_interpreted_kernel_from_a_hang():
    slow = _snapshot(programs=120, grid=1000, last_at=111.9)  # 119 programs in 11.9 s
    text, verdict = progress.describe(slow, 112.0)
    assert verdict is True and "program 120 of the 1000" in text and "slow, not hung" in text
    hung = _snapshot(programs=1, grid=8, last_at=100.0)  # program 1 of 8 running for 12 s
    text, verdict = progress.describe(hung, 112.0)
    assert verdict is False and "program 1 of the 8" in text and "hang" in text
    # The first program, started a moment ago: too soon to tell.
    assert progress.describe(_snapshot(programs=1, grid=8, last_at=111.5), 112.0)[1] is None
    # Programs that had kept pace, then stopped: a hang in a later program.
    stalled = _snapshot(programs=50, grid=100, last_at=105.0)
    assert progress.describe(stalled, 112.0)[1] is False


def test_how_far_on_a_gpu_names_the_launches_and_what_the_host_was_doing():
    text, verdict = progress.describe(_snapshot(launches=3, last_at=100.0), 112.0)
    assert verdict is False and "3 Triton kernels" in text and "nothing had been launched for 12 s" in text
    text, verdict = progress.describe(_snapshot(stage=progress.WAITING), 112.0)
    assert verdict is None and "waiting for the GPU" in text
    text, verdict = progress.describe(_snapshot(launches=0, calls=2), 112.0)
    assert "second checked call" in text and "no Triton kernel had been launched yet" in text
    text, _ = progress.describe(_snapshot(stage=progress.TIMING), 112.0, timed=(7, 25))
    assert "7 of its 25 timed calls" in text
    # Every timed call made: what still runs under the case's limit is named.
    text, _ = progress.describe(_snapshot(stage=progress.TIMING), 112.0, timed=(25, 25))
    assert "all 25 of its timed calls" in text and "profiled call" in text and "25 of its 25" not in text
    text, verdict = progress.describe(_snapshot(compiling_since=90.0), 112.0)
    assert verdict is True and "compiling or autotuning for 22 s" in text


class _Referee:
    """The referee's side that _overdue reads: a case started `ago` seconds back."""

    def __init__(self, key, limit_s, ago):
        self.current = {"key": key, "phase": "case", "started": time.monotonic() - ago, "limit_s": limit_s}

    def overdue(self, grace_s=0.0):
        late = time.monotonic() - self.current["started"] > self.current["limit_s"] + grace_s
        return self.current if late else None

    def timed_calls(self, key):
        return None


def _write_record(tmp_path, snap_fields, ago):
    import struct

    now = progress.now()
    fields = dict(dict(launches=1, programs=0, grid=0, calls=1, stage=progress.CALL, compile_s=0.0,
                       compiling_since=0.0, launch_at=now - ago, last_at=now - ago,
                       grade_compile_s=0.0), **snap_fields)
    (tmp_path / "progress.bin").write_bytes(struct.pack(
        progress._FORMAT, *(fields[k] for k in ("launches", "programs", "grid", "calls", "stage", "compile_s",
                                                 "compiling_since", "launch_at", "last_at")), b"k",
        fields["grade_compile_s"]))


def _overdue(tmp_path, snap_fields, limit_s=10.0, ago=15.0):
    _write_record(tmp_path, snap_fields, ago)
    kata = get_kata("vector_add")
    plan = [{"key": "vector_add/small/float32", "task": "vector_add", "case": "small", "dtype": "float32"}]
    return runner._overdue(_Referee(plan[0]["key"], limit_s, ago), plan, kata, tmp_path)


def test_compiling_lengthens_any_cases_limit_but_only_so_far(tmp_path):
    # 10 s limit, 15 s in, 8 s of them compiling: not overdue.
    assert _overdue(tmp_path, {"compile_s": 8.0}) is None
    # A claim of a day's compiling is capped: past its limit plus the cap, the case stops.
    breach = _overdue(tmp_path, {"compile_s": 86400.0}, ago=10.0 + progress.COMPILE_CREDIT_CAP_S + 1)
    assert breach is not None and "compiling" in breach.message
    breach = _overdue(tmp_path, {})
    assert breach.kind == "time" and "ran for more than 10 s" in breach.message
    assert "nothing had been launched for 15 s" in breach.message


def test_interpreted_programs_still_advancing_get_the_limit_again_and_no_more(tmp_path):
    now = progress.now()
    advancing = {"programs": 300, "grid": 1000, "last_at": now - 0.05}
    assert _overdue(tmp_path, advancing) is None  # 15 s into a 10 s limit: slow, not hung
    breach = _overdue(tmp_path, advancing, ago=21.0)
    assert breach is not None and "ran for more than 20 s" in breach.message and "slow, not hung" in breach.message
    stuck = {"programs": 1, "grid": 8}  # program 1 running since the launch, 15 s back
    breach = _overdue(tmp_path, stuck)
    assert breach is not None and "hang" in breach.message


# -- end to end, under the interpreter --------------------------------------------------------------

SLOW = '''
import torch
import triton
import triton.language as tl


@triton.jit
def slow_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, REPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    for _ in range(REPS):  # busy work: correct, only slow
        acc = acc * 1.0
    tl.store(out_ptr + offs, acc, mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    slow_add[(triton.cdiv(x.numel(), 4),)](x, y, out, x.numel(), BLOCK=4, REPS=3000)
    return out
'''

HANG = '''
import torch
import triton
import triton.language as tl


@triton.jit
def hang_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    i = 0
    while i < n:  # i never advances
        acc = acc * 1.0
    tl.store(out_ptr + offs, acc, mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    hang_add[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out
'''


def _grade_small(tmp_path: Path, source: str, limit_s: float):
    path = tmp_path / "solution.py"
    path.write_text(source)
    return runner.grade(get_kata("vector_add"), path, "interpret", case_timeout_s=limit_s, only_cases=["small"])


def test_the_interpreters_case_cap_tells_a_slow_kernel_from_a_hang(tmp_path):
    slow = _grade_small(tmp_path, SLOW, 3.0)
    assert slow.status == "error" and [d["code"] for d in slow.diagnoses] == ["time_limit"]
    assert "ran for more than 6 s" in slow.message  # its limit, and as much again while running programs
    assert "slow_add" in slow.message and "slow, not hung" in slow.message and "of the 250" in slow.message
    assert "never ends" not in slow.message
    assert slow.diagnoses[0]["advice"].startswith("it was still working, not hung")
    hung = _grade_small(tmp_path, HANG, 3.0)
    assert hung.status == "error" and [d["code"] for d in hung.diagnoses] == ["time_limit"]
    assert "ran for more than 3 s" in hung.message and "program 1 of the 4" in hung.message
    assert "looks like a hang" in hung.message and "slow, not hung" not in hung.message
    assert "infinite loop" in hung.diagnoses[0]["advice"]


def test_a_compiled_kernel_launched_without_jit_function_run_is_counted_once(recorder, monkeypatch):
    """A kernel from .warmup() launched as kernel[grid](...) (or a library's cache of compiled
    kernels) reaches only the driver's launcher: the record counts it there, so a slow chain of
    such launches is not taken for a hang ("nothing had been launched for N s")."""
    rec, path = recorder
    monkeypatch.setattr(progress, "record", rec)
    monkeypatch.setattr(progress, "_installed", [])  # what this test wraps is put back by hand

    class Launcher:  # (gridX, gridY, gridZ, stream, function, packed metadata, launch metadata, ...)
        def __call__(self, gridX, gridY, gridZ, stream, function, *args):
            return None

    class Metadata:  # triton 3.9's LazyDict
        data = {"name": "warm_kernel"}

    original = Launcher.__call__
    progress.count_compiled_launches(Launcher)
    rec.begin(progress.CALL)
    Launcher()(4, 1, 1, 0, 1, (), Metadata(), None, None, 1.0)
    snap = progress.read(path)
    assert (snap.launches, snap.name) == (1, "warm_kernel")
    # Through JITFunction.run (its wrapper's count is on): the launch below it is not counted again.
    progress._inside_run[0] += 1
    try:
        Launcher()(4, 1, 1, 0, 1, (), None, None, None)
    finally:
        progress._inside_run[0] -= 1
    assert progress.read(path).launches == 1
    Launcher.__call__ = original


def test_in_the_worker_the_launch_count_sits_on_top_of_the_progress_record():
    """The worker installs the progress record, then the launch count: on a GPU's launcher the
    count's wrapper is on top (where integrity looks for it), the record's beneath, both reached."""
    import subprocess
    import sys

    code = (
        "from grader.sandbox import integrity, launches, progress\n"
        "from triton.backends.nvidia.driver import CudaLauncher\n"
        "progress.install(); launches.install()\n"
        "snapshot = integrity.Snapshot()\n"
        "assert launches.still_installed() and snapshot.changes() == []\n"
        "below = CudaLauncher.__call__.__wrapped__\n"
        "assert below.__qualname__.startswith('count_compiled_launches'), below.__qualname__\n"
        "assert below.__wrapped__.__module__ == 'triton.backends.nvidia.driver'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_whole_grade_s_time_limit_names_the_compiling_that_took_it(tmp_path):
    referee = _Referee("matmul/decode_m1_t/bfloat16", 30.0, 1.0)
    # 200 s autotuning, more than the 180 s the grade's 180 s limit is lengthened by; the last
    # section 1 s old: compiling, no hang.
    _write_record(tmp_path, {"grade_compile_s": 199.0, "compiling_since": progress.now() - 1.0}, 1.0)
    assert runner.grade_compile_credit(tmp_path, 180.0) == pytest.approx(180.0)
    text, slow = runner._how_far(referee, tmp_path, grade_limit_s=180.0)
    assert slow is True and "200 s of the grade went to Triton compiling and autotuning" in text
    assert "compiling or autotuning for 1 s" in text and "looks slow" not in text  # no kernel blamed
    # The case's own limit says nothing of the grade's compiling.
    text, _ = runner._how_far(referee, tmp_path)
    assert "of the grade's" not in text
    # A grade whose compiling was all added to its limit ran out running kernels, and is told only
    # how far it got.
    _write_record(tmp_path, {"grade_compile_s": 150.0, "last_at": progress.now() - 30.0}, 30.0)
    assert runner.grade_compile_credit(tmp_path, 180.0) == pytest.approx(150.0)
    text, slow = runner._how_far(referee, tmp_path, grade_limit_s=180.0)
    assert "of the grade's" not in text and slow is False



AUTOTUNED_ADD = kernel_sources.add_kernel(prelude="import time\nfrom grader.sandbox import progress\n") + """
_tuned = set()

def vector_add(x, y):
    # An autotuner keyed on the size: each new size benchmarks its configs ({tune_s} s), told to
    # the progress record as Triton's own autotuner is.
    if x.numel() not in _tuned:
        _tuned.add(x.numel())
        with progress.record.compiling():
            time.sleep({tune_s})
    out = torch.empty_like(x)
    """ + kernel_sources.launch_line(block=256) + """
    return out
"""


def test_a_grade_that_autotunes_each_size_gets_its_compiling_added_to_its_limit(tmp_path, grade_interpret):
    """Four sizes autotuned 2 s each: 8 s of compiling in a grade limited to 8 s, which ran out
    of time before; now its limit is lengthened by them. Given only 3 s, the same grade spends
    more than the 3 s added and stops, saying compiling took it."""
    cases = ["small", "two_blocks", "one", "two"]
    path = tmp_path / "solution.py"
    path.write_text(AUTOTUNED_ADD.format(tune_s=2.0))
    result = grade_interpret("vector_add", path, timeout_s=8.0, case_timeout_s=60.0, only_cases=cases)
    assert result.correct and result.status != "error", result.message
    # The grade says where its time went.
    from grader.results.report import grade_time
    assert 8.0 <= result.compile_s < 12.0 and result.duration_s > 8.0, (result.compile_s, result.duration_s)
    assert grade_time(result).endswith(f", {result.compile_s:.1f} s of it Triton compiling and autotuning")
    result = grade_interpret("vector_add", path, timeout_s=3.0, case_timeout_s=60.0, only_cases=cases)
    assert result.status == "error" and result.diagnoses[0]["code"] == "time_limit", result.message
    # Still working, not hung: no advice to look for an infinite loop; and the case in flight when
    # the grade's limit fired (the hidden case "one") is no hidden edge case the kernel fails.
    assert [d["code"] for d in result.diagnoses] == ["time_limit"], result.diagnoses
    assert result.diagnoses[0]["advice"].startswith("it was still working, not hung"), result.diagnoses
    assert "(its limit, 3 s, and 3 s more for compiling)" in result.message, result.message
    assert "more than the 3 s by which its 3 s limit is lengthened for them" in result.message
