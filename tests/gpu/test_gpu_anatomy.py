"""The anatomy of timed cases on a GPU, with small honest kernels: each advice code triggered by a
kernel that earns it, the references earning none of them, every timed case carrying its
anatomy, and `--profile`'s files (Triton IR, PTX, a Chrome trace). Bench cases only
(`only_cases`), to keep the whole file to a couple of minutes."""

from __future__ import annotations

import json

import pytest
import torch

from grader.grading.runner import grade
from grader.judge.kernel_anatomy import ORDER as ANATOMY_CODES
from grader.kata.catalog import get_kata

# Correct, but a fixed grid of 8 programs, each looping over every 8th block.
VECTOR_ADD_8 = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    pid = tl.program_id(0)
    for block in range(pid, tl.cdiv(n, BLOCK), PROGRAMS):
        offsets = block * BLOCK + tl.arange(0, BLOCK)  # int32: every case here is under 2**31
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(8,)](x, y, out, x.numel(), BLOCK=1024, PROGRAMS=8, num_warps=4)
    return out
'''

# Correct and tiled (coalesced both ways), but persistent: PROGRAMS programs walk the BM x BN
# tiles, each turned round (tl.trans) on its way out.
PERSISTENT_TRANSPOSE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, x_row_stride, BM: tl.constexpr, BN: tl.constexpr,
                     PROGRAMS: tl.constexpr):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    for tile in range(pid, tl.cdiv(M, BM) * tiles_n, PROGRAMS):
        rm = (tile // tiles_n) * BM + tl.arange(0, BM)
        rn = (tile % tiles_n) * BN + tl.arange(0, BN)
        block = tl.load(x_ptr + rm.to(tl.int64)[:, None] * x_row_stride + rn[None, :],
                        mask=(rm[:, None] < M) & (rn[None, :] < N))
        tl.store(out_ptr + rn.to(tl.int64)[:, None] * M + rm[None, :], tl.trans(block),
                 mask=(rn[:, None] < N) & (rm[None, :] < M))


def transpose(x):
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    transpose_kernel[({programs},)](out, x, M, N, x.stride(0), BM={bm}, BN={bn}, PROGRAMS={programs}, num_warps=4)
    return out
'''


def persistent_transpose(bm: int, bn: int, programs: int) -> str:
    return PERSISTENT_TRANSPOSE.format(bm=bm, bn=bn, programs=programs)


# 64 x 64 tiles on 8 programs: 124 of an H200's 132 SMs idle.
TRANSPOSE_8 = persistent_transpose(64, 64, 8)

# Correct (the mask is a function of the seed and the flat index), but persistent on 8 programs.
DROPOUT_8 = '''
import torch
import triton
import triton.language as tl


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, seed, p, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    pid = tl.program_id(0)
    for block in range(pid, tl.cdiv(n, BLOCK), PROGRAMS):
        offsets = block * BLOCK + tl.arange(0, BLOCK)  # int32: every case here is under 2**31
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        keep = tl.rand(seed, offsets) >= p
        y = tl.where(keep, x.to(tl.float32) / (1.0 - p), 0.0)
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    if x.numel():
        dropout_kernel[(8,)](x, out, x.numel(), seed, p, BLOCK=1024, PROGRAMS=8, num_warps=4)
    return out
'''

# Correct, but each program of four warps holds a 256 x 128 tile (256 values a thread) and turns
# it round through shared memory: registers or shared memory, whichever binds first, leave room
# for at most three such programs (12 of an SM's 64 warps) at a time (under 25% on an H200,
# measured). A grid of one such tile each still reached 68% of the copy ceiling there (2.5x
# eager, which reaches about 27%: no advice due), so it runs persistent on 32 programs, one on
# each of a quarter of the SMs: slower than eager and far under half the copy ceiling, as advice
# needs (small_grid is named too).
TRANSPOSE_WIDE_TILE = persistent_transpose(256, 128, 32)

# Correct, but a program of one warp holds 16384 elements of each input, all live at once (the
# store waits for a sum over the block, which adds 0.0): registers spill, and few such programs
# fit on an SM.
VECTOR_ADD_SPILLS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    total = tl.sum(x, axis=0)  # finite on these inputs: adds exactly 0.0 below
    tl.store(out_ptr + offsets, x + y + total * 0.0, mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 16384),)](x, y, out, n, BLOCK=16384, num_warps=1)
    return out
'''

# Correct, but the host waits for the GPU after each of many small launches: the GPU idles.
VECTOR_ADD_SYNCED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, start, n, BLOCK: tl.constexpr):
    offsets = start + tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
             mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    chunk = max(1 << 16, triton.cdiv(n, 256))
    for start in range(0, n, chunk):
        add_kernel[(triton.cdiv(min(chunk, n - start), 1024),)](x, y, out, start, n, BLOCK=1024)
        torch.cuda.synchronize()
    return out
'''

# Correct, but every 256 elements one atomic add into a single float64 total.
TOTAL_SUM_ATOMIC = '''
import torch
import triton
import triton.language as tl


@triton.jit
def atomic_sum_kernel(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0).to(tl.float64)
    tl.atomic_add(total_ptr, tl.sum(x, axis=0))


@triton.jit
def cast_kernel(total_ptr, out_ptr):
    tl.store(out_ptr, tl.load(total_ptr).to(tl.float32))


def total_sum(x):
    total = torch.zeros(1, dtype=torch.float64, device=x.device)
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    n = x.numel()
    if n:
        atomic_sum_kernel[(triton.cdiv(n, 256),)](x, total, n, BLOCK=256, num_warps=1)
    cast_kernel[(1,)](total, out)
    return out


def row_sum(x):
    raise NotImplementedError


def row_argmax(x):
    raise NotImplementedError
'''


def _grade(tmp_path, kata_name: str, source: str | None, cases: list[str], **options):
    kata = get_kata(kata_name)
    path = kata.reference_path
    if source is not None:
        path = tmp_path / "solution.py"
        path.write_text(source)
    return grade(kata, path, "gpu", only_cases=cases, **options)


def _codes(result) -> set[str]:
    return {a["code"] for a in result.advice}


def _every_timed_case_has_its_anatomy(result) -> None:
    timed = [c for c in result.cases if c.timed]
    assert timed, result.message
    for case in timed:
        assert case.kernels, (case.name, case.anatomy)
        top = max(case.kernels, key=lambda k: k["share"] or 0)
        assert top["source"] == "triton" and top["num_warps"] and top["registers"], top
        assert top["grid"] and top["occupancy"] is not None and top["gpu_ms"] > 0, top
        assert case.anatomy["gpu_busy_ms"] > 0 and case.anatomy["sm_count"] >= 8


@pytest.mark.parametrize("kata_name, source, cases", [
    ("vector_add", VECTOR_ADD_8, ["bench_2e28"]),
    ("transpose", TRANSPOSE_8, ["bench_8192x8192"]),
    ("dropout", DROPOUT_8, ["bench_8192x8192"]),
], ids=["vector_add", "transpose", "dropout"])
def test_a_correct_kernel_on_8_programs_gets_small_grid(tmp_path, kata_name, source, cases):
    result = _grade(tmp_path, kata_name, source, cases)
    assert result.correct, result.message
    _every_timed_case_has_its_anatomy(result)
    small = next((a for a in result.advice if a["code"] == "small_grid"), None)
    assert small, result.advice
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert small["message"].startswith(f"8 programs on {sms} SMs: {sms - 8} SMs idle"), small
    # Memory bound, far below half the copy ceiling: low_bandwidth too, after small_grid.
    assert "low_bandwidth" in _codes(result), result.advice


@pytest.mark.parametrize("kata_name, cases", [
    ("softmax", ["bench_8192x8192", "bench_32768x1024", "bench_1024x32768"]),
    ("vector_add", ["bench_2e28", "bench_2e26_plus_3"]),  # at about 1.00x: the advice's gate is open
])
def test_references_get_none_of_the_anatomy_s_codes(tmp_path, kata_name, cases):
    result = _grade(tmp_path, kata_name, None, cases)
    assert result.correct, result.message
    _every_timed_case_has_its_anatomy(result)
    assert not _codes(result) & set(ANATOMY_CODES), result.advice


def _top_kernel(result) -> dict:
    return max(next(c for c in result.cases if c.timed).kernels, key=lambda k: k["share"] or 0)


def test_register_spills(tmp_path):
    # One warp a program: at most 32 programs (half the SM's warps) fit whatever the registers,
    # and on an H200 it spilled with 50% theoretical occupancy: spills, not low occupancy.
    result = _grade(tmp_path, "vector_add", VECTOR_ADD_SPILLS, ["bench_2e26_plus_3"])
    assert result.correct, result.message
    top = _top_kernel(result)
    assert top["spills"] > 0, json.dumps(top)
    assert "register_spills" in _codes(result), result.advice


def test_low_occupancy(tmp_path):
    result = _grade(tmp_path, "transpose", TRANSPOSE_WIDE_TILE, ["bench_8192x8192"])
    assert result.correct, result.message
    tops = [max(c.kernels, key=lambda k: k["share"] or 0) for c in result.cases if c.timed and c.kernels]
    assert tops and all(t["occupancy"] < 0.25 for t in tops), json.dumps(tops)
    assert "low_occupancy" in _codes(result), result.advice


def test_launch_bound(tmp_path):
    result = _grade(tmp_path, "vector_add", VECTOR_ADD_SYNCED, ["bench_2e26_plus_3"])
    assert result.correct, result.message
    assert "launch_bound" in _codes(result), (result.advice, [c.anatomy for c in result.cases if c.timed])


def test_atomics_contention(tmp_path):
    result = _grade(tmp_path, "reduce", TOTAL_SUM_ATOMIC, ["bench_odd"])
    assert result.correct, result.message
    assert "atomics_contention" in _codes(result), (result.advice, [c.kernels for c in result.cases if c.timed])


def test_profile_writes_the_ir_ptx_and_a_chrome_trace_and_the_report_names_them(tmp_path):
    out = tmp_path / "profile"
    result = _grade(tmp_path, "vector_add", VECTOR_ADD_8, ["bench_2e26_plus_3"], profile_dir=out)
    files = next(c for c in result.cases if c.timed).anatomy["files"]
    assert set(files) == {"trace", "ttir", "ptx"}, files
    assert "tt.func" in open(files["ttir"]).read() and ".entry add_kernel" in open(files["ptx"]).read()
    trace = json.load(open(files["trace"]))
    assert any(e.get("name") == "add_kernel" for e in trace["traceEvents"])
    from grader.results.report import render_report
    assert files["ptx"] in render_report(result, "html")
