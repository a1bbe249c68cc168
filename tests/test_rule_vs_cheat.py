"""The rule broken vs the grade gamed (grader/sandbox/provenance.py, docs/SCORING.md): PyTorch
computing on the kata's inputs is the cheat `torch_compute` (or `forbidden_op`); PyTorch
finishing the submission's own results (partials its Triton kernel wrote) or counting integer
inputs fails the grade with the diagnosis `torch_outside_kernels` and no cheat. A "partial"
that is a copy of the inputs stays a cheat."""

from __future__ import annotations

import pytest
import torch

from conftest import write
from grader.kata.allowed_ops import BASE_ALLOWED
from grader.sandbox.torch_compute import watch_torch_compute
from grader.sandbox.provenance import Provenance


def _watch(inputs: dict, launched: set, body):
    provenance = Provenance(list(inputs.items()), launched)
    with watch_torch_compute(BASE_ALLOWED, provenance=provenance) as record:
        body()
    return record, provenance


def _ptr(t):
    return t.untyped_storage().data_ptr()


def test_torch_on_the_inputs_is_the_cheat():
    x = torch.randn(64)
    record, _ = _watch({"x": x}, set(), lambda: x.exp().sum())
    assert record.ops == ["aten.exp", "aten.sum"] and record.own == [] and record.counts == []


def test_torch_reducing_a_kernels_partials_is_the_rule_broken():
    x, launched, out = torch.randn(64), set(), {}

    def body():
        partials = torch.empty(8)
        launched.add(_ptr(partials))  # handed to a Triton kernel in this call
        partials.copy_(x.view(8, 8)[:, 0])  # (what the kernel would have written)
        total = partials.sum() / 8  # and what torch computes from it alone stays its own
        out["total"] = total.to(torch.float64)

    record, provenance = _watch({"x": x}, launched, body)
    assert record.ops == [] and record.own == ["aten.sum", "aten.div"], record
    assert provenance.copies_of_inputs() == []


def test_a_copy_of_the_inputs_is_no_partial():
    x, launched = torch.randn(64), set()

    def body():
        decoy = torch.empty(64)
        launched.add(_ptr(decoy))  # a kernel that copies x into it
        decoy.copy_(x)
        decoy.exp().sum()

    record, provenance = _watch({"x": x}, launched, body)
    assert record.own == ["aten.exp", "aten.sum"]  # by origin alone...
    assert provenance.copies_of_inputs() == ["aten.exp on a copy of the input 'x' its kernel made"]


def test_a_torch_copy_of_the_inputs_and_a_tensor_from_before_the_call_are_the_inputs():
    x, cached = torch.randn(64), torch.randn(64)

    def body():
        x.clone().exp()
        cached.neg()

    record, _ = _watch({"x": x}, set(), body)
    assert record.ops == ["aten.exp", "aten.neg"] and record.own == []


def test_an_integer_count_read_on_the_host_is_a_count():
    logits, target = torch.randn(8, 5), torch.tensor([1, -100, 3, 4, -100, 0, 2, 2])

    def body():
        n = (target != -100).sum().item()
        assert (target * (target != -100)).max() < 5 and n == 6

    record, _ = _watch({"logits": logits, "target": target}, set(), body)
    assert record.ops == [] and record.own == []
    assert record.counts == ["aten.ne", "aten.sum", "aten._local_scalar_dense", "aten.mul", "aten.max",
                             "aten.lt"], record.counts


def test_counting_floating_inputs_is_the_cheat():
    x = torch.randn(64)
    record, _ = _watch({"x": x}, set(), lambda: (x > 0).sum().item())
    assert record.ops == ["aten.gt", "aten.sum", "aten._local_scalar_dense"] and record.counts == []


# ---- graded on the interpreter ----

REDUCE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def partial_sums(x_ptr, out_ptr, n, BLOCK: tl.constexpr, COPY: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    if COPY:
        tl.store(out_ptr + offs, x, mask=offs < n)
    else:
        tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0))


def row_sum(x):
    raise NotImplementedError


def row_argmax(x):
    raise NotImplementedError
'''

# Liger-Kernel's pattern: the kernel writes one partial per program, torch sums them.
PARTIALS = REDUCE + '''

def total_sum(x):
    n = x.numel()
    blocks = triton.cdiv(n, 4096)
    partials = torch.empty(blocks, dtype=torch.float32, device=x.device)
    partial_sums[(blocks,)](x, partials, n, BLOCK=4096, COPY=False)
    return partials.sum()
'''

# A decoy: the kernel only copies x, torch does the sum.
COPIED = REDUCE + '''

def total_sum(x):
    n = x.numel()
    copy = torch.empty(n, dtype=torch.float32, device=x.device)
    partial_sums[(triton.cdiv(n, 4096),)](x, copy, n, BLOCK=4096, COPY=True)
    return copy.sum()
'''


def _total_sum(result):
    return [c for c in result.cases if c.task == "total_sum" and c.status in ("fail", "error")]


def test_a_partials_sum_in_torch_fails_as_the_rule_broken(tmp_path, grade_interpret):
    result = grade_interpret("reduce", write(tmp_path, PARTIALS))
    failed = _total_sum(result)
    assert result.status == "fail" and result.cheats == [], result.cheats
    assert failed and {c.diagnosis for c in failed} == {"torch_outside_kernels"}, [(c.name, c.message) for c in failed]
    assert "torch.Tensor.sum (forbidden in this kata) on what your Triton kernels wrote" in failed[0].message
    advice = {d["code"]: d["advice"] for d in result.diagnoses}["torch_outside_kernels"]
    assert "final reduction over partials in a second Triton kernel" in advice


def test_a_partial_that_copies_the_input_is_the_cheat(tmp_path, grade_interpret):
    result = grade_interpret("reduce", write(tmp_path, COPIED))
    assert result.status == "fail" and result.cheat == "forbidden_op", result.cheats
    assert "a copy of the input 'x'" in result.cheats[0]["message"], result.cheats[0]


# Liger-Kernel's cross-entropy checks and counts its targets with torch and .item(); here an
# embedding checks its indices so: the kernel does the gather.
COUNTED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def gather_rows(idx_ptr, w_ptr, out_ptr, D, w_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    index = tl.load(idx_ptr + row)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        values = tl.load(w_ptr + index * w_stride + cols, mask=cols < D)
        tl.store(out_ptr + row * D + cols, values, mask=cols < D)


def embedding(indices, weight):
    assert bool(((indices >= 0) & (indices < weight.shape[0])).all()), "index out of range"
    out = torch.empty(indices.numel(), weight.shape[1], dtype=weight.dtype, device=weight.device)
    gather_rows[(indices.numel(),)](indices, weight, out, weight.shape[1], weight.stride(0), BLOCK=128)
    return out.view(*indices.shape, weight.shape[1])


def embedding_backward(indices, grad_out, num_embeddings):
    raise NotImplementedError
'''


def test_an_index_check_read_on_the_host_fails_as_the_rule_broken(tmp_path, grade_interpret):
    result = grade_interpret("gather_scatter", write(tmp_path, COUNTED))
    failed = [c for c in result.cases if c.task == "embedding" and c.status == "fail"]
    assert result.cheats == [] and failed, (result.cheats, result.message)
    assert {c.diagnosis for c in failed} == {"torch_outside_kernels"}, [(c.name, c.message) for c in failed]
    assert "counting or checking integer inputs" in failed[0].message
