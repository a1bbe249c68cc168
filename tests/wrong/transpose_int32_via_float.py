"""Wrong transpose: routes every value through float32, as if it were arithmetic.

The tile is converted to float32 after the load and back to out's type by the store. For the
float dtypes that round trip is exact, but int32 values beyond 2**24 lose their low bits: a
transpose must move bits, never convert them.
"""
# expect-fail: small
# expect-fail: edge_values

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
    # BUG: float32 holds only 24 bits of an int32.
    tile = tl.load(x_ptr + rm.to(tl.int64)[:, None] * x_row_stride + rn[None, :], mask=mask).to(tl.float32)
    out_ptrs = out_ptr + rn.to(tl.int64)[:, None] * M + rm[None, :]
    tl.store(out_ptrs, tl.trans(tile).to(out_ptr.dtype.element_ty), mask=tl.trans(mask))


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    tiles_n = triton.cdiv(N, 64)
    transpose_kernel[(triton.cdiv(M, 64) * tiles_n,)](out, x, M, N, x.stride(0), tiles_n,
                                                       BLOCK_M=64, BLOCK_N=64)
    return out
