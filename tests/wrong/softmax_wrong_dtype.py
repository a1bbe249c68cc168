"""Wrong softmax: returns a float32 tensor whatever the input dtype.

The values are right, but a float16 (or bfloat16) input must give an output of its own dtype.
"""
# expect-fail: odd_tail
# expect-fail: small
# expect-diagnosis: wrong_dtype

import torch
import triton
import triton.language as tl

MAX_BLOCK = 16384


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_looped_kernel(out_ptr, x_ptr, n_cols, x_row_stride, out_row_stride,
                          BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    m = -float("inf")
    l = 0.0
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_ptr + row * x_row_stride + offs, mask=offs < n_cols,
                    other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / l
        tl.store(out_ptr + row * out_row_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)  # BUG: not x.dtype
    block_n = triton.next_power_of_2(n_cols)
    if block_n <= MAX_BLOCK:
        softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                  BLOCK_N=block_n, num_warps=8)
    else:
        softmax_looped_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                         BLOCK_N=4096, num_warps=8)
    return out
