"""Diagnoses: the analysis of failing outputs on synthetic data, the checker's naming of failures
(cheat only on proof), and a grade's findings as the runner assembles, renders and serialises
them. No grading here: everything is built by hand, so it runs in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from grader.grading.plan import build_plan
from grader.grading.verdict import WorkerRun, verdict
from grader.judge import failure_codes
from grader.judge.checker import Checker
from grader.judge.failure_codes import Diagnosis, Findings, classify, from_message, hidden_only
from grader.judge.inputs import AGAIN
from grader.judge.wrong_values import analyse
from grader.kata.catalog import get_kata
from grader.results.report import render_report
from grader.results.schema import CaseResult
from grader.sandbox import watchdog

TOL = dict(atol=1e-6, rtol=1e-5)


def _rows(m: int, n: int, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(m, n, generator=g, dtype=torch.float64) * scale + 0.1


# ---- the value analysis ----------------------------------------------------------------------

def test_a_tail_never_written():
    truth = torch.arange(1000, dtype=torch.float64) + 1
    got = truth.float().clone()
    got[768:] = float("nan")
    d = analyse(got, truth, **TOL)
    assert d.code == "tail_wrong"
    assert "elements 768..999" in d.message and "never written" in d.message
    assert "triton.cdiv" in d.advice


def test_a_tail_of_zeros_is_not_called_unwritten():
    truth = torch.arange(1000, dtype=torch.float64) + 1
    got = truth.float().clone()
    got[990:] = 0
    d = analyse(got, truth, **TOL)
    assert d.code == "tail_wrong" and "0 where they should not be" in d.message
    assert "never written" not in d.message


def test_the_last_element_only():
    truth = torch.arange(1025, dtype=torch.float64) + 1
    got = truth.float().clone()
    got[-1] = float("nan")
    d = analyse(got, truth, **TOL)
    assert d.code == "tail_wrong" and "element 1024 (the last of 1025)" in d.message
    assert "n - 1" in d.advice


def test_the_last_rows_never_written():
    truth = _rows(97, 30)
    got = truth.float().clone()
    got[96:] = float("nan")
    d = analyse(got, truth, **TOL)
    assert d.code == "rows_wrong" and "row 96 (the last of 97)" in d.message
    assert "every row" in d.advice


def test_columns_past_a_block_never_written_in_every_row():
    truth = _rows(3, 1100)
    got = (truth * 1.07).float()  # the statistics missed those columns: the rest is off too
    got[:, 1024:] = float("nan")
    d = analyse(got, truth, **TOL)
    assert d.code == "row_end_wrong"
    assert "columns 1024..1099 of every row" in d.message and "never written" in d.message
    assert "off too" in d.message
    assert "1024 = 2^10" in d.advice and "loop" in d.advice


def test_the_last_column_of_every_row():
    truth = _rows(9, 2)
    got = truth.float().clone()
    got[:, 1] = float("nan")
    d = analyse(got, truth, **TOL)
    assert d.code == "row_end_wrong" and "the last column (column 1) of every row" in d.message


def test_nan_where_truth_is_finite_on_rows_of_large_magnitude():
    x = torch.randn(8, 100, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x[4:] *= 1000
    truth = torch.softmax(x, dim=-1)
    got = truth.float().clone()
    got[4:] = float("nan")
    d = analyse(got, truth, inputs={"x": x.float()}, **TOL)
    assert d.code == "overflow"
    assert "NaN where the ground truth is finite" in d.message and "4 of 8 rows" in d.message
    assert "rows that came out right stay below" in d.message
    assert "subtract the row max" in d.advice


def test_zeros_from_a_float16_statistic_that_overflowed():
    x = (torch.rand(8, 64, generator=torch.Generator().manual_seed(2)) * 700 + 300).half()
    truth = x.double() / x.double().pow(2).mean(dim=-1, keepdim=True).sqrt()
    got = torch.zeros_like(x)  # x * x is inf in float16: rsqrt(inf) = 0
    d = analyse(got, truth, inputs={"x": x, "weight": torch.ones(64, dtype=torch.half)},
                atol=1e-3, rtol=2e-3)
    assert d.code == "overflow"
    assert d.message.startswith("the output is 0 where it should not be")
    assert "never written" not in d.message and "float16" in d.advice


def test_scattered_nan_on_ordinary_rows_is_not_called_overflow():
    x = torch.randn(4, 100, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    truth = torch.softmax(x, dim=-1)
    got = truth.float().clone()
    got[1, 5] = got[2, 50] = float("nan")
    d = analyse(got, truth, inputs={"x": x.float()}, **TOL)
    assert d.code == "unwritten_elements" and "2 of 400 elements" in d.message


def test_one_wrong_factor_per_row():
    truth = _rows(6, 50)
    got = (truth * torch.linspace(1.1, 1.3, 6, dtype=torch.float64)[:, None]).float()
    d = analyse(got, truth, **TOL)
    assert d.code == "row_scale" and "each of the 6 wrong rows" in d.message
    assert "BLOCK_SIZE" in d.advice and "eps" in d.advice


def test_exact_integers_off_by_a_unit_are_not_a_row_factor():
    # An int32 GEMM summed in float32: results near 2.5e7 off by 1 or 2 (float32 spacing there
    # is 2). Every row's got / expected is 1.0000000x: that is no scale factor.
    gen = torch.Generator().manual_seed(4)
    truth = torch.randint(24_000_000, 26_000_000, (8, 40), generator=gen).double()
    got = (truth + torch.randint(-2, 3, (8, 40), generator=gen).double()).to(torch.int32)
    got[0] = truth[0].to(torch.int32)  # one row right
    d = analyse(got, truth, mode="exact")
    assert d.code == "wrong_values", d


def test_one_wrong_factor_per_column():
    truth = _rows(6, 50)
    w = torch.linspace(0.5, 2.0, 50, dtype=torch.float64)
    got = (truth / w).float()
    d = analyse(got, truth, **TOL)
    assert d.code == "column_scale" and "weight" in d.advice


def test_statistics_stored_in_float16_are_low_precision_not_a_tail():
    """FlagGems' layer_norm in a float16 case stores rstd in float16: of 4 rows' rstd, the last
    two rounded out of tolerance, which read as a grid stopping short (seen on an H200)."""
    truth = torch.tensor([1.5 + 1e-7, 0.75 + 1e-8, 1.2345678, 0.87654321], dtype=torch.float64)
    got = truth.half().float()
    d = analyse(got, truth, **TOL)
    assert d.code == "low_precision", d
    assert "exactly a float16 value" in d.message and "torch.float32" in d.advice
    assert analyse(truth.bfloat16().float(), truth, **TOL).message.count("bfloat16") == 2
    # Gradients accumulated in float16: a row of one index is a copy of float16 values, exact
    # (and right); the rows summed from several are rounded, and wrong.
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(6, 16, generator=g).half().double()
    grad = torch.cat([rows[:4], (rows[4] + rows[5] + rows[0])[None]])
    got = torch.cat([rows[:4], (rows[4].half() + rows[5].half() + rows[0].half()).double()[None]]).float()
    d = analyse(got, grad, **TOL)
    assert d.code == "low_precision", d


def test_a_wrong_tail_of_values_exact_in_float16_anyway_is_still_a_tail():
    truth = torch.arange(1, 1001, dtype=torch.float64)  # small integers: float16 holds them all
    got = truth.float().clone()
    got[990:] += 1
    assert analyse(got, truth, **TOL).code == "tail_wrong"
    short = torch.tensor([1.1, 2.2, 3.3], dtype=torch.float64)  # too few values to say anything
    assert analyse(short.half().float(), short, **TOL).code != "low_precision"


def test_low_precision_is_asked_only_when_nothing_structural_fits():
    truth = _rows(4, 50)
    # Computed in float16 but not stored from there: no value is exactly a float16 one.
    got = (truth.half().double() * (1 + 2.0 ** -20)).float()
    asked = []
    d = analyse(got, truth, downgraded=lambda: asked.append(1) or "float16", **TOL)
    assert asked and d.code == "low_precision" and "float16" in d.message
    tail = truth.float().clone()
    tail[-1, -3:] = float("nan")
    assert analyse(tail, truth, downgraded=lambda: pytest.fail("asked"), **TOL).code == "tail_wrong"


def test_when_nothing_fits_it_says_so_plainly():
    truth = _rows(5, 40)
    noise = torch.randn(5, 40, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    got = (truth + 0.01 * noise).float()
    d = analyse(got, truth, **TOL)
    assert d.code == "wrong_values" and "out of tolerance" in d.message
    assert "largest error" in d.message


def test_hidden_cases_only():
    def case(name, hidden, status):
        return CaseResult(task="t", name=name, dtype="float32", shape=[1], hidden=hidden, status=status)

    found, failed = hidden_only([case("small", False, "pass"), case("long_row", True, "error"),
                                 case("long_row", True, "fail"), case("odd", True, "pass"),
                                 case("bf16", True, "skipped")])
    assert found.code == "hidden_cases_fail" and len(failed) == 2
    assert found.message == "passes the public cases but fails hidden edge cases: long_row"
    assert hidden_only([case("small", False, "fail"), case("long_row", True, "fail")]) is None


# ---- the vocabularies ------------------------------------------------------------------------

@pytest.mark.parametrize("reason", sorted(failure_codes.RECLASSIFIED))
def test_what_an_honest_bug_can_produce_is_a_diagnosis(reason):
    kind, code = classify(reason)
    assert kind == "diagnosis" and code in failure_codes.ADVICE


@pytest.mark.parametrize("reason", sorted(failure_codes.CHEATS))
def test_what_no_honest_kernel_produces_is_a_cheat(reason):
    assert classify(reason) == ("cheat", reason)


def test_an_output_on_the_wrong_device_is_a_bug_and_a_subclass_a_cheat():
    assert classify("output_type", "'out' is on cpu, expected cuda:0 (the inputs' device): the "
                    "work must stay on the device") == ("diagnosis", "wrong_device")
    assert classify("output_type", "'out' is a Honest, a torch.Tensor subclass") == ("cheat", "output_type")


@pytest.mark.parametrize("message, code", [
    ("'out' has dtype float32, expected float16", "wrong_dtype"),
    ("'y' has shape (4, 8), expected (4, 9)", "wrong_shape"),
    ("not implemented yet: softmax raised NotImplementedError('')", "not_implemented"),
    ("softmax raised an exception:\nTraceback ...", "exception"),
    ("softmax must return 2 values (a, b), got a Tensor", "wrong_output"),
])
def test_worker_messages_without_a_reason(message, code):
    status = "error" if "raised" in message else "fail"
    assert from_message(message, status).code == code


def test_findings_are_listed_once_per_code_with_a_count_and_the_first_case():
    f = Findings()
    f.diagnosis(Diagnosis("tail_wrong", "elements 768..999 were never written"), "k/small/float32")
    f.diagnosis(Diagnosis("tail_wrong", "elements 1..2 were never written"), "k/odd/float32")
    f.diagnosis(Diagnosis("wrong_dtype", "'out' has dtype float32"), "k/small/float16")
    f.cheat("forbidden_op", "k/small/float32", "called torch.add")
    f.cheat("forbidden_op", "k/odd/float32", "called torch.add")
    f.cheat("fake_result", None, "forged events", first=True)
    assert [d["code"] for d in f.diagnoses] == ["tail_wrong", "wrong_dtype"]
    tail = f.diagnoses[0]
    assert tail["count"] == 2 and tail["first_case"] == "k/small/float32"
    assert tail["message"].startswith("elements 768..999") and "triton.cdiv" in tail["advice"]
    assert [c["reason"] for c in f.cheats] == ["fake_result", "forbidden_op"]
    assert f.cheats[0] == {"reason": "fake_result", "count": 0, "first_case": None, "message": "forged events"}
    assert f.cheats[1]["count"] == 2 and f.cheats[1]["first_case"] == "k/small/float32"


# ---- the checker: a cheat only on proof ------------------------------------------------------

PLANNED = {"task": "vector_add", "case": "small", "dtype": "float32", "key": "vector_add/small/float32"}


@pytest.fixture(scope="module")
def checker():
    return Checker(get_kata("vector_add"), seed=7, device="cpu")


def _truth(checker, salt: str = "") -> torch.Tensor:
    task = checker.tasks["vector_add"]
    inputs = checker._inputs(task, "small", "float32", PLANNED["key"], salt)
    return checker._truth(task, inputs)[0].float()


def _saved(tmp_path: Path, name: str, out: torch.Tensor) -> str:
    path = tmp_path / f"{name}.pt"
    torch.save({"out": [out]}, path)
    return str(path)


def _ran(tmp_path, first, again) -> dict:
    return {"task": "vector_add", "name": "small", "dtype": "float32", "shape": [1000],
            "hidden": False, "status": "ran", "message": "", "cheat": None,
            "outputs": {"first": _saved(tmp_path, "first", first), "again": _saved(tmp_path, "again", again)}}


def test_right_then_wrong_depends_on_the_input(checker, tmp_path):
    right = _truth(checker)
    result = checker.check_case(PLANNED, _ran(tmp_path, right, _truth(checker, AGAIN) + 1))
    assert result["status"] == "fail" and result["cheat"] is None
    assert result["diagnosis"]["code"] == "input_dependent_error"
    assert "the first call passed but the second" in result["diagnosis"]["message"]


def test_wrong_then_right_depends_on_the_input_too(checker, tmp_path):
    result = checker.check_case(PLANNED, _ran(tmp_path, _truth(checker) * 1.5, _truth(checker, AGAIN)))
    assert result["cheat"] is None and result["diagnosis"]["code"] == "input_dependent_error"
    assert "the first call failed but the second" in result["diagnosis"]["message"]


def test_the_first_result_again_on_new_inputs_is_cached(checker, tmp_path):
    right = _truth(checker)
    result = checker.check_case(PLANNED, _ran(tmp_path, right, right.clone()))
    assert result["status"] == "fail" and result["cheat"] == "cached_results"
    assert result["diagnosis"] is None


def test_a_failing_case_message_says_what_was_seen_and_what_to_try(checker, tmp_path):
    bad = _truth(checker)
    bad[768:] = float("nan")
    again = _truth(checker, AGAIN)
    again[768:] = float("nan")
    result = checker.check_case(PLANNED, _ran(tmp_path, bad, again))
    assert result["cheat"] is None and result["diagnosis"]["code"] == "tail_wrong"
    summary, seen = result["message"].split("\n")
    assert "232 of 1000" in summary
    assert seen.startswith("elements 768..999 (the last 232 of 1000) were never written")
    assert "triton.cdiv" in seen


def _timed(monkeypatch, tmp_path, fn, keep):
    """fn timed by grader.timing.timer's call-by-call loop on the CPU (tests/cpu_timing.py's fakes),
    the outputs of the calls in `keep` verified by the checker."""
    from cpu_timing import KeepAt, cpu_timing
    from test_timing import _vector_add_checker_and_args, _verify

    from grader.judge.inputs import case_seed

    timing = cpu_timing(monkeypatch)
    checker, planned, make_args = _vector_add_checker_and_args()
    result = timing.time_pair(fn, lambda x, y: x + y, make_args,
                              seed=case_seed(7, planned["key"] + "/rng"), use_graph=False,
                              sampler=KeepAt(keep))
    return _verify(checker, planned, result, tmp_path)


def test_wrong_timed_outputs_are_a_diagnosis_of_what_they_show(monkeypatch, tmp_path):
    def tail_dropped(x, y):
        out = x + y
        out[-3:] = float("nan")
        return out

    failure = _timed(monkeypatch, tmp_path, tail_dropped, {12: 0})
    assert failure["cheat"] is None and failure["diagnosis"]["code"] == "timed_outputs_wrong"
    assert "although the checked calls were right" in failure["message"]
    assert "never written" in failure["message"]


def test_stale_timed_outputs_stay_a_cheat(monkeypatch, tmp_path):
    cache = {}

    def by_pointer(x, y):
        return cache.setdefault(x.data_ptr(), x + y)

    failure = _timed(monkeypatch, tmp_path, by_pointer, {30: 0})
    assert failure["cheat"] == "cached_results" and "diagnosis" not in failure


# ---- the runner: a grade's findings, its JSON and its report ---------------------------------

def _passing(planned) -> dict:
    return {"task": planned.task, "name": planned.case, "dtype": planned.dtype, "shape": [1000],
            "hidden": planned.hidden, "status": "pass", "message": "", "cheat": None,
            "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatched": 0, "total": 1000, "mismatches": []}


def _assembled(mode: str, change) -> object:
    kata = get_kata("vector_add")
    plan = build_plan(kata, mode)
    verdicts = {p.key: _passing(p) for p in plan if not p.skip_reason}
    timing_failures = change(verdicts) or {}
    events = [{"type": "env", "device": "test", "versions": {}, "ceilings": None},
              {"type": "done"}]
    run = WorkerRun(events, 0, None, "", 0, [], verdicts, timing_failures)
    limits = watchdog.ResourceLimits(wall_s=60, memory_bytes=1 << 30, processes=64, output_bytes=1 << 20)
    return verdict(kata, Path("/nonexistent/solution.py"), mode, 1, plan, run, limits)


def test_honest_failures_make_a_failing_grade_with_diagnoses_and_no_cheat():
    def change(verdicts):
        tail = Diagnosis("tail_wrong", "elements 768..999 (the last 232 of 1000) were never written").to_dict()
        for key in ("vector_add/small/float32", "vector_add/small/float16"):
            verdicts[key].update(status="fail", message="'out': 232 of 1000 differ\n...", diagnosis=tail)
        verdicts["vector_add/odd_tail/float32"].update(
            status="fail", cheat="out_of_bounds_write",
            message="wrote out of bounds: 4 byte(s) after the end of a tensor it allocated")

    result = _assembled("interpret", change)
    assert result.status == "fail" and result.score == 0
    assert result.cheat is None and result.cheats == []
    assert [d["code"] for d in result.diagnoses] == ["tail_wrong", "out_of_bounds_write"]
    tail, oob = result.diagnoses
    assert tail["count"] == 2 and tail["first_case"] == "vector_add/small/float32"
    assert oob["count"] == 1 and "mask the store" in oob["advice"]
    case = next(c for c in result.cases if c.name == "odd_tail" and c.dtype == "float32")
    assert case.cheat is None and case.diagnosis == "out_of_bounds_write"
    data = json.loads(json.dumps(result.to_dict(), default=str))
    assert data["schema"] == "triton-kata/grade/2" and data["diagnoses"] == result.diagnoses
    for fmt in ("md", "html"):
        report = render_report(result, fmt)
        assert "What went wrong" in report and "Rejected" not in report
        assert "tail_wrong" in report and "Does your grid cover the tail?" in report


def test_a_cheat_is_listed_once_with_its_count():
    def change(verdicts):
        for key in list(verdicts)[:3]:
            verdicts[key].update(status="fail", cheat="forbidden_op",
                                 message="called a forbidden op: torch.add is forbidden in this kata")

    result = _assembled("interpret", change)
    assert result.cheat == "forbidden_op" and len(result.cheats) == 1
    assert result.cheats[0]["count"] == 3 and result.diagnoses == []
    report = render_report(result, "md")
    assert "## Rejected: `forbidden_op`" in report and "in 3 case(s)" in report
    assert "## What went wrong" in report  # the grade's message, under its own heading


def test_wrong_timed_outputs_fail_the_grade_as_a_diagnosis():
    def change(verdicts):
        found = Diagnosis("timed_outputs_wrong", "a sampled timed call returned wrong results")
        return {"vector_add/bench_2e28/float32": {"diagnosis": found.to_dict(), "message": found.text}}

    result = _assembled("gpu", change)
    assert result.status == "fail" and result.cheats == []
    assert [d["code"] for d in result.diagnoses] == ["timed_outputs_wrong", "hidden_cases_fail"]
    case = next(c for c in result.cases if c.name == "bench_2e28")
    assert case.status == "fail" and case.diagnosis == "timed_outputs_wrong" and case.cheat is None


def test_a_timing_cheat_stays_a_cheat_and_an_exception_while_timed_is_an_error():
    def change(verdicts):
        return {"vector_add/bench_2e28/float32": {"cheat": "slow_first_calls", "message": "slow"},
                "vector_add/bench_2e26_plus_3/float32": {"message": "failed while being timed:\nboom"}}

    result = _assembled("gpu", change)
    assert result.cheat == "slow_first_calls"
    assert [d["code"] for d in result.diagnoses] == ["failed_while_timed", "hidden_cases_fail"]
    case = next(c for c in result.cases if c.name == "bench_2e26_plus_3")
    assert case.status == "error" and case.diagnosis == "failed_while_timed"


def test_every_code_and_reason_is_documented():
    scoring = (Path(__file__).parent.parent / "docs" / "SCORING.md").read_text()
    first_columns = [line.split("|")[1] for line in scoring.splitlines() if line.startswith("| `")]
    for name in [*failure_codes.CHEATS, *failure_codes.ADVICE, *failure_codes.RECLASSIFIED, *failure_codes.SPEED_ADVICE]:
        assert any(f"`{name}`" in column for column in first_columns), name


@pytest.mark.parametrize("restricted, cheat", [(True, None), (False, "protected_path_written")])
def test_a_changed_store_is_a_cheat_only_where_landlock_could_not_stop_the_write(restricted, cheat):
    kata = get_kata("vector_add")
    plan = build_plan(kata, "interpret")
    verdicts = {p.key: _passing(p) for p in plan if not p.skip_reason}
    events = [{"type": "env", "device": "test", "versions": {}, "ceilings": None},
              {"type": "sandbox", "filesystem_restricted": restricted}, {"type": "done"}]
    run = WorkerRun(events, 0, None, "", 0, ["/home/u/results.sqlite"], verdicts, {})
    limits = watchdog.ResourceLimits(wall_s=60, memory_bytes=1 << 30, processes=64, output_bytes=1 << 20)
    result = verdict(kata, Path("/nonexistent/solution.py"), "interpret", 1, plan, run, limits)
    assert result.cheat == cheat
    assert result.status == ("pass" if cheat is None else "error")


def test_small_scattered_errors_are_not_a_row_factor():
    # An AdamW step with eps inside the square root: the params move by ~1e-3, and where the
    # gradient is small the update is off by ~1e-5 of the weight. got / expected is 1 for most
    # elements and 1.00001 for a few: all within 1e-3 of each other, yet no common factor.
    gen = torch.Generator().manual_seed(5)
    truth = torch.rand(1, 200, generator=gen, dtype=torch.float64) + 0.5
    got = truth.clone()
    got[0, ::17] += 1e-5 * torch.rand(12, generator=gen, dtype=torch.float64)
    d = analyse(got.float(), truth, atol=1e-30, rtol=2e-6)
    assert d.code == "wrong_values", d


# ---- norm-compared outputs (an iterated computation judged as a whole) --------------------------

def _iterated(seed: int = 0) -> torch.Tensor:
    return torch.randn(24, 40, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_a_norm_output_nan_everywhere_is_divergence_or_unwritten_not_just_unwritten():
    truth = _iterated()
    d = analyse(torch.full((24, 40), float("nan"), dtype=torch.bfloat16), truth, mode="norm", rtol=0.1)
    assert d.code == "non_finite" and "divergence or an unwritten buffer" in d.message
    assert "diverges" in d.advice and "poisons" in d.advice
    # Elementwise, the same output is still called unwritten (the grader's NaN fill).
    assert analyse(torch.full((24, 40), float("nan")), truth, **TOL).code == "nothing_written"


def test_a_norm_output_with_an_unwritten_tail_is_still_a_tail():
    truth = _iterated()
    got = truth.to(torch.bfloat16)
    got[20:] = float("nan")
    d = analyse(got, truth, mode="norm", rtol=0.1)
    assert d.code == "rows_wrong" and "rows 20..23" in d.message


def test_a_norm_output_off_as_a_whole_says_so_in_its_own_terms():
    truth = _iterated()
    got = (truth + 0.5 * _iterated(1)).to(torch.bfloat16)
    d = analyse(got, truth, mode="norm", rtol=0.1)
    assert d.code == "wrong_values"
    assert "relative Frobenius error 0.5" in d.message and "tolerance 0.1" in d.message
    assert "even share" in d.message


def test_bf16_rounding_is_not_called_one_factor_per_row_under_a_norm():
    truth = _iterated()
    got = (1.3 * truth).to(torch.bfloat16)  # scaled, then rounded: ratios vary by a bf16 step
    d = analyse(got, truth, mode="norm", rtol=0.1)
    assert d.code == "wrong_values" and "relative Frobenius error 0.3" in d.message


# ---- near misses: errors of honest size are named as the effect, never a race ---------------------

def test_a_constant_rounded_to_float32_is_a_near_miss():
    # 1 - beta2 computed on the device from a float32 0.999: every element off by 1 - 1.3e-5.
    truth = _rows(4, 50)
    got = (truth * (1 - 1.29e-5)).float()
    d = analyse(got, truth, atol=1e-30, rtol=2e-6)
    assert d.code == "near_miss", d
    assert "same factor" in d.message and "constant" in d.message and "host in float64" in d.advice


def test_an_exponent_rounded_at_a_large_offset_is_a_near_miss():
    # exp(x - lse) with lse rounded at |x| ~ 1000: each row off by its own ~|x| * 2^-24.
    gen = torch.Generator().manual_seed(3)
    x = -1000 + 4 * torch.randn(4, 300, generator=gen, dtype=torch.float64)
    truth = torch.softmax(x, dim=1)
    per_row = torch.tensor([1.1, -0.7, 0.9, -1.2], dtype=torch.float64)[:, None] * 1000 * 2.0 ** -24
    got = (truth * (1 + per_row)).float()
    d = analyse(got, truth, atol=1e-12, rtol=2e-5, inputs={"logits": x.float()})
    assert d.code == "near_miss", d
    assert "exp(x - lse)" in d.message and "subtract the row max" in d.advice


def test_an_error_within_ten_times_the_allowance_names_what_it_models():
    truth = _rows(3, 40)
    allowance = torch.full_like(truth, 1e-6)
    got = truth.clone()
    got[1, ::7] += 4e-6 * torch.sign(torch.randn(6, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    d = analyse(got.float(), truth, atol=1e-30, rtol=1e-7, allowance=allowance,
                near_miss="constants computed on the device")
    assert d.code == "near_miss" and "constants computed on the device" in d.message, d
    # Beyond ten times the allowance (a planted bug's size), it is not a near miss.
    got[1, ::7] = truth[1, ::7] + 5e-5
    assert analyse(got.float(), truth, atol=1e-30, rtol=1e-7, allowance=allowance,
                   near_miss="constants computed on the device").code != "near_miss"


def test_the_allowance_widens_the_comparison():
    from grader.judge.compare import compare_values
    truth = _rows(2, 10)
    got = (truth + 3e-6).float()
    assert not compare_values(got, truth, "'x'", mode="allclose", atol=0, rtol=1e-7).ok
    ok = compare_values(got, truth, "'x'", mode="allclose", atol=0, rtol=1e-7,
                        allowance=torch.full_like(truth, 4e-6))
    assert ok.ok, ok.message


def test_a_near_miss_in_one_call_is_not_called_a_race(checker, tmp_path):
    # The first call just outside the tolerance (a constant's rounding), the second inside.
    first = (_truth(checker).double() * (1 + 5e-6)).float()
    result = checker.check_case(PLANNED, _ran(tmp_path, first, _truth(checker, AGAIN)))
    assert result["status"] == "fail" and result["cheat"] is None
    found = result["diagnosis"]
    assert found["code"] == "near_miss", found
    assert "race" not in found["message"] + found["advice"]


def test_float16_storage_failing_in_one_call_keeps_its_name(checker, tmp_path):
    # Triton's layer-norm tutorial sums dweight's partials in float16: one draw of two lands
    # outside the tolerance, and every value is a float16 one. The cause is the storage, named
    # as such, not "an error that depends on the values".
    again = _truth(checker, AGAIN).half().float()
    result = checker.check_case(PLANNED, _ran(tmp_path, _truth(checker), again))
    found = result["diagnosis"]
    assert result["cheat"] is None and found["code"] == "low_precision", found
    assert "exactly a float16 value" in found["message"] and "the first call passed but the second" in found["message"]


def test_a_small_input_dependent_error_is_not_called_a_race(checker, tmp_path):
    # Scattered errors 3x the tolerance in one call, no honest pattern: input-dependent, no race.
    first = _truth(checker).double()
    first[::50] += 3e-6 * first[::50].abs().clamp_min(1)
    result = checker.check_case(PLANNED, _ran(tmp_path, first.float(), _truth(checker, AGAIN)))
    found = result["diagnosis"]
    assert found["code"] == "input_dependent_error", found
    assert "not the signature of a race" in found["message"] and "race" not in found["advice"]
