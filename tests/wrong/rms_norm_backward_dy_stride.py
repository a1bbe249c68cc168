"""Wrong rms_norm_backward: finds row i of dy with x's row stride.

Right whenever dy and x share their row stride (contiguous inputs); when dy is a column slice
of a tensor of another width, every row of dy after the first is read from the wrong place.
"""
# expect-fail: strided_small
# expect-fail: strided_rows

import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr,
                        M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_program,
                        BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, M)
    for row in range(row_start, row_end):
        rstd = tl.load(rstd_ptr + row)
        # Pass 1: c = mean(dy * w * x) over the row.
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < N
            dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            acc += dy * w * x
        c = tl.sum(acc, axis=0) / N
        # Pass 2: dx, and this row's dweight terms added into this program's partial row.
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < N
            dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            dx = (dy * w - x * (rstd * rstd * c)) * rstd
            tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            p = partial_ptr + pid * N + cols
            tl.store(p, tl.load(p, mask=mask, other=0.0) + dy * x * rstd, mask=mask)


@triton.jit
def column_sum_kernel(partial_ptr, dw_ptr, P, N, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for p in range(0, P):
        acc += tl.load(partial_ptr + p * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(dw_ptr + cols, acc, mask=mask)


def rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                      rstd: torch.Tensor):
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dweight = torch.empty(N, dtype=torch.float32, device=x.device)
    rows_per_program = 16
    P = triton.cdiv(M, rows_per_program)
    partial = torch.zeros((P, N), dtype=torch.float32, device=x.device)
    block = min(triton.next_power_of_2(N), 4096)
    rms_norm_bwd_kernel[(P,)](dy, x, weight, rstd, dx, partial, M, N,
                              x.stride(0), x.stride(0), dx.stride(0), rows_per_program,  # BUG: dy.stride(0)
                              BLOCK_N=block, num_warps=8)
    column_sum_kernel[(triton.cdiv(N, 256),)](partial, dweight, P, N, BLOCK_N=256)
    return dx, dweight
