"""Bug: the kept elements are written as x, not x / (1 - p): the 1 / (1 - p) scale is forgotten,
so the expected value of the output is (1 - p) * x instead of x."""
# expect-fail: small
# expect-fail: p09

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    r = tl.rand(seed, offsets)
    y = tl.where(r >= p, x, 0.0)  # BUG: should be x / (1 - p)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 4096),)](x, out, n, p, seed, BLOCK_SIZE=4096)
    return out
