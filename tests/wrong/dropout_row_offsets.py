"""Bug: one program per row, and the generator is given the column index instead of the flat
index row * N + column: every row gets the same mask (the row's offset is not added)."""
# expect-fail: tall
# expect-fail: small

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_row_kernel(x_ptr, out_ptr, n_cols, p, scale, seed, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask).to(tl.float32)
        r = tl.rand(seed, cols)  # BUG: should be tl.rand(seed, row * n_cols + cols)
        y = tl.where(r >= p, x * scale, 0.0)
        tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    m, n = x.shape
    block_n = min(4096, triton.next_power_of_2(n))
    dropout_row_kernel[(m,)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_N=block_n)
    return out
