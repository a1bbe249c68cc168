"""Triton's own tutorials (python/tutorials of triton-lang/triton) graded as submissions on the
GPU: the kernels of each tutorial, extracted (tutorial_source.py: importing the tutorial itself
would run its test and benchmark), sit beside a thin wrapper in the kata's signature that calls
the tutorial's own launcher. Skipped without CUDA, or without the tutorials' source in the
ignored folder .tutorials/ (as in CI: no third-party code enters the repository). To get it,
from a clone of triton-lang/triton:

    python benchmarks/fetch_triton_tutorials.py PATH/TO/triton.git   # release/3.6.x, else HEAD

What each tutorial gets, and why:

- 01 vector add: every case.
- 02 fused softmax: a limit. One program holds a whole row in one block
  (BLOCK_SIZE = next_power_of_2(N)) and computes in the input's dtype; the kata has rows of a
  million columns and asks for float32 arithmetic.
- 03 matrix multiplication: a limit, its output is always float16 (`accumulator.to(tl.float16)`
  into a float16 tensor), so bfloat16 inputs get a float16 result. It has no bias epilogue
  (only leaky_relu): matmul_bias_act is absent.
- 04 low-memory dropout: every case (`tl.rand(seed, offsets)`, the kata's own contract; it keeps
  r > p where the kata says r >= p, which differs only when r is exactly 0, 2^-31 a draw).
- 05 layer norm: forward and backward (the partial sums of dweight and dbias under a spin lock
  of atomics), both with the tutorial's documented limit, rows of 64 KB and more refused; the
  backward keeps those partial sums, and dweight and dbias, in the input's dtype.
- 06 fused attention: not graded here (Hopper/Blackwell-specific paths, tensor descriptors).

The tutorials read one row stride for x and y (and dy and dx): the layer-norm wrapper hands them
contiguous rows, as the Liger-Kernel wrapper does. The backward's launch settings travel on
autograd's context from the forward in the tutorial; the wrapper computes them as its forward
does."""

from __future__ import annotations

import pytest
import torch

from external_grading import check, grade_wrapper
from tutorial_source import extract_file, tutorials_present

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not tutorials_present(),
                                 reason=".tutorials/ is absent (benchmarks/fetch_triton_tutorials.py)")]

MODULE = "triton_tutorial"  # the extracted kernels, beside solution.py

WRAPPERS = {
    "vector_add": ("01-vector-add.py", '''
from triton_tutorial import add


def vector_add(x, y):
    return add(x, y)
''', {"vector_add": "pass"}),
    "softmax": ("02-fused-softmax.py", '''
import triton_tutorial


def softmax(x):
    return triton_tutorial.softmax(x)
''', {"softmax": "limit: one block holds a whole row (next_power_of_2(N)), in the input's dtype"}),
    "matmul": ("03-matrix-multiplication.py", '''
import triton_tutorial


def matmul(a, b):
    return triton_tutorial.matmul(a, b)


def matmul_bias_act(a, b, bias, activation):
    raise NotImplementedError("the tutorial's kernel has no bias; its one activation is leaky_relu")
''', {"matmul": "limit: the output is always float16, bfloat16 inputs included",
      "matmul_bias_act": "absent"}),
    "dropout": ("04-low-memory-dropout.py", '''
from triton_tutorial import seeded_dropout


def dropout(x, p, seed):
    return seeded_dropout(x, p, seed)
''', {"dropout": "pass"}),
    "layer_norm": ("05-layer-norm.py", '''
import triton
from triton_tutorial import LayerNorm


class _Context:
    """What the tutorial's LayerNorm.forward and .backward keep on autograd's context."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


def layer_norm(x, weight, bias, eps):
    ctx = _Context()
    # The kernel reads one row stride for x and y: contiguous rows.
    y = LayerNorm.forward(ctx, x.contiguous(), (x.shape[-1],), weight, bias, eps)
    mean, rstd = ctx.saved_tensors[3:]
    return y, mean, rstd


def layer_norm_backward(dy, x, weight, mean, rstd):
    ctx = _Context()
    ctx.saved_tensors = (x.contiguous(), weight, None, mean, rstd)
    # The launch settings the tutorial's forward leaves on the context, computed as it does.
    n = x.shape[-1]
    ctx.BLOCK_SIZE = min(65536 // x.element_size(), triton.next_power_of_2(n))
    if n > ctx.BLOCK_SIZE:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    ctx.num_warps = min(max(ctx.BLOCK_SIZE // 256, 1), 8)
    dx, _, dweight, dbias, _ = LayerNorm.backward(ctx, dy.contiguous())
    return dx, dweight.float(), dbias.float()
''', {"layer_norm": "limit: rows of 64 KB and more are refused",
      "layer_norm_backward": "limit: rows of 64 KB and more are refused; float16 and bfloat16 "
                             "partial sums of dweight and dbias are kept in the input's dtype"}),
}

# The matmul tutorial autotunes 16 configurations on every new (M, N, K), as FlagGems' mm does
# (test_flag_gems.py): the same few cases, and one of matmul_bias_act to see it absent. Softmax
# without the million-column rows, whose one-block programs would spend the grade compiling.
ONLY_CASES = {
    "matmul": ["k_tail", "tails_t", "gpu_odd_t", "bench_4096", "relu_tails"],
    "softmax": ["small", "strided_small", "one_col", "odd_tail", "large_magnitude", "large_negative",
                "strided", "pow2_15_plus_1", "long_row", "many_short_rows", "bench_8192x8192"],
}


def submission(tmp_path, kata: str, prelude: str = "") -> str:
    """The tutorial's kernels written beside the submission; the wrapper's source."""
    tutorial, body, _ = WRAPPERS[kata]
    extract_file(tutorial, tmp_path / f"{MODULE}.py")
    return prelude + body


@pytest.mark.parametrize("kata", sorted(WRAPPERS))
def test_triton_tutorial_graded_as_a_submission(tmp_path, kata):
    result = grade_wrapper(tmp_path, kata, submission(tmp_path, kata), only_cases=ONLY_CASES.get(kata))
    check(result, WRAPPERS[kata][2])
