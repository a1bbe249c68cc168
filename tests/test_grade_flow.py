"""How a grade moves: live progress, --fail-fast, and each case's own time limit (interpreter)."""

from __future__ import annotations

from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from conftest import WRONG, write
import kernel_sources

HANG = '''
import time
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def softmax(x):
    if x.shape[1] > 200:  # hangs on the first case with long rows
        while True:
            time.sleep(0.1)
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''


def test_a_hang_is_reported_by_its_case_within_the_case_limit(tmp_path):
    result = grade(get_kata("softmax"), write(tmp_path, HANG), "interpret", timeout_s=200,
                   case_timeout_s=20)
    assert result.status == "error" and result.duration_s < 100, result.message
    assert "softmax/medium [float32]" in result.message and "M=128, N=1000" in result.message
    assert "loop that never ends" in result.message and "--timeout" in result.message
    hung = [c for c in result.cases if c.name == "medium" and c.dtype == "float32"]
    assert hung[0].status == "error"


def test_a_task_stops_after_three_failing_cases_unless_keep_going():
    from grader.sandbox.referee import FAILURES_PER_TASK
    result = grade(get_kata("vector_add"), WRONG / "vector_add_bad_mask.py", "interpret")
    failed = [c for c in result.cases if c.status in ("fail", "error")]
    not_run = [c for c in result.cases if c.status == "not_run"]
    assert result.status == "fail" and len(failed) == FAILURES_PER_TASK
    assert not_run and all("already failed" in c.message and "--keep-going" in c.message
                           for c in not_run)
    everything = grade(get_kata("vector_add"), WRONG / "vector_add_bad_mask.py", "interpret",
                       keep_going=True)
    assert not [c for c in everything.cases if c.status == "not_run"]
    assert len([c for c in everything.cases if c.status == "fail"]) > FAILURES_PER_TASK


def test_fail_fast_stops_at_the_first_failing_case_and_progress_hears_each_case():
    events = []
    result = grade(get_kata("vector_add"), WRONG / "vector_add_bad_mask.py", "interpret",
                   fail_fast=True, progress=events.append)
    assert result.status == "fail"
    ran = [c for c in result.cases if c.status in ("pass", "fail", "error")]
    failed = [c for c in ran if c.status != "pass"]
    assert len(failed) == 1 and ran[-1] is failed[0]
    not_run = [c for c in result.cases if c.status == "not_run"]
    assert not_run and all("--fail-fast" in c.message for c in not_run)
    checked = [e for e in events if e["type"] == "case"]
    assert len(checked) == len(ran)
    assert [e["type"] for e in events[:2]] == ["start", "case"]


def test_an_autotuned_kernel_on_the_interpreter_runs_its_first_configuration():
    # @triton.autotune times its configurations with the GPU driver, which the interpreter has
    # not: its first configuration runs, and the honest kernel passes (on a GPU it is autotuned:
    # tests/gpu/test_gpu_grading.py).
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "vector_add_autotuned.py"
    result = grade(get_kata("vector_add"), path, "interpret")
    assert result.status == "pass" and result.correct, result.message


DEVICE_QUERY = kernel_sources.add_kernel() + """

def vector_add(x, y):
    # One program per SM, as a persistent kernel sizes its grid: a question for the GPU's driver.
    sms = triton.runtime.driver.active.utils.get_device_properties(0)["multiprocessor_count"]
    out = torch.empty_like(x)
    """ + kernel_sources.launch_line() + """
    return out
"""


def test_a_driver_query_on_the_interpreter_is_told_why_and_what_to_do(tmp_path):
    # A question only a GPU's driver answers: an error with advice, never a cheat.
    path = tmp_path / "solution.py"
    path.write_text(DEVICE_QUERY)
    result = grade(get_kata("vector_add"), path, "interpret", only_cases=["small"])
    assert result.status != "pass" and result.cheats == [], result.cheats
    (found,) = [d for d in result.diagnoses if d["code"] == "gpu_only_feature"]
    assert "driver" in found["advice"] and "kata grade --gpu" in found["advice"]


def test_a_grade_says_where_its_time_went():
    from grader.grading.runner import phases

    # start-up until the first case; checked cases until timing is asked for; then timing.
    timeline = [(10.5, "start", "t/a/float32"), (10.6, "case", "t/a/float32"), (14.0, "time", None),
                (14.1, "start", "t/big/float32"), (14.2, "timing", "t/big/float32")]
    assert phases(timeline, 10.0, 20.0, timed=True) == {"start_up": 0.5, "checked_cases": 3.5, "timing": 6.0}
    # Not timed (a case failed): no timing phase; the worker never started a case: start-up only.
    assert phases(timeline[:3], 10.0, 14.5, timed=False) == {"start_up": 0.5, "checked_cases": 3.5}
    assert phases([], 10.0, 12.0, timed=True) == {"start_up": 2.0}
    result = grade(get_kata("vector_add"), get_kata("vector_add").reference_path, "interpret")
    assert set(result.phases_s) == {"start_up", "checked_cases"}  # the interpreter times nothing
    assert sum(result.phases_s.values()) <= result.duration_s + 0.05


def test_the_cli_and_the_reports_show_the_grade_time_by_phase():
    from grader.cli.main import format_result
    from grader.results.report import grade_time, render_report

    result = grade(get_kata("vector_add"), get_kata("vector_add").reference_path, "interpret")
    shown = format_result(result)
    assert f"graded in {result.duration_s:.1f} s (start-up " in shown and "checked cases" in shown
    assert result.compile_s is not None and "compiling" not in grade_time(result)  # the interpreter compiles nothing
    assert f"| Grade time | {grade_time(result)} |" in render_report(result, "md")
    assert f"<th>Grade time</th><td>{grade_time(result)}</td>" in render_report(result, "html")


def test_a_case_named_a_cheat_leads_the_grades_message():
    # Other cases may fail first as bugs (a diagnosis); the cheat is the verdict that matters.
    from grader.grading.verdict import grade_status
    from grader.results.schema import CaseResult, TaskResult

    wrong = CaseResult("t", "a", "float32", None, False, "fail", message="3 of 9 differ",
                       diagnosis="wrong_values")
    cheat = CaseResult("t", "b", "float32", None, False, "fail", message="results are cached",
                       cheat="cached_results")
    _, message = grade_status([TaskResult("t", 1.0, "eager", [wrong, cheat], False)], "gpu", False, "")
    assert message == "2 case(s) failed; named a cheat: t/b [float32]: results are cached"
    _, message = grade_status([TaskResult("t", 1.0, "eager", [wrong], False)], "gpu", False, "")
    assert message == "1 case(s) failed; first: t/a [float32]: 3 of 9 differ"


def test_a_partial_gpu_grade_of_checked_cases_only_is_judged_on_correctness():
    # `kata grade --case first_case --gpu`: no bench case chosen, so nothing can be timed. The
    # interpreter passes such a grade; the GPU said "fail: vector_add: not timed".
    from pathlib import Path

    from grader.grading.plan import build_plan
    from grader.grading.verdict import WorkerRun, verdict
    from grader.kata.catalog import get_kata
    from grader.sandbox import watchdog

    kata = get_kata("vector_add")
    limits = watchdog.ResourceLimits(wall_s=60, memory_bytes=1 << 30, processes=64, output_bytes=1 << 20)
    env = {"device": "NVIDIA H200", "versions": {}, "ceilings": None, "ceilings_measured": False}
    full = build_plan(kata, "gpu")

    def grade_of(plan):
        verdicts = {p.key: {"task": p.task, "name": p.case, "dtype": p.dtype, "shape": [1],
                            "hidden": p.hidden, "status": "pass", "message": "", "cheat": None}
                    for p in plan if not p.skip_reason}
        run = WorkerRun([{"type": "done"}], 0, None, "", 0, [], verdicts, {}, env=env)
        return verdict(kata, Path("/nonexistent/solution.py"), "gpu", 1, plan, run, limits)

    checked = [p for p in full if not p.bench][:2]
    result = grade_of(checked)
    assert result.status == "pass" and result.correct and not result.speed_measured, result.message
    # With a bench case in the plan that was never timed, the speed is still missing, and fails.
    untimed = grade_of(checked + [next(p for p in full if p.bench and not p.skip_reason)])
    assert untimed.status == "fail" and untimed.message == "vector_add: not timed"
