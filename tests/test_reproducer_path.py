"""TRITON_REPRODUCER_PATH=FILE, which the compiler_error advice names, works under the sandbox:
the worker may write only beneath its grade folder, so it gets a path there and the grader copies
the file to FILE once the worker is done (grader.grading.processes.copy_reproducer). Triton's
compiler writes the reproducer only when it crashes, which cannot be made to happen on the
interpreter: the submission below writes where the variable points, as the compiler would."""

from __future__ import annotations

from pathlib import Path

from conftest import write
from grader.grading import processes
from grader.grading.runner import grade
from grader.kata.catalog import get_kata
import kernel_sources

WRITES_THE_REPRODUCER = kernel_sources.add_kernel(prelude="import os\n") + '''

def vector_add(x, y):
    with open(os.environ["TRITON_REPRODUCER_PATH"], "w") as f:  # as Triton's compiler does on a crash
        f.write("module { tt.func @add_kernel() }")
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out
'''


def test_the_reproducer_asked_for_reaches_the_file_named(tmp_path, monkeypatch):
    wanted = tmp_path / "out" / "crash.mlir"
    monkeypatch.setenv("TRITON_REPRODUCER_PATH", str(wanted))
    result = grade(get_kata("vector_add"), write(tmp_path, WRITES_THE_REPRODUCER), "interpret",
                   only_cases=["small"])
    assert result.correct, (result.message, result.output)
    assert wanted.read_text() == "module { tt.func @add_kernel() }"


def test_only_a_plain_file_is_copied_out(tmp_path):
    folder = tmp_path / "grade-tmp"
    folder.mkdir()
    assert processes.copy_reproducer(folder, str(tmp_path / "a.mlir")) is None  # nothing written
    secret = tmp_path / "secret"
    secret.write_text("not the worker's")
    (folder / processes.REPRODUCER_NAME).symlink_to(secret)
    assert processes.copy_reproducer(folder, str(tmp_path / "a.mlir")) is None and not (tmp_path / "a.mlir").exists()
    (folder / processes.REPRODUCER_NAME).unlink()
    (folder / processes.REPRODUCER_NAME).write_text("module {}")
    assert processes.copy_reproducer(folder, str(tmp_path / "a.mlir")) == str(tmp_path / "a.mlir")
    assert processes.copy_reproducer(folder, "") is None  # not asked for


def test_two_grades_asking_for_a_reproducer_share_one_warm_start_server(tmp_path, monkeypatch):
    # Each grade's worker gets a reproducer path in its own folder: read when a kernel compiles,
    # not at import, so it is no part of the warm start's key (else every grade started a server).
    from grader.grading import warm_start

    monkeypatch.setenv("TRITON_REPRODUCER_PATH", str(tmp_path / "crash.mlir"))
    first, second = (processes.worker_env("interpret", tmp_path / name / "tmp") for name in ("a", "b"))
    assert first["TRITON_REPRODUCER_PATH"] != second["TRITON_REPRODUCER_PATH"]
    assert warm_start.server_key(first) == warm_start.server_key(second)
