"""torch_compute on a GPU (skipped without CUDA): PyTorch doing the work behind a token Triton
kernel is caught on the compiled launch path too, and honest solutions stay clean there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import FIXTURES, TESTS
from grader.grading.runner import grade
from grader.kata import catalog


def _torch_compute(result, *ops):
    assert result.status == "fail" and result.score == 0, result.message
    assert result.cheat == "torch_compute", result.cheats
    assert all(op in result.cheats[0]["message"] for op in ops), result.cheats[0]


def test_softmax_with_torch_exp_and_sum_is_caught():
    result = grade(catalog.get_kata("softmax"), TESTS / "cheats" / "softmax_torch_exp_sum.py", "gpu")
    _torch_compute(result, "aten.exp", "aten.sum")


def test_gemm_as_a_float_matmul_is_caught(fixture_katas):
    result = grade(catalog.get_kata("toy_gemm"), TESTS / "cheats" / "toy_gemm_float_matmul.py", "gpu")
    _torch_compute(result, "aten.mm")


def test_dispatch_switched_off_is_caught():
    result = grade(catalog.get_kata("vector_add"), TESTS / "cheats" / "vector_add_disables_torch_dispatch.py", "gpu")
    _torch_compute(result, "ran where the dispatch mode did not see")


def test_numpy_through_the_host_is_caught(tmp_path):
    source = (TESTS / "cheats" / "vector_add_disables_torch_dispatch.py").read_text()
    body = source[:source.index("\ndef vector_add")] + '''

def vector_add(x, y):
    import numpy as np
    total = torch.from_numpy(np.add(x.cpu().numpy(), y.cpu().numpy())).to(x.device)
    out = torch.empty_like(x)
    launch(total, torch.zeros_like(y), out)
    return out
'''
    path = tmp_path / "solution.py"
    path.write_text(body)
    _torch_compute(grade(catalog.get_kata("vector_add"), path, "gpu"), "to the host")


def test_honest_gemm_stays_clean_on_the_gpu(fixture_katas):
    result = grade(catalog.get_kata("toy_gemm"), FIXTURES / "reference" / "toy_gemm.py", "gpu")
    assert result.correct and result.cheats == [], (result.message, result.cheats)


def test_torch_compile_switched_back_on_is_caught(tmp_path):
    # TorchInductor writes Triton kernels and launches them past the JIT, so the op recorder sees
    # none of its work: switching torch.compile back on is the evidence.
    cheat = TESTS / "cheats" / "vector_add_torch_compile.py"
    path = tmp_path / "solution.py"
    path.write_text(  # Triton's JIT needs its kernels' source in a file: the cheat, prefixed
        "import torch\nimport torch._dynamo\nimport torch._inductor.config\n"
        "torch._dynamo.config.disable = False\n"
        "torch._inductor.config.compile_threads = 1  # no compile workers (the sandbox refuses them)\n"
        + cheat.read_text())
    _torch_compute(grade(catalog.get_kata("vector_add"), path, "gpu"), "torch.compile was switched back on")


def test_quantize_rounding_through_torch_is_caught(tmp_path):
    # The fp8 task forbids PyTorch's conversion into float8 (kata.yaml forbidden_casts): here the
    # kernel's own q goes through float32 and back, so PyTorch did the final rounding. The int8
    # tasks, which allow casts, stay clean.
    source = (TESTS.parent / "reference" / "quantize.py").read_text()
    source += '''

_honest_fp8 = quantize_fp8_rowwise


def quantize_fp8_rowwise(x):
    q, scale = _honest_fp8(x)
    return q.float().to(torch.float8_e4m3fn), scale
'''
    path = tmp_path / "solution.py"
    path.write_text(source)
    result = grade(catalog.get_kata("quantize"), path, "gpu")
    _torch_compute(result, "a conversion into torch.float8_e4m3fn")
    failed = {c.task for c in result.cases if c.status == "fail"}
    assert failed == {"quantize_fp8_rowwise"}, failed


def test_honest_launcher_idioms_leave_no_trace_on_the_gpu():
    # tests/honest_idioms.py on CUDA tensors, each as the body of a checked call.
    env = dict(os.environ, PYTHONPATH=str(TESTS.parent))
    done = subprocess.run([sys.executable, str(TESTS / "op_escapes.py"), "--idioms-on", "cuda"],
                          capture_output=True, text=True, env=env, cwd=TESTS.parent, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    assert results and all(name.startswith("idiom:") for name in results)
    traces = {name: got for name, got in results.items()
              if got["ops"] or got["escapes"] or got["threads"] or got["error"] or got["forbidden"]}
    assert not traces, traces
