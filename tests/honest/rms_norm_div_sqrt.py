"""Honest variant: y = x / sqrt(mean(x^2) + eps) * w, with a true division by a square root
(not rsqrt), the sum of squares accumulated per lane across blocks and reduced once."""
# panel-cases: large_magnitude, tiny_rows, small, strided_rows

import torch
import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    denom = tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (x / denom * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _rms[(M,)](x, weight, y, N, x.stride(0), y.stride(0), eps, BLOCK=min(2048, triton.next_power_of_2(N)))
    return y
