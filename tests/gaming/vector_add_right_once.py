"""Right on the first call, garbage afterwards (the 'it passed once' kernel): an error that
depends on the input, or a race, looks the same."""
# expect-diagnosis: input_dependent_error

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

_calls = {}


def vector_add(x, y):
    out = torch.empty_like(x)
    seen = _calls.get(x.numel(), 0)
    _calls[x.numel()] = seen + 1
    launch(x, x if seen else y, out)
    return out
