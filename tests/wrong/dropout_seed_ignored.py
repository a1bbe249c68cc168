"""Bug: the seed argument never reaches the generator: a fixed debugging seed (SEED) is still
hard-wired in the kernel, so the mask depends on the flat index only and is the same for every
seed. Each single call looks right; a second call with another seed keeps the same elements."""
# expect-fail: new_seed
# expect-fail: p01_new_seed

import torch
import triton
import triton.language as tl

SEED = tl.constexpr(1234)  # used while debugging


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    r = tl.rand(SEED, offsets)  # BUG: should be tl.rand(seed, offsets)
    y = tl.where(r >= p, x * scale, 0.0)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 4096),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_SIZE=4096)
    return out
