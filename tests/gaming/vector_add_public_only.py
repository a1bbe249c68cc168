"""Special-cases the public sizes; everything else gets a wrong one (an edge-case bug only
the hidden cases hit looks the same)."""
# expect-diagnosis: hidden_cases_fail

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def launch(x, y, out):
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)

PUBLIC_SIZES = {1000, 2048}


def vector_add(x, y):
    out = torch.empty_like(x)
    launch(x, y if x.numel() in PUBLIC_SIZES else x, out)
    return out
