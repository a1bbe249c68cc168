"""Compile-ahead helpers (grader.grading.compile_ahead): which cases they run, how many start, and
that a grade with them reaches the verdict it reaches without them, leaving no process behind.

On a GPU they fill Triton's cache; under the interpreter nothing compiles, so a grade starts none
unless KATA_COMPILE_AHEAD says so, as these tests do to run the real processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.grading import compile_ahead
from grader.grading.compile_ahead import Helpers, helper_count, shares
from grader.grading.plan import build_plan
from grader.grading.runner import grade
from grader.kata import catalog
from grader.sandbox import watchdog

ROOT = Path(__file__).resolve().parents[1]
# A helper's limits in the tests that launch stand-in processes.
LIMITS = watchdog.ResourceLimits(wall_s=120, memory_bytes=1 << 30, processes=4, output_bytes=1 << 20)


def _plan(kata, mode="gpu"):
    return [dict(p.to_dict(), key=p.key) for p in build_plan(kata, mode)]


def test_shares_are_the_small_checked_cases_after_the_workers_own_third():
    kata = catalog.get_kata("softmax")
    plan = _plan(kata)
    small = [p for p in plan if not p["skip_reason"] and not p["bench"]
             and compile_ahead._case_bytes(kata, p) <= compile_ahead.CASE_BYTES]
    runs = shares(kata, plan, 2)
    assert len(runs) == 2 and all(runs)
    # The worker compiles the first third itself; the helpers take the rest, in plan order.
    assert [p["key"] for run in runs for p in run] == [p["key"] for p in small[round(len(small) / 3):]]
    assert abs(len(runs[0]) - len(runs[1])) <= 1
    assert not any(p["bench"] for run in runs for p in run)
    assert shares(kata, plan, 0) == []


def test_helpers_start_only_where_the_katas_declared_peak_leaves_the_gpu_room():
    h100 = 81559 << 20  # an 80 GB H100's memory, as the driver reports it
    room = {k.name: compile_ahead.room_for(k, 2, h100) for k in catalog.all_katas()}
    assert room["adamw"] is room["cross_entropy"] is False  # 71 and 68 GiB: the GPU is theirs
    assert room["paged_decode"] and room["flash_attention"] and room["softmax"]
    assert not compile_ahead.room_for(catalog.get_kata("vector_add"), 1, 24 << 30)  # 30 GiB
    assert compile_ahead.room_for(catalog.get_kata("softmax"), 1, 24 << 30)
    adamw = catalog.get_kata("adamw")
    assert shares(adamw, _plan(adamw), 2, h100) == []
    # Where the GPU's size is unknown, the largest case's bytes moved decide (adamw's: ~19 GB).
    assert shares(adamw, _plan(adamw), 2) == []
    softmax = catalog.get_kata("softmax")
    assert shares(softmax, _plan(softmax), 2) == shares(softmax, _plan(softmax), 2, h100) != []


def test_how_many_helpers(monkeypatch):
    monkeypatch.delenv(compile_ahead.ENV_SWITCH, raising=False)
    monkeypatch.setattr(compile_ahead.os, "cpu_count", lambda: 16)
    assert compile_ahead.DEFAULT == "auto"  # measured: docs/PERFORMANCE.md
    assert helper_count("gpu", shared_gpu=False) == 2
    assert helper_count("interpret", shared_gpu=False) == 0
    monkeypatch.setenv(compile_ahead.ENV_SWITCH, "auto")
    assert helper_count("gpu", shared_gpu=False) == 2
    assert helper_count("gpu", shared_gpu=True) == 0  # grades side by side: the GPU is theirs
    assert helper_count("interpret", shared_gpu=False) == 0  # nothing compiles there
    monkeypatch.setattr(compile_ahead.os, "cpu_count", lambda: 4)
    assert helper_count("gpu", shared_gpu=False) == 0  # the worker and the checker need the cores
    monkeypatch.setenv(compile_ahead.ENV_SWITCH, "1")
    assert helper_count("interpret", shared_gpu=False) == 1  # asked for: the tests' way in
    # Grades sharing a GPU take turns on it; a helper, taking none, could run beside another
    # grade's timing, so none starts there whatever the setting.
    assert helper_count("gpu", shared_gpu=True) == 0
    monkeypatch.setenv(compile_ahead.ENV_SWITCH, "0")
    assert helper_count("gpu", shared_gpu=False) == 0


@pytest.fixture()
def spied_helpers(monkeypatch):
    """KATA_COMPILE_AHEAD=2, started at the first case, and the helpers each grade started,
    with the request each got."""
    monkeypatch.setenv(compile_ahead.ENV_SWITCH, "2")
    monkeypatch.setattr(compile_ahead, "START_AFTER_S", 0)
    started = []
    real_start = Helpers._start

    def start(self, helper):
        real_start(self, helper)
        request = Path(self._grade_dir / f"ahead{helper.index}" / "request.json").read_text()
        started.append((helper, request))

    monkeypatch.setattr(Helpers, "_start", start)
    return started


@pytest.mark.parametrize("submission", ["reference/vector_add.py", "tests/wrong/vector_add_bad_mask.py"])
def test_a_grade_with_helpers_reaches_the_same_verdict_and_leaves_none_running(
        spied_helpers, monkeypatch, submission):
    import json

    kata = catalog.get_kata("vector_add")
    helped = grade(kata, ROOT / submission, "interpret", seed=11, keep_going=True)
    assert len(spied_helpers) == 2
    for helper, request_text in spied_helpers:
        request = json.loads(request_text)
        assert request["warm_up"] is True and request["seed"] != 11  # its inputs are of no use
        assert request["plan"] == helper.run
        assert request["gpu_memory_fraction"] == compile_ahead.GPU_MEMORY_FRACTION
        assert helper.proc.poll() is not None  # stopped with the grade
    monkeypatch.setenv(compile_ahead.ENV_SWITCH, "0")
    alone = grade(kata, ROOT / submission, "interpret", seed=11, keep_going=True)
    assert helped.status == alone.status
    assert [(c.task, c.name, c.dtype, c.status, c.message) for c in helped.cases] == \
        [(c.task, c.name, c.dtype, c.status, c.message) for c in alone.cases]
    assert helped.cheats == alone.cheats == []


def _waiting_workers():
    """(launch, launched): a launcher of stand-in helpers that just wait, and the folders of
    those it started, in order."""
    import subprocess

    launched = []

    def launch(request_path, workdir, env, output, sock):
        launched.append(request_path.parent.name)
        return subprocess.Popen(["sleep", "60"], start_new_session=True)
    return launch, launched


def _delayed_softmax_helpers(tmp_path, start_after_s):
    """Two stand-in helpers of a softmax grade that start after a case of start_after_s:
    (helpers, their shares, the folders of those launched)."""
    kata = catalog.get_kata("softmax")
    runs = shares(kata, _plan(kata), 2)
    launch, launched = _waiting_workers()
    helpers = Helpers(runs, {}, tmp_path, LIMITS, launch, lambda f: {}, start_after_s=start_after_s)
    return helpers, runs, launched


def _until(condition, within_s=10.0):
    import time

    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_helper_stops_when_the_worker_reaches_its_share_and_all_stop_at_the_end(tmp_path):
    kata = catalog.get_kata("softmax")
    runs = shares(kata, _plan(kata), 2)
    launch, launched = _waiting_workers()
    timeline = []
    helpers = Helpers(runs, {"kata_dir": "k"}, tmp_path, LIMITS, launch, lambda folder: {}, timeline,
                      start_after_s=0)
    try:
        helpers.case_started("softmax/small/float32")  # the worker's first case starts them
        assert len(launched) == 2 and all(h.proc.poll() is None for h in helpers.helpers)
        helpers.case_started("softmax/small/float16")  # the worker's own share: nothing changes
        assert all(h.proc.poll() is None for h in helpers.helpers)
        first, second = helpers.helpers
        second.ran.add(second.run[0]["key"])  # the second helper is past its first case
        helpers.case_started(second.run[0]["key"])  # the worker is behind it: it goes on
        assert second.proc.poll() is None
        helpers.case_started(first.run[1]["key"])  # the worker has caught up with the first helper
        assert first.proc.wait(timeout=10) is not None and second.proc.poll() is None
    finally:
        helpers.stop()
    assert all(h.proc.poll() is not None for h in helpers.helpers)
    helpers.case_started("softmax/medium/float32")  # after the end: nothing starts again
    assert len(launched) == 2


def test_helpers_start_only_once_a_case_runs_long_enough_to_be_compiling(tmp_path):
    # Warm, every case takes milliseconds and helpers would only cost the grade their start-up.
    import time

    helpers, runs, launched = _delayed_softmax_helpers(tmp_path, 0.3)
    try:
        kata = catalog.get_kata("softmax")
        own = [p["key"] for p in _plan(kata) if p["key"] not in {q["key"] for r in runs for q in r}]
        for key in own[:3]:  # fast cases: nothing starts
            helpers.case_started(key)
            time.sleep(0.05)
        assert launched == []
        helpers.case_started(own[3])  # a slow case: compiling
        _until(lambda: len(launched) >= 2)
        assert len(launched) == 2 and [h.run for h in helpers.helpers] == runs
    finally:
        helpers.stop()
    assert all(h.proc.poll() is not None for h in helpers.helpers)


def test_a_helper_the_worker_has_reached_before_a_slow_case_never_starts(tmp_path):
    import time

    helpers, runs, launched = _delayed_softmax_helpers(tmp_path, 0.2)
    try:
        helpers.case_started(runs[0][0]["key"])  # warm up to here; now in the first helper's share
        _until(lambda: launched)
        time.sleep(0.2)
        assert launched == ["ahead1"]
    finally:
        helpers.stop()


def test_a_grade_that_ends_before_a_case_is_slow_starts_no_helper(tmp_path):
    kata = catalog.get_kata("softmax")

    def launch(*args):
        raise AssertionError("no helper should start")

    helpers = Helpers(shares(kata, _plan(kata), 2), {}, tmp_path, LIMITS, launch, lambda f: {},
                      start_after_s=0.2)
    helpers.case_started("softmax/small/float32")
    helpers.stop()  # before timing: the timer must not fire after it
    import time
    time.sleep(0.4)
    assert all(h.proc is None for h in helpers.helpers)


def test_a_helper_that_cannot_start_leaves_the_grade_alone(tmp_path):
    # The hook runs in the referee's thread: an exception there would leave the worker waiting.
    kata = catalog.get_kata("softmax")

    def launch(*args):
        raise OSError("no more processes")

    timeline = []
    helpers = Helpers(shares(kata, _plan(kata), 2), {}, tmp_path, LIMITS, launch, lambda f: {}, timeline,
                      start_after_s=0)
    helpers.case_started("softmax/small/float32")
    helpers.stop()
    assert all(h.stopped and h.proc is None for h in helpers.helpers)
    assert [op for _, op, _ in timeline] == ["ahead-failed", "ahead-failed"]


def test_a_helper_stuck_in_a_case_is_stopped(tmp_path, monkeypatch):
    # A hang in a later case would only take GPU time from the grade's worker until it got there.
    import subprocess
    import sys
    import time

    monkeypatch.setattr(compile_ahead, "HELPER_CASE_S", 0.5)
    kata = catalog.get_kata("softmax")
    stuck = ("import json, socket, sys, time\n"
             "line = socket.socket(fileno=int(sys.argv[1]))\n"
             "line.sendall((json.dumps({'op': 'start', 'key': 'k', 'limit_s': 60}) + '\\n').encode())\n"
             "line.recv(100)\n"
             "time.sleep(60)\n")

    def launch(request_path, workdir, env, output, sock):
        return subprocess.Popen([sys.executable, "-c", stuck, str(sock.fileno())],
                                pass_fds=(sock.fileno(),), start_new_session=True)

    helpers = Helpers(shares(kata, _plan(kata), 1), {}, tmp_path, LIMITS, launch, lambda f: {},
                      start_after_s=0)
    try:
        helpers.case_started("softmax/small/float32")
        (helper,) = helpers.helpers
        started = time.monotonic()
        assert helper.proc.wait(timeout=20) is not None
        assert time.monotonic() - started < 10 and helper.stopped
    finally:
        helpers.stop()
