"""layer_norm: LayerNorm forward and backward, computed by Triton kernels.

Forward:  y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (biased variance);
          returns (y, mean, rstd), the statistics in float32.
Backward: xhat = (x - mean) * rstd, g = dy * weight;
          dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), dweight = sum_rows(dy * xhat),
          dbias = sum_rows(dy); returns (dx, dweight, dbias).

Run `kata grade` in this folder to check your work; `kata hint layer_norm` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr,
                          N, x_row_stride, y_row_stride, eps, BLOCK_N: tl.constexpr):
    # TODO: one row: mean, variance around the mean (mind the lanes past N), rstd, y;
    # store y in y's dtype, mean and rstd in float32. Rows can be longer than one block.
    pass


@triton.jit
def layer_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr,
                          dw_partial_ptr, db_partial_ptr,
                          M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_program,
                          BLOCK_N: tl.constexpr):
    # TODO: for each of this program's rows, dx; and this program's float32 shares of dweight
    # and dbias, written to its own rows of the partial buffers.
    pass


@triton.jit
def column_sum_kernel(partial_ptr, out_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    # TODO: out[j] = sum over the P partial rows.
    pass


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    """(y, mean, rstd) for a 2-D x (M, N): y in x's dtype, mean and rstd float32 (M,)."""
    raise NotImplementedError("layer_norm: allocate y, mean, rstd and launch the forward kernel")


def layer_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                        mean: torch.Tensor, rstd: torch.Tensor):
    """(dx, dweight, dbias): dx in x's dtype, dweight and dbias float32 (N,)."""
    raise NotImplementedError(
        "layer_norm_backward: launch the row kernel (dx and partial sums), then the column sums")
