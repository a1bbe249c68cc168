"""Wrong rms_norm: one fixed-size block per row, with no loop over longer rows.

BLOCK_SIZE is capped at 16384 to keep the row in registers, but nothing handles the columns
past it: the statistics cover only the first 16384 columns and the rest of y is never
written. Right for every row up to 16384 columns, wrong for long ones.
"""
# expect-fail: long_row
# expect-diagnosis: row_end_wrong

import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, x_row_stride, y_row_stride, N, eps,
                    BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * y_row_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty),
             mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block = min(triton.next_power_of_2(N), 16384)  # BUG: rows longer than this are truncated
    rms_norm_kernel[(M,)](x, weight, y, x.stride(0), y.stride(0), N, eps,
                          BLOCK_SIZE=block, num_warps=16)
    return y
