"""Wrong prefix_sum: the carry between blocks is never propagated.

One program per row walks the row in blocks of BLOCK elements and scans each with tl.cumsum. The
running total of the earlier blocks (the carry) is declared and added, but never updated after
a block: every block restarts from 0, as if it were a row of its own. Rows that fit one block
are right; longer rows are wrong from their second block on.
"""
# expect-fail: long_rows
# expect-fail: one_long_row

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def scan_row_kernel(x_ptr, out_ptr, N, x_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * N
    carry = tl.zeros([], dtype=x_ptr.dtype.element_ty)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0)
        tl.store(out_row + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
        # BUG: missing `carry += tl.sum(x, axis=0)`: the next block starts from 0 again.


def cumsum(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    scan_row_kernel[(M,)](x, out, N, x.stride(0), BLOCK=BLOCK)
    return out
