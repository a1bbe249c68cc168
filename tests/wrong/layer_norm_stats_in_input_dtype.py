"""Wrong layer_norm: the forward keeps each row's mean and rstd in the input's dtype.

The statistics are computed in float32, but stored into buffers of x's dtype and widened to float32
afterwards. For float32 inputs that is right; for float16 (and bfloat16) mean and rstd keep only
11 (8) significant bits: rstd, near 1, is off by up to 5e-4 (4e-3), far beyond the kata's
1e-4 + 1e-5 relative. The kata asks for float32 statistics whatever the input (FlagGems'
layer_norm does this; graded on an H200 its float16 rstd of four rows, the last two rounded out
of tolerance, was once read as a grid stopping short).
"""
# expect-fail: small
# expect-diagnosis: low_precision

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
    mean = torch.empty(M, dtype=x.dtype, device=x.device)  # the bug: statistics in the input's dtype
    rstd = torch.empty(M, dtype=x.dtype, device=x.device)
    _fwd[(M,)](x, weight, bias, y, mean, rstd, N, x.stride(0), eps, BLOCK=min(2048, triton.next_power_of_2(N)))
    return y, mean.float(), rstd.float()


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
