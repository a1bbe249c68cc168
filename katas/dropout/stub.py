"""dropout: out = 0 or x / (1 - p) per element, the mask drawn from (seed, flat index) by a
Triton kernel.

Run `kata grade` in this folder to check your work; `kata hint dropout` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    # TODO: each program handles one block of BLOCK_SIZE elements of the flattened x.
    # - draw one uniform number per element from (seed, its flat index): tl.rand(seed, offsets)
    # - keep it when r >= p (p is the drop probability), scaled by `scale` = 1 / (1 - p)
    # - dropped elements are written as 0; mind the tail
    pass


def dropout(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """Return dropout(x) for a contiguous (M, N) tensor: each element 0 or x / (1 - p).

    Whether an element is kept depends only on (seed, its flat index).
    """
    raise NotImplementedError("dropout: allocate the output, launch dropout_kernel, return it")
