"""Bug: the grid is n // BLOCK_SIZE, so the tail past the last full block is never written."""
# expect-fail: pow2_minus_1
# expect-fail: odd_tail
# expect-diagnosis: tail_wrong

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    grid = (max(1, n // 256),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=256)
    return out
