"""Honest variant: Welford's running mean and M2 per lane across the row's blocks, the lanes
merged with Chan's formula; rstd = 1 / sqrt(var + eps). Backward: one program per row, dweight
and dbias accumulated with tl.atomic_add."""
# panel-cases: large_offset, bwd_large_offset, tiny_rows, bwd_many_short_rows, small, bwd_small

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, x_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cnt = tl.zeros([BLOCK], tl.float32)
    mu = tl.zeros([BLOCK], tl.float32)
    m2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        new_cnt = cnt + tl.where(mask, 1.0, 0.0)
        delta = tl.where(mask, x - mu, 0.0)
        mu = mu + delta / tl.maximum(new_cnt, 1.0)
        m2 = m2 + tl.where(mask, delta * (x - mu), 0.0)
        cnt = new_cnt
    mean = tl.sum(cnt * mu, axis=0) / N
    dev = tl.where(cnt > 0, mu - mean, 0.0)
    var = (tl.sum(m2, axis=0) + tl.sum(cnt * dev * dev, axis=0)) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bwd(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, N, dy_stride, x_stride,
         BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    sg = tl.zeros([BLOCK], tl.float32)
    sgx = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        g = dy * w
        sg += g
        sgx += g * xhat
    c1 = tl.sum(sg, axis=0) / N
    c2 = tl.sum(sgx, axis=0) / N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        dx = rstd * (dy * w - c1 - xhat * c2)
        tl.store(dx_ptr + row * N + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        tl.atomic_add(dw_ptr + cols, dy * xhat, mask=mask)
        tl.atomic_add(db_ptr + cols, dy, mask=mask)


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
    dw = torch.zeros(N, dtype=torch.float32, device=x.device)
    db = torch.zeros(N, dtype=torch.float32, device=x.device)
    _bwd[(M,)](dy, x, weight, mean, rstd, dx, dw, db, N, dy.stride(0), x.stride(0),
               BLOCK=min(1024, triton.next_power_of_2(N)))
    return dx, dw, db
