"""prefix_sum: inputs, ground truth, tolerance scale and baseline of cumsum.

Case parameters (kata.yaml):
  M, N        rows and columns of x
  row_stride  optional: distance between rows in elements (> N): x is a column slice
              base[:, :N] of a wider (M, row_stride) tensor
and how the values are drawn:
  int32 inputs   integers drawn uniformly from `ints: [lo, hi]` (inclusive; default [-100, 100])
  float32 inputs standard normal by default; `offset` and `scale` (x = offset + scale * randn),
                 `uniform: [lo, hi]` (uniform in [lo, hi)) or `ints: [lo, hi]` (small integers
                 held exactly in float32, whose sums are exact in any order)
"""

import torch

DEFAULT_INTS = (-100, 100)


def _draw(case, shape, dtype, device, generator):
    if dtype == torch.int32 or "ints" in case:
        lo, hi = case.get("ints", DEFAULT_INTS)
        # int64 bounds: hi + 1 may be 2**31.
        v = torch.randint(int(lo), int(hi) + 1, shape, dtype=torch.int64, device=device,
                          generator=generator)
        return v.to(dtype)
    if "uniform" in case:
        lo, hi = case["uniform"]
        v = lo + (hi - lo) * torch.rand(shape, dtype=torch.float32, device=device, generator=generator)
    else:
        v = torch.randn(shape, dtype=torch.float32, device=device, generator=generator)
        v = case.get("offset", 0.0) + case.get("scale", 1.0) * v
    return v.to(dtype)


def make_inputs(case, dtype, device, generator):
    M, N = case["M"], case["N"]
    row_stride = case.get("row_stride", N)
    # The columns past N (strided cases) hold values of the same kind: a kernel that reads them
    # into a row's sums is wrong.
    base = _draw(case, (M, row_stride), dtype, device, generator)
    return {"x": base[:, :N]}


def reference(x):
    """The inclusive prefix sum along the rows, in float64 (exact for int32 inputs: |sums| stay
    far below 2**53). int32 outputs wrap around modulo 2**32, as int32 additions do on the GPU:
    the truth is the exact sum reduced into [-2**31, 2**31)."""
    if x.dtype == torch.int32:
        s = x.to(torch.int64).cumsum(dim=-1)
        return ((s + 2**31) % 2**32 - 2**31).double()
    return x.double().cumsum(dim=-1)


def summed_magnitude(x):
    """The running sum of |x|: the scale of any summation order's float32 rounding error for the
    prefix up to each element (a running sum that passes near 0 has a tiny |expected| but the
    error of all the terms it added)."""
    return x.double().abs().cumsum(dim=-1)


def baseline(x):
    # torch.cumsum promotes int32 to int64 (it returns an int64 tensor): the baseline's business,
    # not the contract's. Timed as PyTorch runs it.
    return torch.cumsum(x, dim=-1)
