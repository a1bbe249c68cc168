"""Wrong transpose: a 2-D grid with M and N swapped.

The grid is (cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)) but the kernel reads the row-tile index from
axis 0 and the column-tile index from axis 1. Right when both counts are equal (square-ish
matrices); otherwise some tiles are never copied while the extra programs fall outside the
matrix and store nothing.
"""
# expect-fail: not_square
# expect-fail: one_row
# expect-fail: tall

import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, x_row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm.to(tl.int64)[:, None] * x_row_stride + rn[None, :], mask=mask)
    out_ptrs = out_ptr + rn.to(tl.int64)[:, None] * M + rm[None, :]
    tl.store(out_ptrs, tl.trans(tile), mask=tl.trans(mask))


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(N, 64), triton.cdiv(M, 64))  # BUG: axis 0 must count row tiles of x
    transpose_kernel[grid](out, x, M, N, x.stride(0), BLOCK_M=64, BLOCK_N=64)
    return out
