"""Wrong softmax: exponentiates x directly, without subtracting the row max.

Mathematically the same function, but exp(x) overflows float32 once x exceeds about 88, so rows
with large values give inf / inf = NaN. Everything else (masking, strides, long rows) is right.
"""
# expect-fail: large_magnitude
# expect-fail: large_offset
# expect-diagnosis: overflow

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
    num = tl.exp(x)  # BUG: no max subtraction
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_looped_kernel(out_ptr, x_ptr, n_cols, x_row_stride, out_row_stride,
                          BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    l = 0.0
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_ptr + row * x_row_stride + offs, mask=offs < n_cols,
                    other=-float("inf")).to(tl.float32)
        l += tl.sum(tl.exp(x), axis=0)  # BUG: no max subtraction
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x) / l
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
