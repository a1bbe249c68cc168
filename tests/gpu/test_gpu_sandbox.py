"""The sandbox on a GPU: every protection holds (reads, writes, network, processes), the doors of
tests/cheats/sandbox stay closed, and CUDA and Triton's whole tool chain still work inside the
confinement: a kernel compiled from a cold cache (ptxas, the launcher built by the C compiler,
libcuda), the outputs handed over by CUDA IPC, a library that keeps files under the home folder.
Skipped without CUDA."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from grader.sandbox import lockdown
import kernel_sources

TESTS = Path(__file__).resolve().parent.parent
DOORS = TESTS / "cheats" / "sandbox"
ONE_CASE = ["small"]

KERNEL = kernel_sources.vector_add(
    int64_offsets=True, block=4096, num_warps=8,
    note="a constant of this test run's own, so the kernel is new to any cache: {marker}",
    prelude='''import os
from pathlib import Path

# A library that keeps a cache under the home folder (FlagGems: ~/.flaggems) must work.
cache = Path.home() / ".flaggems_like" / "config.txt"
cache.parent.mkdir(parents=True, exist_ok=True)
cache.write_text("cached")
print("HOME", os.environ["HOME"], cache.read_text())
''')


def _all_held(result) -> None:
    """Every protection this machine can put in force held (all four on a Linux with Landlock)."""
    from grader.sandbox.confine import support

    protections = result.sandbox["protections"]
    expected = {name: why is None for name, why in support().items()}
    assert {name: p["held"] for name, p in protections.items()} == expected, protections


needs_landlock = pytest.mark.skipif(lockdown.landlock_abi() < 1, reason="this kernel has no Landlock: "
                                    "reads and writes cannot be confined (kata batch grade refuses to run)")


@pytest.mark.parametrize("warm", ["0", "1"], ids=["fresh-worker", "forked-worker"])
def test_a_cold_compile_runs_inside_the_confinement(tmp_path, monkeypatch, warm):
    monkeypatch.setenv("KATA_WARM_START", warm)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))  # cold: ptxas, the launcher
    path = tmp_path / "vector_add" / "solution.py"
    path.parent.mkdir()
    path.write_text(KERNEL.replace("{marker}", uuid.uuid4().hex))
    result = grade(get_kata("vector_add"), path, "gpu")
    if warm == "1":  # the first grade started the server; the second is forked by it
        result = grade(get_kata("vector_add"), path, "gpu")
    # Correct and no cheat: speed is not the subject (a kernel that prints on each call, one case).
    assert result.correct and not result.cheats, (result.message, result.output[-3000:])
    _all_held(result)
    assert "HOME " in result.output and "kata-grade-" in result.output and " cached" in result.output
    assert not (Path.home() / ".flaggems_like").exists()
    assert any((tmp_path / "triton-cache").rglob("*.cubin")), "the kernel was compiled into the cache"


@needs_landlock
@pytest.mark.parametrize("name", sorted(p.stem for p in DOORS.glob("*.py") if "siblings" not in p.stem))
def test_the_doors_stay_closed_on_the_gpu(name, tmp_path):
    path = tmp_path / "submission" / "solution.py"
    path.parent.mkdir()
    shutil.copyfile(DOORS / f"{name}.py", path)
    kata = "softmax" if name.startswith("softmax_") else "vector_add"
    result = grade(get_kata(kata), path, "gpu", only_cases=ONE_CASE)
    doors = [line for line in result.output.splitlines() if line.startswith("DOOR ")]
    assert doors and not [line for line in doors if " OPEN" in line], doors
    _all_held(result)
    if kata == "softmax":  # it had nothing of its own
        assert result.status != "pass" and result.score == 0
    else:  # one untimed case: correct, no cheat (speed is not the subject)
        assert result.correct and not result.cheats, result.message
