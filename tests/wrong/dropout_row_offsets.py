"""Bug: a 2-D kernel (a band of rows per program, looping over the columns) hands the generator
the column index instead of the flat index row * N + column: every row gets the same mask (the
row's offset is not added)."""
# expect-fail: tall
# expect-fail: small

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, p, scale, seed,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        offs = rows[:, None].to(tl.int64) * n_cols + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        r = tl.rand(seed, cols)  # BUG: should be tl.rand(seed, offs)
        y = tl.where(r[None, :] >= p, x * scale, 0.0)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    m, n = x.shape
    block_n = min(1024, triton.next_power_of_2(n))
    block_m = max(1, 4096 // block_n)
    dropout_rows_kernel[(triton.cdiv(m, block_m),)](x, out, m, n, p, 1.0 / (1.0 - p), seed,
                                                   BLOCK_M=block_m, BLOCK_N=block_n)
    return out
