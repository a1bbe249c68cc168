"""Reference solution for the prefix_sum kata.

What it teaches: the scan, the reduction whose every output depends on everything before it.
out[i, j] = x[i, 0] + ... + x[i, j] (inclusive), so element j of a row cannot be written until
the sum of all the row's earlier elements is known. Inside one program that is what tl.cumsum
does. The whole question of the kata is what to do when a row is longer than one program should
hold: the programs must pass running totals ("carries") to each other.

- Rows that fit one block (here up to 8192 elements, 32 KiB): one program scans one row, or
  several short rows at once (a [BLOCK_M, BLOCK_N] tile scanned along axis 1). No program needs
  another's result. 8192 x 8192 runs this way: 8192 programs, x read once, out written once.
- Longer rows are cut into tiles of 4096 elements and need a multi-block scan. Two designs:
  * reduce-then-scan (three launches): (1) each tile's sum, (2) a scan of those sums, which
    gives each tile its carry (the sum of every earlier tile of its row), (3) each tile scanned
    again plus its carry. Simple and deterministic, but x is read twice: 12 bytes of traffic per
    4-byte element instead of 8, so it cannot pass ~67% of the copy bandwidth when x is larger
    than the L2.
  * single-pass scan with decoupled look-back (Merrill & Garland, 2016; what CUB's DeviceScan
    does): each program loads its tile once, publishes the tile's sum at once (flag AGGREGATE),
    then looks back at its predecessors' published values: it adds AGGREGATE sums until it
    meets a predecessor that already published its INCLUSIVE prefix (the sum of its whole row
    up to its end), and stops there. It then publishes its own inclusive prefix and writes its
    tile. x is read once: the traffic of a copy. This file uses it; the reduce-then-scan version
    is kept below (USE_LOOKBACK = False) because it is the one to write first.
  * the look-back, persistent: a program that looks back has no bytes in flight while it waits.
    A fixed grid of programs (4 per SM) each take tile after tile and load the next tile before
    looking back for the current one, so the wait overlaps the next load. This is what reaches
    80% of the copy bandwidth on one long row; the one-program-per-tile kernel stays beside it
    (LOOKBACK_PERSISTENT = 0), the simpler version to write first.

The look-back has two details that decide whether it works at all:
- Value and flag are packed into one 64-bit word (value in the high half, flag in the low) and
  written and read with atomics, so a reader never sees a flag with a stale value.
- A program may only wait for programs that are already running, or the GPU deadlocks (a
  waiting program occupies the slot its predecessor needs). Program ids do not promise that:
  each program takes a ticket from an atomic counter instead, and works on the tile its ticket
  names. Any earlier ticket was taken by a program that is running, and it publishes its sum
  without waiting for anyone, so every wait ends.

Numerics: float32 rows are scanned in float32 (tree-ordered inside a tile, a short chain of
carries between tiles). The carry a tile gets depends on which predecessors had published when
it looked, so the last bits of a float32 result can change from run to run; int32 sums are
exact and wrap around modulo 2**32 on overflow, like any int32 addition on the GPU.
"""

import torch
import triton
import triton.language as tl

# Rows up to this many elements are scanned whole by one program (32 KiB of float32/int32).
ROW_BLOCK_MAX = 8192
# Elements per program for short rows: several rows share one program.
ROW_TILE = 4096
# Tile of the multi-block scans: 4096 elements (16 KiB) per program, 32 per thread at 4 warps.
TILE = 4096
# Predecessors a program reads at once during its look-back (one warp's worth).
WINDOW = 32
# Warps of the look-back kernel: 4096 / 128 threads = 32 elements per thread.
LOOKBACK_WARPS = 4
# False: long rows take the three-launch reduce-then-scan instead of the look-back.
USE_LOOKBACK = True
# Cache hints of the look-back kernel: x is read once and the output written once, so neither
# needs to stay in the L2. "evict_first" on the load, ".cs" (streaming) on the store.
LOOKBACK_LOAD_EVICT = ""
LOOKBACK_STORE_CACHE = ""
# True: the look-back's flags live in memory kept between launches, tagged with an epoch, so a
# launch needs no zeroing first (see _LookbackState). False: zeroed memory for every launch.
REUSE_STATE = True
# True: the look-back reads its predecessors' words with volatile loads instead of atomics.
LOOKBACK_VOLATILE_READ = False
# 0: one look-back program per tile (scan_lookback_kernel). N > 0: a persistent grid of N
# programs per SM, each scanning tile after tile and loading its next tile before it looks back
# for the current one (scan_lookback_persistent_kernel). 4 per SM is the most an SM holds at
# this kernel's 107 registers per thread (4 warps): on an H100 at 1 x 2^24 it scans in 53-54
# µs (83-84% of the copy bandwidth) against 58 µs for one program per tile; 1, 2 and 3 per SM
# are slower than one per tile (103, 68, 58 µs), 5 and 8 the same as 4 (docs/PERFORMANCE.md).
LOOKBACK_PERSISTENT = 4
# The persistent kernel's SM count on the CPU interpreter, which has none.
INTERPRETER_SMS = 4
# Persistent kernel only. False: the next tile's sum is published after the current tile's
# inclusive prefix, so the next tile's load is in flight during the look-back. True: it is
# published before the look-back starts, as early as possible, but then the look-back waits
# for the load.
LOOKBACK_EARLY_AGGREGATE = False

# The look-back's flags (literals in the kernel): 0 = EMPTY, nothing published yet;
# 1 = AGGREGATE, the tile's own sum; 2 = INCLUSIVE, the row's sum up to and including the tile.


@triton.jit
def scan_rows_kernel(x_ptr, out_ptr, M, N, x_row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # BLOCK_M whole rows per program (BLOCK_N >= N): one tl.cumsum along the rows, no carries.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    # Padding lanes load 0: they come after the real ones, so they change no inclusive sum.
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0)
    y = tl.cumsum(x, axis=1)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], y, mask=mask)


@triton.jit
def _pack(value, flag, epoch, IS_FLOAT: tl.constexpr):
    # The value's 32 bits in the high half of an int64; the low half holds the launch's epoch
    # (30 bits) and the flag (2 bits).
    if IS_FLOAT:
        bits = value.to(tl.int32, bitcast=True)
    else:
        bits = value
    return (bits.to(tl.int64) << 32) | (epoch.to(tl.int64) << 2) | flag


@triton.jit
def _flag(word, epoch):
    # The flag of a word this launch wrote; 0 (EMPTY) for a word of an earlier launch.
    mine = ((word >> 2) & 0x3FFFFFFF) == epoch
    return tl.where(mine, word & 3, 0)


@triton.jit
def _unpack_value(word, IS_FLOAT: tl.constexpr):
    bits = (word >> 32).to(tl.int32)
    if IS_FLOAT:
        bits = bits.to(tl.float32, bitcast=True)
    return bits


@triton.jit
def _look_back(row_state, k, epoch, WINDOW: tl.constexpr, IS_FLOAT: tl.constexpr,
               VOLATILE_READ: tl.constexpr):
    # The sum of tiles [0, k) of a row, from the words its tiles publish in row_state.
    # WINDOW predecessors at a time, newest first. From the newest INCLUSIVE in the window on,
    # every value is added; without one, the whole window is added and the next older window is
    # read. If a tile after the newest INCLUSIVE has not published yet (EMPTY), the window is
    # read again: that tile's owner is running and publishes it without waiting for a later one.
    if IS_FLOAT:
        prefix = tl.zeros([], dtype=tl.float32)
    else:
        prefix = tl.zeros([], dtype=tl.int32)
    end = k  # tiles [0, end) of the row are still to be accounted for
    while end > 0:
        idx = end - WINDOW + tl.arange(0, WINDOW)
        in_row = idx >= 0
        # An atomic read (add 0): a plain load could be served stale from a cache.
        if VOLATILE_READ:
            word = tl.load(row_state + idx, mask=in_row, other=0, volatile=True)
        else:
            word = tl.atomic_add(row_state + idx, tl.zeros([WINDOW], dtype=tl.int64), mask=in_row,
                                 sem="relaxed")
        # A word left by an earlier launch (another epoch) means this launch's tile has not
        # published yet: EMPTY.
        flag = tl.where(in_row, _flag(word, epoch), 1)
        value = tl.where(in_row, _unpack_value(word, IS_FLOAT), 0)
        newest_inclusive = tl.max(tl.where(flag == 2, idx, -1), axis=0)
        newest_empty = tl.max(tl.where(flag == 0, idx, -1), axis=0)
        ready = newest_empty < tl.maximum(newest_inclusive, 0)
        part = tl.sum(tl.where(idx >= newest_inclusive, value, 0), axis=0)
        prefix += tl.where(ready, part, 0)
        end = tl.where(ready, tl.where(newest_inclusive >= 0, 0, end - WINDOW), end)
    return prefix


# The ticket base and the epoch change every launch: not specialized, so no launch recompiles.
@triton.jit(do_not_specialize=["ticket_base", "epoch"])
def scan_lookback_kernel(
    x_ptr, out_ptr, state_ptr,
    N, x_row_stride, tiles_per_row, num_tiles, counter_ptr, ticket_base, epoch,
    TILE: tl.constexpr, WINDOW: tl.constexpr, IS_FLOAT: tl.constexpr,
    LOAD_EVICT: tl.constexpr = "", STORE_CACHE: tl.constexpr = "", VOLATILE_READ: tl.constexpr = False,
):
    # The ticket, not the program id, says which tile this program scans: tickets are handed
    # out in the order programs start, so every earlier tile belongs to a running program. The
    # counter is never reset: this launch's tickets are those from ticket_base on.
    ticket = tl.atomic_add(counter_ptr, 1) - ticket_base
    row = ticket // tiles_per_row
    k = ticket - row * tiles_per_row  # the tile's position in its row
    row_state = state_ptr + row * tiles_per_row

    cols = k * TILE + tl.arange(0, TILE)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0, eviction_policy=LOAD_EVICT)

    # 1. Publish this tile's sum before anything else: successors may be waiting for it. The
    #    first tile of a row has nothing before it: its sum is already its inclusive prefix.
    total = tl.sum(x, axis=0)
    tl.atomic_xchg(row_state + k, _pack(total, tl.where(k == 0, 2, 1), epoch, IS_FLOAT),
                   sem="relaxed")

    # 2. Look back over the predecessors for the sum of every earlier tile of the row.
    prefix = _look_back(row_state, k, epoch, WINDOW, IS_FLOAT, VOLATILE_READ)

    # 3. Publish the inclusive prefix (it unblocks the successors' look-back), then write.
    tl.atomic_xchg(row_state + k, _pack(prefix + total, 2, epoch, IS_FLOAT),
                   sem="relaxed")
    y = tl.cumsum(x, axis=0) + prefix
    tl.store(out_ptr + row * N + cols, y, mask=mask, cache_modifier=STORE_CACHE)


# The persistent look-back (LOOKBACK_PERSISTENT > 0). What it teaches: hiding a wait behind
# memory traffic by working one tile ahead. A program of scan_lookback_kernel spends most of its
# life waiting (for its ticket, for its load, then for its predecessors' words), and while it
# looks back it has no bytes in flight: the SM holds only so many programs, so it reads less at
# once than a copy does. Here a fixed grid of programs loop over tickets, and each takes the
# ticket of its next tile and issues that tile's load *before* it looks back for its current
# tile: the load's latency is spent during the look-back. How much of it, the machine code says:
# on sm_90 ptxas gives the prefetched loads and the look-back's atomic reads one scoreboard, so
# the look-back's first read is seen only once the next tile has landed too. The load overlaps
# the look-back's first round trip, not its polling; more programs per SM cover the rest.
#
# Why holding a second ticket cannot deadlock: a program waits only in the look-back of its
# current tile t, and only for tiles before t. Tickets are drawn only by running programs, and a
# persistent program keeps its SM until it stops, so every ticket's owner is running. Take the
# smallest ticket s whose tile is unfinished: every tile before s has published its INCLUSIVE.
# If s is its owner's current tile, its look-back finds them and ends; if s is its owner's
# prefetched tile, the owner's current tile comes before s, so it is finished and s is next.
# Either way s finishes, and by induction every tile does. (Waiting on the prefetched tile's
# predecessors before finishing the current one would break this.)
#
# Ticket accounting: each program draws until it draws a ticket past the last tile, then stops.
# The counter hands out consecutive numbers, so each of num_tiles .. num_tiles + grid - 1 is drawn
# by exactly one program: a launch takes num_tiles + grid tickets, and the next launch's tickets
# start that much later (_scan_lookback).
@triton.jit
def _next_ticket(counter_ptr, ticket_base):
    # A launch's tickets are few (num_tiles + grid): int32, so that a row's number and a tile's
    # position come from a 32-bit division (inline) instead of a 64-bit one (a call, before
    # which the compiler waits for every load in flight).
    return (tl.atomic_add(counter_ptr, 1) - ticket_base).to(tl.int32)


@triton.jit
def _load_tile(x_ptr, ticket, num_tiles, N, x_row_stride, tiles_per_row, TILE: tl.constexpr,
               LOAD_EVICT: tl.constexpr):
    # The tile a ticket names (zeros for a ticket past the last tile), its row and position.
    row = ticket // tiles_per_row
    k = ticket - row * tiles_per_row
    cols = k * TILE + tl.arange(0, TILE)
    end = tl.where(ticket < num_tiles, N, 0)
    x = tl.load(x_ptr + row.to(tl.int64) * x_row_stride + cols, mask=cols < end, other=0,
                eviction_policy=LOAD_EVICT)
    return x, row, k


@triton.jit(do_not_specialize=["ticket_base", "epoch"])
def scan_lookback_persistent_kernel(
    x_ptr, out_ptr, state_ptr,
    N, x_row_stride, tiles_per_row, num_tiles, counter_ptr, ticket_base, epoch,
    TILE: tl.constexpr, WINDOW: tl.constexpr, IS_FLOAT: tl.constexpr,
    LOAD_EVICT: tl.constexpr = "", STORE_CACHE: tl.constexpr = "", VOLATILE_READ: tl.constexpr = False,
    EARLY_AGGREGATE: tl.constexpr = False,
):
    # The first tile: loaded and its sum published, as in scan_lookback_kernel. A tile's word is
    # state_ptr + ticket (its row's words, then its position in the row).
    ticket = _next_ticket(counter_ptr, ticket_base)
    x, row, k = _load_tile(x_ptr, ticket, num_tiles, N, x_row_stride, tiles_per_row, TILE, LOAD_EVICT)
    total = tl.sum(x, axis=0)
    tl.atomic_xchg(state_ptr + ticket, _pack(total, tl.where(k == 0, 2, 1), epoch, IS_FLOAT),
                   mask=ticket < num_tiles, sem="relaxed")
    while ticket < num_tiles:
        # 1. The next ticket and its tile's load, issued now, used after the look-back.
        next_ticket = _next_ticket(counter_ptr, ticket_base)
        x_next, row_next, k_next = _load_tile(x_ptr, next_ticket, num_tiles, N, x_row_stride,
                                              tiles_per_row, TILE, LOAD_EVICT)
        if EARLY_AGGREGATE:
            total_next = tl.sum(x_next, axis=0)
            tl.atomic_xchg(state_ptr + next_ticket,
                           _pack(total_next, tl.where(k_next == 0, 2, 1), epoch, IS_FLOAT),
                           mask=next_ticket < num_tiles, sem="relaxed")

        # 2. The current tile: look back, publish its inclusive prefix.
        prefix = _look_back(state_ptr + row * tiles_per_row, k, epoch, WINDOW, IS_FLOAT, VOLATILE_READ)
        tl.atomic_xchg(state_ptr + ticket, _pack(prefix + total, 2, epoch, IS_FLOAT), sem="relaxed")

        # 3. The next tile's sum, published before the current tile is written: successors may
        #    be waiting for it, and the write need not wait for anything.
        if not EARLY_AGGREGATE:
            total_next = tl.sum(x_next, axis=0)
            tl.atomic_xchg(state_ptr + next_ticket,
                           _pack(total_next, tl.where(k_next == 0, 2, 1), epoch, IS_FLOAT),
                           mask=next_ticket < num_tiles, sem="relaxed")

        cols = k * TILE + tl.arange(0, TILE)
        y = tl.cumsum(x, axis=0) + prefix
        tl.store(out_ptr + row.to(tl.int64) * N + cols, y, mask=cols < N, cache_modifier=STORE_CACHE)
        ticket, x, total, row, k = next_ticket, x_next, total_next, row_next, k_next

# Reduce-then-scan: the three-launch multi-block scan (USE_LOOKBACK = False).

@triton.jit
def tile_sums_kernel(x_ptr, sums_ptr, N, x_row_stride, tiles_per_row, TILE: tl.constexpr):
    # Pass 1: the sum of each tile.
    tile = tl.program_id(0).to(tl.int64)
    row = tile // tiles_per_row
    cols = (tile - row * tiles_per_row) * TILE + tl.arange(0, TILE)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < N, other=0)
    tl.store(sums_ptr + tile, tl.sum(x, axis=0))


@triton.jit
def scan_tiles_kernel(x_ptr, out_ptr, prefix_ptr, N, x_row_stride, tiles_per_row, num_tiles,
                      TILE: tl.constexpr):
    # Pass 3: each tile scanned, plus its carry: the inclusive scan of the tile sums up to the
    # tile *before* it (0 for a row's first tile). Tiles are taken last to first, so the first
    # ones read are those pass 1 read last, which may still sit in the L2.
    tile = (num_tiles - 1 - tl.program_id(0)).to(tl.int64)
    row = tile // tiles_per_row
    k = tile - row * tiles_per_row
    cols = k * TILE + tl.arange(0, TILE)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0)
    carry = tl.load(prefix_ptr + tile - 1, mask=k > 0, other=0)
    tl.store(out_ptr + row * N + cols, tl.cumsum(x, axis=0) + carry, mask=mask)


def _scan_rows(x: torch.Tensor, out: torch.Tensor) -> None:
    M, N = x.shape
    block_n = max(16, triton.next_power_of_2(N))
    block_m = max(1, min(ROW_TILE // block_n, triton.next_power_of_2(M)))
    num_warps = 8 if block_m * block_n >= 8192 else 4
    scan_rows_kernel[(triton.cdiv(M, block_m),)](
        x, out, M, N, x.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
    )


class _LookbackState:
    """The look-back's scratch memory, kept from launch to launch on one stream.

    Every tile's word must read EMPTY before the launch. Zeroing the words is a launch of its
    own (CUB's scan runs an init kernel first), worth ~5% of a 2^24-element scan. Instead each
    launch gets a new epoch, written into every word it publishes, and a word of another epoch
    reads as EMPTY; the ticket counter is never reset, each launch knows where its tickets
    start. Zeroed memory is needed only when the words run out or the epochs wrap.
    """

    EPOCHS = (1 << 30) - 1

    def __init__(self, device):
        self.device, self.words, self.epoch, self.tickets = device, None, 0, 0

    def next_launch(self, num_tiles: int, tickets: int | None = None):
        # tickets: how many the launch draws from the counter (num_tiles unless given).
        if self.words is None or self.words.numel() - 1 < num_tiles or self.epoch >= self.EPOCHS:
            size = max(num_tiles, 2 * (0 if self.words is None else self.words.numel() - 1), 64)
            self.words = torch.zeros(size + 1, dtype=torch.int64, device=self.device)
            self.epoch, self.tickets = 0, 0
        self.epoch += 1
        base, self.tickets = self.tickets, self.tickets + (num_tiles if tickets is None else tickets)
        return self.words, self.words[-1:], base, self.epoch


_LOOKBACK_STATES = {}


def _lookback_state(x: torch.Tensor) -> "_LookbackState":
    # One per stream: two scans in flight on two streams must not share words.
    stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
    key = (str(x.device), stream)
    if key not in _LOOKBACK_STATES:
        _LOOKBACK_STATES[key] = _LookbackState(x.device)
    return _LOOKBACK_STATES[key]


def _sm_count(device) -> int:
    if device.type != "cuda":
        return INTERPRETER_SMS
    if device not in _SM_COUNTS:
        _SM_COUNTS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNTS[device]


_SM_COUNTS = {}


def _scan_lookback(x: torch.Tensor, out: torch.Tensor) -> None:
    M, N = x.shape
    tiles_per_row = triton.cdiv(N, TILE)
    num_tiles = M * tiles_per_row
    # One program per tile; or a persistent grid, whose programs each draw one ticket past the
    # last tile before they stop.
    grid = num_tiles
    if LOOKBACK_PERSISTENT > 0:
        grid = min(num_tiles, LOOKBACK_PERSISTENT * _sm_count(x.device))
    tickets = num_tiles + (grid if LOOKBACK_PERSISTENT > 0 else 0)
    if REUSE_STATE:
        state, counter, base, epoch = _lookback_state(x).next_launch(num_tiles, tickets)
    else:
        # One packed word per tile, then the ticket counter: all zero (EMPTY) before the launch.
        state = torch.zeros(num_tiles + 1, dtype=torch.int64, device=x.device)
        counter, base, epoch = state[num_tiles:], 0, 1
    args = (x, out, state, N, x.stride(0), tiles_per_row, num_tiles, counter, base, epoch)
    meta = dict(TILE=TILE, WINDOW=WINDOW, IS_FLOAT=x.dtype.is_floating_point,
                LOAD_EVICT=LOOKBACK_LOAD_EVICT, STORE_CACHE=LOOKBACK_STORE_CACHE,
                VOLATILE_READ=LOOKBACK_VOLATILE_READ, num_warps=LOOKBACK_WARPS)
    if LOOKBACK_PERSISTENT > 0:
        scan_lookback_persistent_kernel[(grid,)](*args, EARLY_AGGREGATE=LOOKBACK_EARLY_AGGREGATE, **meta)
    else:
        scan_lookback_kernel[(grid,)](*args, **meta)


def _scan_reduce_then_scan(x: torch.Tensor, out: torch.Tensor) -> None:
    M, N = x.shape
    tiles_per_row = triton.cdiv(N, TILE)
    num_tiles = M * tiles_per_row
    sums = torch.empty((M, tiles_per_row), dtype=x.dtype, device=x.device)
    tile_sums_kernel[(num_tiles,)](x, sums, N, x.stride(0), tiles_per_row, TILE=TILE, num_warps=4)
    # Pass 2: the scan of the tile sums, by this same function (one short row per row of x).
    prefix = cumsum(sums)
    scan_tiles_kernel[(num_tiles,)](x, out, prefix, N, x.stride(0), tiles_per_row, num_tiles,
                                    TILE=TILE, num_warps=4)


def cumsum(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2 and x.dtype in (torch.float32, torch.int32)
    # Elements of a row must be adjacent; rows themselves may be strided.
    if x.stride(1) != 1 and x.shape[1] > 1:
        x = x.contiguous()
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if N <= ROW_BLOCK_MAX:
        _scan_rows(x, out)
    elif USE_LOOKBACK:
        _scan_lookback(x, out)
    else:
        _scan_reduce_then_scan(x, out)
    return out
