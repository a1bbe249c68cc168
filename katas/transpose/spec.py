"""transpose: inputs, ground truth and baseline.

Case parameters (kata.yaml):
  M, N        rows and columns of x; the result has shape (N, M)
  row_stride  optional: distance between rows of x in elements (>= N); x is then a column
              slice x = base[:, :N] of a wider (M, row_stride) tensor
  special     optional: the fraction of elements replaced by the dtype's edge values (inf, -inf,
              a NaN, -0.0, the smallest subnormal, the largest finite value; for int32 its
              minimum and maximum), to show that a transpose moves bits and never converts them

The comparison is exact (bit for bit), so the ground truth is simply the transposed input.
"""

import torch

# Edge values as bit patterns (an integer of the dtype's width, viewed as the dtype). The NaN is
# a negative one: its bits differ from the positive NaN the grader fills new outputs with, so an
# element the kernel never writes cannot pass by chance.
_SPECIAL_BITS = {
    torch.float32: (torch.int32, [0x7F800000, -0x00800000, -0x00400000, -0x80000000, 0x00000001, 0x7F7FFFFF]),
    torch.float16: (torch.int16, [0x7C00, -0x0400, -0x0200, -0x8000, 0x0001, 0x7BFF]),
    torch.bfloat16: (torch.int16, [0x7F80, -0x0080, -0x0040, -0x8000, 0x0001, 0x7F7F]),
}


def _specials(dtype, device):
    if dtype in _SPECIAL_BITS:
        int_dtype, bits = _SPECIAL_BITS[dtype]
        return torch.tensor(bits, dtype=int_dtype, device=device).view(dtype)
    info = torch.iinfo(dtype)
    return torch.tensor([info.min, info.max, -1, 0, 1], dtype=dtype, device=device)


def make_inputs(case, dtype, device, generator):
    m, n = case["M"], case["N"]
    row_stride = case.get("row_stride", n)
    shape = (m, row_stride)
    if dtype.is_floating_point:
        base = torch.randn(shape, dtype=torch.float32, device=device, generator=generator).to(dtype)
    else:
        # Integers over the whole range: a kernel that routes them through float32 loses the
        # low bits of anything beyond 2**24.
        info = torch.iinfo(dtype)
        base = torch.randint(info.min, info.max + 1, shape, dtype=torch.int64, device=device,
                             generator=generator).to(dtype)
    fraction = float(case.get("special", 0.0))
    if fraction:
        values = _specials(dtype, device)
        pick = torch.randint(0, values.numel(), shape, device=device, generator=generator)
        where = torch.rand(shape, device=device, generator=generator) < fraction
        base = torch.where(where, values[pick], base)
    # A view with x.stride(0) == row_stride when the case asks for strided rows.
    return {"x": base[:, :n]}


def reference(x):
    # A transpose computes nothing: the ground truth is x's own values in the other layout.
    return x.t().contiguous()


def baseline(x):
    return x.t().contiguous()
