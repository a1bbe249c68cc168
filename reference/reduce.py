"""Reference solution for the reduce kata.

What it teaches: the three shapes a reduction takes on a GPU, and what each one costs.

1. row_sum: reduce along rows, one output per row. Rows are independent, so a program owns one
   row (or a few short ones) and no program ever needs another's result. The program walks its
   row in tiles, adding each tile into a per-lane float32 accumulator, and collapses the lanes
   with one tl.sum at the end. The accumulator is float32 whatever the input dtype: a float16
   accumulator overflows at 65504 and keeps only 11 bits, so a few thousand additions already
   lose the low digits.
2. row_argmax: the same walk, but each lane keeps two things, its best value and where it was.
   Two details decide correctness. Padding lanes (columns past N) must load -inf, not 0: in a
   row of negative numbers a 0 would win. And ties must go to the first index: a lane only
   takes a new value when it is strictly greater (the lane sees its columns in increasing
   order), and the final cross-lane step picks the smallest index among the lanes holding the
   maximum.
3. total_sum: one output for the whole tensor, far larger than one program can hold (up to
   2**30 elements). A two-stage reduction: stage 1 launches one program per chunk of the input,
   each writing its float32 partial sum into a small buffer; stage 2 is a single program summing
   that buffer. Atomics (tl.atomic_add into one float32) would do it in one launch, but the
   order in which programs add is decided by the hardware scheduler, and float addition is not
   associative: the result changes in its last bits from run to run. The two-stage version
   always adds in the same order, so it is deterministic.

All three read every byte of x once and write almost nothing: they are memory bound, and the
goal is to stream x at the bandwidth limit. Offsets are computed in int64 where they can pass
2**31 (row index times row stride, chunk index times chunk length).
"""

import torch
import triton
import triton.language as tl

# Bytes of x one program loads per loop iteration: 16 KiB keeps enough loads in flight per
# program without spilling registers (4096 float32 or 8192 float16/bfloat16 elements).
TILE_BYTES = 16384


@triton.jit
def row_sum_kernel(
    x_ptr, out_ptr,
    M, N, x_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # A tile of BLOCK_M rows by BLOCK_N columns: for long rows BLOCK_M is 1 and the program
    # loops along its row; for short rows it packs several rows so each program still moves
    # a useful amount of memory.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    row_ptrs = x_ptr + rows[:, None] * x_row_stride
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        # Padding adds nothing to a sum: other=0. Widen to float32 before adding.
        x = tl.load(row_ptrs + cols[None, :], mask=mask, other=0.0)
        acc += x.to(tl.float32)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=row_mask)


@triton.jit
def row_argmax_kernel(
    x_ptr, out_ptr,
    M, N, x_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    row_ptrs = x_ptr + rows[:, None] * x_row_stride
    # Each lane's best value so far and its column. Start at -inf: any real value beats it.
    best = tl.full([BLOCK_M, BLOCK_N], float("-inf"), dtype=tl.float32)
    best_col = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        # Padding must never win: load -inf, not 0 (a row of negative numbers has max < 0).
        x = tl.load(row_ptrs + cols[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        # Strictly greater: on a tie the lane keeps the earlier column it already holds.
        take = x > best
        best = tl.where(take, x, best)
        best_col = tl.where(take, cols[None, :], best_col)
    # Across lanes: the row maximum, then the smallest column among the lanes that hold it.
    row_max = tl.max(best, axis=1)
    candidates = tl.where(best == row_max[:, None], best_col, 2147483647)
    first = tl.min(candidates, axis=1)
    # A row of all -inf never takes a value: every lane still holds column 0, which is right.
    tl.store(out_ptr + rows, first.to(tl.int64), mask=row_mask)


@triton.jit
def partial_sum_kernel(
    x_ptr, partial_ptr,
    n,
    BLOCK: tl.constexpr, ITERS: tl.constexpr,
):
    # Stage 1: program p sums the chunk [p * BLOCK * ITERS, (p + 1) * BLOCK * ITERS).
    # The chunk start is int64: with 2**30 elements and more, p * CHUNK passes 2**31.
    chunk_start = tl.program_id(0).to(tl.int64) * (BLOCK * ITERS)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(ITERS):
        offs = chunk_start + i * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        acc += x.to(tl.float32)
    # The partial buffer is float32 too: a chunk's sum easily passes float16's 65504.
    tl.store(partial_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def final_sum_kernel(partial_ptr, out_ptr, num_partials, BLOCK: tl.constexpr):
    # Stage 2: a single program adds the partials, always in the same order.
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, num_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < num_partials, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def _row_tiles(x: torch.Tensor) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps) for a row-wise reduction over x (M, N)."""
    M, N = x.shape
    tile = TILE_BYTES // x.element_size()
    block_n = min(triton.next_power_of_2(N), tile)
    block_m = min(tile // block_n, triton.next_power_of_2(M))
    num_warps = 8 if block_m * block_n * x.element_size() >= 8192 else 4
    return block_m, block_n, num_warps


def _rows(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2
    # The kernels walk each row with unit stride; rows themselves may be strided.
    return x if x.stride(1) == 1 or x.shape[1] == 1 else x.contiguous()


def row_sum(x: torch.Tensor) -> torch.Tensor:
    x = _rows(x)
    M, N = x.shape
    out = torch.empty(M, dtype=torch.float32, device=x.device)
    block_m, block_n, num_warps = _row_tiles(x)
    row_sum_kernel[(triton.cdiv(M, block_m),)](
        x, out, M, N, x.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
    )
    return out


def row_argmax(x: torch.Tensor) -> torch.Tensor:
    x = _rows(x)
    M, N = x.shape
    out = torch.empty(M, dtype=torch.int64, device=x.device)
    block_m, block_n, num_warps = _row_tiles(x)
    # Two live tiles per lane (value and column): half the tile keeps registers in check.
    block_n = max(block_n // 2, 1) if block_m == 1 and block_n >= 2048 else block_n
    row_argmax_kernel[(triton.cdiv(M, block_m),)](
        x, out, M, N, x.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
    )
    return out


def total_sum(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 1
    x = x.contiguous()
    n = x.numel()
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    # Each stage-1 program streams 256 KiB in 16 iterations of 16 KiB: 4096 programs for 1 GiB,
    # enough to fill every SM many times over; the partial buffer stays tiny (4 bytes a program).
    block = TILE_BYTES // x.element_size()
    iters = 16
    num_partials = max(triton.cdiv(n, block * iters), 1)
    partials = torch.empty(num_partials, dtype=torch.float32, device=x.device)
    partial_sum_kernel[(num_partials,)](x, partials, n, BLOCK=block, ITERS=iters, num_warps=8)
    final_sum_kernel[(1,)](partials, out, num_partials, BLOCK=1024, num_warps=4)
    return out
