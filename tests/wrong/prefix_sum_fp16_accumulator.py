"""Wrong prefix_sum: float32 rows scanned in float16 "to halve the registers".

Each block is converted to float16 before tl.cumsum and back to float32 to store: every
running sum keeps 11 bits (relative error ~5e-4, far above the float32 tolerance), and a running
sum past 65504 becomes inf. int32 rows are scanned as int32 and are right.
"""
# expect-fail: small

import torch
import triton
import triton.language as tl

# Rows up to ROW_MAX elements are scanned whole; longer rows in tiles of TILE (reduce-then-scan).
ROW_MAX = 4096
TILE = 1024


@triton.jit
def scan_rows_kernel(x_ptr, out_ptr, M, N, x_row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     IS_FLOAT: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0)
    if IS_FLOAT:
        x = x.to(tl.float16)  # BUG: the scan runs in float16
    y = tl.cumsum(x, axis=1)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def tile_sums_kernel(x_ptr, sums_ptr, N, x_row_stride, tiles_per_row, TILE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // tiles_per_row
    cols = (pid % tiles_per_row) * TILE + tl.arange(0, TILE)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0)
    tl.store(sums_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def add_carry_kernel(x_ptr, out_ptr, prefix_ptr, N, x_row_stride, tiles_per_row, TILE: tl.constexpr,
                     IS_FLOAT: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // tiles_per_row
    k = pid % tiles_per_row
    cols = k * TILE + tl.arange(0, TILE)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0)
    # The carry: the sum of the row's earlier tiles (0 for its first tile).
    carry = tl.load(prefix_ptr + pid - 1, mask=k > 0, other=0)
    if IS_FLOAT:
        x = x.to(tl.float16)
    y = tl.cumsum(x, axis=0).to(out_ptr.dtype.element_ty) + carry
    tl.store(out_ptr + row * N + cols, y, mask=mask)


def cumsum(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if N <= ROW_MAX:
        block_n = max(16, triton.next_power_of_2(N))
        block_m = max(1, min(ROW_MAX // block_n, triton.next_power_of_2(M)))
        scan_rows_kernel[(triton.cdiv(M, block_m),)](x, out, M, N, x.stride(0),
                                                     BLOCK_M=block_m, BLOCK_N=block_n,
                                                     IS_FLOAT=x.dtype.is_floating_point)
        return out
    tiles_per_row = triton.cdiv(N, TILE)
    sums = torch.empty((M, tiles_per_row), dtype=x.dtype, device=x.device)
    tile_sums_kernel[(M * tiles_per_row,)](x, sums, N, x.stride(0), tiles_per_row, TILE=TILE)
    prefix = cumsum(sums)  # the scan of the tile sums: a short row per row of x
    add_carry_kernel[(M * tiles_per_row,)](x, out, prefix, N, x.stride(0), tiles_per_row, TILE=TILE,
                                           IS_FLOAT=x.dtype.is_floating_point)
    return out
