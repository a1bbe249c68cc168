"""Every cheat in tests/cheats/ is rejected with its named reason, in the result, the JSON and
the report; honest solutions are never flagged. (GPU-only cheats: tests/gpu/test_gpu_cheats.py.)"""

from __future__ import annotations

import json
import re

import pytest

from conftest import KATA_NAMES, TESTS
from grader import catalog
from grader.report import render_report
from grader.results import CaseResult

CHEATS = sorted((TESTS / "cheats").glob("*.py"))
# Katas that exist only for the tests (tests/fixtures/katas), found through TRITON_KATA_PATH.
FIXTURES = TESTS / "fixtures"
FIXTURE_KATAS = sorted(p.name for p in (FIXTURES / "katas").iterdir() if (p / "kata.yaml").is_file())


def kata_of_cheat(path) -> str:
    """tests/cheats/<kata>_<trick>.py -> <kata> (the longest kata name, built-in or fixture, that
    prefixes it)."""
    matches = [k for k in KATA_NAMES + FIXTURE_KATAS if path.stem.startswith(k + "_")]
    assert matches, f"{path.name} does not start with a kata name"
    return max(matches, key=len)


@pytest.fixture()
def kata_roots(monkeypatch):
    """use(kata): makes the fixture katas findable when `kata` is one of them."""
    def use(kata: str) -> None:
        if kata in FIXTURE_KATAS:
            monkeypatch.setenv("TRITON_KATA_PATH", str(FIXTURES))
            catalog._load.cache_clear()

    yield use
    catalog._load.cache_clear()


def declared_reason(path) -> str:
    match = re.search(r"^# cheat: (\S+)", path.read_text(), flags=re.M)
    assert match, f"{path.name} does not declare '# cheat: REASON'"
    return match.group(1)


@pytest.mark.parametrize("path", CHEATS, ids=lambda p: p.stem)
def test_cheat_is_rejected_with_its_reason(path, grade_interpret, kata_roots):
    reason = declared_reason(path)
    kata = kata_of_cheat(path)
    kata_roots(kata)
    result = grade_interpret(kata, path)
    assert result.status != "pass" and result.score == 0
    assert result.cheat == reason, (result.cheats, result.message)
    data = json.loads(json.dumps(result.to_dict(), default=str))
    assert data["cheat"] == reason
    assert data["cheats"][0]["reason"] == reason and data["cheats"][0]["message"]
    assert f"`{reason}`" in render_report(result, "md")


def test_every_listed_cheat_has_a_submission():
    reasons = {declared_reason(p) for p in CHEATS}
    # Shown on the CPU here; the GPU-only ones (side_stream, slow_first_calls,
    # timed_outputs_wrong) live in tests/gpu/test_gpu_cheats.py.
    assert {"no_triton_kernel", "forbidden_op", "cached_results", "input_mutated",
            "output_aliases_input", "output_type", "background_thread", "tampering",
            "precision_downgraded", "public_cases_only", "partial_work", "fake_result",
            "nondeterministic", "out_of_bounds_write", "torch_compute"} <= reasons


def test_time_below_the_physical_floor_is_rejected():
    from grader.runner import _reject_impossible

    case = CaseResult(task="t", name="bench", dtype="float32", shape=[1], hidden=True,
                      status="pass", time_ms=0.05, baseline_ms=1.0, speedup=20.0,
                      floor_ms=0.179, roofline=3.6, nbytes=536870912.0)
    _reject_impossible(case, {"copy_gbps": 3000.0, "matmul_tflops": 750.0})
    assert case.status == "fail" and case.cheat == "below_physical_floor"
    assert "0.05 ms" in case.message and "3000 GB/s" in case.message and "536.9 MB" in case.message


def test_time_at_the_floor_is_accepted():
    from grader.runner import _reject_impossible

    case = CaseResult(task="t", name="bench", dtype="float32", shape=[1], hidden=True,
                      status="pass", time_ms=0.18, floor_ms=0.179, roofline=0.99, nbytes=5.4e8)
    _reject_impossible(case, {"copy_gbps": 3000.0, "matmul_tflops": 750.0})
    assert case.status == "pass" and case.cheat is None
