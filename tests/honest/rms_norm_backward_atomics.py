"""Honest variant: one program per row; dx from the row's mean(g * x) (two passes over the row);
dweight accumulated across rows with tl.atomic_add into a zeroed float32 buffer (any order)."""
# panel-cases: large_magnitude, small, tiny_rows

import torch
import triton
import triton.language as tl


@triton.jit
def _bwd(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_ptr, N, dy_stride, x_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    r = tl.load(rstd_ptr + row)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        acc += dy * w * x
    c = tl.sum(acc, axis=0) / N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dx = r * (dy * w) - x * (r * r * r) * c
        tl.store(dx_ptr + row * N + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        tl.atomic_add(dw_ptr + cols, dy * x * r, mask=mask)


def rms_norm_backward(dy, x, weight, rstd):
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dw = torch.zeros(N, dtype=torch.float32, device=x.device)
    _bwd[(M,)](dy, x, weight, rstd, dx, dw, N, dy.stride(0), x.stride(0),
               BLOCK=min(2048, triton.next_power_of_2(N)))
    return dx, dw
