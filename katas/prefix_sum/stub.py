"""prefix_sum: cumsum(x), the inclusive prefix sum along the rows, computed by Triton kernels.

Run `kata grade` in this folder to check your work; `kata hint prefix_sum` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def scan_rows_kernel(x_ptr, out_ptr, M, N, x_row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # TODO: scan BLOCK_M whole rows (BLOCK_N >= N) with tl.cumsum along axis 1.
    # Row i of x starts at x_ptr + i * x_row_stride; row i of out at out_ptr + i * N.
    pass


@triton.jit
def scan_long_rows_kernel(x_ptr, out_ptr, N, x_row_stride, TILE: tl.constexpr):
    # TODO: rows far longer than one block (N up to 2**24). Each tile of a row needs the sum of
    # every earlier tile of the row (its carry): reduce-then-scan (more kernels: tile sums, a
    # scan of them, then each tile plus its carry) or a single pass with decoupled look-back.
    pass


def cumsum(x: torch.Tensor) -> torch.Tensor:
    """Inclusive prefix sum of each row of a 2-D x (M, N), float32 or int32: a new contiguous
    (M, N) tensor of x's dtype (int32 stays int32 and wraps around on overflow)."""
    raise NotImplementedError("cumsum: allocate the output, launch your scan kernels, return it")
