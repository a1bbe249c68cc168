"""layer_norm: inputs, ground truth and baselines of the forward and the backward.

Case parameters (kata.yaml), for both tasks:
  M, N          rows and columns of x
  eps           the epsilon of the forward (inside the square root)
  row_stride    optional: distance between rows of x in elements (>= N); x is then a column
                slice of a wider tensor
  scale, offset optional: x = offset + scale * randn (defaults 1.0 and 0.0)
  abs_range     optional [lo, hi]: instead, |x| uniform in [lo, hi) with random signs
  zero_rows     optional: this many leading rows of x are all zeros (variance 0)
and for the backward:
  dy_row_stride optional: the same as row_stride, for dy, independently of x
"""

import torch
import torch.nn.functional as F


def _x(case, dtype, device, generator):
    M, N = case["M"], case["N"]
    row_stride = case.get("row_stride", N)
    if "abs_range" in case:
        lo, hi = case["abs_range"]
        mag = torch.rand(M, row_stride, dtype=torch.float32, device=device, generator=generator)
        sign = torch.randint(0, 2, (M, row_stride), device=device, generator=generator)
        base = (lo + (hi - lo) * mag) * (2.0 * sign.to(torch.float32) - 1.0)
    else:
        base = case.get("offset", 0.0) + case.get("scale", 1.0) * torch.randn(
            M, row_stride, dtype=torch.float32, device=device, generator=generator)
    base[: case.get("zero_rows", 0)] = 0.0
    # A view with x.stride(0) == row_stride when the case asks for strided rows.
    return base.to(dtype)[:, :N]


def _affine(N, dtype, device, generator):
    # Weights far from 1 (and of both signs) and a bias far from 0, so a kernel that forgets
    # either fails everywhere.
    weight = torch.randn(N, dtype=torch.float32, device=device, generator=generator).to(dtype)
    bias = torch.randn(N, dtype=torch.float32, device=device, generator=generator).to(dtype)
    return weight, bias


def _stats(x, eps):
    # Float64 statistics of the (already rounded) x: biased variance (divide by N), eps inside
    # the square root.
    xd = x.double()
    mean = xd.mean(dim=1)
    var = ((xd - mean[:, None]) ** 2).mean(dim=1)
    return mean, torch.rsqrt(var + eps)


# --- forward ---------------------------------------------------------------------------

def make_forward_inputs(case, dtype, device, generator):
    x = _x(case, dtype, device, generator)
    weight, bias = _affine(case["N"], dtype, device, generator)
    return {"x": x, "weight": weight, "bias": bias, "eps": float(case["eps"])}


def reference_forward(x, weight, bias, eps):
    mean, rstd = _stats(x, eps)
    y = (x.double() - mean[:, None]) * rstd[:, None] * weight.double() + bias.double()
    return y, mean, rstd


def baseline_forward(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[1],), weight, bias, eps)


# --- backward --------------------------------------------------------------------------

def make_backward_inputs(case, dtype, device, generator):
    M, N = case["M"], case["N"]
    x = _x(case, dtype, device, generator)
    weight, _ = _affine(N, dtype, device, generator)
    dy_stride = case.get("dy_row_stride", N)
    dy = torch.randn(M, dy_stride, dtype=torch.float32, device=device,
                     generator=generator).to(dtype)[:, :N]
    # What the forward saved: float32 mean and rstd.
    mean, rstd = _stats(x, case["eps"])
    return {"dy": dy, "x": x, "weight": weight, "mean": mean.to(torch.float32),
            "rstd": rstd.to(torch.float32)}


def reference_backward(dy, x, weight, mean, rstd):
    # Float64 from the very inputs the kernel sees (the forward's float32 mean and rstd). With
    # xhat = (x - mean) * rstd and g = dy * weight:
    #   dx      = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat))
    #   dweight = sum over rows of dy * xhat
    #   dbias   = sum over rows of dy
    dyd, wd = dy.double(), weight.double()
    r = rstd.double()[:, None]
    xhat = (x.double() - mean.double()[:, None]) * r
    g = dyd * wd
    dx = r * (g - g.mean(dim=1, keepdim=True) - xhat * (g * xhat).mean(dim=1, keepdim=True))
    return dx, (dyd * xhat).sum(dim=0), dyd.sum(dim=0)


def dx_magnitude(dy, x, weight, mean, rstd):
    """The size of the terms dx is made of, rstd * (|g| + mean|g| + |xhat| * mean|g * xhat|):
    what float32 rounding is relative to. dx is a difference of these terms: where they cancel
    (a row of one column, or of equal values: variance 0, so rstd = 1/sqrt(eps) ~ 316 and dx is
    exactly 0) any honest kernel is off by rstd times a few float32 ulps of g, far above a tiny
    |dx|."""
    r = rstd.double()[:, None]
    xhat = (x.double() - mean.double()[:, None]) * r
    g = (dy.double() * weight.double()).abs()
    return r * (g + g.mean(dim=1, keepdim=True) + xhat.abs() * (g * xhat.abs()).mean(dim=1, keepdim=True))


def eager_backward(dy, x, weight, mean, rstd):
    """The same backward in eager torch ops, one kernel per op."""
    dyf = dy.float()
    r = rstd[:, None]
    xhat = (x.float() - mean[:, None]) * r
    g = dyf * weight.float()
    dx = r * (g - g.mean(dim=1, keepdim=True) - xhat * (g * xhat).mean(dim=1, keepdim=True))
    return dx.to(x.dtype), (dyf * xhat).sum(dim=0), dyf.sum(dim=0)


def baseline_backward(dy, x, weight, mean, rstd):
    # What autograd runs for F.layer_norm's backward: F.layer_norm is aten.native_layer_norm,
    # whose derivative (derivatives.yaml) is aten.native_layer_norm_backward with the saved mean
    # and rstd. Calling it directly times exactly autograd's backward kernels from the same
    # inputs, without a forward and without autograd's bookkeeping. On CUDA the saved mean and
    # rstd are float32 (on the CPU they have x's dtype, hence the second try); where neither
    # works, the same formula in eager torch ops.
    N = x.shape[1]
    for m, r in ((mean, rstd), (mean.to(x.dtype), rstd.to(x.dtype))):
        try:
            return torch.ops.aten.native_layer_norm_backward(
                dy, x, [N], m.unsqueeze(1), r.unsqueeze(1), weight, None, [True, True, True])
        except RuntimeError:
            continue
    return eager_backward(dy, x, weight, mean, rstd)
