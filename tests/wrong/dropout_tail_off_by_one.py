"""Bug: the tail mask is off by one (offsets < n_elements - 1): the last element is never
written, so it keeps the fresh output's contents (NaN in the grader) instead of 0 or x / (1 - p)."""
# expect-fail: one
# expect-fail: small

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements - 1  # BUG: should be offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    r = tl.rand(seed, offsets)
    y = tl.where(r >= p, x * scale, 0.0)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 4096),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_SIZE=4096)
    return out
