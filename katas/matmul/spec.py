"""matmul: inputs, float64 ground truth, error scales and baselines of matmul and matmul_bias_act.

Case parameters (kata.yaml):
  M, N, K     a is (M, K), b is (K, N)
  b_layout    "row" (default): b is a contiguous (K, N) tensor
              "t": b = w.t(), a transposed view of a contiguous (N, K) weight, so
              b.stride() == (1, K): the layout of every nn.Linear weight
  uniform     optional [lo, hi]: a and b uniform in [lo, hi) instead of standard normal. With
              lo >= 0 every product is positive, so no term cancels another: the case where a
              narrow accumulator shows (a float16 running sum loses the small late terms)
matmul_bias_act only (x = a @ b + bias is the pre-activation):
  activation  "none", "relu" or "gelu_tanh"
  ab_std      the standard deviation of a @ b (a is standard normal, b is normal with standard
              deviation ab_std / sqrt(K)); default 1.0
  bias_range  [lo, hi]: bias uniform in [lo, hi); default [-4.0, 3.0], so that many
              pre-activations sit in -3.5 < x < -2, where the erf and tanh forms of gelu differ
              by 2e-4 to 4.7e-4 while gelu itself is only about -0.005: a relative difference of
              3 to 30%, far beyond any rounding of a float16 or bfloat16 output

The ground truth is float64, computed from the very (already rounded) values the kernel sees: a
correct kernel is left with its float32 summation order and one rounding to the output dtype.
The float64 products are exact (an fp16 or bf16 product has at most 22 significant bits), and
the float64 sums are off by at most K * 2**-53 of the summed magnitude, far below anything the
tolerances resolve.

Error scales (kata.yaml, `scale:`): the rule is |got - expected| <= atol + rtol * scale.
  matmul:           scale = |a| @ |b|, the sum of the magnitudes of the K products. Any float32
                    summation order is off by at most K * 2**-23 of it (kata.yaml says why), and
                    the output's rounding by 2**-11 (float16) or 2**-8 (bfloat16) of |a @ b|,
                    which is no larger.
  matmul_bias_act:  scale = |y| + slope * (|a| @ |b| + |bias|), y = act(x): the output's own
                    rounding is relative to |y|; the pre-activation's summation error is relative
                    to its summed magnitude and reaches y through the activation's slope (1 for
                    "none" and "relu", |gelu'(x)| for gelu, which is 0.025 near x = -2.7: a
                    tolerance that stays tight exactly where the two gelu forms differ most).
"""

import math

import torch
import torch.nn.functional as F

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715
ACTIVATIONS = ("none", "relu", "gelu_tanh")


def _draw(case, shape, dtype, device, generator, std=1.0):
    if "uniform" in case:
        lo, hi = case["uniform"]
        v = lo + (hi - lo) * torch.rand(shape, dtype=torch.float32, device=device, generator=generator)
    else:
        v = std * torch.randn(shape, dtype=torch.float32, device=device, generator=generator)
    return v.to(dtype)


def _operands(case, dtype, device, generator, b_std=1.0):
    M, N, K = case["M"], case["N"], case["K"]
    a = _draw(case, (M, K), dtype, device, generator)
    layout = case.get("b_layout", "row")
    if layout == "row":
        b = _draw(case, (K, N), dtype, device, generator, b_std)
    elif layout == "t":
        # The weight of nn.Linear(K, N) is a contiguous (N, K) tensor; x @ w.t() hands the kernel
        # b with strides (1, K): consecutive k are adjacent in memory, consecutive n are K apart.
        b = _draw(case, (N, K), dtype, device, generator, b_std).t()
    else:
        raise ValueError(f"unknown b_layout {layout!r}")
    return a, b


def make_inputs(case, dtype, device, generator):
    a, b = _operands(case, dtype, device, generator)
    return {"a": a, "b": b}


def make_bias_act_inputs(case, dtype, device, generator):
    K = case["K"]
    a, b = _operands(case, dtype, device, generator, b_std=case.get("ab_std", 1.0) / math.sqrt(K))
    lo, hi = case.get("bias_range", [-4.0, 3.0])
    bias = (lo + (hi - lo) * torch.rand(case["N"], dtype=torch.float32, device=device,
                                        generator=generator)).to(dtype)
    activation = case["activation"]
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}")
    return {"a": a, "b": b, "bias": bias, "activation": activation}


# ----------------------------------------------------------------------------------------------
# Ground truth and error scales (float64)


def reference(a, b):
    return a.double() @ b.double()


def summed_magnitude(a, b):
    return a.double().abs() @ b.double().abs()


def _gelu_tanh64(x):
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * x ** 3)))


def _gelu_tanh_slope64(x):
    t = torch.tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_CUBIC * x * x)


def _preactivation(a, b, bias):
    return a.double() @ b.double() + bias.double()


def bias_act_reference(a, b, bias, activation):
    x = _preactivation(a, b, bias)
    if activation == "relu":
        return x.clamp_min(0.0)
    if activation == "gelu_tanh":
        return _gelu_tanh64(x)
    return x


def bias_act_scale(a, b, bias, activation):
    x = _preactivation(a, b, bias)
    summed = a.double().abs() @ b.double().abs() + bias.double().abs()
    if activation == "gelu_tanh":
        return _gelu_tanh64(x).abs() + _gelu_tanh_slope64(x).abs() * summed
    # relu's slope is 0 or 1; 1 everywhere, because a pre-activation within rounding of 0 may
    # land on either side of it.
    return bias_act_reference(a, b, bias, activation).abs() + summed


# ----------------------------------------------------------------------------------------------
# Baselines: what a user would write (cuBLAS, then one eager kernel per elementwise op)


def baseline(a, b):
    return torch.matmul(a, b)


def bias_act_baseline(a, b, bias, activation):
    x = a @ b + bias
    if activation == "relu":
        return torch.relu(x)
    if activation == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return x
