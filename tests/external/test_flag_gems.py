"""FlagGems' kernels graded as submissions (the optional extra `external`; skipped without it or
without CUDA). Its ops launch their cached compiled kernels directly on later calls (LibEntry),
which the launch count sees (grader/sandbox/launches.py).

The wrappers set GEMS_VENDOR before the import, as anyone grading FlagGems must, or FlagGems
runs nvidia-smi to find the GPU (the sandbox refuses processes). Its cache, ~/.flaggems, lands
in the worker's own home inside the grade's folder (grader.sandbox.confine)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from external_grading import check, grade_wrapper

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(importlib.util.find_spec("flag_gems") is None,
                                 reason="FlagGems is not installed (the optional extra `external`)")]

PRELUDE = '''
import os

os.environ.setdefault("GEMS_VENDOR", "nvidia")

from pathlib import Path

import torch
from flag_gems import ops as gems
from flag_gems.utils.code_cache import cache_dir_path

_home_seen = []


def _cache_in_own_home():
    # FlagGems writes its generated code under ~/.flaggems: the worker's own home, inside the
    # grade's folder. Anywhere else it would have been refused, or would reach the user's home.
    if not _home_seen:
        cache = cache_dir_path()
        if not (cache.is_dir() and cache.parent == Path.home() and "kata-grade-" in str(cache)):
            raise RuntimeError(f"FlagGems' cache is not in the worker's own home: {cache}")
        _home_seen.append(cache)
'''

WRAPPERS = {
    "vector_add": ('''
def vector_add(x, y):
    out = gems.add(x, y)  # its pointwise code generator writes the cache
    _cache_in_own_home()
    return out
''', {"vector_add": "pass"}),
    "softmax": ('''
def softmax(x):
    return gems.softmax(x, -1)
''', {"softmax": "pass"}),
    "rms_norm": ('''
def rms_norm(x, weight, eps):
    return gems.rms_norm(x, [x.shape[-1]], weight, eps)
''', {"rms_norm": "pass"}),
    "rms_norm_backward": ('''
def rms_norm_backward(dy, x, weight, rstd):
    dx, dweight = gems.rms_norm_backward(dy, x, rstd, [x.shape[-1]], weight)
    return dx, dweight.float()
''', {"rms_norm_backward": "rule"}),  # dweight = torch.sum(partial_buffer, dim=0)
    "layer_norm": ('''
def layer_norm(x, weight, bias, eps):
    y, mean, rstd = gems.layer_norm(x, [x.shape[-1]], weight, bias, eps)
    return y, mean.float(), rstd.float()


def layer_norm_backward(dy, x, weight, mean, rstd):
    dx, dweight, dbias = gems.layer_norm_backward(dy, x, [x.shape[-1]], mean, rstd, weight,
                                                  torch.empty_like(weight), [True, True, True])
    return dx, dweight.float(), dbias.float()
''', {"layer_norm": "stored low: mean and rstd are stored in the input's dtype",
      "layer_norm_backward": "stored low: dweight and dbias are stored in the weight's dtype"}),
    "prefix_sum": ('''
def cumsum(x):
    return gems.cumsum(x, 1, dtype=x.dtype)
''', {"cumsum": "pass"}),
    "reduce": ('''
def row_sum(x):
    return gems.sum_dim(x, [1], dtype=torch.float32)


def row_argmax(x):
    return gems.argmax(x, 1)


def total_sum(x):
    return gems.sum(x, dtype=torch.float32).reshape(1)  # FlagGems returns a 0-d tensor (a view)
''', {"row_sum": "pass", "row_argmax": "pass", "total_sum": "pass"}),
    "gather_scatter": ('''
def embedding(indices, weight):
    return gems.embedding(weight, indices)


def embedding_backward(indices, grad_out, num_embeddings):
    return gems.embedding_backward(grad_out, indices, num_embeddings).float()
''', {"embedding": "pass",
      "embedding_backward": "stored low: float16 and bfloat16 gradients are accumulated in their own dtype"}),
    "activations": ('''
def relu(x):
    return gems.relu(x)


def gelu(x, approximate):
    return gems.gelu(x, approximate=approximate)


def silu(x):
    return gems.silu(x)


def swiglu(gate, up):
    raise NotImplementedError("FlagGems' swiglu takes the two halves concatenated")


def swiglu_backward(gate, up, grad_out):
    raise NotImplementedError
''', {"relu": "pass", "gelu": "pass", "silu": "pass", "swiglu": "absent"}),
    "matmul": ('''
def matmul(a, b):
    return gems.mm(a, b)


def matmul_bias_act(a, b, bias, activation):
    raise NotImplementedError
''', {"matmul": "pass"}),
}

# FlagGems' mm autotunes every new (M, N, K) on its first call (LibTuner): about 12 s a shape on
# an H200, so the kata's 34 shapes in two dtypes outlast the grade's 180 s (an H200 run got
# through 7 and was stopped, `time_limit`; `kata grade --timeout` is the way to grade it whole).
# Its test grades odd tails, a transposed B and one timed case.
ONLY_CASES = {"matmul": ["k_tail", "tails_t", "gpu_odd_t", "bench_4096"]}


@pytest.mark.parametrize("kata", sorted(WRAPPERS))
def test_flag_gems_graded_as_a_submission(tmp_path, kata):
    body, expected = WRAPPERS[kata]
    check(grade_wrapper(tmp_path, kata, PRELUDE + body, only_cases=ONLY_CASES.get(kata)), expected)
