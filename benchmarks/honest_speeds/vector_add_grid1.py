"""vector_add, correct and about 0.001x of PyTorch on an H100/H200: one program walks the whole
vector in blocks of 512, on one SM. Near a second a call on the largest bench case: the slowest
kernel issue 31 bounds (a grade within 60 s for a kernel of at most 1 s a call)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_grid1(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_grid1[(1,)](x, y, out, x.numel(), BLOCK=512)
    return out
