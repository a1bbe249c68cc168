"""The sandbox: limits the submission cannot lift, and crashes that end only the worker."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from grader.sandbox import lockdown as sandbox
import kernel_sources
from processes import left_running

KERNEL = kernel_sources.vector_add()


def grade_source(tmp_path: Path, source: str, **kwargs):
    path = tmp_path / "solution.py"
    path.write_text(source)
    return grade(get_kata("vector_add"), path, "interpret", **kwargs)


def test_python_fork_bomb_is_refused(tmp_path):
    bomb = KERNEL.replace("def vector_add(x, y):", "def vector_add(x, y):\n    import os\n"
                          "    while True:\n        os.fork()\n", 1)
    result = grade_source(tmp_path, bomb)
    # A process refused is a diagnosis, not a cheat: a debugging os.system does it too.
    assert result.status == "fail" and result.cheat is None
    assert "sandbox_violation" in [d["code"] for d in result.diagnoses]
    assert "os.fork()" in result.cases[0].message


def test_subprocess_of_python_is_refused(tmp_path):
    source = KERNEL + "\nimport subprocess, sys\ntry:\n    subprocess.run([sys.executable, '-c', 'print(1)'])\n" \
        "except Exception as exc:\n    print('REFUSED:', exc)\n"
    result = grade_source(tmp_path, source)
    assert "REFUSED: the grading sandbox does not allow starting a process" in result.output


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="the process watchdog reads /proc")
@pytest.mark.parametrize("warm", ["1", "0"], ids=["forked-worker", "fresh-worker"])
def test_native_fork_bomb_is_kept_in_bounds_and_cleaned_up(tmp_path, monkeypatch, warm):
    # libc's fork() goes round the audit hook; the parent's watchdog must stop it and kill
    # every process it made, even those that left the process group.
    monkeypatch.setenv("KATA_WARM_START", warm)
    marker = f"kf{os.getpid() % 10**6}{warm}{time.monotonic_ns() % 10**6}"[:15]
    bomb = KERNEL.replace("def vector_add(x, y):", f'''def vector_add(x, y):
    import ctypes, os, time
    libc = ctypes.CDLL(None)
    for i in range(400):
        if libc.fork() == 0:
            libc.prctl(15, ctypes.c_char_p(b"{marker}"), 0, 0, 0)  # PR_SET_NAME
            if i % 2:
                os.setsid()
            time.sleep(120)
            os._exit(0)
''', 1)
    # Forked children count their shared pages as resident: lift the memory limit out of the way.
    result = grade_source(tmp_path, bomb, memory_gib=100_000)
    assert result.status == "error" and result.score == 0
    assert "Process limit exceeded" in result.message
    assert left_running(marker) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="the memory watchdog reads /proc")
def test_memory_limit(tmp_path):
    hog = KERNEL.replace("def vector_add(x, y):", "def vector_add(x, y):\n"
                         "    hog = torch.ones(3 << 30, dtype=torch.uint8)\n", 1)
    result = grade_source(tmp_path, hog, memory_gib=1.5)
    assert result.status == "error" and "Memory limit exceeded" in result.message
    assert "1.5 GiB" in result.message


def test_output_limit(tmp_path):
    source = KERNEL + "\nimport sys\nfor _ in range(40):\n    sys.stdout.write('y' * (1 << 20))\n"
    result = grade_source(tmp_path, source)
    assert result.status == "error" and "Output limit exceeded" in result.message
    assert len(result.output) < 10_000


def test_clean_temporary_working_directory(tmp_path):
    source = KERNEL + "\nimport os\nprint('CWD', os.getcwd(), sorted(os.listdir('.')))\n"
    result = grade_source(tmp_path, source)
    line = next(l for l in result.output.splitlines() if l.startswith("CWD"))
    cwd = line.split()[1]
    assert str(tmp_path) not in cwd and "kata-grade-" in cwd and line.endswith("[]")
    assert not Path(cwd).exists()  # removed after the grade


@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="Landlock is not available in this kernel")
def test_results_store_and_reports_are_not_writable(tmp_path):
    store = tmp_path / "store" / "results.sqlite"
    store.parent.mkdir()
    store.write_bytes(b"precious")
    source = KERNEL + f'''
try:
    open({str(store)!r}, "wb").write(b"forged")
    print("WROTE")
except OSError as exc:
    print("REFUSED", exc.errno)
try:
    open({str(tmp_path / "report.md")!r}, "w").write("forged report")
    print("WROTE REPORT")
except OSError as exc:
    print("REFUSED REPORT", exc.errno)
'''
    result = grade_source(tmp_path, source, protected=[store])
    assert "REFUSED 13" in result.output and "REFUSED REPORT 13" in result.output
    assert store.read_bytes() == b"precious" and not (tmp_path / "report.md").exists()
    assert result.status == "pass" and result.sandbox["filesystem_restricted"]


def test_without_landlock_a_write_to_a_protected_path_voids_the_grade(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_SANDBOX_NO_LANDLOCK", "1")  # as on a kernel without Landlock
    store = tmp_path / "results.sqlite"
    store.write_bytes(b"precious")
    source = KERNEL + f"\nopen({str(store)!r}, 'ab').write(b'forged')\n"
    result = grade_source(tmp_path, source, protected=[store])
    assert result.status == "error" and result.cheat == "protected_path_written"
    assert not result.sandbox["filesystem_restricted"]


def test_exception_in_a_kernel_launch_is_reported(tmp_path):
    source = KERNEL.replace("add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)",
                            "add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, BLOCK=1024)")
    result = grade_source(tmp_path, source)
    assert result.status == "fail" and result.score == 0
    assert "raised an exception" in result.cases[0].message and "n" in result.cases[0].message
    # and the grader carried on with the next cases, until 3 of the task had failed
    assert all(c.status in ("error", "skipped", "not_run") for c in result.cases)
    assert any(c.status == "not_run" and "already failed" in c.message for c in result.cases)

