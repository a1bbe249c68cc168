"""Wrong spmm: the column tile's store is not masked.

N is rarely a multiple of the tile (N = 5 with a 16-wide tile): the lanes past N write into the
next row's first columns, and the last row's spill runs past the end of the output. The loads
were masked; the store must be too.
"""
# expect-fail: mm_small
# expect-diagnosis: out_of_bounds_write

import torch
import triton
import triton.language as tl

NPP = 256  # nonzeros per program


@triton.jit
def spmv_split_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, part_ptr, nnz, R, x_stride,
                      steps, NPP: tl.constexpr):
    # Every program takes NPP consecutive nonzeros, whatever their rows.
    p = tl.program_id(0)
    s = p.to(tl.int64) * NPP
    e = tl.minimum(s + NPP, nnz)
    k = s + tl.arange(0, NPP)
    valid = k < e
    kk = tl.minimum(k, e - 1)
    # Each nonzero's row: the largest r with crow[r] <= k (binary search over all rows).
    lo = tl.zeros([NPP], tl.int64)
    hi = tl.zeros([NPP], tl.int64) + R
    for _ in range(steps):
        mid = (lo + hi) // 2
        c = tl.load(crow_ptr + mid)
        right = c <= kk
        lo = tl.where(right, mid, lo)
        hi = tl.where(right, hi, mid)
    row = lo
    start = tl.load(crow_ptr + row)
    end = tl.load(crow_ptr + row + 1)
    v = tl.load(val_ptr + k, mask=valid, other=0.0).to(tl.float64)
    col = tl.load(col_ptr + k, mask=valid, other=0)
    xv = tl.load(x_ptr + col * x_stride, mask=valid, other=0.0).to(tl.float64)
    # Segmented sum: the prefix at a row's last lane minus the prefix before its first lane.
    prefix = tl.cumsum(v * xv, 0)
    first_lane = start - s
    before = tl.gather(prefix, tl.maximum(first_lane - 1, 0).to(tl.int32), 0)
    seg = prefix - tl.where(first_lane > 0, before, 0.0)
    last = valid & (k + 1 == end)
    tl.store(y_ptr + row, seg.to(y_ptr.dtype.element_ty), mask=last & (start >= s))
    # Rows crossing a program boundary: each program adds its piece in float32.
    piece = (last & (start < s)) | ((k == e - 1) & (end > e))
    tl.atomic_add(part_ptr + row, seg.to(tl.float32), mask=piece)


@triton.jit
def crossing_rows_kernel(crow_ptr, part_ptr, y_ptr, R, NPP: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = r < R
    start = tl.load(crow_ptr + r, mask=m, other=0)
    end = tl.load(crow_ptr + r + 1, mask=m, other=0)
    crossing = m & (end > start) & (start // NPP != (end - 1) // NPP)
    tl.store(y_ptr + r, tl.load(part_ptr + r, mask=crossing, other=0.0).to(y_ptr.dtype.element_ty),
             mask=crossing)


def spmv(crow_indices, col_indices, values, x):
    R = crow_indices.shape[0] - 1
    nnz = values.shape[0]
    y = torch.zeros(R, dtype=values.dtype, device=values.device)  # empty rows stay 0
    part = torch.zeros(R, dtype=torch.float32, device=values.device)
    steps = (R - 1).bit_length()  # ceil(log2(R)) halvings of [0, R)
    spmv_split_kernel[(max(1, triton.cdiv(nnz, NPP)),)](
        crow_indices, col_indices, values, x, y, part, nnz, R, x.stride(0), steps, NPP=NPP)
    crossing_rows_kernel[(triton.cdiv(R, 256),)](crow_indices, part, y, R, NPP=NPP, BLOCK=256)
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
    # BUG: the store is not masked: a tile of BN >= N columns writes past the row's end.
    tl.store(out_ptr + r.to(tl.int64) * N + cols, acc.to(out_ptr.dtype.element_ty))


def spmm(crow_indices, col_indices, values, b):
    R, N = crow_indices.shape[0] - 1, b.shape[1]
    out = torch.empty((R, N), dtype=values.dtype, device=values.device)
    bn = min(triton.next_power_of_2(N), 64)
    spmm_row_kernel[(R, triton.cdiv(N, bn))](crow_indices, col_indices, values, b, out, N,
                                             b.stride(0), b.stride(1), BLOCK=32, BN=bn)
    return out
