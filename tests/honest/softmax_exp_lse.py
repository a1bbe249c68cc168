"""Honest variant: one online pass for lse = m + log(sum exp(x - m)), then p = exp(x - lse) (no
division), block by block over rows of any length."""
# panel-cases: large_offset, large_negative, small

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, N, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = float("-inf")
    d = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, tl.exp(x - lse).to(y_ptr.dtype.element_ty), mask=cols < N)


def softmax(x):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _softmax[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK=min(4096, triton.next_power_of_2(N)))
    return y
