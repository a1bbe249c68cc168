"""Bug: the generator is given the lane number, tl.arange(0, BLOCK_SIZE), instead of the
element's flat index (the block's offset is not added): every block draws the same random
numbers, so the mask repeats every BLOCK_SIZE elements. Each block on its own looks fine."""
# expect-fail: new_seed
# expect-fail: many_blocks

import torch
import triton
import triton.language as tl


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    r = tl.rand(seed, tl.arange(0, BLOCK_SIZE))  # BUG: should be tl.rand(seed, offsets)
    y = tl.where(r >= p, x * scale, 0.0)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 4096),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK_SIZE=4096)
    return out
