"""Wrong rms_norm: adds eps outside the square root, x / (sqrt(mean(x^2)) + eps).

For rows of ordinary magnitude the difference is below 1e-5 relative, but when mean(x^2) is
comparable to eps (tiny rows) the result is off by a large factor.
"""
# expect-fail: tiny_rows
# expect-diagnosis: row_scale
# expect-diagnosis: input_dependent_error

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
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    rms = tl.sqrt(tl.sum(acc, axis=0) / N) + eps  # BUG: eps belongs inside the sqrt
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_row_stride + cols, (x / rms * w).to(y_ptr.dtype.element_ty),
                 mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block = min(triton.next_power_of_2(N), 8192)
    rms_norm_kernel[(M,)](x, weight, y, x.stride(0), y.stride(0), N, eps,
                          BLOCK_SIZE=block, num_warps=8)
    return y
