"""Launches are counted wherever they come from (grader/sandbox/launches.py): at the driver's
launcher on a GPU, which every compiled kernel goes through, and at the interpreter's
GridExecutor. The GPU's own paths (a compiled kernel from .warmup() launched directly, a
library's cache of compiled kernels, a multi-config autotuner) are graded in
tests/gpu/test_gpu_launch_paths.py; here, the wrapper itself and the interpreter's paths."""

from __future__ import annotations

import threading

import pytest

from conftest import write
from grader.sandbox import launches


class _FakeLauncher:
    """A launcher with the signature of Triton's (3.6 and 3.9 alike): grid, stream, function,
    then the metadata and the kernel's arguments."""

    calls = 0

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        type(self).calls += 1


class _LazyDict:  # what Triton hands its launcher as launch metadata
    def __init__(self, name):
        self.data = {"name": name, "stream": 7}


@pytest.fixture()
def fake_launcher():
    saved = dict(launches._wrapped)
    cls = type("Launcher", (_FakeLauncher,), {"calls": 0})
    launches._wrap_launcher(cls)
    yield cls
    launches._wrapped.clear()
    launches._wrapped.update(saved)
    launches.log.stop()


def test_the_launcher_counts_every_launch_with_its_stream_and_storages(fake_launcher):
    torch = pytest.importorskip("torch")
    buffer, scalar = torch.zeros(4), torch.zeros(2)
    launcher = fake_launcher()
    launcher(1, 1, 1, 7, None, b"meta", _LazyDict("partials_kernel"), None, None, buffer, 3)
    assert launches.log.count == 0  # no call being checked: nothing recorded
    launches.log.start(stream=7, keep_storages=True)
    launcher(4, 1, 1, 7, None, b"meta", _LazyDict("partials_kernel"), None, None, buffer, 3)
    launcher(1, 1, 1, 8, None, b"meta", _LazyDict("side_kernel"), None, None, scalar[1:])
    assert fake_launcher.calls == 3 and launches.log.count == 2
    assert launches.log.storages == {buffer.untyped_storage().data_ptr(), scalar.untyped_storage().data_ptr()}
    # The launch's own stream argument, not the current one, decides: `kernel[grid](..., stream=s)`.
    assert launches.log.foreign_streams == ["side_kernel"]
    thread = threading.Thread(target=launcher, args=(1, 1, 1, 7, None, b"meta", None, None, None))
    thread.start()
    thread.join()
    assert launches.log.foreign_threads == ["a Triton kernel"]
    launches.log.start(stream=7)  # a new call starts from nothing
    assert launches.log.count == 0 and not launches.log.storages and not launches.log.foreign_streams


def test_a_launcher_put_back_is_seen(fake_launcher):
    assert launches.still_installed()
    fake_launcher.__call__ = fake_launcher.__call__.__wrapped__
    assert not launches.still_installed()


def test_install_wraps_every_backends_launcher_and_the_interpreter():
    pytest.importorskip("triton")
    from triton.backends.nvidia.driver import CudaLauncher
    from triton.runtime.interpreter import GridExecutor

    launches.install()
    assert CudaLauncher.__call__ is launches._wrapped[CudaLauncher][1]
    assert GridExecutor.__call__ is launches._wrapped[GridExecutor][1]
    launches.install()  # twice is once
    assert CudaLauncher.__call__.__wrapped__.__name__ == "__call__"
    assert not hasattr(CudaLauncher.__call__.__wrapped__, "__wrapped__")


# An autotuner over heuristics over a JIT function, the interpreter's launch path for both (one
# config: the interpreter cannot time several).
AUTOTUNED_HEURISTICS = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256})], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
    else:
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    return out
'''


def test_autotuner_and_heuristics_launches_are_counted_on_the_interpreter(tmp_path, grade_interpret):
    result = grade_interpret("vector_add", write(tmp_path, AUTOTUNED_HEURISTICS))
    ran = [c for c in result.cases if c.status not in ("skipped", "not_run")]
    assert result.correct and result.cheats == [], (result.message, result.cheats)
    assert ran and all(c.launches == 1 for c in ran), [(c.name, c.launches) for c in ran]
