"""softmax: out[i, :] = softmax(x[i, :]) for a 2-D tensor x, computed by a Triton kernel.

Run `kata grade` in this folder to check your work; `kata hint softmax` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    out_ptr, x_ptr, n_rows, n_cols, x_row_stride, out_row_stride, BLOCK_N: tl.constexpr,
):
    # TODO: each program computes the softmax of one row (or more).
    # - row i of x starts at x_ptr + i * x_row_stride; of out, at out_ptr + i * out_row_stride
    # - subtract the row's max before exp; compute in float32
    # - lanes past n_cols must change neither the max nor the sum
    # - rows can be longer than any block you can afford: loop over them in blocks
    pass


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Return the softmax over the last dim of the 2-D tensor x (rows may be strided).

    The result is a new contiguous tensor with x's shape and dtype.
    """
    raise NotImplementedError("softmax: allocate the output, launch softmax_kernel, return it")
