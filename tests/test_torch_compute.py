"""The torch_compute rule: PyTorch may allocate, fill, view and copy during a checked call, nothing
else (grader/kata/allowed_ops.py, grader/sandbox/torch_compute.py, docs/SCORING.md). The cheats that break it are
under tests/cheats/ (tests/test_cheats.py); here: the ways round the check, one process running
them all as the worker would (tests/op_escapes.py), the kata.yaml key, and honest code clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES
from grader.grading.runner import grade
from honest_idioms import idioms
from grader.kata import catalog
from grader.kata.allowed_ops import BASE_ALLOWED, HOST_READS, describe, effective_allowed
from grader.kata.format import KataFormatError, parse_kata

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@pytest.fixture(scope="module")
def escapes() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, str(TESTS / "op_escapes.py")], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("scenario", ["honest", "launch_with_copy_forbidden", "exp_allowed_by_the_kata",
                                      "fp8_honest_fp8_forbidden", "honest_fp8_forbidden"])
def test_allowed_work_leaves_no_trace(escapes, scenario):
    got = escapes[scenario]
    assert got == dict(got, ops=[], escapes=[], threads=[], error=None, forbidden=[]), got


@pytest.mark.parametrize("scenario, op", [("fp8_cast", "aten._to_copy"), ("fp8_copy_into", "aten.copy_")])
def test_a_forbidden_cast_is_recorded_with_its_dtype(escapes, scenario, op):
    ops = escapes[f"{scenario}_fp8_forbidden"]["ops"]
    assert len(ops) == 1 and ops[0].startswith(f"{op}, a conversion into torch.float8_e4m3fn"), ops
    assert escapes[scenario]["ops"] == []  # an ordinary copy where the kata forbids no cast


@pytest.mark.parametrize("idiom", sorted(idioms("cpu")))
def test_honest_launcher_idioms_leave_no_trace(escapes, idiom):
    got = escapes[f"idiom:{idiom}"]
    assert got == dict(got, ops=[], escapes=[], threads=[], error=None, forbidden=[]), got


def test_torch_math_is_recorded_by_name(escapes):
    assert escapes["exp_sum"]["ops"] == ["aten.exp", "aten.sum", "aten.div"]
    assert escapes["exp_sum"]["escapes"] == []


@pytest.mark.parametrize("scenario, op", [
    ("numpy_read", "Tensor.numpy"), ("tolist_read", "Tensor.tolist"),
    ("item_read", "aten._local_scalar_dense"), ("printing", "Tensor.__repr__"),
    ("custom_op", "kata_test.double"), ("subclass_hides_work", "aten.view on a tensor subclass (_Hiding)"),
    ("random_numbers", "aten.rand_like"),
])
def test_other_ways_of_computing_are_recorded(escapes, scenario, op):
    assert any(name.startswith(op) for name in escapes[scenario]["ops"]), escapes[scenario]


@pytest.mark.parametrize("scenario, evidence", [
    ("disable_torch_dispatch", "aten.exp"), ("no_dispatch", "aten.exp"),
    ("pop_mode_temporarily", "aten.exp"), ("disable_current_modes", "aten.exp"),
    ("exclude_python_key", "aten.exp"), ("pop_mode_and_leave_it", "mode stack was changed"),
    ("redispatch", "redispatch"), ("record_function_off", "_enable_record_function"),
    ("profiler_off", "profiler was switched off"),
    ("profiler_off_through_original", "profiler was switched off"),
    ("recorder_patched", "recorder was modified"), ("python_kernel_over_allowed_op", "aten.exp"),
])
def test_switching_the_check_off_leaves_evidence(escapes, scenario, evidence):
    got = escapes[scenario]
    assert any(evidence in e for e in got["escapes"]), got
    assert got["modes_left"] == 0  # and the grader's mode stack is put back as it was


def test_work_in_another_thread_is_seen(escapes):
    assert escapes["thread_does_the_work"]["threads"], escapes["thread_does_the_work"]


def test_the_base_list_computes_nothing():
    computing = {"aten.exp", "aten.sum", "aten.add", "aten.mul", "aten.div", "aten.mm", "aten.matmul",
                 "aten.amax", "aten.index", "aten.index_select", "aten.cat", "aten._local_scalar_dense",
                 "aten.where", "aten.constant_pad_nd"}
    assert not computing & BASE_ALLOWED
    assert {"aten.empty", "aten.empty_like", "aten.view", "aten.copy_", "aten._to_copy", "aten.fill_"} <= BASE_ALLOWED
    assert not {"aten.rand", "aten.rand_like", "aten.randn", "aten.randint", "aten.bernoulli",
                "aten.uniform_", "aten.normal_", "aten.randperm"} & BASE_ALLOWED  # dropout's work


def test_the_kata_may_allow_more_and_its_forbidden_list_wins():
    allowed = effective_allowed(("aten.cat",), ("aten.copy_", "torch.softmax"))
    assert "aten.cat" in allowed and "aten.copy_" not in allowed and "aten.clone" in allowed


def test_the_message_names_the_ops_and_their_spelling():
    text = describe(["aten.exp", "aten.sum", "aten.exp", "Tensor.numpy", "aten.a", "aten.b", "aten.c", "aten.d"])
    assert text.startswith("aten.exp (.exp()), aten.sum (.sum()), .numpy() (Tensor.numpy)")
    assert text.endswith("and 1 more")


def _gemm_yaml() -> dict:
    return yaml.safe_load((FIXTURES / "katas" / "toy_gemm" / "kata.yaml").read_text())


def _parse(raw):
    return parse_kata(raw, Path("katas/toy_gemm"), Path("reference/toy_gemm.py"))


def test_allowed_ops_at_kata_and_task_level():
    raw = _gemm_yaml()
    raw["allowed_ops"] = ["aten.cat", "Tensor.tolist"]
    task = _parse(raw).tasks[0]
    assert task.allowed_ops == ("aten.constant_pad_nd", "aten.cat", "Tensor.tolist")


@pytest.mark.parametrize("entry, message", [
    ("torch.cat", "name the aten op (aten.cat)"),
    ("aten.cat.default", "is not an op name"),
    ("cat", "is not an op name"),
    (3, "is not an op name"),
])
def test_allowed_ops_must_name_ops(entry, message):
    raw = _gemm_yaml()
    raw["tasks"][0]["allowed_ops"] = [entry]
    with pytest.raises(KataFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _parse(raw)


def test_forbidden_casts_at_kata_and_task_level():
    raw = _gemm_yaml()
    raw["forbidden_casts"] = ["float8_e4m3fn"]
    raw["tasks"][0]["forbidden_casts"] = ["int8", "float8_e4m3fn"]
    assert _parse(raw).tasks[0].forbidden_casts == ("int8", "float8_e4m3fn")
    assert _parse(_gemm_yaml()).tasks[0].forbidden_casts == ()


@pytest.mark.parametrize("entry", ["fp8", "torch.float8_e4m3fn", 8])
def test_forbidden_casts_must_name_dtypes(entry):
    raw = _gemm_yaml()
    raw["tasks"][0]["forbidden_casts"] = [entry]
    with pytest.raises(KataFormatError, match="is not a torch dtype name"):
        _parse(raw)


def test_an_op_cannot_be_both_allowed_and_forbidden():
    raw = _gemm_yaml()
    raw["forbidden"] = ["aten.constant_pad_nd"]
    with pytest.raises(KataFormatError, match="both allowed"):
        _parse(raw)


def test_host_reads_are_names_a_kata_may_allow():
    assert set(HOST_READS) >= {"Tensor.numpy", "Tensor.tolist"}


PADDED = '''
import torch
import torch.nn.functional as F
import triton
from toy_gemm import matmul_kernel


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    pad = (-K) % 32
    a = F.pad(a, (0, pad))  # allowed by the kata (aten.constant_pad_nd)
    b = F.pad(b.t(), (0, pad)).t()
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    matmul_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
        a, b, c, M, N, K + pad, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    return c
'''


def test_gemm_fixture_reference_and_an_allowed_op_grade_clean(fixture_katas, tmp_path):
    kata = catalog.get_kata("toy_gemm")
    reference = grade(kata, FIXTURES / "reference" / "toy_gemm.py", "interpret")
    assert reference.status == "pass" and reference.cheats == [], reference.message
    solution = tmp_path / "solution.py"
    # The fixture's kernels beside the solution: a kata root's reference/ is out of the worker's reach.
    (tmp_path / "toy_gemm.py").write_text((FIXTURES / "reference" / "toy_gemm.py").read_text())
    solution.write_text(PADDED)
    padded = grade(kata, solution, "interpret")
    assert padded.status == "pass" and padded.cheats == [], padded.message


def test_the_guards_do_not_import_dynamo():
    """torch wraps a dispatch mode's __torch_dispatch__ in torch._dynamo.disable unless the mode
    opts out; then the submission's first op imports torch._dynamo: seconds of every grade."""
    import subprocess
    import sys
    code = (
        "import sys, torch\n"
        "from grader.sandbox.forbidden_ops import submission_guards\n"
        "from grader.sandbox.torch_compute import watch_torch_compute\n"
        "from grader.sandbox.out_of_bounds import GuardedFactories\n"
        "with submission_guards({}, {'aten.sort'}, []), watch_torch_compute(frozenset()), GuardedFactories():\n"
        "    torch.ones(3) + 1\n"
        "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


REENABLED_COMPILE = '''
import torch
import torch._dynamo
torch._dynamo.config.disable = False  # switch torch.compile back on
'''


def test_torch_compile_switched_back_on_is_named(tmp_path):
    # backend "eager" keeps the test fast on the CPU; on a GPU inductor writes Triton kernels the
    # op recorder cannot see (tests/gpu/test_gpu_torch_compute.py): the switch is the evidence.
    path = tmp_path / "solution.py"
    cheat = (TESTS / "cheats" / "vector_add_torch_compile.py").read_text()
    path.write_text(REENABLED_COMPILE + cheat.replace("@torch.compile", '@torch.compile(backend="eager")'))
    result = grade(catalog.get_kata("vector_add"), path, "interpret")
    assert result.cheat == "torch_compute", result.cheats
    assert "torch.compile was switched back on" in result.cheats[0]["message"], result.cheats[0]


HONEST_VIEWS = """\
    # Views an honest launcher writes. x.view(torch.uint8) makes torch dispatch a detach with plain
    # torch.Tensor in `types` (once taken for a tensor subclass hiding work); flatten, unflatten
    # and movedim are composite ops without a default overload (once taken for ops run unseen).
    assert x.view(torch.uint8).data_ptr() == x.data_ptr()
    x = x.unflatten(0, (1, x.numel())).movedim(0, 1).flatten()
"""


def test_honest_views_are_not_torch_compute(tmp_path):
    source = (ROOT / "reference" / "vector_add.py").read_text()
    marker = "    out = torch.empty_like(x)\n"
    assert marker in source
    path = tmp_path / "solution.py"
    path.write_text(source.replace(marker, HONEST_VIEWS + marker, 1))
    result = grade(catalog.get_kata("vector_add"), path, "interpret")
    assert result.status == "pass" and result.cheats == [], (result.message, result.cheats)
