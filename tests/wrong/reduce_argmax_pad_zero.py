"""Wrong reduce: row_argmax loads the padding lanes (columns past N) as 0 instead of -inf.

In a row whose values are all negative, a padding lane's 0 beats every real value and the
kernel returns a column >= N. Rows with a positive maximum hide the bug.
"""
# expect-fail: all_negative
# expect-fail: all_negative_long
# expect-fail: extreme_negative

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0.0)
        acc += x.to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def row_argmax_kernel(x_ptr, out_ptr, N, x_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
    best_col = tl.zeros([BLOCK_N], dtype=tl.int32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N,
                    other=0.0).to(tl.float32)  # BUG: padding must be -inf
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
