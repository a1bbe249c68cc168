"""quantize: inputs, ground truth and baselines for the three tasks.

quantize_fp8_rowwise and quantize_int8_rowwise share make_inputs. Case parameters:
  M, N        rows and columns of x
  row_stride  optional (> N): x is the column slice base[:, :N] of a wider tensor, so
              x.stride(0) == row_stride
  scale       x = scale * randn (default 1.0), kept within half the dtype's finite range
  ramp        x += ramp * j / N: each row's largest magnitude sits near its end, far past the
              first block of a long row
  neg_peak    one element of every row (at a random column) is set to -neg_peak * (1 to 2):
              the largest magnitude of the row is negative
  zero_rows   this many leading rows are all zeros (scale = the 1e-12 floor, q = 0)
  tiny_rows   this many trailing rows are scaled by 1e-14: amax / QMAX is below the floor, so
              scale = 1e-12 and q rounds to (nearly) 0

dequantize_int8_rowwise (make_dequant_inputs): M, N, row_stride (of q), zero_rows (q = 0 and
scale = 1e-12, as quantize returns for a zero row), scale_range [lo, hi] (per-row scales
log-uniform in it; default [1e-3, 1e-1]).
"""

import math

import torch

FP8_MAX = 448.0
INT8_MAX = 127.0
SCALE_FLOOR = 1e-12


def make_inputs(case, dtype, device, generator):
    m, n = case["M"], case["N"]
    row_stride = case.get("row_stride", n)
    full = torch.randn(m, row_stride, dtype=torch.float32, device=device, generator=generator)
    full *= float(case.get("scale", 1.0))
    if case.get("ramp"):
        full += case["ramp"] / n * torch.arange(row_stride, dtype=torch.float32, device=device)
    if case.get("neg_peak"):
        cols = torch.randint(0, n, (m,), device=device, generator=generator)
        peak = 1.0 + torch.rand(m, device=device, generator=generator)
        full[torch.arange(m, device=device), cols] = -float(case["neg_peak"]) * peak
    full[: case.get("zero_rows", 0)] = 0.0
    tiny = case.get("tiny_rows", 0)
    if tiny:
        full[m - tiny:] *= 1e-14
    # Finite in the target dtype, whatever the scale (float16 stops at 65504).
    limit = torch.finfo(dtype).max / 2
    full = full.clamp(-limit, limit).to(dtype)
    return {"x": full[:, :n]}


def _scale(x64, qmax):
    amax = x64.abs().amax(dim=1, keepdim=True)
    return torch.clamp(amax / qmax, min=SCALE_FLOOR)


def fp8_reference(x):
    # The unrounded quotient, saturated to the fp8 range; the checker rounds it to e4m3 and
    # accepts one fp8 ULP either way (the kernel's float32 quotient is not this float64 one).
    x64 = x.double()
    scale = _scale(x64, FP8_MAX)
    return (x64 / scale).clamp(-FP8_MAX, FP8_MAX), scale


def int8_reference(x):
    # The unrounded quotient, clamped: compared under atol 0.5 (kata.yaml), it accepts the
    # nearest integer, and either neighbour where x / scale is within 1e-6 (relative) of a .5
    # boundary, where the kernel's float32 quotient may land on the other side.
    x64 = x.double()
    scale = _scale(x64, INT8_MAX)
    return (x64 / scale).clamp(-INT8_MAX, INT8_MAX), scale


def fp8_baseline(x):
    scale = torch.clamp(x.abs().amax(dim=1, keepdim=True).float() / FP8_MAX, min=SCALE_FLOOR)
    q = (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def int8_baseline(x):
    scale = torch.clamp(x.abs().amax(dim=1, keepdim=True).float() / INT8_MAX, min=SCALE_FLOOR)
    # torch.round rounds half to even.
    q = torch.round(x.float() / scale).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def make_dequant_inputs(case, dtype, device, generator):
    m, n = case["M"], case["N"]
    row_stride = case.get("row_stride", n)
    full = torch.randint(-127, 128, (m, row_stride), device=device, generator=generator,
                         dtype=torch.int8)
    lo, hi = case.get("scale_range", [1e-3, 1e-1])
    u = torch.rand(m, 1, dtype=torch.float64, device=device, generator=generator)
    scale = torch.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * u).float()
    zero = case.get("zero_rows", 0)
    full[:zero] = 0
    scale[:zero] = SCALE_FLOOR
    return {"q": full[:, :n], "scale": scale, "dtype": dtype}


def dequant_reference(q, scale, dtype):
    return q.double() * scale.double()


def dequant_baseline(q, scale, dtype):
    return (q.float() * scale).to(dtype)
