"""Wrong transpose: always allocates a float32 output, whatever x's dtype.

Right for float32 inputs only: for float16, bfloat16 and int32 the values are converted on the
store and the result has the wrong dtype.
"""
# expect-fail: small
# expect-fail: medium

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
    tl.store(out_ptrs, tl.trans(tile).to(out_ptr.dtype.element_ty), mask=tl.trans(mask))


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((N, M), dtype=torch.float32, device=x.device)  # BUG: dtype=x.dtype
    tiles_n = triton.cdiv(N, 64)
    transpose_kernel[(triton.cdiv(M, 64) * tiles_n,)](out, x, M, N, x.stride(0), tiles_n,
                                                       BLOCK_M=64, BLOCK_N=64)
    return out
