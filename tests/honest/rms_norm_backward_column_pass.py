"""Honest variant: two kernels. dx: one program per row, as rstd * (g - x * c) with
c = mean(g * (x * rstd)) * rstd (the normalised x in the sum). dweight: a second kernel over column blocks that walks
every row in order (reading dy, x, rstd again): a sequential float32 sum over rows."""
# panel-cases: large_magnitude, small, tiny_rows

import torch
import triton
import triton.language as tl


@triton.jit
def _dx(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, N, dy_stride, x_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    r = tl.load(rstd_ptr + row)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        acc += (dy * w) * (x * r)
    c = tl.sum(acc, axis=0) / N * r
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dx = (dy * w - x * c) * r
        tl.store(dx_ptr + row * N + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dw(dy_ptr, x_ptr, rstd_ptr, dw_ptr, M, N, dy_stride, x_stride, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    acc = tl.zeros([BLOCK], tl.float32)
    for row in range(0, M):
        r = tl.load(rstd_ptr + row)
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        acc += dy * (x * r)
    tl.store(dw_ptr + cols, acc, mask=mask)


def rms_norm_backward(dy, x, weight, rstd):
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dw = torch.empty(N, dtype=torch.float32, device=x.device)
    _dx[(M,)](dy, x, weight, rstd, dx, N, dy.stride(0), x.stride(0), BLOCK=min(1024, triton.next_power_of_2(N)))
    BLOCK_N = min(256, triton.next_power_of_2(N))
    _dw[(triton.cdiv(N, BLOCK_N),)](dy, x, rstd, dw, M, N, dy.stride(0), x.stride(0), BLOCK=BLOCK_N)
    return dx, dw
