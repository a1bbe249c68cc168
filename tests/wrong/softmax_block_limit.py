"""Wrong softmax: one block per row, its size capped at 65536 columns, and no loop.

The shape of a widely used library kernel: BLOCK = min(next_power_of_2(N), 65536). Right for
every row up to 65536 columns (all the public cases); on longer rows the columns past the block
are never written and the statistics miss them, so the rest of the row is off too.
"""
# expect-fail: long_row
# expect-diagnosis: row_end_wrong

import torch
import triton
import triton.language as tl

MAX_FUSED_SIZE = 65536


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block_n = min(triton.next_power_of_2(n_cols), MAX_FUSED_SIZE)  # BUG: no loop past the block
    num_warps = 32 if block_n >= 32768 else 16 if block_n >= 8192 else 8 if block_n >= 2048 else 4
    softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0), BLOCK_N=block_n,
                              num_warps=num_warps)
    return out
