"""Reference solution for the reduce kata.

What it teaches: the three shapes a reduction takes on a GPU, and what each one costs.

1. row_sum: reduce along rows, one output per row. Rows are independent, so a program owns one
   row (or a few short ones) and no program ever needs another's result. The accumulator is
   float32 whatever the input dtype: a float16 accumulator overflows at 65504 and keeps only 11
   bits, so a few thousand additions already lose the low digits.
2. row_argmax: the same walk, but the answer is a position. Two details decide correctness.
   Padding lanes (columns past N) must load -inf, not 0: in a row of negative numbers a 0 would
   win. And ties must go to the first index.
3. total_sum: one output for the whole tensor, far larger than one program can hold (up to
   2**30 elements). A two-stage reduction: stage 1 runs a fixed number of programs, each
   summing its share of x into a float32 partial; stage 2 sums the partials in a fixed order.
   Atomics (tl.atomic_add into one float32) would do it in one launch, but the order in which
   programs add is decided by the hardware scheduler, and float addition is not associative:
   the result changes in its last bits from run to run. The two-stage version always adds in
   the same order, so it is deterministic.

All three read every byte of x once and write almost nothing: they are memory bound, and the
goal is to stream x at the bandwidth limit. Five things decide whether they do:

- Enough bytes in flight. DRAM answers a load after a microsecond or so; to keep it busy every
  SM needs tens of KiB of loads outstanding. That is what the tile size, the number of programs
  per SM and loading the next tile before reducing the current one are for.
- Few registers per byte loaded, so that many programs fit on an SM at once (an SM has 65536
  registers: a program of 8 warps at 64 registers a thread takes a quarter of them; programs
  launched beyond what fits wait for a later wave). A row that fits
  one tile is loaded whole and reduced straight from the loaded values: no loop, no running
  accumulator. Only rows longer than a tile keep running per-lane state (a float32 sum, or
  the best value and its column) across the loop.
- Few instructions per byte. At 2 bytes an element a 16-bit argmax compares twice as many
  elements per byte as a float32 one, and a reduction over (value, column) pairs (tl.argmax,
  ties to the smaller column) costs several instructions per element. Two cheaper ways are
  here (ARGMAX_METHOD): a plain maximum, then the smallest column holding it; or, for 16-bit
  values, the value and its column packed into one int32 so that one integer maximum does
  both at once.
- Wide loads. A 16-byte load moves 8 float16 values at once, but only where the compiler can
  prove 8 neighbouring lanes are all in bounds or all out. A mask like `offs < n` with an odd n
  proves nothing, and every lane then loads its 2 bytes alone. total_sum therefore walks its
  full blocks without a mask and masks only the last, partial one.
- What the reads leave in the L2. x is read once, so its lines are worth nothing after the
  load; with eviction_policy="evict_first" they are the first to go, and streaming x does not
  push out the L2's other lines (another kernel's data, or dirty lines that would otherwise
  have to be written back to DRAM while x is being read).

Offsets are computed in int64 where they can pass 2**31 (row index times row stride, block
index times block length).
"""

import torch
import triton
import triton.language as tl

# ---- Tunables, chosen per element size (4: float32, 2: float16/bfloat16) ---------------------
# Row tasks: (tile bytes, warps, programs per SM, eviction policy of the loads of x).
#   tile bytes: a row of at most this many bytes is loaded whole (several short rows share one
#     tile); longer rows are walked tile by tile.
#   programs per SM: 0 launches one program per tile of rows. k > 0 launches k programs per SM
#     (a persistent grid); each strides over the tiles of rows and loads its next tile before
#     it reduces the one in hand, so a load is in flight while it computes.
#   eviction policy: "" (the default) or "evict_first". x is read once: "evict_first" tells the
#     L2 to give up these lines before anything else, so streaming x does not push out what
#     the L2 held before (lines that other kernels still use, or have written and not yet
#     written back to DRAM).
ROW_SUM_CONFIG = {4: (16384, 8, 0, ""), 2: (16384, 8, 0, "evict_first")}  # H100 sweep (docs/PERFORMANCE.md)
ROW_ARGMAX_CONFIG = {4: (16384, 8, 0, ""), 2: (16384, 8, 0, "evict_first")}  # H100 sweep
# How row_argmax reduces a tile of whole rows (see _tile_argmax below):
#   "pairs": one tl.argmax over (value, column) pairs;
#   "max_then_first": the row maximum, then the smallest column holding it (two plain reductions);
#   "packed": 16-bit only, each (value, column) packed into one int32 whose order is the
#     argmax order, and one integer max (one plain reduction).
ARGMAX_METHOD = {4: "pairs", 2: "packed"}
# total_sum stage 1: (block bytes, warps, programs per SM, eviction policy). Each program strides
# over the full blocks of x (block p, p + P, p + 2P, ...), loading its next block before adding
# the current.
TOTAL_SUM_CONFIG = {4: (16384, 8, 4, ""), 2: (16384, 8, 8, "evict_first")}  # chosen by an H100 sweep (docs/PERFORMANCE.md)
# By element size. True: stage 2 is done by stage 1's last program to finish (found with an
# atomic counter), in the same launch; False: a second launch.
TOTAL_SUM_ONE_LAUNCH = {4: False, 2: True}
# Without a GPU (the Triton interpreter runs the programs one after another) the persistent
# grids count one SM: a few programs, still more than one.
INTERPRETER_SMS = 1


# ---- row_sum and row_argmax ------------------------------------------------------------------

@triton.jit
def _row_tile(x_ptr, block, M, N, x_row_stride, other,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVICT: tl.constexpr):
    # The [BLOCK_M, BLOCK_N] tile of whole rows number `block` (BLOCK_N >= N). Rows past M and
    # columns past N load `other`. A tile past the last row is all masked: it reads nothing.
    rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    return tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=other,
                   eviction_policy=EVICT)


@triton.jit
def _store_rows(out_ptr, block, M, values, BLOCK_M: tl.constexpr):
    rows = tl.cast(block, tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(out_ptr + rows, values, mask=rows < M)


@triton.jit
def _tile_sum(x):
    # Widen to float32 before adding.
    return tl.sum(x.to(tl.float32), axis=1)


@triton.jit
def _tile_argmax(x, METHOD: tl.constexpr, BLOCK_N: tl.constexpr):
    # The first column of each row's maximum, three ways. Each is exact: no rounding is involved.
    cols = tl.arange(0, BLOCK_N)
    if METHOD == "packed":
        # A 16-bit float is a sign bit and 15 bits of magnitude, and larger magnitudes are larger
        # integers. So key = +magnitude or -magnitude orders like the values (and -0 == +0).
        # Beside the key, in the low 16 bits, 0xFFFF - column: of two equal keys the smaller
        # column is the larger number. One integer max then finds the first column of the
        # maximum. (BLOCK_N <= 65536: a 16-bit tile holds at most 8192 columns.)
        bits = x.to(tl.int16, bitcast=True).to(tl.int32)  # sign-extended
        magnitude = bits & 0x7FFF
        key = tl.where(bits < 0, -magnitude, magnitude)
        best = tl.max((key << 16) | (0xFFFF - cols)[None, :], axis=1)
        first = 0xFFFF - (best & 0xFFFF)
    elif METHOD == "max_then_first":
        # The maximum (in x's own dtype: exact), then the smallest column that holds it.
        row_max = tl.max(x, axis=1)
        first = tl.min(tl.where(x == row_max[:, None], cols[None, :], BLOCK_N), axis=1)
    else:
        # One pass over (value, column) pairs: of two pairs the larger value wins, and of two
        # equal values the smaller column (tie_break_left), so ties go to the first index.
        # (Widening to float32 is exact, so it changes no comparison.)
        first = tl.argmax(x.to(tl.float32), axis=1, tie_break_left=True)
    return first.to(tl.int64)


@triton.jit
def _whole_rows(x_ptr, out_ptr, M, N, x_row_stride, other,
                ARGMAX: tl.constexpr, METHOD: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                PREFETCH: tl.constexpr, EVICT: tl.constexpr):
    # Rows that fit one tile, shared by both row kernels: tiles of BLOCK_M whole rows, each
    # loaded once and reduced straight from the loaded values. Program p takes tiles p, p + P,
    # p + 2P, ... (P programs); with one program per tile the loop runs once.
    pid = tl.program_id(0)
    num_progs = tl.num_programs(0)
    num_blocks = tl.cdiv(M, BLOCK_M)
    if PREFETCH:
        x = _row_tile(x_ptr, pid, M, N, x_row_stride, other, BLOCK_M, BLOCK_N, EVICT)
    for block in range(pid, num_blocks, num_progs):
        if PREFETCH:
            # The next tile's load goes out before this tile is reduced.
            x_next = _row_tile(x_ptr, block + num_progs, M, N, x_row_stride, other,
                               BLOCK_M, BLOCK_N, EVICT)
        else:
            x = _row_tile(x_ptr, block, M, N, x_row_stride, other, BLOCK_M, BLOCK_N, EVICT)
        if ARGMAX:
            _store_rows(out_ptr, block, M, _tile_argmax(x, METHOD, BLOCK_N), BLOCK_M)
        else:
            _store_rows(out_ptr, block, M, _tile_sum(x), BLOCK_M)
        if PREFETCH:
            x = x_next


@triton.jit
def row_sum_kernel(
    x_ptr, out_ptr,
    M, N, x_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    WHOLE_ROWS: tl.constexpr, PREFETCH: tl.constexpr, EVICT: tl.constexpr,
):
    if WHOLE_ROWS:
        # Padding adds nothing to a sum: other=0.
        _whole_rows(x_ptr, out_ptr, M, N, x_row_stride, 0.0, False, "",
                    BLOCK_M, BLOCK_N, PREFETCH, EVICT)
    else:
        # Rows longer than a tile (BLOCK_M == 1): walk the row, adding each tile into a
        # per-lane float32 accumulator, and collapse the lanes once at the end.
        for row in range(tl.program_id(0), M, tl.num_programs(0)):
            row_ptr = x_ptr + tl.cast(row, tl.int64) * x_row_stride
            acc = tl.zeros([BLOCK_N], dtype=tl.float32)
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                acc += tl.load(row_ptr + cols, mask=cols < N, other=0.0,
                               eviction_policy=EVICT).to(tl.float32)
            tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def row_argmax_kernel(
    x_ptr, out_ptr,
    M, N, x_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    WHOLE_ROWS: tl.constexpr, PREFETCH: tl.constexpr, EVICT: tl.constexpr,
    METHOD: tl.constexpr,
):
    if WHOLE_ROWS:
        # Padding must never win: load -inf, not 0 (a row of negative numbers has max < 0).
        _whole_rows(x_ptr, out_ptr, M, N, x_row_stride, float("-inf"), True, METHOD,
                    BLOCK_M, BLOCK_N, PREFETCH, EVICT)
    else:
        # Rows longer than a tile: each lane keeps its best value so far and that value's
        # column. Start at -inf: any real value beats it.
        for row in range(tl.program_id(0), M, tl.num_programs(0)):
            row_ptr = x_ptr + tl.cast(row, tl.int64) * x_row_stride
            best = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
            best_col = tl.zeros([BLOCK_N], dtype=tl.int32)
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)
                x = tl.load(row_ptr + cols, mask=cols < N, other=float("-inf"),
                            eviction_policy=EVICT).to(tl.float32)
                # Strictly greater: on a tie the lane keeps the earlier column it already holds.
                take = x > best
                best = tl.where(take, x, best)
                best_col = tl.where(take, cols, best_col)
            # Across lanes: the row maximum, then the smallest column among the lanes holding it.
            # A row of all -inf never takes a value: every lane still holds column 0, which is right.
            row_max = tl.max(best, axis=0)
            first = tl.min(tl.where(best == row_max, best_col, 2147483647), axis=0)
            tl.store(out_ptr + row, first.to(tl.int64))


# ---- total_sum -------------------------------------------------------------------------------

@triton.jit
def partial_sum_kernel(
    x_ptr, partial_ptr, out_ptr, count_ptr,
    n, num_full,
    BLOCK: tl.constexpr, FINAL_BLOCK: tl.constexpr, ONE_LAUNCH: tl.constexpr, EVICT: tl.constexpr,
):
    # Stage 1. x is num_full full blocks of BLOCK elements, then a partial block (n % BLOCK
    # elements, maybe none). Program p sums full blocks p, p + P, p + 2P, ... (P programs).
    pid = tl.program_id(0)
    num_progs = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    # No per-element mask on the full blocks: the loads stay 16 bytes wide whatever n is. (The
    # load past a program's last block is masked by one number for the whole block, which
    # keeps them wide too.) Block starts are int64: block * BLOCK can pass 2**31.
    lanes = tl.zeros([BLOCK], dtype=tl.int32)  # + a block number: that number in every lane
    x = tl.load(x_ptr + pid.to(tl.int64) * BLOCK + offs, mask=lanes + pid < num_full, other=0.0,
                eviction_policy=EVICT)
    for block in range(pid, num_full, num_progs):
        nxt = block + num_progs
        x_next = tl.load(x_ptr + tl.cast(nxt, tl.int64) * BLOCK + offs, mask=lanes + nxt < num_full,
                         other=0.0, eviction_policy=EVICT)
        acc += x.to(tl.float32)
        x = x_next
    # The partial block, masked, by the program whose turn it would have been.
    if pid == num_full % num_progs:
        tail = tl.cast(num_full, tl.int64) * BLOCK + offs
        acc += tl.load(x_ptr + tail, mask=tail < n, other=0.0, eviction_policy=EVICT).to(tl.float32)
    # The partial buffer is float32 too: a share's sum easily passes float16's 65504.
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))
    if ONE_LAUNCH:
        # Stage 2 by the last program to finish. The barrier puts this program's partial before
        # its count (whichever thread stores it); acq_rel makes every partial counted before
        # visible to the program that counts last.
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr, 1, sem="acq_rel")
        if done == num_progs - 1:
            total = tl.zeros([FINAL_BLOCK], dtype=tl.float32)
            for start in range(0, num_progs, FINAL_BLOCK):
                p = start + tl.arange(0, FINAL_BLOCK)
                # .cg: from the L2, where the other programs' partials are.
                total += tl.load(partial_ptr + p, mask=p < num_progs, other=0.0, cache_modifier=".cg")
            tl.store(out_ptr, tl.sum(total, axis=0))
            tl.store(count_ptr, 0)  # leave the counter at 0 for the next call


@triton.jit
def final_sum_kernel(partial_ptr, out_ptr, num_partials, BLOCK: tl.constexpr):
    # Stage 2: a single program adds the partials, always in the same order.
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, num_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < num_partials, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


# ---- launchers -------------------------------------------------------------------------------

def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return INTERPRETER_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def _rows(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2
    # The kernels walk each row with unit stride; rows themselves may be strided.
    return x if x.stride(1) == 1 or x.shape[1] == 1 else x.contiguous()


def _launch_rows(kernel, x: torch.Tensor, out: torch.Tensor, config, **extra) -> None:
    tile_bytes, num_warps, programs_per_sm, evict = config
    M, N = x.shape
    tile = max(tile_bytes // x.element_size(), 16)
    whole_rows = N <= tile
    if whole_rows:
        # Whole rows, as many per tile as fit.
        block_n = triton.next_power_of_2(N)
        block_m = min(tile // block_n, triton.next_power_of_2(M))
        num_blocks = triton.cdiv(M, block_m)
    else:
        block_m, block_n, num_blocks = 1, tile, M
    grid = num_blocks
    if programs_per_sm:
        grid = min(num_blocks, programs_per_sm * _num_sms(x.device))
    kernel[(grid,)](
        x, out, M, N, x.stride(0), BLOCK_M=block_m, BLOCK_N=block_n,
        WHOLE_ROWS=whole_rows, PREFETCH=whole_rows and grid < num_blocks, EVICT=evict,
        num_warps=num_warps, **extra,
    )


def row_sum(x: torch.Tensor) -> torch.Tensor:
    x = _rows(x)
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    _launch_rows(row_sum_kernel, x, out, ROW_SUM_CONFIG[x.element_size()])
    return out


def row_argmax(x: torch.Tensor) -> torch.Tensor:
    x = _rows(x)
    out = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
    size = x.element_size()
    tile_bytes, num_warps, programs_per_sm, evict = ROW_ARGMAX_CONFIG[size]
    if x.shape[1] * size > tile_bytes:
        # Long rows keep two float32/int32 tiles per lane (best value and column) across the
        # loop: a smaller tile keeps registers in check.
        tile_bytes = max(tile_bytes // 2, 64)
    method = ARGMAX_METHOD[size]
    if method == "packed" and (size != 2 or tile_bytes // size > 65536):
        method = "pairs"  # the packed key is for 16-bit values, columns of a tile < 2**16
    _launch_rows(row_argmax_kernel, x, out, (tile_bytes, num_warps, programs_per_sm, evict),
                 METHOD=method)
    return out


_COUNTERS: dict = {}


def _counter(device: torch.device) -> torch.Tensor:
    # One int32 per device, zero between calls (the kernel that uses it resets it).
    if device not in _COUNTERS:
        _COUNTERS[device] = torch.zeros(1, dtype=torch.int32, device=device)
    return _COUNTERS[device]


def total_sum(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 1
    x = x.contiguous()
    n = x.numel()
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    block_bytes, num_warps, programs_per_sm, evict = TOTAL_SUM_CONFIG[x.element_size()]
    block = block_bytes // x.element_size()
    num_full = n // block
    # A few programs per SM, each looping over many blocks: enough loads in flight everywhere,
    # no tail of half-empty waves, and only a few hundred partials for stage 2.
    num_progs = max(1, min(num_full, programs_per_sm * _num_sms(x.device)))
    partials = torch.empty(num_progs, dtype=torch.float32, device=x.device)
    one_launch = TOTAL_SUM_ONE_LAUNCH[x.element_size()] and num_progs > 1
    count = _counter(x.device) if one_launch else partials
    partial_sum_kernel[(num_progs,)](
        x, partials, out, count, n, num_full,
        BLOCK=block, FINAL_BLOCK=1024, ONE_LAUNCH=one_launch, EVICT=evict, num_warps=num_warps,
    )
    if not one_launch:
        final_sum_kernel[(1,)](partials, out, num_progs, BLOCK=1024, num_warps=4)
    return out
