"""Liger-Kernel's kernels graded as submissions (the optional extra `external`; skipped without
it or without CUDA), through its ops' forward and backward functions. Its Triton kernels do the
per-element work; its wrappers sum per-program partial gradients with torch (`_dW.sum(dim=0)`),
and its cross-entropy counts and checks the targets with torch and `.item()` and sums the
per-row losses with `torch.sum`: the rule broken, never a cheat. Its documented limit: rows
longer than 65536 elements are refused (`calculate_settings`: "Cannot launch Triton kernel
since n = ... exceeds the recommended Triton blocksize = 65536")."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from external_grading import check, grade_wrapper

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None,
                                 reason="Liger-Kernel is not installed (the optional extra `external`)")]

WRAPPERS = {
    "cross_entropy": ('''
import torch
from liger_kernel.ops.cross_entropy import cross_entropy_forward


def cross_entropy(logits, target, ignore_index):
    # Liger writes the gradient over its input (the logits): hand it a copy, which becomes the
    # gradient (already divided by the number of non-ignored rows).
    work = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
    work.copy_(logits)
    work.requires_grad_(True)
    loss, _, _, _, grad = cross_entropy_forward(work, target, None, ignore_index, 0.0, 0.0, "mean",
                                                None, False)
    return loss.float(), grad.detach()
''', {"cross_entropy": "rule"}),  # (target != ignore_index).sum().item(), torch.sum(loss_1d)
    "layer_norm": ('''
from liger_kernel.ops.layer_norm import layer_norm_backward as liger_backward
from liger_kernel.ops.layer_norm import layer_norm_forward


def layer_norm(x, weight, bias, eps):
    y, _, mean, rstd, _, _ = layer_norm_forward(x.contiguous(), weight, bias, eps)
    return y, mean, rstd


def layer_norm_backward(dy, x, weight, mean, rstd):
    return liger_backward(dy.contiguous(), x.contiguous(), weight, weight, mean, rstd)
''', {"layer_norm": "limit: rows longer than 65536 are refused",
      "layer_norm_backward": "rule"}),  # _DW.sum(dim=0), _DB.sum(dim=0)
    "rms_norm": ('''
from liger_kernel.ops.rms_norm import rms_norm_forward


def rms_norm(x, weight, eps):
    y, _, _, _, _, _ = rms_norm_forward(x.contiguous(), weight, eps, 0.0, "llama", None)
    return y
''', {"rms_norm": "limit: rows longer than 65536 are refused"}),
    "rms_norm_backward": ('''
from liger_kernel.ops.rms_norm import _str_to_casting_mode
from liger_kernel.ops.rms_norm import rms_norm_backward as liger_backward
from liger_kernel.ops.utils import calculate_settings


def rms_norm_backward(dy, x, weight, rstd):
    block, warps = calculate_settings(x.shape[-1])  # (what its forward returns)
    dx, dweight = liger_backward(dy.contiguous(), x.contiguous(), weight, rstd, 0.0,
                                 _str_to_casting_mode["llama"], block, warps, False, None)
    return dx, dweight.float()
''', {"rms_norm_backward": "rule"}),  # _dW.sum(dim=0)
    "activations": ('''
from liger_kernel.ops.swiglu import swiglu_backward as liger_backward
from liger_kernel.ops.swiglu import swiglu_forward


def swiglu(gate, up):
    return swiglu_forward(gate.contiguous(), up.contiguous())[2]


def swiglu_backward(gate, up, grad_out):
    # Liger writes the two gradients over its gate and up: hand it copies.
    return liger_backward(gate.clone(memory_format=torch.contiguous_format),
                          up.clone(memory_format=torch.contiguous_format), grad_out.contiguous())


def relu(x):
    raise NotImplementedError


def gelu(x, approximate):
    raise NotImplementedError


def silu(x):
    raise NotImplementedError
''', {"swiglu": "limit: rows longer than 65536 are refused",
      "swiglu_backward": "limit: rows longer than 65536 are refused", "relu": "absent"}),
}


@pytest.mark.parametrize("kata", sorted(WRAPPERS))
def test_liger_kernel_graded_as_a_submission(tmp_path, kata):
    body, expected = WRAPPERS[kata]
    check(grade_wrapper(tmp_path, kata, "import torch\n" + body), expected)
