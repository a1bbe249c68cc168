"""Honest variant: two passes for the statistics (the mean, then the sum of (x - mean)^2 in a
second pass over the row), y = (x - mean) / sqrt(var + eps) * w + b with a true division.
Backward: dx per row; dweight and dbias by a second kernel over column blocks that walks every
row in order (a sequential float32 sum over rows)."""
# panel-cases: large_offset, bwd_large_offset, tiny_rows, bwd_many_short_rows, small, bwd_small

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, x_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s += tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(s, axis=0) / N
    q = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        d = tl.where(cols < N, x - mean, 0.0)
        q += d * d
    std = tl.sqrt(tl.sum(q, axis=0) / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / std)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + cols, ((x - mean) / std * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dx(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, N, dy_stride, x_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    sg = 0.0
    sgx = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        g = (tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
             * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32))
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        sg += tl.sum(g, axis=0)
        sgx += tl.sum(g * tl.where(mask, x - mean, 0.0), axis=0)
    c1 = sg / N
    c2 = sgx / N * rstd
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        g = (tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
             * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32))
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = (x - mean) * rstd
        tl.store(dx_ptr + row * N + cols, ((g - (c1 + xhat * c2)) * rstd).to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dwdb(dy_ptr, x_ptr, mean_ptr, rstd_ptr, dw_ptr, db_ptr, M, N, dy_stride, x_stride, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    aw = tl.zeros([BLOCK], tl.float32)
    ab = tl.zeros([BLOCK], tl.float32)
    for row in range(0, M):
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        aw += dy * ((x - mean) * rstd)
        ab += dy
    tl.store(dw_ptr + cols, aw, mask=mask)
    tl.store(db_ptr + cols, ab, mask=mask)


def layer_norm(x, weight, bias, eps):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    _fwd[(M,)](x, weight, bias, y, mean, rstd, N, x.stride(0), eps, BLOCK=min(1024, triton.next_power_of_2(N)))
    return y, mean, rstd


def layer_norm_backward(dy, x, weight, mean, rstd):
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dw = torch.empty(N, dtype=torch.float32, device=x.device)
    db = torch.empty(N, dtype=torch.float32, device=x.device)
    _dx[(M,)](dy, x, weight, mean, rstd, dx, N, dy.stride(0), x.stride(0), BLOCK=min(1024, triton.next_power_of_2(N)))
    BLOCK_N = min(256, triton.next_power_of_2(N))
    _dwdb[(triton.cdiv(N, BLOCK_N),)](dy, x, mean, rstd, dw, db, M, N, dy.stride(0), x.stride(0), BLOCK=BLOCK_N)
    return dx, dw, db
