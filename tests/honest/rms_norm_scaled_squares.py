"""Honest variant: the mean of squares as a sum of (x * (1/N)) * x (divided before summing),
reduced per block and added up in a scalar; y = (x * w) * rsqrt(ms + eps), the weight first."""
# panel-cases: large_magnitude, tiny_rows, small, strided_rows

import torch
import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    inv_n = 1.0 / N
    ms = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        ms += tl.sum((x * inv_n) * x, axis=0)
    rstd = tl.rsqrt(ms + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, ((x * w) * rstd).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _rms[(M,)](x, weight, y, N, x.stride(0), y.stride(0), eps, BLOCK=min(1024, triton.next_power_of_2(N)))
    return y
