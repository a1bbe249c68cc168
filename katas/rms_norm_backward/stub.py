"""rms_norm_backward: dx and dweight of RMSNorm, computed by Triton kernels.

    g = dy * weight
    dx = rstd * g - x * rstd**3 * mean(g * x, last dim)
    dweight = sum over rows of dy * x * rstd

Run `kata grade` in this folder to check your work; `kata hint rms_norm_backward` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_bwd_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr,
    M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_program,
    BLOCK_N: tl.constexpr,
):
    # TODO: for each of this program's rows: dx in float32 (mind the mean over N columns),
    # stored in dx's dtype; and this program's float32 share of dweight, written to its own
    # row of partial_ptr (no other program may write there).
    pass


@triton.jit
def column_sum_kernel(partial_ptr, dw_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    # TODO: dweight[j] = sum over the P partial rows.
    pass


def rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                      rstd: torch.Tensor):
    """(dx, dweight): dx (M, N) in x's dtype, dweight (N,) in float32.

    dy and x have stride(1) == 1 but possibly strided rows; rstd is the forward's float32 (M,).
    """
    raise NotImplementedError(
        "rms_norm_backward: launch the row kernel (dx and partial dweights), then the column sum")
