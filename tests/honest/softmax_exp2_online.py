"""Honest variant: base 2 throughout (exp2 of (x - m) * log2(e)), a running max and a running
sum kept per lane (vectors, merged with one rescale at the end), then a write pass that multiplies
by the reciprocal of the sum."""
# panel-cases: large_offset, large_negative, small

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, N, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    d = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # Lanes that have seen nothing yet keep m = -inf: their sum stays 0.
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp2((m - m_new) * 1.4426950408889634))
        beta = tl.where(m_new == float("-inf"), 0.0, tl.exp2((x - m_new) * 1.4426950408889634))
        d = d * alpha + beta
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, d * tl.exp2((m - row_max) * 1.4426950408889634)), axis=0)
    inv = 1.0 / total
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        p = tl.exp2((x - row_max) * 1.4426950408889634) * inv
        tl.store(y_ptr + row * y_stride + cols, p.to(y_ptr.dtype.element_ty), mask=cols < N)


def softmax(x):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _softmax[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK=min(2048, triton.next_power_of_2(N)))
    return y
