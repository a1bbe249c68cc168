"""rms_norm: inputs, ground truth and baseline.

Case parameters (kata.yaml):
  M, N        rows and columns of x
  eps         the epsilon passed to rms_norm
  row_stride  optional: distance between rows of x in elements (>= N); x is then a column
              slice x = base[:, :N] of a wider (M, row_stride) tensor
  scale       optional: x = scale * randn (default 1.0)
  abs_range   optional [lo, hi]: instead, |x| uniform in [lo, hi) with random signs
  zero_rows   optional: this many leading rows of x are all zeros (rsqrt(0 + eps) must not blow up)
"""

import torch
import torch.nn.functional as F


def make_inputs(case, dtype, device, generator):
    M, N = case["M"], case["N"]
    row_stride = case.get("row_stride", N)
    if "abs_range" in case:
        lo, hi = case["abs_range"]
        mag = torch.rand(M, row_stride, dtype=torch.float32, device=device, generator=generator)
        sign = torch.randint(0, 2, (M, row_stride), device=device, generator=generator)
        base = (lo + (hi - lo) * mag) * (2.0 * sign.to(torch.float32) - 1.0)
    else:
        base = case.get("scale", 1.0) * torch.randn(
            M, row_stride, dtype=torch.float32, device=device, generator=generator
        )
    base[: case.get("zero_rows", 0)] = 0.0
    base = base.to(dtype)
    # A view with x.stride(0) == row_stride when the case asks for strided rows.
    x = base[:, :N]
    # Weights far from 1 (and of both signs), so a kernel that forgets them fails everywhere.
    weight = torch.randn(N, dtype=torch.float32, device=device, generator=generator).to(dtype)
    return {"x": x, "weight": weight, "eps": float(case["eps"])}


def reference(x, weight, eps):
    # Float64 ground truth from the (already rounded) inputs: the only error left in a correct
    # kernel is fp32 arithmetic plus one rounding to the output dtype.
    xd = x.double()
    mean_sq = (xd * xd).mean(dim=-1, keepdim=True)
    return xd * torch.rsqrt(mean_sq + eps) * weight.double()


def baseline(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
