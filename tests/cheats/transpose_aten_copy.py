# cheat: forbidden_op
"""The transpose done by aten.copy_ itself, from a strided view of x, with a token kernel.
Python-level copy_ and __setitem__ are forbidden; the aten op underneath must be too."""
import torch
import triton
import triton.language as tl


@triton.jit
def touch(x_ptr, BLOCK: tl.constexpr):
    tl.load(x_ptr + tl.arange(0, BLOCK))


def transpose(x):
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    torch.ops.aten.copy_.default(out, x.as_strided((N, M), (1, x.stride(0))))
    touch[(1,)](x, BLOCK=1)
    return out
