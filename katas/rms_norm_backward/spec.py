"""rms_norm_backward: inputs, ground truth and baseline.

Case parameters (kata.yaml):
  M, N           rows and columns of x and dy
  eps            the epsilon the forward used (it only shapes rstd: the backward never sees it)
  x_row_stride   optional: distance between rows of x in elements (>= N); x is then a column
                 slice of a wider tensor
  dy_row_stride  optional: the same for dy, independently of x
  scale          optional: x = scale * randn (default 1.0)
  abs_range      optional [lo, hi]: instead, |x| uniform in [lo, hi) with random signs
  zero_rows      optional: this many leading rows of x are all zeros (rstd = 1/sqrt(eps))
"""

import torch


def make_inputs(case, dtype, device, generator):
    M, N = case["M"], case["N"]
    x_stride = case.get("x_row_stride", N)
    dy_stride = case.get("dy_row_stride", N)
    if "abs_range" in case:
        lo, hi = case["abs_range"]
        mag = torch.rand(M, x_stride, dtype=torch.float32, device=device, generator=generator)
        sign = torch.randint(0, 2, (M, x_stride), device=device, generator=generator)
        x_base = (lo + (hi - lo) * mag) * (2.0 * sign.to(torch.float32) - 1.0)
    else:
        x_base = case.get("scale", 1.0) * torch.randn(
            M, x_stride, dtype=torch.float32, device=device, generator=generator)
    x_base[: case.get("zero_rows", 0)] = 0.0
    x = x_base.to(dtype)[:, :N]
    dy = torch.randn(M, dy_stride, dtype=torch.float32, device=device,
                     generator=generator).to(dtype)[:, :N]
    # Weights far from 1 and of both signs, so a kernel that forgets them fails everywhere.
    weight = torch.randn(N, dtype=torch.float32, device=device, generator=generator).to(dtype)
    # What the forward saved: 1 / sqrt(mean(x^2) + eps) of the rounded x, in float32.
    xd = x.double()
    rstd = torch.rsqrt((xd * xd).mean(dim=1) + case["eps"]).to(torch.float32)
    return {"dy": dy, "x": x, "weight": weight, "rstd": rstd}


def reference(dy, x, weight, rstd):
    # Float64 from the very inputs the kernel sees, rstd included (the forward's float32 value).
    # With g = dy * weight and r = rstd:
    #   dx = r * g - x * r^3 * mean(g * x)    (the second term is d rstd / dx at work)
    #   dweight = sum over rows of dy * x * r
    xd, dyd, wd = x.double(), dy.double(), weight.double()
    r = rstd.double()[:, None]
    g = dyd * wd
    c = (g * xd).mean(dim=1, keepdim=True)
    dx = r * g - xd * r ** 3 * c
    dweight = (dyd * xd * r).sum(dim=0)
    return dx, dweight


def eager_backward(dy, x, weight, rstd):
    """The same backward in eager torch ops, one kernel per op."""
    xf, dyf = x.float(), dy.float()
    r = rstd[:, None]
    g = dyf * weight.float()
    c = (g * xf).mean(dim=1, keepdim=True)
    dx = (r * (g - xf * (r * r) * c)).to(x.dtype)
    return dx, (dyf * xf * r).sum(dim=0)


def baseline(dy, x, weight, rstd):
    # What autograd runs for F.rms_norm's backward: on CUDA, F.rms_norm's forward is the fused
    # aten._fused_rms_norm, whose derivative (derivatives.yaml) is aten._fused_rms_norm_backward
    # called with the saved rstd. Calling that op directly times exactly autograd's backward
    # kernels from the same inputs, without a forward (which a baseline doing forward and
    # backward would add) and without autograd's bookkeeping. Where the op is missing (another
    # device or torch), the same formula in eager torch ops.
    if x.is_cuda and hasattr(torch.ops.aten, "_fused_rms_norm_backward"):
        try:
            return torch.ops.aten._fused_rms_norm_backward(
                dy, x, [x.shape[1]], rstd.unsqueeze(1), weight, [True, True])
        except (RuntimeError, NotImplementedError):
            pass
    return eager_backward(dy, x, weight, rstd)
