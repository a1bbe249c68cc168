"""A learner's first day without the rough edges (issue 35): `kata list` fits the terminal,
failure lines wrap and never cut, each distinct error once with its traceback, a stub's grade is
short, the interview fits its minutes, a bare file finds its kata, a compiler crash is named as
one, and the batch's time left comes from the katas' grade times."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import format_result, main
from grader.kata.catalog import all_katas, get_kata
from grader.results.schema import CaseResult, GradeResult, TaskResult
from grader.results.scoring import score

FIXTURES = Path(__file__).parent / "fixtures"
REFERENCE = Path(__file__).parent.parent / "reference"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def invoke(*args, columns: int | None = None, **kwargs):
    env = {"COLUMNS": str(columns) if columns else ""}
    return CliRunner().invoke(main, [str(a) for a in args], env=env, **kwargs)


def widest(text: str) -> int:
    return max(len(ANSI.sub("", line)) for line in text.splitlines())


# --- 1. kata list ---------------------------------------------------------------------------

@pytest.mark.parametrize("columns", [100, None])  # COLUMNS=100, and no width known (a pipe): 100
def test_kata_list_fits_in_100_columns(tmp_path, columns):
    result = invoke("list", "--dir", tmp_path, columns=columns)
    assert result.exit_code == 0, result.output
    assert widest(result.output) <= 100
    listed = [line.split()[0] for line in result.output.splitlines()[2:] if line.strip()]
    assert listed == [k.name for k in all_katas()]


def test_kata_list_honours_columns_and_json_keeps_the_full_detail(tmp_path):
    longest = max(all_katas(), key=lambda k: len(k.title))
    wide = invoke("list", "--dir", tmp_path, columns=250)
    assert longest.title in wide.output  # room enough: nothing shortened
    narrow = invoke("list", "--dir", tmp_path, columns=80)
    assert widest(narrow.output) <= 80 and longest.title not in narrow.output and "..." in narrow.output
    detail = json.loads(invoke("list", "--dir", tmp_path, "--json", columns=80).output)
    softmax = next(k for k in detail if k["name"] == "softmax")
    kata = get_kata("softmax")
    assert softmax["title"] == kata.title and softmax["topics"] == list(kata.topics)
    assert softmax["minutes"] == kata.minutes and "warmup" in softmax["tracks"]
    assert softmax["tasks"][0]["signature"] == kata.tasks[0].signature
    assert softmax["status"] == "not started" and softmax["best_score"] is None


# --- 2-4. the grade's terminal output ---------------------------------------------------------

def _case(name, status, message="", dtype="float32"):
    return CaseResult(task="vector_add", name=name, dtype=dtype, shape=[10] if status != "not_run" else None,
                      hidden=False, status=status, message=message)


def _result(cases, message):
    result = GradeResult(kata="vector_add", title="Vector addition", submission="s.py",
                         submission_sha256=None, mode="interpret", status="fail", correct=False,
                         score=0.0, speedup=None, threshold=1.0, roofline=None,
                         tasks=[TaskResult(name="vector_add", threshold=1.0, baseline="b", cases=cases,
                                           correct=False)], message=message)
    result.score_breakdown = score(result.tasks, False, False)
    return result


ADVICE = ("values that are NaN where the truth is finite: look for 0/0, inf - inf, the square "
          "root or log of a negative number, or elements never written, so NaN often means a "
          "lane outside the mask was read and reached the result without being masked")


def test_failure_lines_wrap_at_the_terminal_width_and_are_never_cut(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    wrong = [_case(f"case{i}", "fail", f"{i + 1} of 10 elements differ: {ADVICE}") for i in range(2)]
    shown = format_result(_result(wrong, "2 case(s) failed; first: vector_add/case0 [float32]: "
                                  + wrong[0].message))
    failing = ANSI.sub("", shown).split("failing cases:")[1]  # the case table keeps its columns
    assert widest(failing) <= 80
    flat = " ".join(ANSI.sub("", shown).split())
    assert "so NaN often means a lane outside the mask was read and reached the result without being masked" in flat
    monkeypatch.setenv("COLUMNS", "200")
    failing = ANSI.sub("", format_result(_result(wrong, ""))).split("failing cases:")[1]
    assert widest(failing) > 100  # a wide terminal gets long lines


def test_each_distinct_error_is_shown_once_with_its_traceback(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    trace = ('vector_add raised an exception:\nTraceback (your code only):\n  File "s.py", line {n}, in '
             'vector_add\n    helper{n}(x)\n{error}')
    first = trace.format(n=4, error="ValueError: printed 10 MB then gave up")
    second = trace.format(n=9, error="IndexError: index 7 is out of bounds")
    cases = [_case("a", "error", first), _case("a", "error", first, "float16"), _case("b", "error", second)]
    text = ANSI.sub("", format_result(_result(cases, "3 case(s) failed; first: vector_add/a [float32]: " + first)))
    for line in ("ValueError: printed 10 MB then gave up", "IndexError: index 7 is out of bounds",
                 "helper4(x)", "helper9(x)", 'File "s.py", line 9, in vector_add'):
        assert text.count(line) == 1, (line, text)
    assert "a [float32], a [float16]: vector_add raised an exception:" in text


def test_a_stubs_grade_is_short(tmp_path):
    workspace = tmp_path / "softmax"
    assert invoke("new", "softmax", "--dir", tmp_path).exit_code == 0
    result = invoke("grade", workspace, "--interpret", "--no-record", columns=100)
    assert result.exit_code == 1
    text = ANSI.sub("", result.output)
    lines = text.splitlines()
    assert len(lines) <= 30, text  # was 61: a row per case not run, the message three times
    assert widest("\n".join(lines[1:])) <= 100  # below "Grading PATH ..."
    assert text.count("NotImplementedError(") == 1
    assert "not_run" not in text
    (collapsed,) = [line for line in lines if "more case(s) not run" in line]
    stub = [c for t in get_kata("softmax").tasks for c in t.cases]
    assert int(collapsed.split()[0]) > len(stub)  # every dtype of the cases after the first failures
    assert "--keep-going" in " ".join(text.split())


def test_json_is_strict_when_errors_are_not_finite():
    from grader.results.report import to_json
    case = _case("nan_rows", "fail", "values that are NaN where the truth is finite")
    case.max_abs_err, case.max_rel_err, case.tolerance_used = math.nan, math.inf, {"out": math.inf}
    case.round_speedups = [1.0, -math.inf]

    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")
    found = json.loads(to_json(_result([case], "1 case(s) failed")), parse_constant=refuse)
    (written,) = found["tasks"][0]["cases"]
    assert (written["max_abs_err"], written["max_rel_err"]) == ("NaN", "Infinity")
    assert written["tolerance_used"] == {"out": "Infinity"} and written["round_speedups"] == [1.0, "-Infinity"]


def test_a_partial_gpu_grade_says_why_its_speed_was_not_measured():
    result = _result([_case("a", "pass")], "")
    result.mode, result.status, result.correct, result.only_cases = "gpu", "pass", True, ["a"]
    text = ANSI.sub("", format_result(result))
    assert "speed not measured (no bench case among the cases chosen with --case)" in text


# --- 5. the interview fits its minutes ------------------------------------------------------

def test_an_interview_of_20_minutes_fits_in_20_minutes(tmp_path):
    result = invoke("interview", "start", "--minutes", 20, "--dir", tmp_path / "iv", "--seed", 1)
    assert result.exit_code == 0, result.output
    state = json.loads((tmp_path / "iv" / "interview.json").read_text())
    assert state["minutes"] == 20 and state["katas"]
    assert sum(k["minutes"] for k in state["katas"]) <= 20
    for seed in range(5):  # whichever katas the seed ranks first
        folder = tmp_path / f"iv{seed}"
        assert invoke("interview", "start", "--minutes", 45, "--count", 3, "--dir", folder,
                      "--seed", seed).exit_code == 0
        picked = json.loads((folder / "interview.json").read_text())["katas"]
        assert sum(k["minutes"] for k in picked) <= 45


def test_an_interview_nothing_fits_in_says_what_does(tmp_path):
    shortest = min(all_katas(), key=lambda k: k.minutes)
    result = invoke("interview", "start", "--minutes", 1, "--dir", tmp_path / "iv")
    assert result.exit_code == 2 and not (tmp_path / "iv").exists()
    text = " ".join(result.output.split())
    assert f"--minutes {shortest.minutes} or more" in text and "--count" in text


# --- 6. a bare file without --kata ----------------------------------------------------------

def test_a_bare_file_is_graded_against_the_kata_its_functions_belong_to(tmp_path):
    from grader.learner.workspace import resolve
    mine = tmp_path / "my_try.py"
    mine.write_text((REFERENCE / "rms_norm.py").read_text())
    notes = []
    kata, solution = resolve(mine, None, notes)
    assert (kata.name, solution) == ("rms_norm", mine)
    assert notes and "rms_norm" in notes[0] and "--kata" in notes[0]
    begun = tmp_path / "begun.py"  # one of activations' five functions written so far
    begun.write_text("def swiglu(gate, up):\n    return gate\n")
    assert resolve(begun)[0].name == "activations"


def test_a_bare_file_that_fits_several_katas_or_none_asks_for_kata(tmp_path):
    both = tmp_path / "both.py"
    both.write_text("def rms_norm(x, weight, eps):\n    pass\n\n"
                    "def rms_norm_backward(dy, x, weight, rstd):\n    pass\n")
    result = invoke("grade", both, "--interpret", "--no-record")
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Add --kata NAME" in text
    assert "rms_norm (rms_norm)" in text and "rms_norm_backward (rms_norm_backward)" in text
    none = tmp_path / "scratch.py"
    none.write_text("x = 1\n")
    result = invoke("grade", none, "--interpret", "--no-record")
    assert result.exit_code == 2 and "Add --kata NAME" in " ".join(result.output.split())
    assert "not a kata workspace" not in result.output


# --- 7. a crash of Triton's compiler --------------------------------------------------------

def test_a_compiler_message_is_diagnosed_compiler_error():
    from grader.judge.failure_codes import Diagnosis, from_message
    crash = ("vector_add raised an exception:\nTraceback (your code only):\n  File \"s.py\", line 9, "
             "in vector_add\n    kernel[grid](x)\nRuntimeError: PassManager::run failed")
    found = from_message(crash, "error")
    assert found.code == "compiler_error" and "PassManager::run failed" in found.message
    assert "not necessarily a bug in your code" in found.message and "num_warps" in found.advice
    mine = "vector_add raised an exception:\nRuntimeError: my own PassManager wrapper failed"
    assert from_message(mine, "error") == Diagnosis("exception", "vector_add raised an exception:")
    # How an honest scan kernel's crash ended on an H200 (triton 3.6): MLIR's crash reproducer.
    reproduced = ("cumsum raised an exception:\nTraceback (your code only):\n  ...\nRuntimeError: "
                  "... reproducer generated at `std::errs, please share the reproducer above with "
                  "Triton project.`")
    assert from_message(reproduced, "error").code == "compiler_error"


def test_a_compiler_crash_is_named_with_the_failing_pass():
    # The interpreter compiles nothing: the fixture raises what Triton 3.6 raises, after writing
    # MLIR's diagnostics to stderr as the compiler does.
    from grader.grading.runner import grade
    result = grade(get_kata("vector_add"), FIXTURES / "vector_add_compiler_crash.py", "interpret")
    assert result.status == "fail" and result.cheats == []
    (found,) = result.diagnoses
    assert found["code"] == "compiler_error"
    assert "the pass that failed: TritonGPUCombineTensorSelectAndIf" in found["message"]
    assert "BLOCK" in found["advice"] and "splitting the kernel" in found["advice"]
    failed = [c for c in result.cases if c.status == "error"]
    assert failed and all(c.diagnosis == "compiler_error" for c in failed)
    assert "the compiler's last lines:" in failed[0].message
    assert failed[0].message.count("Pipeline failed while executing") == 1  # each line once
    shown = ANSI.sub("", format_result(result))
    assert "compiler_error" in shown and "Pipeline failed while executing" in shown


def test_an_error_raised_from_another_shows_the_reason_it_was_raised_from(tmp_path):
    # Triton 3.6's CompilationError points at the kernel's line and keeps the frontend's reason
    # in the error it was raised from: the reason is what the learner needs.
    from grader.grading.runner import grade
    solution = tmp_path / "solution.py"
    solution.write_text(
        "def vector_add(x, y):\n    try:\n"
        "        raise AssertionError('expected accumulator dtype fp32, got int32; pass out_dtype=int32')\n"
        "    except AssertionError as e:\n"
        "        raise RuntimeError('at 28:15: part = tl.dot(a, b, part)') from e\n")
    kata = get_kata("vector_add")
    result = grade(kata, solution, "interpret", only_cases=[kata.tasks[0].cases[0].name])
    failed = [c for c in result.cases if c.status == "error"]
    assert failed and result.cheats == []
    assert "RuntimeError: at 28:15" in failed[0].message
    assert "caused by: AssertionError: expected accumulator dtype fp32" in failed[0].message


def test_an_error_raised_while_handling_another_says_so(tmp_path):
    from grader.sandbox.case_runner import user_traceback
    try:
        try:
            {}["block"]
        except KeyError:
            raise ValueError("BLOCK must be a power of two")
    except ValueError as exc:
        text = user_traceback(exc, tmp_path / "solution.py")
    assert text.splitlines() == ["ValueError: BLOCK must be a power of two",
                                 "raised while handling: KeyError: 'block'"]


# --- 8. the batch's time left ---------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _job(key, kata="vector_add"):
    from grader.batch.engine import Job
    return Job(key, "alice", kata, f"/{key}.py", "0" * 64, {}, "d", "interpret")


def _finished(job, seconds=1.0):
    from fakes import fake_result

    from grader.batch.driver import Finished
    result = fake_result(job.kata)
    result.duration_s, result.device = seconds, "CPU (Triton interpreter)"
    return Finished(job, result, 1)


def test_the_batch_says_estimating_until_a_grade_ends_then_uses_the_katas_time():
    import io

    from grader.batch.progress import Progress
    clock = Clock()
    jobs = [_job("a"), _job("b"), _job("c")]
    progress = Progress(3, stream=io.StringIO(), live=False, jobs=jobs, slots=1, clock=clock)
    progress.started(jobs[0], 1)
    for seconds in (5, 31):  # one long grade running: the time left does not grow with it
        clock.now = 1000 + seconds
        assert "estimating time left" in progress.status()
    clock.now = 1040.0
    progress.finished(_finished(jobs[0]))  # vector_add takes 40 s here
    progress.started(jobs[1], 1)
    clock.now += 10
    assert progress.time_left() == pytest.approx(30 + 40)  # b's rest, then c
    assert "50s elapsed, ~1m10s left" in progress.status()
    clock.now += 50  # b runs past its usual time: left is c's time, not more
    assert progress.time_left() == pytest.approx(40)


def test_the_batch_estimates_from_the_stores_earlier_grades_of_the_kata(tmp_path):
    import io

    from fakes import fake_result

    from grader.batch.estimate import earlier_grade_seconds
    from grader.batch.progress import Progress
    from grader.store.database import record_grade
    db = tmp_path / "results.db"
    for seconds in (12.0, 20.0, 14.0):
        result = fake_result("softmax", sha=f"{seconds:064.0f}")
        result.duration_s, result.device = seconds, "CPU (Triton interpreter)"
        record_grade(result, db, "bob")
    history = earlier_grade_seconds(db, ["softmax", "vector_add"], "interpret")
    assert sorted(history[("softmax", "CPU (Triton interpreter)")]) == [12.0, 14.0, 20.0]
    assert earlier_grade_seconds(db, ["softmax"], "gpu") == {}
    clock = Clock()
    jobs = [_job(f"s{i}", "softmax") for i in range(4)]
    progress = Progress(4, stream=io.StringIO(), live=False, jobs=jobs, slots=2, history=history,
                        clock=clock)
    progress.started(jobs[0], 1)
    progress.started(jobs[1], 1)
    clock.now += 4
    assert progress.time_left() == pytest.approx((10 + 10 + 14 + 14) / 2)  # median 14 s a grade
    other = Progress(1, stream=io.StringIO(), live=False, jobs=[_job("v")], history=history, clock=clock)
    assert other.time_left() is None  # no grade of vector_add anywhere yet


# --- 9. interpreter grades ------------------------------------------------------------------

def test_an_interpreter_grade_runs_torch_on_one_thread(tmp_path):
    # The worker and the checker share the machine's cores: a thread per core each made them
    # wait on one another (docs/PERFORMANCE.md, issue 35).
    from grader.grading.runner import grade
    solution = tmp_path / "solution.py"
    solution.write_text((REFERENCE / "vector_add.py").read_text()
                        + "\nprint('torch threads:', torch.get_num_threads())\n")
    result = grade(get_kata("vector_add"), solution, "interpret", only_cases=["small"])
    assert result.status == "pass", result.message
    assert "torch threads: 1" in result.output


def test_an_interpreter_grade_shows_no_empty_timing_columns():
    import click

    from grade_factory import make_grade

    interpreted = click.unstyle(format_result(make_grade("vector_add", mode="interpret")))
    assert "max err" in interpreted and "baseline ms" not in interpreted and "roofline" not in interpreted.split("\n\n")[1]
    timed = click.unstyle(format_result(make_grade("vector_add", mode="gpu")))
    assert "baseline ms" in timed and "speedup" in timed
