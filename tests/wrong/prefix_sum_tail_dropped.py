"""Wrong prefix_sum: the last, partial tile of each long row is never scanned.

The number of tiles per row is N // TILE instead of cdiv(N, TILE): rows whose length is a
multiple of the tile are right, every other long row keeps its last N % TILE elements unwritten.
"""
# expect-fail: long_rows
# expect-fail: one_long_row
# expect-diagnosis: row_end_wrong
# expect-diagnosis: unwritten_elements
# expect-diagnosis: tail_wrong

import torch
import triton
import triton.language as tl

# Rows up to ROW_MAX elements are scanned whole; longer rows in tiles of TILE (reduce-then-scan).
ROW_MAX = 4096
TILE = 1024


@triton.jit
def scan_rows_kernel(x_ptr, out_ptr, M, N, x_row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], tl.cumsum(x, axis=1), mask=mask)


@triton.jit
def tile_sums_kernel(x_ptr, sums_ptr, N, x_row_stride, tiles_per_row, TILE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // tiles_per_row
    cols = (pid % tiles_per_row) * TILE + tl.arange(0, TILE)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0)
    tl.store(sums_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def add_carry_kernel(x_ptr, out_ptr, prefix_ptr, N, x_row_stride, tiles_per_row, TILE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // tiles_per_row
    k = pid % tiles_per_row
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
    tiles_per_row = N // TILE  # BUG: the last, partial tile is left out
    sums = torch.empty((M, tiles_per_row), dtype=x.dtype, device=x.device)
    tile_sums_kernel[(M * tiles_per_row,)](x, sums, N, x.stride(0), tiles_per_row, TILE=TILE)
    prefix = cumsum(sums)  # the scan of the tile sums: a short row per row of x
    add_carry_kernel[(M * tiles_per_row,)](x, out, prefix, N, x.stride(0), tiles_per_row, TILE=TILE)
    return out
