"""Slow is not hung, on a GPU (issue 31, points 4 and 5): a correct kernel far slower than the
baseline gets `fail` with its speedup, within the bound; a real hang still gets the time limit,
saying how far the call had got. Skipped without CUDA."""

from __future__ import annotations

import re
from pathlib import Path

from grader.grading.runner import grade
from grader.kata.catalog import get_kata

WALL_BOUND_S = 60.0  # issue 31: a kernel of at most 1 s a call is graded within a minute

# Correct, and about 0.01x of PyTorch: 8 programs walk the whole vector (8 of the GPU's SMs).
GRID_OF_8 = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_grid8(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, n, 8 * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_grid8[(8,)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''

# One correct launch, then a launcher loop that never ends.
LAUNCHER_HANG = GRID_OF_8.replace('''    add_grid8[(8,)](x, y, out, x.numel(), BLOCK=1024)
    return out''', '''    add_grid8[(8,)](x, y, out, x.numel(), BLOCK=1024)
    while True:
        pass''')

# A kernel that never ends: it waits for a flag nobody sets (a volatile load, so the loop stays).
KERNEL_HANG = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_after_flag(x_ptr, y_ptr, out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    flag = tl.load(flag_ptr, volatile=True)
    while flag == 0:
        flag = tl.load(flag_ptr, volatile=True)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    add_after_flag[(triton.cdiv(x.numel(), 1024),)](x, y, out, flag, x.numel(), BLOCK=1024)
    return out
'''


def _solution(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "solution.py"
    path.write_text(source)
    return path


def test_a_correct_kernel_with_a_grid_of_8_programs_gets_fail_with_its_speedup_within_the_bound(tmp_path):
    result = grade(get_kata("vector_add"), _solution(tmp_path, GRID_OF_8), "gpu")
    assert result.status == "fail" and result.correct, result.message
    assert result.cheats == [] and result.diagnoses == [], (result.cheats, result.diagnoses)
    timed = [c for c in result.cases if c.speedup]
    assert len(timed) == 6 and all(c.speedup < 0.5 for c in timed), [(c.name, c.speedup) for c in timed]
    assert "below the threshold" in result.message and 50 <= result.score < 70
    assert result.duration_s <= WALL_BOUND_S, result.phases_s


def test_a_launcher_that_never_returns_gets_the_time_limit_and_how_far_it_got(tmp_path):
    result = grade(get_kata("vector_add"), _solution(tmp_path, LAUNCHER_HANG), "gpu", case_timeout_s=8)
    assert result.status == "error" and result.score == 0
    assert [d["code"] for d in result.diagnoses] == ["time_limit"], result.diagnoses
    # 8 s, and the seconds it spent compiling its kernel.
    assert "Time limit exceeded" in result.message and re.search(r"ran for more than \d+ s", result.message)
    assert "launched 1 Triton kernel so far (the last: add_grid8)" in result.message
    assert "nothing had been launched for" in result.message and "looks like a hang" in result.message
    assert result.duration_s <= WALL_BOUND_S


def test_a_kernel_that_never_ends_gets_the_time_limit_waiting_for_the_gpu(tmp_path):
    result = grade(get_kata("vector_add"), _solution(tmp_path, KERNEL_HANG), "gpu", case_timeout_s=8)
    assert result.status == "error" and result.score == 0
    assert [d["code"] for d in result.diagnoses] == ["time_limit"], result.diagnoses
    assert re.search(r"ran for more than \d+ s", result.message)
    assert "(the last: add_after_flag)" in result.message and "waiting for the GPU" in result.message
    assert result.duration_s <= WALL_BOUND_S


# Autotuned over 12 configurations, compiled afresh (a salt in the kernel's source), for each dtype.
AUTOTUNED = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 512, 1024, 2048)
                          for w in (2, 4, 8)], key=["n"])
@triton.jit
def add_tuned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # SALT
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    return out
'''


def test_compiling_and_autotuning_for_each_dtype_lengthen_the_cases_limit(tmp_path):
    import secrets

    # 5 s a case: less than 12 cold compiles and an autotuning take, in every dtype's first case.
    source = AUTOTUNED.replace("SALT", secrets.token_hex(8))
    result = grade(get_kata("vector_add"), _solution(tmp_path, source), "gpu", case_timeout_s=5)
    # What is held is the time limit; the speed (0.89x against 0.9x once, on an H200) is not.
    assert result.correct and result.status in ("pass", "fail") and result.speedup, result.message
    assert "time_limit" not in [d["code"] for d in result.diagnoses]


def test_the_whole_grades_limit_is_lengthened_by_its_autotuning(tmp_path):
    """Twelve configurations, compiled afresh and benchmarked for every size and dtype, take
    more of a grade than a 15 s whole-grade limit: that limit is lengthened by the grade's
    compiling and autotuning (at most by 15 s more), so the grade gets its verdict, or, where
    compiling took more than that, says so. Before, it stopped at 15 s as if the kernel hung."""
    import secrets

    limit_s = 15.0
    source = AUTOTUNED.replace("SALT", secrets.token_hex(8))
    result = grade(get_kata("vector_add"), _solution(tmp_path, source), "gpu", timeout_s=limit_s,
                   case_timeout_s=60)
    assert result.compile_s and result.duration_s > limit_s, (result.compile_s, result.duration_s, result.message)
    if "time_limit" in [d["code"] for d in result.diagnoses]:
        assert f"its {limit_s:g} s limit is lengthened for them" in result.message, result.message
        assert result.compile_s > limit_s
    else:
        assert result.correct and result.status in ("pass", "fail") and result.speedup, result.message
