# cheat: torch_compute
"""The GEMM done by PyTorch as a.float() @ b.float(); a token Triton kernel copies the result out.
(tests/fixtures/katas/toy_gemm forbids nothing: the general rule catches it.)"""
import torch
import triton
import triton.language as tl


@triton.jit
def cast_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(out_ptr.dtype.element_ty), mask=mask)


def matmul(a, b):
    full = (a.float() @ b.float()).contiguous()
    c = torch.empty(full.shape, dtype=a.dtype, device=a.device)
    cast_kernel[(triton.cdiv(c.numel(), 1024),)](full, c, c.numel(), BLOCK=1024)
    return c
