"""benchmarks/spmv_floor.py bounds what a CSR SpMV can reach only if its kernel really pays every
unavoidable cost: every nonzero streamed and its x gathered, every row pointer read and every y
written. On the interpreter (a fresh process, so TRITON_INTERPRET holds at import), each y must be
its program's sum of products, for odd sizes, full and partial chunks, and both row steps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import importlib.util
import torch
spec = importlib.util.spec_from_file_location("spmv_floor", "benchmarks/spmv_floor.py")
floor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(floor)

gen = torch.Generator().manual_seed(0)
for R, nnz, C, npp, row_block in [(1000, 3001, 50, 512, 128), (700, 2048, 9, 256, 512),
                                  (129, 5000, 33, 1024, 128), (5, 7, 3, 256, 128)]:
    lengths = torch.multinomial(torch.ones(R), nnz, replacement=True, generator=gen).bincount(minlength=R)
    crow = torch.zeros(R + 1, dtype=torch.int64)
    crow[1:] = lengths.cumsum(0)
    col = torch.randint(0, C, (nnz,), generator=gen)
    values, x = torch.randn(nnz, generator=gen), torch.randn(C, generator=gen)
    for gather in (True, False):
        y = floor.floor_spmv(crow, col, values, x, npp=npp, warps=4, row_block=row_block, gather=gather)
        programs = -(-nnz // npp)
        rows_per_program = -(-(-(-R // programs)) // row_block) * row_block
        products = values * (x[col] if gather else col.float())
        totals = torch.stack([products[p * npp:(p + 1) * npp].sum() for p in range(programs)])
        owner = torch.arange(R) // rows_per_program
        expected = crow[:R].float() * 1e-30 + totals[owner]
        assert torch.allclose(y, expected, rtol=1e-5, atol=1e-5), (R, nnz, npp, row_block, gather)
print("ok")
"""


def test_the_floor_kernel_streams_every_nonzero_and_row():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT)), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
