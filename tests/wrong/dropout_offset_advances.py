"""Bug: like PyTorch's generator, the launcher advances a global Philox offset after every call
so that "each call draws fresh numbers": but then two calls with the same seed keep different
elements. The mask must depend only on (seed, flat index)."""
# expect-fail: small
# expect-fail: many_blocks

import torch
import triton
import triton.language as tl

_calls = [0]  # numbers drawn so far, as torch's CUDA generator keeps them


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, scale, seed, philox_offset,
                   BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    r = tl.rand(seed, philox_offset + offsets)  # BUG: the counter depends on earlier calls
    y = tl.where(r >= p, x * scale, 0.0)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 4096),)](x, out, n, p, 1.0 / (1.0 - p), seed, _calls[0],
                                            BLOCK_SIZE=4096)
    _calls[0] += n
    return out
