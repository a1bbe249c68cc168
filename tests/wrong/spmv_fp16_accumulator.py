"""Wrong spmv: float16 values are multiplied and summed in float16.

One lane per row, each walking its row one nonzero at a time, with an accumulator of the values'
dtype: for float16 inputs every product and every running sum is rounded to 11 bits. On the
dense row of positive_dense_row, 2000 positive products of ~0.25 each, the running sum passes
256, where float16's spacing is 0.25: each added product is rounded by up to half its size,
and the sum drifts far outside the tolerance. Float32 inputs are unaffected. Accumulate in
float32 (and multiply there: a float16 x float16 product is exact in float32).
"""
# expect-fail: positive_dense_row

import torch
import triton
import triton.language as tl

@triton.jit
def spmv_rows_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, R, x_stride, ROWS: tl.constexpr):
    # One lane per row ("CSR-scalar"): each lane walks its own row, one nonzero per step.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < R
    start = tl.load(crow_ptr + rows, mask=row_ok, other=0)
    end = tl.load(crow_ptr + rows + 1, mask=row_ok, other=0)
    longest = tl.max(end - start, axis=0)
    # BUG: the accumulator has the values' dtype: float16 for float16 inputs.
    acc = tl.zeros([ROWS], val_ptr.dtype.element_ty)
    for j in range(0, longest):
        k = start + j
        m = k < end
        v = tl.load(val_ptr + k, mask=m, other=0.0)
        c = tl.load(col_ptr + k, mask=m, other=0)
        xv = tl.load(x_ptr + c * x_stride, mask=m, other=0.0)
        acc += v * xv
    tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=row_ok)


def spmv(crow_indices, col_indices, values, x):
    R = crow_indices.shape[0] - 1
    y = torch.empty(R, dtype=values.dtype, device=values.device)
    spmv_rows_kernel[(triton.cdiv(R, 64),)](crow_indices, col_indices, values, x, y, R,
                                           x.stride(0), ROWS=64)
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
