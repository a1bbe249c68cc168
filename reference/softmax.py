"""Reference solution for the softmax kata.

What it teaches: the row-wise reduction, the most common shape of kernel after the elementwise
one. Softmax needs two facts about a row (its maximum and the sum of its exponentials) before it
can write a single output, so the question is always: where does the row live while we reduce it?

- Short and medium rows (the usual case) fit in registers. One program loads a whole row (or a
  few short rows at once), reduces it, and writes it: the tensor is read once and written once,
  the least traffic possible, so the kernel runs at memory bandwidth.
- Rows too long for registers are streamed in blocks with the *online softmax* trick: keep a
  running maximum and a running sum that is rescaled whenever the maximum grows. One pass finds
  both statistics, a second pass writes the output (that re-read mostly hits L2).

Numerical stability: exp overflows float32 above about 88, so softmax is computed as
exp(x - max(x)) / sum(exp(x - max(x))), which is mathematically the same and never overflows.
Padding lanes are loaded as -inf, the identity of max whose exponential is exactly 0, so they
change neither statistic. All arithmetic is float32, whatever the input dtype.
"""

import torch
import triton
import triton.language as tl

# Largest row (rounded up to a power of two) held whole in registers. At 32768 elements a
# program of 16 warps keeps 64 float32 values per thread: still no register spills, and on an
# H100 faster than streaming the row twice with the online kernel.
MAX_FUSED_BLOCK = 32768
# Target number of elements per program for short rows: several rows share one program so
# each program still moves enough bytes to hide memory latency.
TILE_ELEMENTS = 4096
# Block size of the streaming (online) kernel for rows longer than MAX_FUSED_BLOCK.
ONLINE_BLOCK = 8192


@triton.jit
def softmax_rows_kernel(
    out_ptr, x_ptr, n_rows, n_cols, x_row_stride, out_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # Each program owns BLOCK_M consecutive rows, each held whole: BLOCK_N >= n_cols.
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < n_cols
    # Rows past the end re-read the last real row instead of being masked: every row of the tile
    # then has a finite maximum (no -inf - -inf = NaN), and their results are simply not stored.
    safe_rows = tl.minimum(rows, n_rows - 1).to(tl.int64)
    # The input's rows may be strided (a slice of a wider tensor): only the stride says where
    # row r starts. Offsets in int64 so huge tensors cannot overflow 32-bit arithmetic.
    x = tl.load(
        x_ptr + safe_rows[:, None] * x_row_stride + cols[None, :],
        mask=col_ok[None, :], other=-float("inf"),
    ).to(tl.float32)
    row_max = tl.max(x, axis=1)
    # exp(x - max) <= 1: no overflow, and padding lanes give exp(-inf) = 0.
    num = tl.exp(x - row_max[:, None])
    den = tl.sum(num, axis=1)
    # One division per row, then a multiply per element.
    y = num * (1.0 / den)[:, None]
    out_rows = rows.to(tl.int64)
    tl.store(
        out_ptr + out_rows[:, None] * out_row_stride + cols[None, :],
        y.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & col_ok[None, :],
    )


@triton.jit
def softmax_online_kernel(
    out_ptr, x_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_N: tl.constexpr,
):
    # One program per row; the row is longer than BLOCK_N, so it is streamed in blocks.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_N)

    # Pass 1: online softmax. Every lane keeps its own running max m and running sum l of
    # exp(x - m); when a new value raises m, the old sum is rescaled by exp(m_old - m_new).
    # Per-lane statistics avoid a cross-warp reduction in every iteration. The launcher only
    # uses this kernel when n_cols > BLOCK_N, so the first block is full and every lane's m is
    # finite from then on (no exp(-inf - -inf) = NaN).
    m = tl.full([BLOCK_N], -float("inf"), tl.float32)
    l = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        l = l * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    # Merge the lanes the same way: one max, and every lane's sum rescaled to it.
    row_max = tl.max(m, axis=0)
    inv_den = 1.0 / tl.sum(l * tl.exp(m - row_max), axis=0)

    # Pass 2: both statistics are known; read the row again and write the output.
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_den
        tl.store(out_row + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.ndim == 2, "softmax expects a 2-D tensor"
    if x.stride(1) != 1:
        # The kernels assume unit stride along a row (coalesced loads); rows may be strided.
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return out

    block_n = triton.next_power_of_2(n_cols)
    if block_n <= MAX_FUSED_BLOCK:
        # Whole rows in registers. Short rows are batched so a program holds ~TILE_ELEMENTS.
        block_m = min(max(1, TILE_ELEMENTS // block_n), triton.next_power_of_2(n_rows))
        # Scale warps with the tile: about 16 values per thread, between 4 and 16 warps (more
        # warps only add synchronisation to the cross-warp reductions).
        num_warps = min(16, max(4, block_m * block_n // 512))
        grid = (triton.cdiv(n_rows, block_m),)
        softmax_rows_kernel[grid](
            out, x, n_rows, n_cols, x.stride(0), out.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
        )
    else:
        softmax_online_kernel[(n_rows,)](
            out, x, n_cols, x.stride(0), out.stride(0), BLOCK_N=ONLINE_BLOCK, num_warps=16,
        )
    return out
