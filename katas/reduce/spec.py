"""reduce: inputs, ground truth and baselines of row_sum, row_argmax and total_sum.

Case parameters (kata.yaml), for the row tasks:
  M, N        rows and columns of x
  row_stride  optional: distance between rows in elements (> N): x is a column slice
              base[:, :N] of a wider (M, row_stride) tensor
and for total_sum:
  n           the length of x
and for both, how the values are drawn (default: standard normal):
  offset, scale  x = offset + scale * randn
  uniform        [lo, hi]: x uniform in [lo, hi) instead
  ints           [lo, hi]: x integers drawn uniformly from lo..hi inclusive, so a row has many
                 exact ties (every dtype represents small integers exactly)
  extreme        true: x uniform in [-max, -max / 2) where max is the dtype's largest finite
                 value: every value is hugely negative
  max_last       true: the largest value of each row is placed in its last column (a tail lane)
"""

import torch

# The float64 ground truth is built this many elements at a time, so a 2**30-element input
# needs no 8 GiB float64 copy.
CHUNK_ELEMENTS = 1 << 26


def _draw(case, shape, dtype, device, generator):
    """Values of the case's distribution, drawn in float32 and rounded once to dtype."""
    if "ints" in case:
        lo, hi = case["ints"]
        v = torch.randint(lo, hi + 1, shape, device=device, generator=generator).to(torch.float32)
    elif "uniform" in case:
        lo, hi = case["uniform"]
        v = lo + (hi - lo) * torch.rand(shape, dtype=torch.float32, device=device, generator=generator)
    elif case.get("extreme"):
        big = torch.finfo(dtype).max
        v = -big * (0.5 + 0.5 * torch.rand(shape, dtype=torch.float32, device=device,
                                           generator=generator))
    else:
        v = torch.randn(shape, dtype=torch.float32, device=device, generator=generator)
        v = case.get("offset", 0.0) + case.get("scale", 1.0) * v
    if case.get("max_last") and len(shape) == 2:
        v[:, -1] = v.amax(dim=1) + 1.0
    return v.to(dtype)


def _values(case, shape, dtype, device, generator, columns=None):
    """The input, drawn a slab of rows (or elements) at a time: a 2**31-element float16 case
    then needs no 8 GiB float32 draft beside it. columns: where max_last puts the maximum."""
    out = torch.empty(shape, dtype=dtype, device=device)
    rows = out.view(shape[0], -1)
    step = max(1, CHUNK_ELEMENTS // max(1, rows.shape[1]))
    for start in range(0, rows.shape[0], step):
        part = rows[start:start + step]
        cols = columns if columns is not None else part.shape[1]
        part_shape = (part.shape[0], cols) if len(shape) == 2 else (part.shape[0],)
        drawn = _draw(case, part_shape, dtype, device, generator)
        if len(shape) == 2:
            part[:, :cols] = drawn
            if cols < part.shape[1]:  # the padding of strided rows: values the kernel must not read
                part[:, cols:] = _draw(dict(case, max_last=False), (part.shape[0], part.shape[1] - cols),
                                       dtype, device, generator)
        else:
            part.view(-1).copy_(drawn)
    return out


def make_row_inputs(case, dtype, device, generator):
    M, N = case["M"], case["N"]
    row_stride = case.get("row_stride", N)
    base = _values(case, (M, row_stride), dtype, device, generator, columns=N)
    # A view with x.stride(0) == row_stride when the case asks for strided rows.
    return {"x": base[:, :N]}


def make_vector_inputs(case, dtype, device, generator):
    return {"x": _values(case, (case["n"],), dtype, device, generator)}


def _row_chunks(x):
    rows = max(1, CHUNK_ELEMENTS // max(x.shape[1], 1))
    return [x[i:i + rows] for i in range(0, x.shape[0], rows)]


def reference_row_sum(x):
    # Float64 sums of the (already rounded) inputs: what is left in a correct kernel is the
    # float32 rounding of its own summation order.
    return torch.cat([c.double().sum(dim=1) for c in _row_chunks(x)])


def reference_row_argmax(x):
    # torch.argmax returns the first index of the maximum on ties; comparisons are exact in
    # any dtype, and float64 keeps every value of the input.
    return torch.cat([c.double().argmax(dim=1) for c in _row_chunks(x)])


def reference_total_sum(x):
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for start in range(0, x.numel(), CHUNK_ELEMENTS):
        total += x[start:start + CHUNK_ELEMENTS].double().sum()
    return total.reshape(1)


def baseline_row_sum(x):
    return x.float().sum(-1)


def baseline_row_argmax(x):
    return x.argmax(-1)


def baseline_total_sum(x):
    # x.float().sum() is a 0-d tensor; the task returns shape (1,).
    return x.float().sum().reshape(1)
