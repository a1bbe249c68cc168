# cheat: forbidden_op
"""Cheat: the GEMM done by PyTorch's `@` (cuBLAS), with a token Triton kernel copying it out.

`@` is Tensor.__matmul__ in Python and aten.mm underneath; the kata forbids both (and every
other matmul path), so the grader names the forbidden op rather than the general torch_compute.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def matmul(a, b):
    full = (a @ b).contiguous()  # BUG: forbidden
    c = torch.empty_like(full)
    copy_kernel[(triton.cdiv(c.numel(), 1024),)](full, c, c.numel(), BLOCK=1024)
    return c


def matmul_bias_act(a, b, bias, activation):
    return matmul(a, b)
