"""Honest variant: one pass over the row with the shifted-data formula, var = E[(x - K)^2] -
E[x - K]^2 with K = x[0] (stable when K is near the mean: no catastrophic cancellation at mean
100), rstd via tl.rsqrt. Backward: per-program float32 partials of dweight and dbias, summed by
a second kernel."""
# panel-cases: large_offset, bwd_large_offset, tiny_rows, bwd_many_short_rows, small, bwd_small

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, x_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    k = tl.load(x_ptr + row * x_stride).to(tl.float32)
    s1 = tl.zeros([BLOCK], tl.float32)
    s2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - k, 0.0)
        s1 += d
        s2 += d * d
    m1 = tl.sum(s1, axis=0) / N
    var = tl.maximum(tl.sum(s2, axis=0) / N - m1 * m1, 0.0)
    mean = k + m1
    rstd = tl.rsqrt(var + eps)
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
def _bwd(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, pw_ptr, pb_ptr, M, N, dy_stride, x_stride,
         ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for c0 in range(0, N, BLOCK):
        c = c0 + cols
        tl.store(pw_ptr + pid * N + c, tl.zeros([BLOCK], tl.float32), mask=c < N)
        tl.store(pb_ptr + pid * N + c, tl.zeros([BLOCK], tl.float32), mask=c < N)
    for i in range(0, ROWS):
        row = pid * ROWS + i
        if row < M:
            mean = tl.load(mean_ptr + row)
            rstd = tl.load(rstd_ptr + row)
            sg = 0.0
            sgx = 0.0
            for c0 in range(0, N, BLOCK):
                c = c0 + cols
                mask = c < N
                dy = tl.load(dy_ptr + row * dy_stride + c, mask=mask, other=0.0).to(tl.float32)
                x = tl.load(x_ptr + row * x_stride + c, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
                xhat = tl.where(mask, (x - mean) * rstd, 0.0)
                sg += tl.sum(dy * w, axis=0)
                sgx += tl.sum(dy * w * xhat, axis=0)
            c1 = sg / N
            c2 = sgx / N
            for c0 in range(0, N, BLOCK):
                c = c0 + cols
                mask = c < N
                dy = tl.load(dy_ptr + row * dy_stride + c, mask=mask, other=0.0).to(tl.float32)
                x = tl.load(x_ptr + row * x_stride + c, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
                xhat = tl.where(mask, (x - mean) * rstd, 0.0)
                tl.store(dx_ptr + row * N + c, (rstd * (dy * w - c1 - xhat * c2)).to(dx_ptr.dtype.element_ty), mask=mask)
                tl.store(pw_ptr + pid * N + c, tl.load(pw_ptr + pid * N + c, mask=mask, other=0.0) + dy * xhat, mask=mask)
                tl.store(pb_ptr + pid * N + c, tl.load(pb_ptr + pid * N + c, mask=mask, other=0.0) + dy, mask=mask)


@triton.jit
def _sum(pw_ptr, pb_ptr, dw_ptr, db_ptr, P, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    aw = tl.zeros([BLOCK], tl.float32)
    ab = tl.zeros([BLOCK], tl.float32)
    for p in range(0, P):
        aw += tl.load(pw_ptr + p * N + cols, mask=mask, other=0.0)
        ab += tl.load(pb_ptr + p * N + cols, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, aw, mask=mask)
    tl.store(db_ptr + cols, ab, mask=mask)


def layer_norm(x, weight, bias, eps):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    _fwd[(M,)](x, weight, bias, y, mean, rstd, N, x.stride(0), eps, BLOCK=min(2048, triton.next_power_of_2(N)))
    return y, mean, rstd


def layer_norm_backward(dy, x, weight, mean, rstd):
    M, N = x.shape
    ROWS = 16
    P = triton.cdiv(M, ROWS)
    BLOCK = min(1024, triton.next_power_of_2(N))
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    pw = torch.empty((P, N), dtype=torch.float32, device=x.device)
    pb = torch.empty((P, N), dtype=torch.float32, device=x.device)
    dw = torch.empty(N, dtype=torch.float32, device=x.device)
    db = torch.empty(N, dtype=torch.float32, device=x.device)
    _bwd[(P,)](dy, x, weight, mean, rstd, dx, pw, pb, M, N, dy.stride(0), x.stride(0), ROWS=ROWS, BLOCK=BLOCK)
    _sum[(triton.cdiv(N, 256),)](pw, pb, dw, db, P, N, BLOCK=256)
    return dx, dw, db
