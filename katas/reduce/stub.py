"""reduce: row_sum, row_argmax and total_sum, each computed by Triton kernels you launch.

Run `kata grade` in this folder to check your work; `kata hint reduce` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, x_row_stride, BLOCK_N: tl.constexpr):
    # TODO: sum one row of x into out[row], accumulating in float32. Rows can be longer than
    # any block you want to hold at once, and rows are x_row_stride elements apart.
    pass


@triton.jit
def row_argmax_kernel(x_ptr, out_ptr, N, x_row_stride, BLOCK_N: tl.constexpr):
    # TODO: the column of the maximum of one row (the first one on ties), stored as int64.
    # What must the lanes past N hold when every value of the row is negative?
    pass


@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    # TODO: stage 1 of total_sum: this program's share of x, summed in float32. Then a second
    # kernel (or tl.atomic_add) combines the partial sums.
    pass


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum of each row of a 2-D x (M, N): a float32 tensor of shape (M,)."""
    raise NotImplementedError("row_sum: allocate a float32 (M,) output, launch your kernel")


def row_argmax(x: torch.Tensor) -> torch.Tensor:
    """Column of each row's maximum (first on ties): an int64 tensor of shape (M,)."""
    raise NotImplementedError("row_argmax: allocate an int64 (M,) output, launch your kernel")


def total_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum of all of a 1-D x (up to 2**30 elements): a float32 tensor of shape (1,)."""
    raise NotImplementedError("total_sum: launch a two-stage reduction (or atomics)")
