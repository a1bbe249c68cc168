"""Wrong reduce: row_sum accumulates in the input dtype instead of float32.

The per-lane accumulator and the final tl.sum stay in float16 (tl.sum keeps its input's
dtype); only the result is widened. A float16 sum overflows past 65504 and keeps 11 bits:
rows whose sum is in the tens of thousands come out inf, and long rows lose their low digits.
Float32 inputs are unaffected, so only the float16 runs catch it.
"""
# expect-fail: long_row_positive
# expect-fail: large_positive
# expect-fail: positive

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=x_ptr.dtype.element_ty)  # BUG: float16 accumulator
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0.0)
        acc += x
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(tl.float32))


@triton.jit
def row_argmax_kernel(x_ptr, out_ptr, N, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
    best_col = tl.zeros([BLOCK_N], dtype=tl.int32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N,
                    other=float("-inf")).to(tl.float32)
        take = x > best
        best = tl.where(take, x, best)
        best_col = tl.where(take, cols, best_col)
    m = tl.max(best, axis=0)
    first = tl.min(tl.where(best == m, best_col, 2147483647), axis=0)
    tl.store(out_ptr + row, first.to(tl.int64))


@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x.to(tl.float32), axis=0))


@triton.jit
def final_sum_kernel(partial_ptr, out_ptr, P, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, P, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < P, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty(M, dtype=torch.float32, device=x.device)
    block = min(triton.next_power_of_2(N), 4096)
    row_sum_kernel[(M,)](x, out, N, x.stride(0), BLOCK_N=block, num_warps=8)
    return out


def row_argmax(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty(M, dtype=torch.int64, device=x.device)
    block = min(triton.next_power_of_2(N), 4096)
    row_argmax_kernel[(M,)](x, out, N, x.stride(0), BLOCK_N=block, num_warps=8)
    return out


def total_sum(x: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    block = 4096
    P = triton.cdiv(n, block)
    partials = torch.empty(P, dtype=torch.float32, device=x.device)
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    partial_sum_kernel[(P,)](x, partials, n, BLOCK=block, num_warps=8)
    final_sum_kernel[(1,)](partials, out, P, BLOCK=1024, num_warps=4)
    return out
