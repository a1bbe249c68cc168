"""A real GPU, shared or poisoned (issue 31): a ceilings cache measured beside another process
accuses nobody later, and a grade timed beside another process names no timing-based cheat
and says the GPU was shared. Skipped without CUDA; run on an H100/H200 (docs/PERFORMANCE.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import triton

from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from grader.timing import ceilings

TIMING_CHEATS = {"slow_first_calls", "below_physical_floor"}
# What the issue saw: another process multiplying 8192x8192 bf16 matrices without pause.
HOG = """
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
(a @ a).sum().item()
print("ready", flush=True)
while True:
    b = a @ a
"""


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_CACHE_DIR", str(tmp_path / "cache"))
    versions = {"torch": torch.__version__, "triton": triton.__version__}
    return ceilings.cache_key(torch.cuda.get_device_name(0), versions)


@pytest.fixture()
def hog():
    proc = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_poisoned_ceilings_cache_on_an_idle_gpu_accuses_no_one(cache):
    # The cache: 264 TFLOP/s (an idle H200 measures ~708) named the matmul reference
    # below_physical_floor on 12 cases.
    poisoned = {"device": torch.cuda.get_device_name(0), "copy_gbps": 900.0, "matmul_tflops": 127.0,
                "l2_bytes": None}
    ceilings.save(cache, poisoned)
    kata = get_kata("matmul")
    result = grade(kata, kata.reference_path, "gpu")
    assert result.cheats == [] and result.status == "pass", (result.cheats, result.message)
    assert result.gpu_shared is None, result.gpu_shared
    healed = ceilings.load_all()[cache]
    if ceilings.datasheet(result.device):  # a known device: the far-off cache was measured again
        assert "measured again" in result.environment.get("ceilings_note", "")
        assert healed["matmul_tflops"] > 2 * poisoned["matmul_tflops"]
    assert all(c.cheat is None for c in result.cases)


@pytest.mark.parametrize("name", ["layer_norm", "activations"])
def test_beside_another_process_honest_kernels_are_named_no_cheat_and_the_gpu_is_shared(cache, hog, name):
    kata = get_kata(name)
    result = grade(kata, kata.reference_path, "gpu")
    assert result.correct, result.message
    assert not {c["reason"] for c in result.cheats} & TIMING_CHEATS, result.cheats
    assert result.gpu_shared, (result.environment.get("gpu_processes_seen_by"), result.timings_disturbed)
    seen = [p["pid"] for p in result.gpu_shared["processes"]]
    assert hog.pid in seen or result.gpu_shared["unsteady_cases"], result.gpu_shared
    assert cache not in ceilings.load_all()  # nothing measured beside the other process is kept
