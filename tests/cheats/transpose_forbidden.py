# cheat: forbidden_op
"""Cheat: lets PyTorch do the copy (x.t().contiguous()), then launches a kernel that
copies the already transposed result into the output.

The numbers are right and a Triton kernel does run, but the transpose itself is done by torch:
the kata forbids t() and contiguous() (and aten.t, aten.clone underneath).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(out_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    src = x.t().contiguous()  # BUG: forbidden
    out = torch.empty_like(src)
    n = src.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](out, src, n, BLOCK=1024)
    return out
