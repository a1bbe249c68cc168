"""Bug: only the kept elements are stored (the store is masked with `keep`): the dropped ones are
never written, so they hold whatever the fresh output held (garbage from torch.empty_like; the
grader fills it with NaN) instead of 0."""
# expect-fail: small
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
    keep = tl.rand(seed, offsets) >= p
    # BUG: dropped elements must be written as 0; this leaves them untouched.
    tl.store(out_ptr + offsets, (x * scale).to(out_ptr.dtype.element_ty), mask=mask & keep)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 4096),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_SIZE=4096)
    return out
