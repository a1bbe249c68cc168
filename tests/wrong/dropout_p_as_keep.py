"""Bug: p is used as the keep probability (keep when r < p), so a fraction p of the elements
survives instead of 1 - p, and p = 0 drops everything. At p = 0.5 the two agree."""
# expect-fail: small_p01
# expect-fail: identity
# expect-fail: p09

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    r = tl.rand(seed, offsets)
    y = tl.where(r < p, x * scale, 0.0)  # BUG: keeps with probability p; should be r >= p
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 4096),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_SIZE=4096)
    return out
