"""GPU-only grading behaviour (skipped without CUDA; run on an H100/H200, results in docs/PERFORMANCE.md)."""

from __future__ import annotations

from pathlib import Path

import torch

from grader.grading.runner import grade
from grader.kata.catalog import get_kata
import kernel_sources

KERNEL = kernel_sources.with_launch(store_offset=True)  # launch(x, y, out, offset=0)


def _grade(tmp_path: Path, body: str):
    path = tmp_path / "solution.py"
    path.write_text(KERNEL + body)
    return grade(get_kata("vector_add"), path, "gpu")


def test_reference_passes_with_speed_and_roofline():
    result = grade(get_kata("vector_add"), get_kata("vector_add").reference_path, "gpu")
    assert result.status == "pass", result.message
    assert result.speed_measured and result.speedup > 0.9 and result.roofline > 0.8
    assert result.environment["ceilings"]["copy_gbps"] > 500
    assert all(c.time_ms and c.baseline_ms for c in result.cases if c.status == "pass" and c.speedup)


def test_cuda_illegal_address_is_a_clear_error(tmp_path):
    # Stores 2^40 elements past the output: an illegal address that kills the CUDA context.
    body = "\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n    launch(x, y, out, offset=1 << 40)\n    return out\n"
    result = _grade(tmp_path, body)
    assert result.status == "error" and result.score == 0
    assert "CUDA fault" in result.message and "illegal" in result.message
    assert any(c.status == "not_run" for c in result.cases)


def test_correct_but_slow_fails_the_threshold(tmp_path):
    body = ("\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n"
            "    for _ in range(4):\n        launch(x, y, out)\n    return out\n")
    result = _grade(tmp_path, body)
    assert result.correct and result.status == "fail"
    assert result.speedup < 0.5 and "below the threshold" in result.message
    assert 50 < result.score < 100


def test_unwritten_elements_are_caught_on_cuda(tmp_path):
    body = ("\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n"
            "    if x.numel() > 1:\n        launch(x[:-1], y[:-1], out[:-1])\n    return out\n")
    result = _grade(tmp_path, body)
    assert result.status == "fail" and "never wrote" in result.message


def test_an_autotuned_kernel_grades_clean():
    # Autotuning runs inside the first checked call (triton.testing.do_bench: allocation, fills,
    # events and many launches): none of it may read as PyTorch work or a timing trick. (Its
    # speed is the autotuner's business: not asserted.)
    path = Path(__file__).resolve().parent.parent / "fixtures" / "vector_add_autotuned.py"
    result = grade(get_kata("vector_add"), path, "gpu")
    assert result.correct and result.cheats == [] and result.diagnoses == [], (
        result.message, result.cheats, result.diagnoses)
    assert any(c.time_ms for t in result.tasks for c in t.cases)  # timed, not stopped


def test_an_honest_shortcut_without_a_kernel_grades_clean(tmp_path):
    # dropout with p = 0 answered by x.clone() and no launch (tests/test_cheats.py, on the CPU).
    source = (Path(__file__).resolve().parent.parent.parent / "reference" / "dropout.py").read_text()
    marker = "    out = torch.empty_like(x)\n"
    path = tmp_path / "solution.py"
    path.write_text(source.replace(marker, "    if p == 0.0:\n        return x.clone()\n" + marker, 1))
    result = grade(get_kata("dropout"), path, "gpu")
    assert result.status == "pass" and result.cheats == [], (result.message, result.cheats)


def test_an_output_buffer_reused_across_calls_is_judged_call_by_call(tmp_path):
    # The kernel recomputes into one module-level output per shape: each call's result is right
    # when it returns. The second checked call overwrites the first's buffer before the checker
    # reads it, so the first call's outputs must go over as copies (as on the CPU), or the first
    # call reads as wrong ("input_dependent_error").
    source = (Path(__file__).resolve().parent.parent.parent / "reference" / "vector_add.py").read_text()
    marker = "    out = torch.empty_like(x)\n"
    assert marker in source
    reuse = ("    key = (x.shape, x.dtype, x.device)\n"
             "    if _OUTPUTS.get(key) is None:\n"
             "        _OUTPUTS[key] = torch.empty_like(x)\n"
             "    out = _OUTPUTS[key]\n")
    path = tmp_path / "solution.py"
    path.write_text(source.replace(marker, reuse, 1) + "\n\n_OUTPUTS = {}\n")
    result = grade(get_kata("vector_add"), path, "gpu")
    assert result.correct and result.cheats == [] and result.diagnoses == [], (
        result.message, result.cheats, result.diagnoses)


def test_autotuning_is_not_counted_in_a_calls_peak_memory():
    # Triton's autotuner benchmarks inside the first call with a 256 MB flush buffer: outside the
    # meter (grader.kata.memory_budget.exclude_from_meter, installed by the worker), so an
    # autotuned kernel in a kata with a memory budget is judged by its own allocations.
    import importlib.util

    from triton.runtime.autotuner import Autotuner

    from grader.kata import memory_budget

    memory_budget.exclude_from_meter(Autotuner, "_bench")
    assert getattr(Autotuner._bench, "kata_excluded", False)
    path = Path(__file__).resolve().parent.parent / "fixtures" / "vector_add_autotuned.py"
    spec = importlib.util.spec_from_file_location("autotuned", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    meter = memory_budget.PeakMeter(active=True)
    meter.start()
    out = module.vector_add(x, y)  # autotunes here
    meter.stop()
    torch.testing.assert_close(out, x + y)
    assert meter.extra <= 2 * out.numel() * out.element_size(), meter.extra  # the output, not 256 MB


def test_a_real_cuda_out_of_memory_in_the_checker_is_named_gpu_busy(private_kata):
    # The checker is forked by the warm start; its CUDA out-of-memory must reach the grade as the
    # machine's state (grade again), with the exception's line and no traceback, not as a bug.
    spec = private_kata("gpu_full") / "spec.py"
    spec.write_text(spec.read_text().replace(
        "    return x.double() + y.double()",
        "    torch.empty(1 << 50, dtype=torch.uint8, device=x.device)\n"
        "    return x.double() + y.double()", 1))
    kata = get_kata("gpu_full")
    result = grade(kata, kata.reference_path, "gpu")
    assert result.status == "error" and result.cheat is None
    assert result.message.startswith("The GPU ran out of memory while the grader itself worked"), result.message
    assert "out of memory" in result.message and "Traceback" not in result.message
    assert [d["code"] for d in result.diagnoses] == ["gpu_busy"], result.diagnoses


def test_a_blocking_copy_in_the_call_is_advice_with_its_line_and_never_a_fault(tmp_path):
    # torch.tensor(..., device="cuda") copies from pageable memory and waits for the GPU.
    body = ("\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n"
            "    torch.tensor([x.numel()], device=x.device)\n"
            "    launch(x, y, out)\n    return out\n")
    result = _grade(tmp_path, body)
    assert result.correct and result.cheat is None and not result.diagnoses, result.message
    # The anatomy may add its own codes (a synced call can be launch_bound): host_sync is held.
    codes = [a["code"] for a in result.advice]
    assert "host_sync" in codes, result.advice
    advice = result.advice[codes.index("host_sync")]
    line = (KERNEL + body).splitlines().index("    torch.tensor([x.numel()], device=x.device)") + 1
    assert advice["code"] == "host_sync" and f"solution.py:{line}" in advice["message"], advice
    assert {a["code"] for a in result.advice} <= {"host_sync", "launch_bound", "low_bandwidth"}, result.advice
    assert "debug mode" not in result.output and "synchroniz" not in result.output, result.output
    timed = [c for c in result.cases if c.timed]
    assert timed and all(c.host_syncs >= 1 for c in timed)


def test_the_reference_shows_no_host_syncs():
    result = grade(get_kata("vector_add"), get_kata("vector_add").reference_path, "gpu")
    assert result.advice == [] and all(c.host_syncs == 0 for c in result.cases if c.timed)
