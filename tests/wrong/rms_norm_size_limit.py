"""Wrong rms_norm: one block per row, and a hard limit of 65536 columns.

The shape of a widely used library kernel: the block is next_power_of_2(N), and a helper
refuses (raises) when that exceeds 65536 rather than loop over the row. Right for every public
case; the hidden long rows raise. Real code, honestly written: a limit, not a cheat.
"""
# expect-fail: long_row
# expect-diagnosis: hidden_cases_fail

import torch
import triton
import triton.language as tl

MAX_FUSED_SIZE = 65536


def calculate_settings(n: int) -> tuple[int, int]:
    block = triton.next_power_of_2(n)
    if block > MAX_FUSED_SIZE:  # BUG: a limit where a loop over the row was needed
        raise RuntimeError(f"Cannot launch Triton kernel since n = {n} exceeds the recommended "
                           f"Triton blocksize = {MAX_FUSED_SIZE}.")
    num_warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, num_warps


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, x_row_stride, y_row_stride, N, eps,
                    BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * y_row_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    block, num_warps = calculate_settings(N)
    rms_norm_kernel[(M,)](x, weight, y, x.stride(0), y.stride(0), N, eps,
                          BLOCK_SIZE=block, num_warps=num_warps)
    return y
