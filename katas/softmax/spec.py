"""softmax: inputs, ground truth and baseline.

Case parameters: M rows, N columns; optional row_stride (> N: x is a column slice of a wider
tensor, so x.stride(0) == row_stride), scale, offset and ramp
(x[i, j] = offset + scale * randn + ramp * j / N: with a ramp the row max lies at its end).
"""

import torch


def make_inputs(case, dtype, device, generator):
    m, n = case["M"], case["N"]
    row_stride = case.get("row_stride", n)
    scale = float(case.get("scale", 1.0))
    offset = float(case.get("offset", 0.0))
    ramp = float(case.get("ramp", 0.0))
    full = torch.randn(m, row_stride, dtype=torch.float32, device=device, generator=generator)
    full = full * scale + offset
    if ramp:
        full += ramp / n * torch.arange(row_stride, dtype=torch.float32, device=device)
    full = full.to(dtype)
    # A column slice of a wider tensor: rows are strided, elements within a row are not.
    x = full[:, :n]
    return {"x": x}


def reference(x):
    # Float64 ground truth from the very values the kernel sees, with the max subtracted so it
    # stays finite for the large-magnitude cases.
    x64 = x.double()
    e = torch.exp(x64 - x64.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).contiguous()


# An honest kernel may normalise with exp(x - lse) (one online pass for lse, then one write
# pass) or in base 2: the exponent is then rounded at |x| ~ 1000 on the offset cases, a relative
# error of a few |x| * 2^-24 in every p (6e-5 at |x| = 1000, measured 5e-5: rtol is 1e-5).
# Allowed per element as p * 4 * 2^-24 * max(|x|, |lse|); below 3e-6 of p where |x| < 10.
UNIT = 2.0 ** -24
OFFSET_UNITS = 4.0


def allowance(x):
    """Each element's extra allowance for an exponent rounded at the row's magnitude."""
    x64 = x.double()
    lse = torch.logsumexp(x64, dim=-1, keepdim=True)
    offset = torch.maximum(x64.abs().amax(dim=-1, keepdim=True), lse.abs())
    return (torch.exp(x64 - lse) * offset * (OFFSET_UNITS * UNIT)).float()  # float32: half the memory


def baseline(x):
    return torch.softmax(x, dim=-1)
