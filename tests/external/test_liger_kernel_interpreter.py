"""Liger-Kernel's cross-entropy runs under the Triton interpreter too: graded on the CPU as a
submission, it gets the rule-broken verdict (its wrapper counts the targets with torch and
`.item()` and sums the per-row losses with `torch.sum`), never a cheat. Skipped without
Liger-Kernel (the optional extra `external`; CI does not install it). Its other ops call
`.to()` on Python floats inside their kernels, which the interpreter cannot run."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import write
from external_grading import check

pytestmark = pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None,
                                reason="Liger-Kernel is not installed (the optional extra `external`)")


def test_liger_cross_entropy_on_the_interpreter_is_the_rule_broken(tmp_path, grade_interpret):
    from test_liger_kernel import WRAPPERS

    body, expected = WRAPPERS["cross_entropy"]
    result = grade_interpret("cross_entropy", write(tmp_path, "import torch\n" + body))
    check(result, expected)
    message = next(c.message for c in result.cases if c.diagnosis == "torch_outside_kernels")
    assert "aten.sum" in message and "counting or checking integer inputs" in message, message
