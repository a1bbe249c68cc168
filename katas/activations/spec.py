"""activations: inputs, ground truth and baselines for the five tasks.

Case parameters (kata.yaml):
  M, N         the shape of every input (all inputs of a task share it)
  scale        optional: inputs are scale * randn (defaults below, per input)
  abs_range    optional [lo, hi]: instead, |x| uniform in [lo, hi) with random signs
               (the extreme-value cases: exp overflows, fp16 products overflow)
  approximate  gelu only: "none" (the erf form) or "tanh" (the tanh approximation)
  up_scale     swiglu, swiglu_backward: up is up_scale * randn (default 1.0)

Default scales: x is 1.0 * randn for relu and silu and 3.0 * randn for gelu (so that many
values sit in -4 < x < -1, where the erf and tanh forms differ most, by up to 4.7e-4); gate is
3.0 * randn (both saturated tails of the sigmoid and its middle), up and grad_out 1.0 * randn.

The ground truth is float64, computed from the very (already rounded) values the kernel sees:
the only error left in a correct kernel is float32 arithmetic and one rounding to the output
dtype.
"""

import math

import torch
import torch.nn.functional as F

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _draw(case, shape, dtype, device, generator, scale):
    if "abs_range" in case:
        lo, hi = case["abs_range"]
        mag = torch.rand(shape, dtype=torch.float32, device=device, generator=generator)
        sign = torch.randint(0, 2, shape, device=device, generator=generator)
        x = (lo + (hi - lo) * mag) * (2.0 * sign.to(torch.float32) - 1.0)
    else:
        x = scale * torch.randn(shape, dtype=torch.float32, device=device, generator=generator)
    return x.to(dtype).contiguous()


def _shape(case):
    return (case["M"], case["N"])


# ----------------------------------------------------------------------------------------------
# relu, gelu, silu: one input x


def make_x_inputs(case, dtype, device, generator):
    return {"x": _draw(case, _shape(case), dtype, device, generator, case.get("scale", 1.0))}


def make_gelu_inputs(case, dtype, device, generator):
    x = _draw(case, _shape(case), dtype, device, generator, case.get("scale", 3.0))
    return {"x": x, "approximate": case["approximate"]}


def relu_reference(x):
    return torch.clamp_min(x.double(), 0.0)


def gelu_reference(x, approximate):
    x64 = x.double()
    if approximate == "tanh":
        inner = SQRT_2_OVER_PI * (x64 + 0.044715 * x64 ** 3)
        return 0.5 * x64 * (1.0 + torch.tanh(inner))
    # x * Phi(x), with Phi(x) = erfc(-x / sqrt(2)) / 2: no cancellation for negative x.
    return x64 * 0.5 * torch.special.erfc(-x64 / math.sqrt(2.0))


def _silu64(x64):
    return x64 * torch.sigmoid(x64)


def silu_reference(x):
    return _silu64(x.double())


def relu_baseline(x):
    return torch.relu(x)


def gelu_baseline(x, approximate):
    return F.gelu(x, approximate=approximate)


def silu_baseline(x):
    return F.silu(x)


# ----------------------------------------------------------------------------------------------
# swiglu(gate, up) = silu(gate) * up, and its backward


def make_swiglu_inputs(case, dtype, device, generator):
    shape = _shape(case)
    gate = _draw(case, shape, dtype, device, generator, case.get("scale", 3.0))
    up = _draw({}, shape, dtype, device, generator, case.get("up_scale", 1.0))
    return {"gate": gate, "up": up}


def make_swiglu_backward_inputs(case, dtype, device, generator):
    inputs = make_swiglu_inputs(case, dtype, device, generator)
    inputs["grad_out"] = _draw({}, _shape(case), dtype, device, generator, 1.0)
    return inputs


def swiglu_reference(gate, up):
    return _silu64(gate.double()) * up.double()


def swiglu_backward_reference(gate, up, grad_out):
    g, u, dy = gate.double(), up.double(), grad_out.double()
    s = torch.sigmoid(g)
    # d silu / dg = s + g * s * (1 - s)   (the product rule on g * sigmoid(g))
    grad_gate = dy * u * s * (1.0 + g * (1.0 - s))
    grad_up = dy * g * s
    return grad_gate, grad_up


def swiglu_baseline(gate, up):
    return F.silu(gate) * up


def swiglu_backward_baseline(gate, up, grad_out):
    # The ops autograd runs for out = F.silu(gate) * up on out.backward(grad_out): MulBackward0
    # (grad_up = grad_out * silu(gate), grad_silu = grad_out * up), then SiluBackward0
    # (aten.silu_backward(grad_silu, gate)). Autograd would have saved silu(gate) in the
    # forward; from (gate, up, grad_out) alone it has to be recomputed, as any kernel must.
    s = F.silu(gate)
    grad_up = grad_out * s
    grad_gate = torch.ops.aten.silu_backward(grad_out * up, gate)
    return grad_gate, grad_up
