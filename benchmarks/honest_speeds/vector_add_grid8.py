"""vector_add, correct and about 0.01x of PyTorch on an H100/H200: a fixed grid of 8 programs walks
the whole vector, so 8 of the GPU's SMs do all the work (issue 31: graded in 181 s, then a time
limit, before the timing was sized from the kernel's own time)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_grid8(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, n, 8 * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_grid8[(8,)](x, y, out, x.numel(), BLOCK=1024)
    return out
