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


def baseline(x):
    return torch.softmax(x, dim=-1)
