"""Wrong layer_norm: the forward adds eps outside the square root.

rstd = 1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps). Indistinguishable for rows of
unit variance, far off when var is comparable to eps (and for an all-zero row, 1 / eps).
"""
# expect-fail: tiny_rows

import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr,
                          N, x_row_stride, y_row_stride, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        xc = tl.where(mask, x - mean, 0.0)
        acc += xc * xc
    var = tl.sum(acc, axis=0) / N
    rstd = 1.0 / (tl.sqrt(var) + eps)  # BUG: eps goes inside the square root
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def layer_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr,
                          dw_partial_ptr, db_partial_ptr,
                          M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_program,
                          BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, M)
    for row in range(row_start, row_end):
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        # Pass 1: the two row means, of g and of g * xhat.
        acc1 = tl.zeros([BLOCK_N], dtype=tl.float32)
        acc2 = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < N
            dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            g = dy * w
            acc1 += g
            acc2 += g * (x - mean) * rstd
        c1 = tl.sum(acc1, axis=0) / N
        c2 = tl.sum(acc2, axis=0) / N
        # Pass 2: dx, and this row's terms added into this program's partial rows.
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = cols < N
            dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = (x - mean) * rstd
            dx = (dy * w - c1 - xhat * c2) * rstd
            tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            pw = dw_partial_ptr + pid * N + cols
            tl.store(pw, tl.load(pw, mask=mask, other=0.0) + dy * xhat, mask=mask)
            pb = db_partial_ptr + pid * N + cols
            tl.store(pb, tl.load(pb, mask=mask, other=0.0) + dy, mask=mask)


@triton.jit
def column_sum_kernel(partial_ptr, out_ptr, P, N, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for p in range(0, P):
        acc += tl.load(partial_ptr + p * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + cols, acc, mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    block = min(triton.next_power_of_2(N), 4096)
    layer_norm_fwd_kernel[(M,)](x, weight, bias, y, mean, rstd, N, x.stride(0), y.stride(0), eps,
                                BLOCK_N=block, num_warps=8)
    return y, mean, rstd


def layer_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                        mean: torch.Tensor, rstd: torch.Tensor):
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dweight = torch.empty(N, dtype=torch.float32, device=x.device)
    dbias = torch.empty(N, dtype=torch.float32, device=x.device)
    rows_per_program = 16
    P = triton.cdiv(M, rows_per_program)
    dw_partial = torch.zeros((P, N), dtype=torch.float32, device=x.device)
    db_partial = torch.zeros((P, N), dtype=torch.float32, device=x.device)
    block = min(triton.next_power_of_2(N), 4096)
    layer_norm_bwd_kernel[(P,)](dy, x, weight, mean, rstd, dx, dw_partial, db_partial, M, N,
                                dy.stride(0), x.stride(0), dx.stride(0), rows_per_program,
                                BLOCK_N=block, num_warps=8)
    column_sum_kernel[(triton.cdiv(N, 256),)](dw_partial, dweight, P, N, BLOCK_N=256)
    column_sum_kernel[(triton.cdiv(N, 256),)](db_partial, dbias, P, N, BLOCK_N=256)
    return dx, dweight, dbias
