"""Wrong transpose: assumes x is contiguous and uses N as the row stride of x.

Right for contiguous x; when x is a column slice base[:, :N] of a wider tensor
(x.stride(0) > N) every row after the first is read from the wrong place.
"""
# expect-fail: strided_small
# expect-fail: strided
# expect-fail: one_col_strided

import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, tiles_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rm = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    # BUG: row i of x starts at i * x.stride(0), not i * N.
    tile = tl.load(x_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], mask=mask)
    tl.store(out_ptr + rn.to(tl.int64)[:, None] * M + rm[None, :], tl.trans(tile), mask=tl.trans(mask))


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    tiles_n = triton.cdiv(N, 64)
    transpose_kernel[(triton.cdiv(M, 64) * tiles_n,)](out, x, M, N, tiles_n, BLOCK_M=64, BLOCK_N=64)
    return out
