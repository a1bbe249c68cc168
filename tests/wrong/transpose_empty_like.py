"""Wrong transpose: allocates the output with torch.empty_like(x), shape (M, N) instead of (N, M).

The kernel is right and writes every element where out = x.T wants it (same number of
elements), but the returned tensor has x's shape: right only for square matrices.
"""
# expect-fail: small
# expect-fail: not_square
# expect-fail: one_row

import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, x_row_stride, tiles_n,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rm = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm.to(tl.int64)[:, None] * x_row_stride + rn[None, :], mask=mask)
    out_ptrs = out_ptr + rn.to(tl.int64)[:, None] * M + rm[None, :]
    tl.store(out_ptrs, tl.trans(tile), mask=tl.trans(mask))


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty_like(x)  # BUG: x's shape (M, N); out = x.T has shape (N, M)
    tiles_n = triton.cdiv(N, 64)
    transpose_kernel[(triton.cdiv(M, 64) * tiles_n,)](out, x, M, N, x.stride(0), tiles_n,
                                                       BLOCK_M=64, BLOCK_N=64)
    return out
