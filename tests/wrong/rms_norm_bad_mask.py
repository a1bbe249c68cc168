"""Wrong rms_norm: off-by-one mask, cols < N - 1, that drops the last column of every row.

The last element is left out of the sum of squares (while the mean still divides by N) and
is never stored. With N = 2 the statistics of every row are badly off.
"""
# expect-fail: two_cols
# expect-diagnosis: row_end_wrong

import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, x_row_stride, y_row_stride, N, eps,
                    BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < N - 1  # BUG: the last valid column is N - 1, so this should be cols < N
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < N - 1  # BUG (same)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_row_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty),
                 mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block = min(triton.next_power_of_2(N), 8192)
    rms_norm_kernel[(M,)](x, weight, y, x.stride(0), y.stride(0), N, eps,
                          BLOCK_SIZE=block, num_warps=8)
    return y
