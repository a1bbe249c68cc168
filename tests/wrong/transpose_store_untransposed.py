"""Wrong transpose: the store uses x's layout; the tile is transposed but lands where it was.

The offsets of out are written with the input's formula (row * N + column): every element goes
back to the position it had in x, so out holds x's bytes reinterpreted as an (N, M) matrix.
Right only when M == 1 or N == 1, where a transpose does not move anything.
"""
# expect-fail: small
# expect-fail: odd_tail
# expect-fail: not_square

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
    # BUG: the strides are not swapped: element (i, j) is stored at i * N + j, x's own layout,
    # instead of at j * M + i.
    out_ptrs = out_ptr + rm.to(tl.int64)[None, :] * N + rn[:, None]
    tl.store(out_ptrs, tl.trans(tile), mask=tl.trans(mask))


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    tiles_n = triton.cdiv(N, 64)
    transpose_kernel[(triton.cdiv(M, 64) * tiles_n,)](out, x, M, N, x.stride(0), tiles_n,
                                                       BLOCK_M=64, BLOCK_N=64)
    return out
