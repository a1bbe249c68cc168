"""A kata's declared GPU-grade peak against the GPU's memory (grader.kata.gpu_memory_fit): said before a
grade, where the grader's own work runs out of memory, and where a case does."""

from __future__ import annotations

from grader.grading import runner, verdict
from grader.kata import catalog
from grader.kata.gpu_memory_fit import GIB, shortfall


def test_a_gpu_smaller_than_the_katas_measured_peak_is_named():
    adamw = catalog.get_kata("adamw")  # peaks near 71 GiB
    said = shortfall(adamw, 24 * GIB)
    assert said.startswith("adamw's GPU grade peaks near 71 GiB") and "this GPU has 24 GiB" in said
    assert "may not fit" in said and "--case NAME" in said
    assert shortfall(adamw, 80 * GIB) is None
    assert shortfall(adamw, None) is None  # no GPU, or the driver would not say
    assert shortfall(catalog.get_kata("softmax"), 24 * GIB) is None


def test_the_grader_running_out_of_gpu_memory_says_when_the_gpu_is_too_small(monkeypatch):
    adamw = catalog.get_kata("adamw")
    monkeypatch.setattr(verdict.cuda_probe, "total_memory_bytes", lambda: 24 * GIB)
    message = verdict.gpu_busy_message(adamw, "gpu", "CUDA out of memory")
    assert message.startswith("adamw's GPU grade peaks near 71 GiB") and message.endswith("CUDA out of memory")
    assert verdict.GPU_BUSY_MESSAGE in message
    # A GPU large enough, or an interpreter grade: the message as before (another program?).
    assert verdict.gpu_busy_message(adamw, "interpret", "x") == verdict.GPU_BUSY_MESSAGE + "x"
    monkeypatch.setattr(verdict.cuda_probe, "total_memory_bytes", lambda: 80 * GIB)
    assert verdict.gpu_busy_message(adamw, "gpu", "x") == verdict.GPU_BUSY_MESSAGE + "x"


def test_kata_grade_warns_before_a_gpu_grade_on_a_smaller_gpu(monkeypatch, tmp_path):
    # The CLI asks the driver (no CUDA context) and warns on stderr before grading.
    from click.testing import CliRunner

    from grader.cli import main as cli
    from grader.grading import cuda_probe

    monkeypatch.setattr(cuda_probe, "total_memory_bytes", lambda: 24 * GIB)
    monkeypatch.setattr(cli, "resolve_mode", lambda interpret, gpu: "gpu")
    graded = []
    monkeypatch.setattr(runner, "grade", lambda kata, *a, **k: graded.append(kata.name) or _stop())
    solution = tmp_path / "solution.py"
    solution.write_text("")
    result = CliRunner().invoke(cli.main, ["grade", str(solution), "--kata", "adamw", "--no-record"])
    assert graded == ["adamw"]
    assert "Warning: adamw's GPU grade peaks near 71 GiB" in result.stderr


class _Stopped(Exception):
    pass


def _stop():
    raise _Stopped


def test_the_workspace_readme_gives_the_gpu_grade_peak():
    from grader.results.report import render_workspace_readme

    assert "A GPU grade peaks near 71 GiB of GPU memory" in render_workspace_readme(catalog.get_kata("adamw"))
