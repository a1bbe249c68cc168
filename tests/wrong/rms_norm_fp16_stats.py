"""Wrong rms_norm: computes the statistics in the input dtype instead of float32.

x * x and the sum of squares stay in fp16 (only the final scaling is done in fp32). For
|x| of a few hundred, x * x overflows fp16 (max 65504): the sum is inf, rstd is 0 and the
row comes out as zeros. Harmless for float32 inputs, so only the float16 run catches it.
"""
# expect-fail: large_magnitude
# expect-diagnosis: overflow

import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, x_row_stride, y_row_stride, N, eps,
                    BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_SIZE], dtype=x_ptr.dtype.element_ty)  # BUG: accumulates in fp16
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0.0)
        acc += x * x  # BUG: squares in fp16
    mean_sq = tl.sum(acc, axis=0).to(tl.float32) / N
    rstd = tl.rsqrt(mean_sq + eps)
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
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
