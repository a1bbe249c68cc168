"""Wrong softmax: the online (long-row) loop forgets to rescale the running sum.

When a later block raises the running max, the sum accumulated so far is still relative to the
old max: it must be multiplied by exp(m_old - m_new). Without that, rows longer than one block
get a wrong denominator (unless the row's max happens to lie in its first block).
"""
# expect-fail: long_row_rising
# expect-fail: long_row
# expect-fail: strided_long
# expect-fail: pow2_15_plus_1
# expect-diagnosis: row_scale

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
        l = l + tl.sum(tl.exp(x - m_new), axis=0)  # BUG: l is not rescaled to the new max
        m = m_new
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / l
        tl.store(out_ptr + row * out_row_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block_n = triton.next_power_of_2(n_cols)
    if block_n <= MAX_BLOCK:
        softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                  BLOCK_N=block_n, num_warps=8)
    else:
        softmax_looped_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                         BLOCK_N=4096, num_warps=8)
    return out
