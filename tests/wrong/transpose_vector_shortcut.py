"""Wrong transpose: a shortcut for vectors that forgets the row stride.

The tiled kernel is right. But when M == 1 or N == 1 "x.T holds the same bytes as x", so the
launcher copies x as a flat array of M * N elements instead. True for a single row, and for a
single column of a contiguous x; but when x = base[:, :1] is a column slice of a wider tensor,
its elements are x.stride(0) apart, not 1.
"""
# expect-fail: one_col_strided

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


@triton.jit
def copy_kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    if M == 1 or N == 1:
        # BUG: for N == 1 the elements of x are x.stride(0) apart, not contiguous.
        copy_kernel[(triton.cdiv(M * N, 1024),)](out, x, M * N, BLOCK=1024)
        return out
    tiles_n = triton.cdiv(N, 64)
    transpose_kernel[(triton.cdiv(M, 64) * tiles_n,)](out, x, M, N, x.stride(0), tiles_n,
                                                       BLOCK_M=64, BLOCK_N=64)
    return out
