"""Cheats that only a GPU can show: side streams, timing tricks, wrong timed outputs, a card-sized
allocation, CUDA-graph timing of short kernels. Skipped without CUDA; run on an H100/H200 and
recorded in docs/PERFORMANCE.md."""

from __future__ import annotations

from pathlib import Path

import torch

from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from grader.timing.perturb import replay
import kernel_sources

KERNEL = kernel_sources.with_launch(int64_offsets=True, block=4096, num_warps=8)


def _grade(tmp_path: Path, body: str):
    path = tmp_path / "solution.py"
    path.write_text(KERNEL + body)
    return grade(get_kata("vector_add"), path, "gpu")


def test_side_stream(tmp_path):
    body = '''
_side = torch.cuda.Stream()


def vector_add(x, y):
    out = torch.empty_like(x)
    with torch.cuda.stream(_side):
        launch(x, y, out)
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status == "fail" and result.cheat == "side_stream", result.cheats


def test_background_thread_on_gpu(tmp_path):
    body = '''
import threading


def vector_add(x, y):
    out = torch.empty_like(x)
    threading.Thread(target=launch, args=(x, y, out)).start()
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status == "fail" and result.cheat == "background_thread", result.cheats


def test_slow_first_timed_calls(tmp_path):
    # A timing-aware submission: the first call after a pause stalls. A stall seen once is no
    # evidence (another process's, say): a suspect case is timed again after a pause like the
    # first timing's (grader.sandbox.worker.RETIME_PAUSE_S), where this one stalls again and is
    # named. Where its stalls fall depends on the grader's own pauses: where none fell on the
    # first timed calls, nothing is named, and the stalls inside the timed window cost it speed.
    body = '''
import time

_last = [None]


def vector_add(x, y):
    now = time.perf_counter()
    paused = _last[0] is not None and now - _last[0] > 0.2
    _last[0] = now
    out = torch.empty_like(x)
    if paused:
        torch.cuda._sleep(100_000_000)  # about 50 ms of GPU time, inside the timed window
    launch(x, y, out)
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status == "fail", result.message
    if result.cheat is None:  # never seen on the first timed calls, or not seen again
        assert result.speedup < 0.9 and not result.cheats, (result.speedup, result.timings_disturbed)
    else:
        assert result.cheat == "slow_first_calls", result.cheats


def test_results_cached_only_while_timed(tmp_path):
    # Honest for the two checked calls of each shape, then serves results by pointer.
    body = '''
_calls, _cache = {}, {}


def vector_add(x, y):
    key = (x.numel(), x.dtype)
    _calls[key] = _calls.get(key, 0) + 1
    ptrs = (x.data_ptr(), y.data_ptr())
    if _calls[key] > 2 and ptrs in _cache:
        return _cache[ptrs]
    out = torch.empty_like(x)
    launch(x, y, out)
    _cache[ptrs] = out
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status == "fail" and result.cheat == "cached_results", result.cheats


def test_patched_timer_changes_nothing_and_is_named(tmp_path):
    body = '''
import triton.testing

torch.cuda.Event.elapsed_time = lambda self, end: 1e-6
triton.testing.do_bench = lambda *args, **kwargs: 1e-6


def vector_add(x, y):
    out = torch.empty_like(x)
    launch(x, y, out)
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status == "error" and result.cheat == "tampering", result.cheats
    assert "Event.elapsed_time" in result.message


def test_allocating_the_whole_card_fails_alone(tmp_path):
    body = '''

def vector_add(x, y):
    hog = torch.empty(torch.cuda.get_device_properties(0).total_memory, dtype=torch.uint8, device="cuda")
    out = torch.empty_like(x)
    launch(x, y, out)
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status in ("fail", "error") and result.score == 0
    assert "out of memory" in result.cases[0].message.lower()
    # The next grade on the same card is unaffected.
    again = grade(get_kata("vector_add"), get_kata("vector_add").reference_path, "gpu")
    assert again.status == "pass", again.message


def _vector_add_reference():
    import importlib.util
    spec = importlib.util.spec_from_file_location("ref_vector_add", get_kata("vector_add").reference_path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref


def _short_inputs(salt):
    """Inputs of a kernel far under timer.SHORT_MS: timed by CUDA-graph replay."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(sum(map(ord, salt)))
    return (torch.randn(1 << 16, device="cuda", generator=gen),
            torch.randn(1 << 16, device="cuda", generator=gen))


class _KeepSome:  # the parent's role: keep a few calls, chosen here
    def begin(self, calls, n_sets):
        self.keep_at = {3: 1, calls // 2: 0, calls - 1: n_sets - 1}

    def keep(self, call):
        return self.keep_at.get(call)


def test_short_kernels_are_timed_by_graph_replay():
    from grader.timing import timer as timing

    ref = _vector_add_reference()
    result = timing.time_pair(ref.vector_add, lambda x, y: x + y, _short_inputs, seed=1, sampler=_KeepSome())
    assert result.method == "cuda_graph" and result.calls_per_sample >= 8
    assert 0.3 < result.speedup < 3.0 and result.time_ms < 0.02
    assert len(result.checked) == 3
    for sample in result.checked:  # what the replay returned, for the inputs rebuilt by replay
        sets = [_short_inputs(f"/timing{i}") for i in range(result.n_sets)]
        replay(sets, 1, sample.call, per_call_all_sets=True)
        x, y = sets[sample.set]
        torch.testing.assert_close(sample.outputs, x + y)


def test_a_short_kernel_reusing_its_output_is_timed_call_by_call():
    # CUDA-graph timing replays one call per input set; with one output buffer shared by all of
    # them, a kept sample would hold the last set's result. The timer sees the shared buffer and
    # times call by call instead, where each kept output is copied as it returns.
    import triton

    from grader.timing import timer as timing

    ref = _vector_add_reference()
    buffers = {}

    def reusing(x, y):
        out = buffers.setdefault((x.shape, x.dtype), torch.empty_like(x))
        ref.add_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, out, x.numel(), BLOCK_SIZE=4096, num_warps=8)
        return out

    result = timing.time_pair(reusing, lambda x, y: x + y, _short_inputs, seed=1, sampler=_KeepSome())
    assert result.method == "events" and len(result.checked) == 3
    for sample in result.checked:
        sets = [_short_inputs(f"/timing{i}") for i in range(result.n_sets)]
        replay(sets, 1, sample.call, per_call_all_sets=False)
        x, y = sets[sample.set]
        torch.testing.assert_close(sample.outputs, x + y)


def test_prediction_of_the_checked_timed_calls_gets_nowhere(tmp_path):
    # The strongest attack on a grader that picks the verified timed calls in the worker: find the
    # grade's seed in the worker's memory, rebuild the pick, compute honestly on the predicted
    # calls and serve stale results (padded with a real launch, to stay above the floor) on the
    # rest. Here the pick is made by the parent after each call, so the prediction is a guess.
    # (The cache holds each set's first timed call, a stale copy the checker recognises. Filled
    # from the checked calls too, it could replay their result where the allocator handed their
    # buffers on to a timed set: a diagnosis, not a cheat, which made this test fail now and then.)
    body = '''
import gc
import random

from grader.judge.inputs import case_seed

_calls, _cache, _state = {}, {}, {}


def _grade_seed():
    for obj in gc.get_objects():
        if type(obj).__name__ == "CaseRunner" and hasattr(obj, "seed"):
            return obj.seed
    return 0


def _predicted(n_timed):
    # The old pick: one call in each of two random rounds, from the timing rng.
    seed = _state.setdefault("seed", _grade_seed())
    rng = random.Random(case_seed(seed, "vector_add/bench_2e28/float32/rng"))
    per_round = n_timed
    return {r * (per_round + 3) + 3 + rng.randrange(per_round) for r in rng.sample(range(5), 2)}


def vector_add(x, y):
    key = (x.numel(), x.dtype)
    n = _calls[key] = _calls.get(key, 0) + 1
    ptrs = (x.data_ptr(), y.data_ptr())
    out = torch.empty_like(x)
    launch(x, y, out)  # the padding: the same launch, on throw-away storage when cheating
    if n > 2 and ptrs in _cache and (n - 3) not in _predicted(10):
        return _cache[ptrs]
    if n > 2 and ptrs not in _cache:  # a set's first timed call: what the later ones replay
        _cache[ptrs] = out
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status == "fail" and result.cheat == "cached_results", result.cheats
    assert "earlier call" in result.message


class _PatchingMatmul:
    """The incremental-update cheat: keep each set's last inputs and fp32 result, and where the
    timing's change since then is a few rows of a or of b, correct the result by recomputing
    those rows of c (a) or by a rank-k update (b) instead of doing the GEMM. Exact, so no
    correctness check can see it; only the density of the change makes it cost the work."""

    LOW_RANK = 64

    def __init__(self):
        self.held = {}
        self.patched = 0

    def __call__(self, a, b):
        key = (a.data_ptr(), b.data_ptr())
        held = self.held.get(key)
        if held is not None:
            a0, b0, c = held
            rows_a = (a != a0).any(1).nonzero().flatten()
            rows_b = (b != b0).any(1).nonzero().flatten()
            if len(rows_a) + len(rows_b) <= self.LOW_RANK:
                c[rows_a] = (a[rows_a] @ b0).float()
                c.addmm_(a[:, rows_b].float(), (b[rows_b].float() - b0[rows_b].float()))
                a0[rows_a], b0[rows_b] = a[rows_a], b[rows_b]
                self.patched += 1
                return c.to(a.dtype)
        out = a @ b
        self.held[key] = (a.clone(), b.clone(), out.float())
        return out


def _gemm_inputs(salt):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(sum(map(ord, salt)))
    return tuple(torch.randn(8192, 8192, device="cuda", generator=gen, dtype=torch.bfloat16) for _ in range(2))


def test_a_result_patched_from_the_last_call_costs_the_work_itself():
    # With every timed call's change confined to a short span, this cheat, diffing its inputs
    # with torch, already ran 1.09-1.31x the GEMM it skipped (docs/PERFORMANCE.md), and one that
    # knew the span without diffing would run far faster; with every input rescaled at random it
    # must do the GEMM, and pays for its diff on top (0.57x).
    from grader.timing import timer as timing

    cheat = _PatchingMatmul()
    result = timing.time_pair(cheat, lambda a, b: a @ b, _gemm_inputs, seed=3, use_graph=False)
    assert cheat.patched == 0
    assert result.speedup < 1.05, result


def test_forged_timings_written_from_inside_the_worker(tmp_path):
    # Correct, then, once timed, it writes a fast timing for every bench case into the events
    # file itself, reports the grade done and exits: no kept timed outputs reached the parent.
    body = '''
import os
import sys


def _forge():
    frame = sys._getframe()
    while frame is not None and not {"reporter", "plan", "line"} <= frame.f_locals.keys():
        frame = frame.f_back
    if frame is None or not any(f.f_code.co_name == "time_case" for f in _frames()):
        return
    from grader.sandbox import protocol  # the worker's own events, as it writes them

    for planned in frame.f_locals["plan"]:
        if planned["bench"]:
            frame.f_locals["reporter"].emit(protocol.Timing(planned["key"], {
                "time_ms": 0.5, "baseline_ms": 1.0, "speedup": 2.0, "timing_method": "events",
                "round_speedups": [2.0] * 5}))
    frame.f_locals["reporter"].emit(protocol.Done())
    os._exit(0)


def _frames():
    frame = sys._getframe()
    while frame is not None:
        yield frame
        frame = frame.f_back


def vector_add(x, y):
    _forge()
    out = torch.empty_like(x)
    launch(x, y, out)
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status != "pass" and result.cheat == "fake_result", result.cheats
    assert "never handed over" in result.message


def test_an_earlier_case_s_timing_rewritten_in_the_events_file(tmp_path):
    # The sandbox refuses to open the events file (outside the grade's folder), so the
    # submission writes through the worker's own handle on it, found in memory: a timing for each
    # bench case, a hundred times faster. The parent takes the timings the worker told it on the
    # line, and a file that says otherwise voids the grade.
    body = '''
import gc
import json
import sys

_calls = [0]


def _forge():
    frame = sys._getframe()
    while frame is not None and "request" not in frame.f_locals:
        frame = frame.f_back
    plan = frame.f_locals["request"].plan  # the worker's Request (grader.sandbox.protocol)
    reporter = next(o for o in gc.get_objects() if type(o).__name__ == "Reporter")
    for planned in plan:
        if planned["bench"]:
            timing = {"time_ms": 0.01, "baseline_ms": 1.0, "speedup": 100.0, "timing_method": "events",
                      "calls_per_sample": 1, "samples": 10, "round_speedups": [100.0]}
            reporter._file.write(json.dumps({"type": "timing", "key": planned["key"], "timing": timing}) + "\\n")
    reporter._file.flush()


def vector_add(x, y):
    _calls[0] += 1
    if _calls[0] == 60:  # the first bench case is being timed
        _forge()
    out = torch.empty_like(x)
    launch(x, y, out)
    return out
'''
    result = _grade(tmp_path, body)
    assert result.cheat == "fake_result", (result.cheats, result.message)
    assert "result channel" in result.message, result.message
    assert all(c.speedup is None or c.speedup < 2 for t in result.tasks for c in t.cases)
