"""One-shot GPU check of the `compiler_error` diagnosis (issue 35): scan kernels that may crash
Triton's compiler, each graded as a prefix_sum submission.

    python benchmarks/compiler_crash_check.py OUT_DIR

Writes each candidate to OUT_DIR/NAME.py (a whole `cumsum(x)` whose kernel uses a construct
that some Triton releases fail to compile), grades it with `python -m grader grade FILE --kata
prefix_sum --gpu --no-record --json`, and prints one line per candidate: the grade's status and
diagnoses, and whether Triton's compiler crashed ("PassManager::run failed", an MLIR pass, LLVM).
Expected: every candidate whose compile crashed is diagnosed `compiler_error` (never
`exception`), with the failing pass named; the others pass or fail as ordinary kernels.
OUT_DIR/summary.json has the figures, OUT_DIR/NAME.json each grade.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEADER = '''import torch
import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b

'''

# name: (kernel source, launcher body); each launcher scans rows of x (M, N) in blocks of BLOCK
# with a carry, one program per row, so only the construct named differs.
LAUNCH = '''
def cumsum(x):
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    kernel[(m,)](x, out, n, x.stride(0), out.stride(0), BLOCK={block}, num_warps={warps}{extra})
    return out
'''

CANDIDATES = {
    # A scanned column broadcast against a tile loaded column-major through a block pointer: the
    # pattern of triton-lang/triton#7817 (open; an assertion in the scan's lowering, surfaced as
    # "PassManager::run failed"). Its contribution is zero, so the kernel stays correct. Block
    # pointers exist in triton 3.6 (the GPU machines), not in 3.9.
    "scan_column_times_tile": ('''
@triton.jit
def kernel(x_ptr, out_ptr, n, xs, os, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    tile_ptr = tl.make_block_ptr(base=x_ptr + row * xs, shape=(1, n), strides=(xs, 1), offsets=(0, 0),
                                 block_shape=(16, 16), order=(0, 1))
    tile = tl.load(tile_ptr, boundary_check=(0, 1), padding_option="zero").to(tl.float32)
    column = tl.cumsum(tl.zeros([16, 1], dtype=tl.float32), axis=0)
    nothing = tl.sum(tl.sum(column * tile, axis=1), axis=0)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * xs + cols, mask=cols < n, other=0).to(tl.float32)
        s = tl.cumsum(v, 0) + carry + nothing
        tl.store(out_ptr + row * os + cols, s.to(out_ptr.dtype.element_ty), mask=cols < n)
        carry += tl.sum(v, 0)
''', {"block": 1024, "warps": 4}),
    # A plain row scan launched on a cluster of two CTAs (Hopper): the pattern of
    # triton-lang/triton#11829 (open; the scan's lowering asserts under num_ctas > 1).
    "scan_two_ctas": ('''
@triton.jit
def kernel(x_ptr, out_ptr, n, xs, os, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * xs + cols, mask=cols < n, other=0).to(tl.float32)
        s = tl.cumsum(v, 0) + carry
        tl.store(out_ptr + row * os + cols, s.to(out_ptr.dtype.element_ty), mask=cols < n)
        carry += tl.sum(v, 0)
''', {"block": 1024, "warps": 4, "extra": ", num_ctas=2"}),
    # A 2-D block scanned along axis 1, then the row's last column taken with a reduction.
    "scan_2d_axis1": ('''
@triton.jit
def kernel(x_ptr, out_ptr, n, xs, os, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = tl.zeros([1, 1], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        v = tl.load(x_ptr + row * xs + cols, mask=cols < n, other=0).to(tl.float32)
        s = tl.cumsum(v, axis=1) + carry
        tl.store(out_ptr + row * os + cols, s.to(out_ptr.dtype.element_ty), mask=cols < n)
        carry = tl.max(tl.where(cols == tl.minimum(n - 1, start + BLOCK - 1), s, -float("inf")), axis=1, keep_dims=True)
''', {"block": 1024, "warps": 4}),
    # A reversed associative scan of a tuple (value, flag) with a custom combine function.
    "scan_reverse_tuple": ('''
@triton.jit
def _pair(a, fa, b, fb):
    return a + b, fa | fb


@triton.jit
def kernel(x_ptr, out_ptr, n, xs, os, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * xs + cols, mask=cols < n, other=0).to(tl.float32)
        flags = cols < n
        r, _ = tl.associative_scan((tl.flip(v, 0), tl.flip(flags, 0)), 0, _pair, reverse=True)
        s = tl.flip(r, 0)
        s = tl.cumsum(v, 0) + carry + 0.0 * s
        tl.store(out_ptr + row * os + cols, s.to(out_ptr.dtype.element_ty), mask=cols < n)
        carry += tl.sum(v, 0)
''', {"block": 1024, "warps": 4}),
    # A scan of a boolean mask (int1) cast afterwards.
    "scan_int1": ('''
@triton.jit
def kernel(x_ptr, out_ptr, n, xs, os, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * xs + cols, mask=cols < n, other=0).to(tl.float32)
        live = tl.associative_scan(cols < n, 0, _add)
        s = tl.cumsum(v, 0) + carry + 0.0 * live.to(tl.float32)
        tl.store(out_ptr + row * os + cols, s.to(out_ptr.dtype.element_ty), mask=cols < n)
        carry += tl.sum(v, 0)
''', {"block": 1024, "warps": 4}),
    # A scan over a reshaped 3-D block along its middle axis.
    "scan_3d_middle": ('''
@triton.jit
def kernel(x_ptr, out_ptr, n, xs, os, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * xs + cols, mask=cols < n, other=0).to(tl.float32)
        t = tl.reshape(v, (4, BLOCK // 16, 4))
        inner = tl.cumsum(t, 1)
        s = tl.cumsum(v, 0) + carry + 0.0 * tl.reshape(inner, (BLOCK,))
        tl.store(out_ptr + row * os + cols, s.to(out_ptr.dtype.element_ty), mask=cols < n)
        carry += tl.sum(v, 0)
''', {"block": 1024, "warps": 4}),
    # One warp scanning a block far larger than its lanes.
    "scan_one_warp_huge_block": ('''
@triton.jit
def kernel(x_ptr, out_ptr, n, xs, os, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * xs + cols, mask=cols < n, other=0).to(tl.float32)
        s = tl.associative_scan(v, 0, _add) + carry
        tl.store(out_ptr + row * os + cols, s.to(out_ptr.dtype.element_ty), mask=cols < n)
        carry += tl.sum(v, 0)
''', {"block": 65536, "warps": 1}),
}

CRASH = ("PassManager::run failed", "processing an MLIR pass pipeline", "LLVM ERROR",
         "failed to legalize operation")


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    summary = []
    for name, (kernel, launch) in CANDIDATES.items():
        path = out / f"{name}.py"
        path.write_text(HEADER + kernel + LAUNCH.format(**dict({"extra": ""}, **launch)))
        done = subprocess.run([sys.executable, "-m", "grader", "grade", str(path), "--kata", "prefix_sum",
                               "--gpu", "--no-record", "--json", "--fail-fast"], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        (out / f"{name}.json").write_text(done.stdout)
        try:
            result = json.loads(done.stdout)
        except json.JSONDecodeError:
            result = {"status": f"no result (exit {done.returncode})", "diagnoses": [], "output": done.stderr}
        text = json.dumps(result)
        crashed = any(marker in text for marker in CRASH)
        codes = [d["code"] for d in result.get("diagnoses", [])]
        ok = (not crashed) or codes == ["compiler_error"]
        row = {"candidate": name, "status": result.get("status"), "diagnoses": codes,
               "compiler_crashed": crashed, "as_expected": ok,
               "first_diagnosis": (result.get("diagnoses") or [{}])[0].get("message", "")[:300]}
        summary.append(row)
        print(f"{name:<26} {row['status']:<6} crashed={crashed!s:<5} diagnoses={codes} "
              f"{'OK' if ok else 'UNEXPECTED'}  {row['first_diagnosis'][:160]}", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    crashed = [r for r in summary if r["compiler_crashed"]]
    print(f"\n{len(crashed)} candidate(s) crashed the compiler; "
          f"{sum(not r['as_expected'] for r in summary)} unexpected diagnosis(es).")
    return 0 if all(r["as_expected"] for r in summary) else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "compiler_crash_check")))
