"""transpose: out = x.T as a new contiguous tensor, computed by a Triton kernel.

Run `kata grade` in this folder to check your work; `kata hint transpose` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, x_row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # TODO: each program copies one tile of x into out, transposed: out[j, i] = x[i, j].
    # - row i of x starts at x_ptr + i * x_row_stride (rows may be strided); row j of out
    #   (shape (N, M), contiguous) starts at out_ptr + j * M
    # - both reads and writes should be coalesced: consecutive threads, consecutive addresses
    # - M and N are not multiples of your blocks: mask both dimensions
    pass


def transpose(x: torch.Tensor) -> torch.Tensor:
    """Return x.T (x is 2-D, x.stride(1) == 1) as a new contiguous (N, M) tensor."""
    raise NotImplementedError("transpose: allocate the output, launch transpose_kernel, return it")
