"""tutorial_source.extract on a made-up tutorial of the sphinx-gallery kind (it runs in CI, which
has no .tutorials/): the kernels and what they use stay, the script around them goes."""

from __future__ import annotations

import ast

from tutorial_source import extract

TUTORIAL = '''
"""A tutorial."""
import tabulate
import torch

import triton
import triton.language as tl
from triton.runtime import driver

try:
    import apex
    HAS_APEX = True
except ModuleNotFoundError:
    HAS_APEX = False

DEVICE = driver.active.get_active_torch_device()
properties = driver.active.utils.get_device_properties(DEVICE.index)
NUM_SM = properties["multiprocessor_count"]
unused = torch.zeros(3)
x = torch.randn(10, device=DEVICE)


@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x):
    out = torch.empty_like(x)
    grid = lambda meta: (NUM_SM, )
    kernel[grid](out, x.numel(), BLOCK=1024)
    return out


def test_launch():
    assert launch(x) is not None


@triton.testing.perf_report(triton.testing.Benchmark(x_names=["n"], x_vals=[1], line_arg="p",
                                                     line_vals=["t"], line_names=["T"], ylabel="",
                                                     plot_name="", args={}))
def benchmark(n, p):
    print(tabulate.tabulate([[HAS_APEX]]))


print(launch(x))
benchmark.run(show_plots=True)
'''


def test_extract_keeps_the_kernels_and_what_they_use():
    module = ast.parse(extract(TUTORIAL))
    kept = [getattr(n, "name", None) or ast.unparse(n) for n in module.body]
    assert kept == ["import torch", "import triton", "import triton.language as tl",
                    "from triton.runtime import driver",
                    "DEVICE = driver.active.get_active_torch_device()",
                    "properties = driver.active.utils.get_device_properties(DEVICE.index)",
                    "NUM_SM = properties['multiprocessor_count']",
                    "kernel", "launch"], kept
