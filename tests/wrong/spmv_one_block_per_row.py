"""Wrong spmv: each row is summed from one block of 1024 nonzeros, with no loop.

Most rows of a sparse matrix are short, so one block per row looks enough; but power-law rows
reach 100 000 entries and a dense row has all C. Every entry past the first block is dropped.
(Looping over the row fixes the values; splitting long rows over many programs fixes the speed.)
"""
# expect-fail: positive_dense_row
# expect-fail: one_row

import torch
import triton
import triton.language as tl

@triton.jit
def spmv_row_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, x_stride, BLOCK: tl.constexpr):
    # One program per row (correct; slow on power-law rows, fine here).
    r = tl.program_id(0)
    start = tl.load(crow_ptr + r)
    end = tl.load(crow_ptr + r + 1)
    # BUG: one block per row, no loop: "rows are short". Entries past the first BLOCK are
    # never read.
    k = start + tl.arange(0, BLOCK)
    m = k < end
    v = tl.load(val_ptr + k, mask=m, other=0.0).to(tl.float32)
    c = tl.load(col_ptr + k, mask=m, other=0)
    xv = tl.load(x_ptr + c * x_stride, mask=m, other=0.0).to(tl.float32)
    acc = v * xv
    tl.store(y_ptr + r, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def spmv(crow_indices, col_indices, values, x):
    R = crow_indices.shape[0] - 1
    y = torch.empty(R, dtype=values.dtype, device=values.device)
    spmv_row_kernel[(R,)](crow_indices, col_indices, values, x, y, x.stride(0), BLOCK=1024)
    return y


@triton.jit
def spmm_row_kernel(crow_ptr, col_ptr, val_ptr, b_ptr, out_ptr, N, stride_bk, stride_bn,
                    BLOCK: tl.constexpr, BN: tl.constexpr):
    # One program per (row, tile of BN columns) (correct; slow on power-law rows).
    r = tl.program_id(0)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    col_ok = cols < N
    start = tl.load(crow_ptr + r)
    end = tl.load(crow_ptr + r + 1)
    acc = tl.zeros([BN], tl.float32)
    for k0 in range(start, end, BLOCK):
        k = k0 + tl.arange(0, BLOCK)
        m = k < end
        v = tl.load(val_ptr + k, mask=m, other=0.0).to(tl.float32)
        c = tl.load(col_ptr + k, mask=m, other=0)
        bg = tl.load(b_ptr + c[:, None] * stride_bk + cols[None, :] * stride_bn,
                     mask=m[:, None] & col_ok[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(v[:, None] * bg, axis=0)
    tl.store(out_ptr + r.to(tl.int64) * N + cols, acc.to(out_ptr.dtype.element_ty), mask=col_ok)


def spmm(crow_indices, col_indices, values, b):
    R, N = crow_indices.shape[0] - 1, b.shape[1]
    out = torch.empty((R, N), dtype=values.dtype, device=values.device)
    bn = min(triton.next_power_of_2(N), 64)
    spmm_row_kernel[(R, triton.cdiv(N, bn))](crow_indices, col_indices, values, b, out, N,
                                             b.stride(0), b.stride(1), BLOCK=32, BN=bn)
    return out
