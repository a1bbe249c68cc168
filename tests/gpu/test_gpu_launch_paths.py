"""Every way a compiled Triton kernel reaches the GPU is a launch (grader/sandbox/launches.py
counts at the driver's launcher): a kernel compiled with .warmup() and launched directly, as
Triton's fused-softmax tutorial does; a library's own cache of compiled kernels, as FlagGems'
LibEntry keeps; an autotuner timing several configs over heuristics. Each honest vector_add
below was named `no_triton_kernel` or `cached_results` when only JITFunction.run was counted.
Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.grading.runner import grade
from grader.kata.catalog import get_kata
import kernel_sources

KERNEL = kernel_sources.add_kernel(int64_offsets=True)

# The fused-softmax tutorial's pattern: compile with .warmup(), launch the compiled kernel.
WARMUP = '''
def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, 1024), 1, 1)
    kernel = add_kernel.warmup(x, y, out, n, BLOCK=1024, grid=grid)
    kernel._init_handles()
    kernel[grid](x, y, out, n, 1024)
    return out
'''

# FlagGems' LibEntry, reduced: the first call of a specialization runs the JIT and keeps the
# compiled kernel it returns; later calls launch that kernel directly (on triton 3.3-3.6 with
# every parameter, constexprs included, as FlagGems 5.0 does; else without the constexprs).
LIBRARY_CACHE = '''
_MINOR = tuple(int(p) for p in triton.__version__.split(".")[:2])


class LibEntry:
    def __init__(self, fn):
        self.fn, self.cache = fn, {}

    def __getitem__(self, grid):
        return lambda *args, **constexprs: self.run(grid, args, constexprs)

    @staticmethod
    def _key(arg):
        if hasattr(arg, "data_ptr"):
            return (arg.dtype, arg.data_ptr() % 16 == 0)
        return (type(arg), arg == 1, arg % 16 == 0, -2**31 <= arg < 2**31)

    def run(self, grid, args, constexprs):
        key = tuple(self._key(a) for a in args) + tuple(sorted(constexprs.items()))
        kernel = self.cache.get(key)
        if kernel is None:
            self.cache[key] = self.fn.run(*args, grid=grid, warmup=False, **constexprs)
            return
        launch_args = (*args, *constexprs.values()) if (3, 3) <= _MINOR <= (3, 6) else args
        kernel[tuple(grid) + (1,) * (3 - len(grid))](*launch_args)


cached_add = LibEntry(add_kernel)


def vector_add(x, y):
    out = torch.empty_like(x)
    cached_add[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''

# Several configs timed by the autotuner on the first call, over heuristics.
AUTOTUNED = '''
@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 2048}, num_warps=8)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
    else:
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    tuned_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    return out
'''


def _grade(tmp_path: Path, body: str):
    path = tmp_path / "solution.py"
    path.write_text(KERNEL + body)
    return grade(get_kata("vector_add"), path, "gpu")


@pytest.mark.parametrize("body", [WARMUP, LIBRARY_CACHE, AUTOTUNED], ids=["warmup", "library_cache", "autotuned"])
def test_every_launch_path_is_counted(tmp_path, body):
    result = _grade(tmp_path, body)
    ran = [c for c in result.cases if c.status not in ("skipped", "not_run")]
    assert result.correct and result.cheats == [], (result.message, result.cheats)
    # The second checked call's count: one launch, however it was made.
    assert ran and all(c.launches == 1 for c in ran), [(c.name, c.launches) for c in ran]


def test_a_compiled_kernel_sent_to_a_side_stream_is_seen(tmp_path):
    # The launcher is handed the stream itself: `kernel[grid](..., stream=s)` changes no
    # current stream, and the timer would not see the work.
    body = '''
_side = torch.cuda.Stream()


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, 1024), 1, 1)
    kernel = add_kernel.warmup(x, y, out, n, BLOCK=1024, grid=grid)
    _side.wait_stream(torch.cuda.current_stream())
    kernel[grid](x, y, out, n, 1024, stream=_side.cuda_stream)
    torch.cuda.current_stream().wait_stream(_side)
    return out
'''
    result = _grade(tmp_path, body)
    assert result.status == "fail" and result.cheat == "side_stream", result.cheats


@pytest.mark.parametrize("body", [WARMUP, LIBRARY_CACHE], ids=["warmup", "library_cache"])
def test_the_anatomy_sees_a_compiled_kernel_launched_without_the_jit(tmp_path, body):
    # The anatomy's profiled call sees launches where the count does: a compiled kernel launched
    # directly is a Triton kernel with its facts (grid, warps, registers), not an unnamed GPU event.
    result = _grade(tmp_path, body)
    timed = [c for c in result.cases if c.timed]
    assert result.correct and timed, (result.message, result.cheats)
    for case in timed:
        ours = [k for k in case.kernels or [] if k["source"] == "triton"]
        assert ours and ours[0]["name"] == "add_kernel", (case.name, case.anatomy, case.kernels)
        assert ours[0]["grid"] and ours[0]["num_warps"] and ours[0]["registers"], ours[0]
