"""Advice on speed ("how to be faster"), which never changes the verdict.

Host syncs in a submission's call (grader.timing.host_syncs) are found in one untimed call.
PyTorch's sync debug mode needs CUDA, so here it is faked: a "sync" is the warning PyTorch raises
while the mode is on; tests/gpu has the real one. Many launches per call are counted in the
second checked call, under the interpreter too."""

from __future__ import annotations

import warnings

import pytest

from cpu_timing import cpu_timing
from grader.judge import failure_codes
from grader.results.schema import CaseResult
from grader.timing import host_syncs
import kernel_sources

SYNC = "called a synchronizing CUDA operation"  # PyTorch's wording


@pytest.fixture
def sync_mode(monkeypatch):
    """PyTorch's sync debug mode, faked: {'mode': 0 or 1, 'turned_on': times set to 1}."""
    state = {"mode": 0, "turned_on": 0}

    def set_mode(mode):
        warnings.warn("Synchronization debug mode is a prototype feature")  # as PyTorch does
        state["mode"] = mode
        state["turned_on"] += mode == 1

    monkeypatch.setattr(host_syncs, "_set_mode", set_mode)
    monkeypatch.setattr(host_syncs, "_get_mode", lambda: state["mode"])
    return state


def _copies_to_the_gpu(state, times):
    """A call that makes `times` blocking copies: PyTorch warns at each while the mode is on."""
    def call(*args):
        for _ in range(times):
            if state["mode"]:
                warnings.warn(SYNC)
        return args[0] + args[1] if args else "result"
    return call


def test_a_watched_call_counts_its_syncs_and_names_the_first_line(sync_mode):
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        result, seen = host_syncs.watched(_copies_to_the_gpu(sync_mode, 2))
    assert shown == []  # neither the syncs nor PyTorch's note on its own mode reach the output
    assert result == "result" and seen.count == 2
    assert seen.first_at.startswith("test_speed_advice.py:")
    assert sync_mode["mode"] == 0  # restored


def test_other_warnings_are_raised_again_and_the_mode_is_restored_after_an_error(sync_mode):
    def warns_then_fails():
        warnings.warn("my own warning")
        raise ValueError("boom")

    with pytest.warns(UserWarning, match="my own warning"), pytest.raises(ValueError):
        host_syncs.watched(warns_then_fails)
    assert sync_mode["mode"] == 0

    _, seen = host_syncs.watched(lambda: None)
    assert seen.count == 0 and seen.first_at is None


def _time(monkeypatch, submission):
    import torch

    timing = cpu_timing(monkeypatch)
    make_args = lambda salt: (torch.ones(8), torch.ones(8))  # noqa: E731
    return timing.time_pair(submission, lambda x, y: x + y, make_args, seed=1, use_graph=False,
                            watch_syncs=True)


def test_the_timer_watches_one_untimed_call_past_the_first_round(monkeypatch, sync_mode):
    calls = []

    def submission(x, y):
        calls.append(sync_mode["mode"])
        if sync_mode["mode"]:
            warnings.warn(SYNC)
        return x + y

    result = _time(monkeypatch, submission)
    assert result.host_syncs.count == 1 and sync_mode["turned_on"] == 1
    from grader.timing.timer import WARMUP
    # The first warm-up call of round 2 (the submission runs first in even rounds, second in odd).
    assert calls.index(1) == WARMUP + result.samples and calls.count(1) == 1


def test_an_honest_call_shows_no_syncs_and_without_watching_none_is_reported(monkeypatch, sync_mode):
    assert _time(monkeypatch, lambda x, y: x + y).host_syncs.count == 0
    timing = cpu_timing(monkeypatch)
    import torch
    quiet = timing.time_pair(lambda x, y: x + y, lambda x, y: x + y,
                             lambda salt: (torch.ones(8), torch.ones(8)), seed=1, use_graph=False)
    assert quiet.host_syncs is None and sync_mode["turned_on"] == 1  # the CPU default: not watched


def _case(name, syncs, at=None):
    return CaseResult(task="adamw_step", name=name, dtype="float32", shape=None, hidden=False,
                      status="pass", host_syncs=syncs, host_sync_at=at)


def test_speed_advice_lists_host_syncs_once_with_the_first_case_and_line():
    advice = failure_codes.speed_advice([_case("a", 0), _case("b", 3, "solution.py:42"), _case("c", 1),
                                         _case("d", None)])
    assert advice == [{"code": "host_sync", "count": 2, "first_case": "adamw_step/b/float32",
                       "message": "3 operation(s) in one call of adamw_step made the host wait for "
                                  "the GPU, the first at solution.py:42",
                       "advice": failure_codes.SPEED_ADVICE["host_sync"]}]
    assert "pin_memory=True" in advice[0]["advice"] and ".item()" in advice[0]["advice"]
    assert failure_codes.speed_advice([_case("a", 0), _case("d", None)]) == []


def test_the_worker_timing_fields_reach_the_case():
    from grader.grading.plan import PlannedCase
    from grader.grading.verdict import case_result

    planned = PlannedCase(task="adamw_step", case="bench", dtype="float32", hidden=False, bench=True)
    raw = {"task": "adamw_step", "name": "bench", "dtype": "float32", "shape": [4], "hidden": False,
           "status": "pass"}
    case = case_result(planned, raw, {"time_ms": 1.0, "host_syncs": 2, "host_sync_at": "s.py:7"})
    assert (case.host_syncs, case.host_sync_at) == (2, "s.py:7")


def test_advice_is_shown_by_the_cli_and_in_reports():
    from grader.cli.main import format_result
    from grader.results.report import render_report
    from grader.results.schema import GradeResult, TaskResult
    from grader.results.scoring import score

    case = _case("bench", 2, "solution.py:9")
    result = GradeResult(kata="adamw", title="AdamW", submission="solution.py", submission_sha256=None,
                         mode="gpu", status="pass", correct=True, score=100.0, speedup=1.0,
                         threshold=1.0, roofline=None,
                         tasks=[TaskResult(name="adamw_step", threshold=1.0, baseline="b", cases=[case],
                                           correct=True)],
                         advice=failure_codes.speed_advice([case]))
    result.score_breakdown = score(result.tasks, True, True)
    text = format_result(result)
    assert "how to be faster:" in text and "solution.py:9" in text and "non_blocking=True" in text
    for fmt in ("md", "html"):
        report = render_report(result, fmt)
        assert "How to be faster" in report and "solution.py:9" in report


CHUNKED = kernel_sources.add_kernel() + """

def vector_add(x, y):
    # Correct, and one launch per 1024 elements.
    out = torch.empty_like(x)
    for start in range(0, x.numel(), 1024):
        end = min(start + 1024, x.numel())
        add_kernel[(1,)](x[start:end], y[start:end], out[start:end], end - start, BLOCK=1024)
    return out
"""


def test_a_launch_per_chunk_passes_with_advice_naming_the_most_launches(tmp_path, grade_interpret):
    path = tmp_path / "solution.py"
    path.write_text(CHUNKED)
    result = grade_interpret("vector_add", path)
    assert result.status == "pass" and result.cheat is None and result.diagnoses == [], result.message
    (advice,) = result.advice
    assert advice["code"] == "many_launches" and "launched 97 Triton kernels (case odd_tail)" in advice["message"]
    # odd_tail (97 launches) and pow2_16_plus_1 (65), in float32 and float16 (bfloat16 is
    # skipped on the interpreter); 1025 elements take 2.
    assert advice["count"] == 4
    assert {c.name: c.launches for c in result.cases if c.dtype == "float32"}["pow2_plus_1"] == 2


@pytest.mark.parametrize("launches, advised", [(failure_codes.MANY_LAUNCHES - 1, False), (failure_codes.MANY_LAUNCHES, True)])
def test_many_launches_starts_at_its_threshold(launches, advised):
    case = _case("a", 0)
    case.launches = launches
    assert [a["code"] for a in failure_codes.speed_advice([case])] == (["many_launches"] if advised else [])


def test_forged_counts_from_the_worker_give_no_advice():
    forged = [_case("a", "many"), _case("b", True)]
    forged[0].launches, forged[1].launches = "many", 10.0**9
    assert failure_codes.speed_advice(forged) == []


def test_the_submissions_own_warning_filters_still_apply_in_the_watched_call(sync_mode):
    class Fallback(UserWarning):
        pass

    def call():  # takes a fallback where its own warning is an error, as it chose at import
        try:
            warnings.warn("no fast path here", Fallback)
        except Fallback:
            return "fallback"
        return "fast path"

    with warnings.catch_warnings():
        warnings.simplefilter("error", Fallback)
        assert call() == "fallback"
        result, seen = host_syncs.watched(call)  # the same call, and no error after it
    assert result == "fallback" and seen.count == 0

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its syncs are still counted, never raised
        _, seen = host_syncs.watched(_copies_to_the_gpu(sync_mode, 2))
    assert seen.count == 2


def test_forged_host_sync_figures_give_no_advice_and_no_text_of_their_own():
    assert failure_codes.speed_advice([_case("a", -3, "solution.py:1")]) == []
    for at in ("solution.py:12\n\nstatus: pass, score 100", "<b>solution.py</b>:1", "a" * 5000 + ":1",
               "solution.py", 7):
        (advice,) = failure_codes.speed_advice([_case("a", 2, at)])
        assert advice["message"] == "2 operation(s) in one call of adamw_step made the host wait for the GPU"
