"""Bug: writes the sum into x and returns x, clobbering an input (and aliasing it)."""
# expect-fail: small
# expect-diagnosis: output_aliases_input
# expect-diagnosis: input_mutated

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(x_ptr + offsets, x + y, mask=mask)


def vector_add(x, y):
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK_SIZE=1024)
    return x
