"""Reference solution for the rms_norm_backward kata.

What it teaches: a backward pass that is a row-wise reduction (for dx) and a column-wise
reduction (for dweight) at once, from a single read of the inputs.

The math. The forward is y = x * r * w with r = rstd = 1 / sqrt(mean(x^2) + eps). With
g = dy * w, and remembering that r depends on every x of its row (dr/dx_j = -r^3 * x_j / N):

    dx      = r * g - x * r^3 * mean(g * x)      one row at a time
    dweight = sum over rows of dy * x * r         one column at a time

Three ideas carry the kernels:

1. dx is row-local. A program that holds a row (dy, x, w, r) computes mean(g * x) with one
   tl.sum and writes dx: one read of dy and x, one write of dx, nothing else.
2. dweight is a sum over all M rows, so many programs contribute to every column. Letting them
   add into dweight directly is a race (a read-add-write from two programs loses one of them),
   and atomics would make the result depend on timing. Instead each program sums its own rows
   into a float32 accumulator held in registers and writes it to its own row of a partial
   buffer (P, N); a second kernel sums the P partial rows column by column. The order is fixed,
   so the result is deterministic, and the buffer is small (P is a few hundred).
3. Precision: everything is float32 in registers. A float16 dweight accumulator would lose
   about three digits over a few thousand rows; dx is rounded to the input dtype once.

For the main path the program count P is twice the number of SMs: a persistent grid where each
program walks a contiguous run of rows. Short rows are processed BLOCK_M at a time so each loop
iteration still moves enough bytes. Rows longer than MAX_FUSED_N do not fit in registers; they
take a second path: one kernel computes mean(g * x) per row, then a 2-D grid of (row group,
column tile) programs writes dx and the partial dweight of its tile.
"""

import torch
import triton
import triton.language as tl

# Rows up to this many elements are held in registers whole (dy, x, w, the dweight accumulator).
MAX_FUSED_N = 8192
# Elements of dy (and of x) a fused program handles per loop iteration.
TILE_ELEMENTS = 4096


@triton.jit
def rms_norm_bwd_fused_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr,
    M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_program,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    # This program's share of dweight, in float32, for its rows only: no other program
    # touches it.
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    row_start = pid * rows_per_program
    for r in range(0, rows_per_program, BLOCK_M):
        # Widen before multiplying by a stride: row * stride can pass 2**31.
        rows = (row_start + r + tl.arange(0, BLOCK_M)).to(tl.int64)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        # Rows past M and columns past N load 0: they add nothing to either reduction.
        dy = tl.load(dy_ptr + rows[:, None] * dy_row_stride + cols[None, :], mask=mask,
                     other=0.0).to(tl.float32)
        x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask,
                    other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        g = dy * w[None, :]
        # mean over the real row length N, not BLOCK_N.
        c = tl.sum(g * x, axis=1) / N
        dx = (g - x * (rstd * rstd * c)[:, None]) * rstd[:, None]
        tl.store(dx_ptr + rows[:, None] * dx_row_stride + cols[None, :],
                 dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * x * rstd[:, None]
    tl.store(partial_ptr + pid.to(tl.int64) * N + cols, tl.sum(dw_acc, axis=0), mask=col_mask)


@triton.jit
def row_dot_kernel(dy_ptr, x_ptr, w_ptr, c_ptr, N, dy_row_stride, x_row_stride,
                   BLOCK_N: tl.constexpr):
    # Long rows, step 1: c[row] = mean(dy * w * x) over the whole row, tile by tile.
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        acc += dy * w * x
    tl.store(c_ptr + row, tl.sum(acc, axis=0) / N)


@triton.jit
def rms_norm_bwd_tiled_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, c_ptr, dx_ptr, partial_ptr,
    M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_group,
    BLOCK_N: tl.constexpr,
):
    # Long rows, step 2: program (group, tile) owns rows_per_group rows by BLOCK_N columns.
    group = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    row_start = group * rows_per_group
    row_end = tl.minimum(row_start + rows_per_group, M)
    # Row pointers, widened to int64 once and then advanced one row per iteration.
    first = row_start.to(tl.int64)
    dy_row = dy_ptr + first * dy_row_stride
    x_row = x_ptr + first * x_row_stride
    dx_row = dx_ptr + first * dx_row_stride
    for row in range(row_start, row_end):
        dy = tl.load(dy_row + cols, mask=col_mask, other=0.0).to(tl.float32)
        x = tl.load(x_row + cols, mask=col_mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        c = tl.load(c_ptr + row)
        dx = (dy * w - x * (rstd * rstd * c)) * rstd
        tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw_acc += dy * x * rstd
        dy_row += dy_row_stride
        x_row += x_row_stride
        dx_row += dx_row_stride
    tl.store(partial_ptr + group.to(tl.int64) * N + cols, dw_acc, mask=col_mask)


@triton.jit
def column_sum_kernel(partial_ptr, out_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    # dweight[j] = sum over the P partial rows of partial[p, j], always in the same order.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = (start + tl.arange(0, BLOCK_P)).to(tl.int64)
        mask = (rows < P)[:, None] & col_mask[None, :]
        acc += tl.load(partial_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=col_mask)


def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter: any small number of programs will do


def _column_sum(partials: torch.Tensor, out: torch.Tensor) -> None:
    P, N = partials.shape
    # The buffer is small (a few MB) but must be read by many programs at once, or its sum
    # becomes a latency-bound tail: each program takes a narrow strip of columns and all (up
    # to 512) partial rows in one 8192-element tile, so the whole buffer is in flight at once.
    block_p = min(triton.next_power_of_2(P), 512)
    block_n = min(max(8192 // block_p, 16), 4096, triton.next_power_of_2(N))
    column_sum_kernel[(triton.cdiv(N, block_n),)](
        partials, out, P, N, BLOCK_P=block_p, BLOCK_N=block_n, num_warps=4)


def rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                      rstd: torch.Tensor):
    assert x.dim() == 2 and dy.shape == x.shape and weight.shape == (x.shape[1],)
    M, N = x.shape
    # The kernels walk rows with unit stride; rows themselves may be strided.
    if x.stride(1) != 1:
        x = x.contiguous()
    if dy.stride(1) != 1:
        dy = dy.contiguous()
    weight, rstd = weight.contiguous(), rstd.contiguous()
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dweight = torch.empty(N, dtype=torch.float32, device=x.device)

    block_n = triton.next_power_of_2(N)
    if block_n <= MAX_FUSED_N:
        block_m = max(1, min(TILE_ELEMENTS // block_n, triton.next_power_of_2(M)))
        # 16 elements per thread and tensor: registers for dy, x, g, dx and the accumulator
        # without spilling, and room for two programs per SM.
        num_warps = min(16, max(1, block_m * block_n // 512))
        # A persistent grid: 2 programs per SM, each a contiguous run of rows (a multiple of
        # BLOCK_M). Its partial row is written once, at the end.
        programs = min(2 * _sm_count(x.device), triton.cdiv(M, block_m))
        rows_per_program = triton.cdiv(triton.cdiv(M, programs), block_m) * block_m
        programs = triton.cdiv(M, rows_per_program)
        partials = torch.empty((programs, N), dtype=torch.float32, device=x.device)
        rms_norm_bwd_fused_kernel[(programs,)](
            dy, x, weight, rstd, dx, partials,
            M, N, dy.stride(0), x.stride(0), dx.stride(0), rows_per_program,
            BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
        )
    else:
        tile = 2048
        c = torch.empty(M, dtype=torch.float32, device=x.device)
        row_dot_kernel[(M,)](dy, x, weight, c, N, dy.stride(0), x.stride(0),
                             BLOCK_N=4096, num_warps=8)
        rows_per_group = 16
        groups = triton.cdiv(M, rows_per_group)
        partials = torch.empty((groups, N), dtype=torch.float32, device=x.device)
        rms_norm_bwd_tiled_kernel[(groups, triton.cdiv(N, tile))](
            dy, x, weight, rstd, c, dx, partials,
            M, N, dy.stride(0), x.stride(0), dx.stride(0), rows_per_group,
            BLOCK_N=tile, num_warps=8,
        )
    _column_sum(partials, dweight)
    return dx, dweight
