"""matmul_lowp: inputs, ground truth and baselines for the FP8 and INT8 GEMMs.

matmul_fp8 (make_fp8_inputs). a and b are quantized the way a real FP8 layer quantizes them:
float32 activations x (M, K) and weights w (N, K) are drawn, each row scaled so its largest
magnitude lands on 448 (the e4m3 maximum), and rounded to float8_e4m3fn; the row scales are
kept in float32. So a = x / a_scale, b = (w / w_scale).t(): b is the column-major (K, N) view
of a contiguous (N, K) weight, as the contract says. Case parameters:
  M, N, K        the GEMM's shape
  positive       all x and w are >= 0 (post-ReLU-like): every product is positive, so the
                 result is as large as the sum of the terms' magnitudes and no rounding error
                 hides behind a cancellation
  row_spread     [lo, hi]: each row of x and of w is multiplied by its own factor, log-uniform
                 in [lo, hi], so the scales differ from row to row (default [0.5, 2])
  zero_rows      this many leading rows of x are 0 (a_scale = the 1e-12 floor, a = 0)
  a_row_stride   (> K): a is the column slice base[:, :K] of a wider tensor

matmul_int8 (make_int8_inputs). Case parameters:
  M, N, K        the GEMM's shape
  values         "uniform" (default: every int8 value, -128..127, equally likely),
                 "positive" (lo..hi, default 96..127: large positive sums), or
                 "extremes" (only -128 and 127)
  b_layout       "row" (default: b is a contiguous (K, N) tensor) or "col" (b = w.t(), the
                 column-major view of a contiguous (N, K) int8 weight)
  a_row_stride   (> K): a is the column slice base[:, :K] of a wider tensor

Exactness of int8: |a[i, k] * b[k, j]| <= 128 * 128 = 2**14, so |c[i, j]| <= K * 2**14, which
fits int32 (2**31 - 1) for every K < 2**17 = 131072; the cases go up to K = 32768. The float64
ground truth is exact too: every partial sum is an integer below 2**53.
"""

import math

import torch

FP8_MAX = 448.0
SCALE_FLOOR = 1e-12


# ---- FP8 --------------------------------------------------------------------------------------

def _row_factors(rows, spread, device, generator):
    lo, hi = spread
    u = torch.rand(rows, 1, dtype=torch.float64, device=device, generator=generator)
    return torch.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * u).float()


def _quantize_rows(x):
    """Row-wise e4m3 quantization: (q, scale) with x ~= q * scale and max |q| = 448."""
    scale = torch.clamp(x.abs().amax(dim=1, keepdim=True) / FP8_MAX, min=SCALE_FLOOR)
    q = (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def make_fp8_inputs(case, dtype, device, generator):
    m, n, k = case["M"], case["N"], case["K"]
    spread = case.get("row_spread", [0.5, 2.0])
    x = torch.randn(m, k, dtype=torch.float32, device=device, generator=generator)
    w = torch.randn(n, k, dtype=torch.float32, device=device, generator=generator)
    if case.get("positive"):
        x, w = x.abs(), w.abs()
    x *= _row_factors(m, spread, device, generator)
    w *= _row_factors(n, spread, device, generator)
    x[: case.get("zero_rows", 0)] = 0.0
    a, a_scale = _quantize_rows(x)
    wq, w_scale = _quantize_rows(w)
    stride = case.get("a_row_stride")
    if stride:
        wide = torch.zeros(m, stride, dtype=torch.float8_e4m3fn, device=device)
        wide[:, :k] = a
        a = wide[:, :k]
    # b: (K, N), column-major (b.stride() == (1, K)); b_scale: (1, N), one scale per column.
    return {"a": a, "b": wq.t(), "a_scale": a_scale, "b_scale": w_scale.reshape(1, n).contiguous()}


def _dequantized(a, b, a_scale, b_scale):
    return a.double() * a_scale.double(), b.double() * b_scale.double()


def fp8_reference(a, b, a_scale, b_scale):
    # (a * a_scale) @ (b * b_scale) in float64: exact products, a float64 sum.
    x, w = _dequantized(a, b, a_scale, b_scale)
    return x @ w


def fp8_magnitude(a, b, a_scale, b_scale):
    # The sum of the terms' magnitudes, |a * a_scale| @ |b * b_scale|: any summation order's
    # rounding error is bounded by a multiple of it, whatever the result's own size.
    x, w = _dequantized(a, b, a_scale, b_scale)
    return x.abs() @ w.abs()


def _ceil_to(v, m):
    return -(-v // m) * m


def fp8_baseline(a, b, a_scale, b_scale):
    """torch._scaled_mm with row-wise scales (scale_a (M, 1), scale_b (1, N)), bf16 output.

    cuBLAS/CUTLASS need K and N multiples of 16 (and the rows of a aligned): other shapes are
    zero-padded to them first (zeros add nothing to the sums) and the result sliced back.
    """
    m, k = a.shape
    n = b.shape[1]
    if not a.is_cuda:  # never timed off a GPU; kept runnable for completeness
        x, w = _dequantized(a, b, a_scale, b_scale)
        return (x @ w).to(torch.bfloat16)
    if m % 16 == 0 and k % 16 == 0 and n % 16 == 0 and a.stride(1) == 1 and a.stride(0) == k:
        return torch._scaled_mm(a, b, scale_a=a_scale, scale_b=b_scale, out_dtype=torch.bfloat16)
    mp, kp, np_ = _ceil_to(m, 16), _ceil_to(k, 16), _ceil_to(n, 16)
    ap = torch.zeros(mp, kp, dtype=a.dtype, device=a.device)
    ap[:m, :k] = a
    bp = torch.zeros(np_, kp, dtype=b.dtype, device=b.device)
    bp[:n, :k] = b.t()
    sa = torch.ones(mp, 1, dtype=torch.float32, device=a.device)
    sa[:m] = a_scale
    sb = torch.ones(1, np_, dtype=torch.float32, device=a.device)
    sb[:, :n] = b_scale
    out = torch._scaled_mm(ap, bp.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    return out[:m, :n]


# ---- INT8 -------------------------------------------------------------------------------------

def _int8(shape, values, lo_hi, device, generator):
    if values == "extremes":
        bits = torch.randint(0, 2, shape, device=device, generator=generator, dtype=torch.int8)
        return torch.where(bits.bool(), torch.tensor(127, dtype=torch.int8, device=device),
                           torch.tensor(-128, dtype=torch.int8, device=device))
    lo, hi = lo_hi if values == "positive" else (-128, 127)
    return torch.randint(lo, hi + 1, shape, device=device, generator=generator, dtype=torch.int8)


def make_int8_inputs(case, dtype, device, generator):
    m, n, k = case["M"], case["N"], case["K"]
    values = case.get("values", "uniform")
    lo_hi = case.get("range", [96, 127])
    stride = case.get("a_row_stride", k)
    a = _int8((m, stride), values, lo_hi, device, generator)[:, :k]
    if case.get("b_layout", "row") == "col":
        b = _int8((n, k), values, lo_hi, device, generator).t()
    else:
        b = _int8((k, n), values, lo_hi, device, generator)
    return {"a": a, "b": b}


# Rows of a per float64 product: bounds the ground truth's memory on the 2**31-element case.
_REFERENCE_ROWS = 1 << 13


def int8_reference(a, b):
    # Exact: integer products below 2**15, sums below 2**31, all exact in float64.
    w = b.double()
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float64, device=a.device)
    for start in range(0, a.shape[0], _REFERENCE_ROWS):
        out[start:start + _REFERENCE_ROWS] = a[start:start + _REFERENCE_ROWS].double() @ w
    return out


def int8_baseline(a, b):
    """torch._int_mm (cuBLAS int8 GEMM, int32 result).

    On CUDA it needs M > 16 and K, N multiples of 8: other shapes are zero-padded to the nearest
    shape it accepts (zeros add nothing to the sums) and the result sliced back, which is what a
    user of _int_mm does for a decode-sized M.
    """
    m, k = a.shape
    n = b.shape[1]
    if not a.is_cuda:  # never timed off a GPU; kept runnable (and exact) for completeness
        return int8_reference(a, b).to(torch.int32)
    if m > 16 and k % 8 == 0 and n % 8 == 0:
        return torch._int_mm(a, b)
    mp, kp, np_ = max(m, 17), _ceil_to(k, 8), _ceil_to(n, 8)
    ap = torch.zeros(mp, kp, dtype=torch.int8, device=a.device)
    ap[:m, :k] = a
    bp = torch.zeros(kp, np_, dtype=torch.int8, device=a.device)
    bp[:k, :n] = b
    return torch._int_mm(ap, bp)[:m, :n]
