"""Reference solution for the layer_norm kata: forward and backward.

What it teaches: the full life of a normalization layer, and the two reductions of its
backward. LayerNorm is RMSNorm plus a mean: for every row

    mean = sum(x) / N
    var  = sum((x - mean)^2) / N              biased: divide by N, not N - 1
    rstd = 1 / sqrt(var + eps)                eps inside the square root
    y    = (x - mean) * rstd * w + b

The forward saves mean and rstd (float32) for the backward, which, with xhat = (x - mean) * rstd
and g = dy * w, computes

    dx      = rstd * (g - mean(g) - xhat * mean(g * xhat))    one row at a time
    dweight = sum over rows of dy * xhat                      one column at a time
    dbias   = sum over rows of dy

Ideas that carry the kernels:

1. Forward: one program per row, the whole row in registers. The variance is computed in a
   second pass over the registers, from x - mean: the one-pass formula E[x^2] - mean^2 cancels
   catastrophically in float32 when the mean is large against the spread (x = 100 + noise).
   The padding lanes past N must be zeroed after subtracting the mean, or each adds mean^2
   to the variance. Rows too long for registers take three passes over memory.
2. Backward, dx: row-local, two row means (of g and of g * xhat), then one expression. Forget
   the mean(g) term and dx is wrong for every row: it is what the mean subtraction contributes.
3. Backward, dweight and dbias: sums over all rows, so many programs contribute to each column.
   Each program keeps float32 accumulators for its run of rows in registers and writes them to
   its own row of a partial buffer (2, P, N); a second kernel sums the P rows. No two programs
   ever write the same address, the order of the sums is fixed (deterministic), and float32
   keeps a hundred thousand rows' worth of additions accurate. A persistent grid of twice the
   SM count keeps the buffer small. Long rows take a row-statistics kernel, then a 2-D grid.
4. Backward speed: the pass is memory bound, so what matters is how many bytes each SM has in
   flight. A persistent program that loads a step of rows, reduces it and stores dx leaves its
   share of the memory system idle while it reduces; 16-bit rows carry half the bytes of
   float32 ones per step, so they suffer more. BWD_FUSED_CONFIG sets, by element size, the
   bytes per step, the warps, the programs per SM and whether the next step's loads are issued
   before this step is reduced (prefetch: double buffering in registers).
"""

import torch
import triton
import triton.language as tl

# Forward: rows up to this many bytes are held in registers whole (one pass over memory).
MAX_FUSED_BYTES = 65536
# Backward: rows up to this many elements are held whole (dy, x, w, two accumulators).
MAX_FUSED_N = 8192
# Backward, rows held whole: how each program walks its rows, by element size of x (4: float32,
# 2: float16 and bfloat16). BWD_FUSED_OVERRIDES may replace some keys for one (element size,
# BLOCK_N), e.g. {(2, 8192): {"per_sm": 1}}.
#   tile        elements of dy (and of x) a program loads per step: BLOCK_M = tile // BLOCK_N
#               rows at once, so short rows still move enough bytes per step
#   per_thread  elements of a tile each thread holds: num_warps = tile // (32 * per_thread).
#               16 leaves registers for dy, x, g, dx and the two accumulators
#   per_sm      programs per SM in the persistent grid. More programs hide more latency, but
#               each adds a partial row (2 x N floats) that the column sum reads back
#   prefetch    issue the next step's loads before reducing this one, so that they are in
#               flight while the row sums wait on each other (double buffering in registers):
#               0 none, 1 mean and rstd, 2 also dy and x
#   stages      above 1: Triton's software pipeliner stages dy and x through shared memory
#               (tl.range(num_stages=...), cp.async on sm_80+), another way to overlap them
#               (use it with prefetch 1: the pipeliner leaves the small mean/rstd loads alone)
#   maxnreg     None, or a cap on registers per thread (ptxas spills above it), so that
#               per_sm programs fit on an SM at once: 65536 registers per SM
#   joint       reduce mean(g) and mean(g * xhat) in one tl.reduce: one round of
#               shared-memory exchange per row instead of two
#   evict       eviction policy of the streamed loads and of the dx store ("" or
#               "evict_first": dy, x and dx are touched once, keep w and the partials in L2)
BWD_FUSED_CONFIG = {
    4: dict(tile=4096, per_thread=16, per_sm=2, prefetch=0, stages=1, maxnreg=None, joint=False,
            evict=""),
    2: dict(tile=4096, per_thread=16, per_sm=2, prefetch=0, stages=1, maxnreg=None, joint=False,
            evict=""),
}
# Chosen by an H100 sweep (docs/PERFORMANCE.md): loading the next rows while this one is reduced
# (prefetch=2) is what 16-bit rows need, and one program per SM at long rows halves the
# partial sums of dweight/dbias.
BWD_FUSED_OVERRIDES: dict = {
    (2, 1024): {"prefetch": 2, "maxnreg": 128},
    (2, 4096): {"prefetch": 2, "tile": 8192, "per_sm": 1},
    (2, 8192): {"prefetch": 2, "per_sm": 1},
    (4, 4096): {"prefetch": 2, "per_sm": 1},
}


# --- forward ---------------------------------------------------------------------------

@triton.jit
def layer_norm_fwd_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr,
    N, x_row_stride, y_row_stride, eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    # Zero the padding again after the subtraction: 0 - mean is not 0.
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = tl.rsqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def layer_norm_fwd_looped_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr,
    N, x_row_stride, y_row_stride, eps,
    BLOCK_N: tl.constexpr,
):
    # Long rows: pass 1 the mean, pass 2 the variance around it, pass 3 normalize and store.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        xc = tl.where(mask, x - mean, 0.0)
        acc += xc * xc
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    assert x.dim() == 2 and weight.shape == (x.shape[1],) and bias.shape == (x.shape[1],)
    M, N = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    weight, bias = weight.contiguous(), bias.contiguous()
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(N)
    if block * x.element_size() <= MAX_FUSED_BYTES:
        # Enough warps that each thread holds a handful of 16-byte vectors of the row.
        num_warps = min(max(block * x.element_size() // 2048, 1), 16)
        layer_norm_fwd_kernel[(M,)](
            x, weight, bias, y, mean, rstd, N, x.stride(0), y.stride(0), eps,
            BLOCK_N=block, num_warps=num_warps,
        )
    else:
        layer_norm_fwd_looped_kernel[(M,)](
            x, weight, bias, y, mean, rstd, N, x.stride(0), y.stride(0), eps,
            BLOCK_N=16384 // x.element_size(), num_warps=8,
        )
    return y, mean, rstd


# --- backward --------------------------------------------------------------------------

@triton.jit
def _load_tile(dy_ptr, x_ptr, first_row, row_end, cols, col_mask, dy_row_stride, x_row_stride,
               BLOCK_M: tl.constexpr, EVICT: tl.constexpr):
    # dy and x of BLOCK_M rows from first_row on, in the inputs' dtype (converted to float32
    # where they are used). Rows at or past row_end (this program's end) load 0 and touch no
    # memory.
    rows = (first_row + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask = (rows < row_end)[:, None] & col_mask[None, :]
    dy = tl.load(dy_ptr + rows[:, None] * dy_row_stride + cols[None, :], mask=mask, other=0.0,
                 eviction_policy=EVICT)
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0,
                eviction_policy=EVICT)
    return dy, x


@triton.jit
def _load_stats(mean_ptr, rstd_ptr, first_row, row_end, BLOCK_M: tl.constexpr):
    rows = first_row + tl.arange(0, BLOCK_M)
    row_mask = rows < row_end
    mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
    return mean, rstd


@triton.jit
def _add_pair(a1, a2, b1, b2):
    return a1 + b1, a2 + b2


@triton.jit
def layer_norm_bwd_fused_kernel(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, partial_ptr,
    M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_program, slab_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREFETCH: tl.constexpr,
    STAGES: tl.constexpr, JOINT: tl.constexpr, EVICT: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    # This program's share of dweight and dbias, float32, for its rows only.
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, M)
    # PREFETCH >= 1: each step's loads are issued one step ahead (1: mean and rstd, 2: dy and x
    # too) and stay in flight while the step before is reduced.
    if PREFETCH >= 1:
        mean_next, rstd_next = _load_stats(mean_ptr, rstd_ptr, row_start, row_end, BLOCK_M)
    if PREFETCH >= 2:
        dy_next, x_next = _load_tile(dy_ptr, x_ptr, row_start, row_end, cols, col_mask,
                                     dy_row_stride, x_row_stride, BLOCK_M, EVICT)
    for r in tl.range(row_start, row_end, BLOCK_M, num_stages=STAGES if STAGES > 1 else None):
        if PREFETCH >= 1:
            mean, rstd = mean_next, rstd_next
            mean_next, rstd_next = _load_stats(mean_ptr, rstd_ptr, r + BLOCK_M, row_end, BLOCK_M)
        else:
            mean, rstd = _load_stats(mean_ptr, rstd_ptr, r, row_end, BLOCK_M)
        if PREFETCH >= 2:
            dy_in, x_in = dy_next, x_next
            dy_next, x_next = _load_tile(dy_ptr, x_ptr, r + BLOCK_M, row_end, cols, col_mask,
                                         dy_row_stride, x_row_stride, BLOCK_M, EVICT)
        else:
            dy_in, x_in = _load_tile(dy_ptr, x_ptr, r, row_end, cols, col_mask,
                                     dy_row_stride, x_row_stride, BLOCK_M, EVICT)
        rows = (r + tl.arange(0, BLOCK_M)).to(tl.int64)
        mask = (rows < row_end)[:, None] & col_mask[None, :]
        dy = dy_in.to(tl.float32)
        x = x_in.to(tl.float32)
        # Padding lanes: x - mean is not 0 there, so mask xhat (dy and g are 0 already).
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
        g = dy * w[None, :]
        if JOINT:
            s1, s2 = tl.reduce((g, g * xhat), 1, _add_pair)
        else:
            s1 = tl.sum(g, axis=1)
            s2 = tl.sum(g * xhat, axis=1)
        c1 = s1 / N
        c2 = s2 / N
        dx = (g - c1[:, None] - xhat * c2[:, None]) * rstd[:, None]
        tl.store(dx_ptr + rows[:, None] * dx_row_stride + cols[None, :],
                 dx.to(dx_ptr.dtype.element_ty), mask=mask, eviction_policy=EVICT)
        dw_acc += dy * xhat
        db_acc += dy
    # partial is (2, P, N): slab 0 holds the dweight partials, slab 1 (slab_stride = P * N
    # elements further) the dbias partials.
    out = partial_ptr + pid.to(tl.int64) * N + cols
    tl.store(out, tl.sum(dw_acc, axis=0), mask=col_mask)
    tl.store(out + slab_stride, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def row_stats_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, c1_ptr, c2_ptr,
                     N, dy_row_stride, x_row_stride, BLOCK_N: tl.constexpr):
    # Long rows, step 1: c1 = mean(g) and c2 = mean(g * xhat) of one row, tile by tile.
    row = tl.program_id(0).to(tl.int64)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    acc1 = tl.zeros([BLOCK_N], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        g = dy * w
        acc1 += g
        acc2 += g * (x - mean) * rstd
    tl.store(c1_ptr + row, tl.sum(acc1, axis=0) / N)
    tl.store(c2_ptr + row, tl.sum(acc2, axis=0) / N)


@triton.jit
def layer_norm_bwd_tiled_kernel(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, c1_ptr, c2_ptr, dx_ptr, partial_ptr,
    M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_group, slab_stride,
    BLOCK_N: tl.constexpr,
):
    # Long rows, step 2: program (group, tile) owns rows_per_group rows by BLOCK_N columns.
    group = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    row_start = group * rows_per_group
    row_end = tl.minimum(row_start + rows_per_group, M)
    first = row_start.to(tl.int64)
    dy_row = dy_ptr + first * dy_row_stride
    x_row = x_ptr + first * x_row_stride
    dx_row = dx_ptr + first * dx_row_stride
    for row in range(row_start, row_end):
        dy = tl.load(dy_row + cols, mask=col_mask, other=0.0).to(tl.float32)
        x = tl.load(x_row + cols, mask=col_mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(col_mask, (x - mean) * rstd, 0.0)
        dx = (dy * w - tl.load(c1_ptr + row) - xhat * tl.load(c2_ptr + row)) * rstd
        tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw_acc += dy * xhat
        db_acc += dy
        dy_row += dy_row_stride
        x_row += x_row_stride
        dx_row += dx_row_stride
    out = partial_ptr + group.to(tl.int64) * N + cols
    tl.store(out, dw_acc, mask=col_mask)
    tl.store(out + slab_stride, db_acc, mask=col_mask)


@triton.jit
def column_sum_kernel(partial_ptr, dw_ptr, db_ptr, P, N,
                      BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    # Grid (column strips, 2): axis 1 picks the slab, dweight's or dbias's. Each program sums
    # the P partial rows of its strip, always in the same order.
    slab = tl.program_id(1)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    base = partial_ptr + slab.to(tl.int64) * P * N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = (start + tl.arange(0, BLOCK_P)).to(tl.int64)
        mask = (rows < P)[:, None] & col_mask[None, :]
        acc += tl.load(base + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    total = tl.sum(acc, axis=0)
    if slab == 0:
        tl.store(dw_ptr + cols, total, mask=col_mask)
    else:
        tl.store(db_ptr + cols, total, mask=col_mask)


def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter: any small number of programs will do


def _fused_config(itemsize: int, block_n: int) -> dict:
    cfg = dict(BWD_FUSED_CONFIG[4 if itemsize >= 4 else 2])
    cfg.update(BWD_FUSED_OVERRIDES.get((itemsize, block_n), {}))
    return cfg


def layer_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                        mean: torch.Tensor, rstd: torch.Tensor):
    assert x.dim() == 2 and dy.shape == x.shape and weight.shape == (x.shape[1],)
    M, N = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    if dy.stride(1) != 1:
        dy = dy.contiguous()
    weight, mean, rstd = weight.contiguous(), mean.contiguous(), rstd.contiguous()
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dweight = torch.empty(N, dtype=torch.float32, device=x.device)
    dbias = torch.empty(N, dtype=torch.float32, device=x.device)

    block_n = triton.next_power_of_2(N)
    if block_n <= MAX_FUSED_N:
        cfg = _fused_config(x.element_size(), block_n)
        block_m = max(1, min(cfg["tile"] // block_n, triton.next_power_of_2(M)))
        num_warps = min(32, max(1, block_m * block_n // (32 * cfg["per_thread"])))
        # A persistent grid: per_sm programs per SM, each a contiguous run of rows (a multiple
        # of BLOCK_M), writing its partial rows once, at the end.
        programs = min(cfg["per_sm"] * _sm_count(x.device), triton.cdiv(M, block_m))
        rows_per_program = triton.cdiv(triton.cdiv(M, programs), block_m) * block_m
        programs = triton.cdiv(M, rows_per_program)
        partials = torch.empty((2, programs, N), dtype=torch.float32, device=x.device)
        extra = {"maxnreg": cfg["maxnreg"]} if cfg["maxnreg"] else {}
        layer_norm_bwd_fused_kernel[(programs,)](
            dy, x, weight, mean, rstd, dx, partials,
            M, N, dy.stride(0), x.stride(0), dx.stride(0), rows_per_program, partials.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, PREFETCH=cfg["prefetch"], STAGES=cfg["stages"],
            # (The interpreter runs tl.reduce's combine function in Python, element by
            # element: slow, so it keeps the two tl.sum.)
            JOINT=cfg["joint"] and x.is_cuda, EVICT=cfg["evict"], num_warps=num_warps, **extra,
        )
    else:
        tile = 2048
        c1 = torch.empty(M, dtype=torch.float32, device=x.device)
        c2 = torch.empty(M, dtype=torch.float32, device=x.device)
        row_stats_kernel[(M,)](dy, x, weight, mean, rstd, c1, c2, N, dy.stride(0), x.stride(0),
                               BLOCK_N=4096, num_warps=8)
        rows_per_group = 16
        programs = triton.cdiv(M, rows_per_group)
        partials = torch.empty((2, programs, N), dtype=torch.float32, device=x.device)
        layer_norm_bwd_tiled_kernel[(programs, triton.cdiv(N, tile))](
            dy, x, weight, mean, rstd, c1, c2, dx, partials,
            M, N, dy.stride(0), x.stride(0), dx.stride(0), rows_per_group, partials.stride(0),
            BLOCK_N=tile, num_warps=8,
        )
    # The whole buffer in flight at once: narrow column strips, all (up to 512) partial rows.
    block_p = min(triton.next_power_of_2(programs), 512)
    block_c = min(max(8192 // block_p, 16), 4096, triton.next_power_of_2(N))
    column_sum_kernel[(triton.cdiv(N, block_c), 2)](
        partials, dweight, dbias, programs, N, BLOCK_P=block_p, BLOCK_N=block_c, num_warps=4)
    return dx, dweight, dbias
