"""The honest-error envelope of the elementwise katas (vector_add, activations), measured with
torch on the CPU: each honest formulation computed in float32 and rounded once to the dtype,
against float64, as the fraction of the kata's tolerance it uses (the checker's `excess`: 1.0 is
at the limit). The figures quoted beside those tolerances in kata.yaml come from
this script; no GPU needed (the kernels' math is the same float32 math).

    python benchmarks/elementwise_envelope.py
"""

from __future__ import annotations

import math

import torch

from grader.judge.wrong_values import excess
from grader.kata.catalog import get_kata

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x):
    u = SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + torch.tanh(u))


def _gelu_tanh_as_sigmoid(x):  # 0.5 x (1 + tanh u) = x / (1 + exp(-2u))
    u = SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
    return x / (1.0 + torch.exp(-2.0 * u))


FORMULATIONS = {  # task -> (truth in float64, honest formulations in float32)
    "vector_add": (lambda x, y: x + y, {"x + y": lambda x, y: x + y}),
    "gelu": (lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
             {"erf form": lambda x: 0.5 * x * (1.0 + torch.erf(x * (1 / math.sqrt(2))))}),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))),
                  {"tanh form": _gelu_tanh, "x / (1 + exp(-2u))": _gelu_tanh_as_sigmoid}),
    "silu": (lambda x: x * torch.sigmoid(x),
             {"x * sigmoid(x)": lambda x: x * torch.sigmoid(x),
              "x / (1 + exp(-x))": lambda x: x / (1.0 + torch.exp(-x))}),
    "swiglu": (lambda g, u: g * torch.sigmoid(g) * u,
               {"silu(gate) * up": lambda g, u: g * torch.sigmoid(g) * u,
                "gate / (1 + exp(-gate)) * up": lambda g, u: g / (1.0 + torch.exp(-g)) * u}),
}
TOLERANCE_FROM = {"vector_add": ("vector_add", "vector_add"), "gelu": ("activations", "gelu"),
                  "gelu_tanh": ("activations", "gelu"), "silu": ("activations", "silu"),
                  "swiglu": ("activations", "swiglu")}


def inputs(task: str, n: int = 200_000) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    normal = lambda: torch.randn(n, dtype=torch.float64, generator=gen) * 3  # noqa: E731
    if task in ("vector_add", "swiglu"):  # two operands
        return [normal(), normal()]
    wide = (torch.rand(n // 10, dtype=torch.float64, generator=gen) * 2 - 1) * 1000
    return [torch.cat([normal(), wide])]


def tolerance(task: str, dtype: torch.dtype) -> tuple[float, float]:
    kata_name, task_name = TOLERANCE_FROM[task]
    found = next(t for t in get_kata(kata_name).tasks if t.name == task_name)
    tol = found.tolerance(str(dtype).removeprefix("torch."))
    return float(tol.atol), float(tol.rtol)


def main() -> None:
    for task, (truth_of, honest) in FORMULATIONS.items():
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            args = [a.clamp(-6e4, 6e4).to(dtype) for a in inputs(task)]
            truth = truth_of(*(a.double() for a in args))
            atol, rtol = tolerance(task, dtype)
            for name, formula in honest.items():
                got = formula(*(a.float() for a in args)).to(dtype).double()
                share = excess(got, truth, atol=atol, rtol=rtol)
                print(f"{task:10s} {name:28s} {str(dtype)[6:]:9s} {share:.3f}")


if __name__ == "__main__":
    main()
