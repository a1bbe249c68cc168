"""Wrong prefix_sum (GPU only): tiles on the second axis of a 2-D grid.

Reduce-then-scan with a grid of (M, tiles_per_row): the row on axis 0, the tile on axis 1. CUDA
caps a grid's second and third axes at 65535 programs, so a row of 2**24 elements in tiles of
256 (65536 tiles) cannot even be launched: "invalid argument". Every row the interpreter sees is
far shorter, and the interpreter has no such limit: it passes there (tests/test_wrong_solutions.py
checks that); tests/gpu/test_gpu_wrong.py checks that the longest row catches it. A 1-D grid of
M * tiles_per_row programs (or tiles on axis 0) has no such limit.
"""
# expect-fail: gpu_max_row_positive
# expect-fail: bench_1x2e24

import torch
import triton
import triton.language as tl

# Rows up to ROW_MAX elements are scanned whole; longer rows in tiles of TILE (reduce-then-scan).
ROW_MAX = 4096
TILE = 256


@triton.jit
def scan_rows_kernel(x_ptr, out_ptr, M, N, x_row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], tl.cumsum(x, axis=1), mask=mask)


@triton.jit
def tile_sums_kernel(x_ptr, sums_ptr, N, x_row_stride, tiles_per_row, TILE: tl.constexpr):
    # A 2-D grid: axis 0 the row, axis 1 the tile of the row.
    row = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1).to(tl.int64)
    cols = k * TILE + tl.arange(0, TILE)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0)
    tl.store(sums_ptr + row * tiles_per_row + k, tl.sum(x, axis=0))


@triton.jit
def add_carry_kernel(x_ptr, out_ptr, prefix_ptr, N, x_row_stride, tiles_per_row, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1).to(tl.int64)
    pid = row * tiles_per_row + k
    cols = k * TILE + tl.arange(0, TILE)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0)
    # The carry: the sum of the row's earlier tiles (0 for its first tile).
    carry = tl.load(prefix_ptr + pid - 1, mask=k > 0, other=0)
    tl.store(out_ptr + row * N + cols, tl.cumsum(x, axis=0) + carry, mask=mask)


def cumsum(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if N <= ROW_MAX:
        block_n = max(16, triton.next_power_of_2(N))
        block_m = max(1, min(ROW_MAX // block_n, triton.next_power_of_2(M)))
        scan_rows_kernel[(triton.cdiv(M, block_m),)](x, out, M, N, x.stride(0),
                                                     BLOCK_M=block_m, BLOCK_N=block_n)
        return out
    tiles_per_row = triton.cdiv(N, TILE)
    sums = torch.empty((M, tiles_per_row), dtype=x.dtype, device=x.device)
    # BUG (GPU only): grid axis 1 stops at 65535 programs; N = 2**24 has 65536 tiles.
    tile_sums_kernel[(M, tiles_per_row)](x, sums, N, x.stride(0), tiles_per_row, TILE=TILE)
    prefix = cumsum(sums)  # the scan of the tile sums: a short row per row of x
    add_carry_kernel[(M, tiles_per_row)](x, out, prefix, N, x.stride(0), tiles_per_row, TILE=TILE)
    return out
