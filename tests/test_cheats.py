"""Every cheat in tests/cheats/ is rejected with its named reason, in the result, the JSON and
the report, once per reason with a count of cases; honest solutions are never flagged.
(GPU-only cheats: tests/gpu/test_gpu_cheats.py.)

tests/gaming/ holds attempts at gaming the grade whose evidence an honest bug leaves too
(half the blocks, float16 maths, special-cased public sizes, right only once, a changed input,
an output that is an input): they fail with score 0 and a diagnosis, never a cheat, because the
grader names a cheat only on evidence no honest kernel can produce (docs/SCORING.md)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES, KATA_NAMES, TESTS, kata_of_wrong
from grader.judge.failure_codes import ADVICE, CHEATS, RECLASSIFIED
from grader.results.report import render_report

CHEAT_FILES = sorted((TESTS / "cheats").glob("*.py"))
GAMING = sorted((TESTS / "gaming").glob("*.py"))
# Katas that exist only for the tests (tests/fixtures/katas), found through TRITON_KATA_PATH.
FIXTURE_KATAS = sorted(p.name for p in (FIXTURES / "katas").iterdir() if (p / "kata.yaml").is_file())


def kata_of_cheat(path) -> str:
    """tests/cheats/<kata>_<trick>.py -> <kata> (the longest kata name, built-in or fixture, that
    prefixes it)."""
    matches = [k for k in KATA_NAMES + FIXTURE_KATAS if path.stem.startswith(k + "_")]
    assert matches, f"{path.name} does not start with a kata name"
    return max(matches, key=len)


@pytest.fixture()
def kata_roots(request):
    """use(kata): makes the fixture katas findable when `kata` is one of them."""
    def use(kata: str) -> None:
        if kata in FIXTURE_KATAS:
            request.getfixturevalue("fixture_katas")

    return use


def declared_reason(path) -> str:
    match = re.search(r"^# cheat: (\S+)", path.read_text(), flags=re.M)
    assert match, f"{path.name} does not declare '# cheat: REASON'"
    return match.group(1)


def declared_diagnosis(path) -> str:
    match = re.search(r"^# expect-diagnosis: (\S+)", path.read_text(), flags=re.M)
    assert match, f"{path.name} does not declare '# expect-diagnosis: CODE'"
    return match.group(1)


@pytest.mark.parametrize("path", CHEAT_FILES, ids=lambda p: p.stem)
def test_cheat_is_rejected_with_its_reason(path, grade_interpret, kata_roots):
    reason = declared_reason(path)
    kata = kata_of_cheat(path)
    kata_roots(kata)
    result = grade_interpret(kata, path)
    assert result.status != "pass" and result.score == 0
    assert result.cheat == reason, (result.cheats, result.message)
    data = json.loads(json.dumps(result.to_dict(), default=str))
    assert data["schema"] == "triton-kata/grade/2"
    assert data["cheat"] == reason
    first = data["cheats"][0]
    assert first["reason"] == reason and first["message"]
    reasons = [c["reason"] for c in data["cheats"]]
    assert len(reasons) == len(set(reasons)), "each cheat is listed once per reason"
    flagged = [c for c in result.cases if c.cheat == reason]
    if first["first_case"] is not None:
        assert first["count"] == len(flagged) >= 1
        assert first["first_case"] == f"{flagged[0].task}/{flagged[0].name}/{flagged[0].dtype}"
    report = render_report(result, "md")
    assert f"## Rejected: `{reason}`" in report


@pytest.mark.parametrize("path", GAMING, ids=lambda p: p.stem)
def test_gaming_an_honest_bug_explains_fails_with_a_diagnosis(path, grade_interpret):
    code = declared_diagnosis(path)
    result = grade_interpret(kata_of_wrong(path), path)
    assert result.status == "fail" and result.score == 0, result.message
    assert result.cheat is None and result.cheats == [], result.cheats
    assert code in [d["code"] for d in result.diagnoses], result.diagnoses
    report = render_report(result, "md")
    assert "## What went wrong" in report and "Rejected" not in report


# Honest shortcuts: a case that needs no work (p = 0, nnz = 0, one column) answered with a copy or
# a fill and no kernel. What PyTorch does there is allocation and copying, so launching nothing
# is no evidence of a cheat (F.dropout itself returns its input for p = 0). Each is the kata's
# reference with the shortcut inserted before the marker line.
SHORTCUTS = {  # kata: (marker, shortcut, the cases graded: those it answers, and one it does not)
    "dropout": ("    out = torch.empty_like(x)\n",
                "    if p == 0.0:\n        return x.clone()  # the identity: nothing to compute\n",
                ["identity", "identity_large", "small"]),
    "spmv": ("    # Not zero-filled: every row is stored",
             "    if nnz == 0:\n        return torch.zeros(R, dtype=values.dtype, device=values.device)\n",
             ["nnz_zero", "small", "empty_rows"]),
    "prefix_sum": ("    out = torch.empty((M, N), dtype=x.dtype, device=x.device)\n    if N <= ROW_BLOCK_MAX:",
                   "    if N == 1:\n        return x.clone()  # one column is its own prefix sum\n",
                   ["one", "one_col", "small"]),
}


@pytest.mark.parametrize("kata", sorted(SHORTCUTS))
def test_an_honest_shortcut_without_a_kernel_is_no_cheat(kata, grade_interpret, tmp_path):
    marker, shortcut, cases = SHORTCUTS[kata]
    source = (TESTS.parent / "reference" / f"{kata}.py").read_text()
    assert source.count(marker) == 1, marker
    path = tmp_path / "solution.py"
    path.write_text(source.replace(marker, shortcut + marker))
    result = grade_interpret(kata, path, only_cases=cases)
    graded = {c.name for t in result.tasks for c in t.cases if c.status == "pass"}
    assert result.cheats == [] and not [c for t in result.tasks for c in t.cases if c.status == "fail"], (
        result.message, result.cheats)
    assert graded >= set(cases), graded


def test_what_counts_as_no_work():
    import torch

    from grader.sandbox.case_runner import _no_work_in

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    inputs = {"x": x, "p": 0.0, "params": [torch.ones(3)]}
    assert _no_work_in({"out": torch.zeros(7)}, inputs, ())  # a fill
    assert _no_work_in({"out": torch.full((4,), float("nan"))}, inputs, ())  # unwritten, poisoned
    assert _no_work_in({"out": x.clone().half().reshape(-1)}, inputs, ())  # a cast copy of an input
    assert _no_work_in({"out": [torch.ones(2), x.clone()]}, inputs, ())
    assert not _no_work_in({"out": x * 2}, inputs, ())  # work
    assert not _no_work_in({"out": x.flip(0)}, inputs, ())  # the input's values, out of order
    # An in-place output is its own input: only a constant counts there.
    params = [torch.arange(3.0)]
    assert not _no_work_in({"params": params}, {"params": params}, ("params",))
    assert _no_work_in({"params": [torch.zeros(3)]}, {"params": [torch.zeros(3)]}, ("params",))


def test_every_listed_cheat_has_a_submission():
    reasons = {declared_reason(p) for p in CHEAT_FILES}
    assert reasons <= set(CHEATS), reasons - set(CHEATS)
    # Shown on the CPU here; the GPU-only ones (side_stream, slow_first_calls, timed cached
    # results) live in tests/gpu/test_gpu_cheats.py, the floor check below.
    assert {"no_triton_kernel", "forbidden_op", "cached_results", "output_type",
            "background_thread", "tampering", "fake_result", "torch_compute"} <= reasons


def test_no_reclassified_reason_is_a_cheat_any_more():
    # Each was once a cheat; an honest bug produces its evidence too (docs/SCORING.md).
    for reason, code in RECLASSIFIED.items():
        assert code in ADVICE and reason not in CHEATS
    declared = {declared_reason(p) for p in CHEAT_FILES}
    assert not declared & set(RECLASSIFIED), "tests/cheats/ may only hold real cheats"


def test_time_below_the_physical_floor_is_rejected():
    from grader.grading.timing_evidence import impossible

    below = impossible(0.05, 536870912.0, None, {"copy_gbps": 3000.0, "matmul_tflops": 750.0})
    assert below and "0.05 ms" in below and "3000 GB/s" in below and "536.9 MB" in below


def test_time_at_the_floor_is_accepted():
    from grader.grading.timing_evidence import impossible

    assert impossible(0.18, 5.4e8, None, {"copy_gbps": 3000.0, "matmul_tflops": 750.0}) is None


def test_downgrade_check_pairs_each_float32_output_with_its_own_truth():
    """Outputs of mixed dtypes (int8 q, float32 scale): the scale meets the scale's truth. An
    honest bug (scale = amax / 128 on huge values) is not a downgrade; a bfloat16 scale is."""
    import torch

    from grader.judge.checker import Checker
    from grader.kata.catalog import get_kata

    checker = Checker(get_kata("quantize"), seed=7, device="cpu")
    task = checker.tasks["quantize_int8_rowwise"]
    inputs = checker._inputs(task, "huge_values", "float32", "k", "")
    x = inputs["x"]
    amax = x.abs().amax(dim=1, keepdim=True)
    q = torch.zeros(x.shape, dtype=torch.int8)
    assert checker.downgraded(task, inputs, {"q": [q], "scale": [amax / 128]}) is None
    # Scales left at 0 (no floor on an all-zero input) are exact in bfloat16, and prove nothing.
    zeros = checker._inputs(task, "all_zero", "float32", "k", "")
    assert checker.downgraded(task, zeros, {"q": [q[:3, :257]], "scale": [torch.zeros(3, 1)]}) is None
    low_scale = (x.bfloat16().float().abs().amax(dim=1, keepdim=True) / 127).bfloat16().float()
    assert checker.downgraded(task, inputs, {"q": [q], "scale": [low_scale]}) == "bfloat16"
