"""Reference solution for the spmv kata.

What it teaches: load balancing a sparse matrix, and the segmented sum.

A CSR matrix is three arrays: row r holds the nonzeros crow_indices[r] .. crow_indices[r + 1] - 1
of col_indices and values. The obvious kernel gives each program one row (or a tile of rows) and
loops over its nonzeros. That is correct, and on matrices whose rows have similar lengths it is
even fast. Real sparse matrices are not like that: in a graph a few hub rows hold 10^5 entries
while most hold fewer than 10. With one program per row, the programs of the short rows finish at
once and the GPU then waits on the few programs walking the hub rows, one chunk after another,
with the rest of the chip idle.

The cure is to split the *nonzeros*, not the rows: program p takes the NPP consecutive nonzeros
[p * NPP, (p + 1) * NPP), whatever rows they belong to. Every program now has the same work. The
price is bookkeeping:

1. Which rows does a program touch? Its first nonzero's row is found by a binary search in
   crow_indices (the largest r with crow_indices[r] <= p * NPP). A tiny first kernel does that
   search for every program boundary at once (the "merge-path partition"): `bound[p]`. It probes
   K - 1 pivots per step instead of one, so the search takes log_K(R) dependent round trips to
   memory rather than log_2(R).
2. Inside a program, each nonzero needs its row. spmv finds it by a binary search restricted to
   the program's rows [bound[p], bound[p + 1]] (those few crow_indices stay in the L1 cache).
   spmm instead walks the program's rows in windows of RB rows and counts, for each nonzero, the
   row ends at or before it.
3. The sums per row, a *segmented* sum (a sum that restarts at every row). spmv takes the
   inclusive prefix sum of the block's products (tl.cumsum) and, at the last nonzero of each row,
   subtracts the prefix just before the row's first nonzero (tl.gather fetches it from another
   lane). The prefix is float64: the difference of two prefixes loses ~1e-16 of the whole
   block's magnitude, where a float32 prefix would lose ~1e-7 of it, far more than a short row
   among long ones may lose (a float64 prefix only fails that way when the products of one block
   differ by ~10^9 in size). (tl.associative_scan over (product, row) pairs with
   combine((a, ra), (b, rb)) = (a + b if ra == rb else b, rb) is the other classic, in float32
   and exact in its segments; it is as fast on a GPU, and very slow on the Triton interpreter.)
   spmm multiplies by a 0/1 matrix instead: with onehot[j, i] = 1 when nonzero i lies in row j
   of the window, the window's rows are onehot @ (values[:, None] * B[col, :]), one tl.dot on
   the tensor cores. On rows of similar length (a banded matrix) there is a cheaper way, with
   no segments at all: step t of a window adds the t-th nonzero of each of its rows into that
   row's accumulator (SPMM_CONFIG's mode "ell"); a window takes as many steps as its longest
   row, which on a power law would be a hub's length, so the table is keyed by row length.
4. Rows that cross a program boundary get partial sums from two or more programs. Rows that lie
   wholly inside one program are stored directly; the partials of a crossing row are added, in
   float32, into one slot per crossing row (`cross[first boundary it crosses]`) with
   tl.atomic_add, and a last small kernel copies each slot into its row, cast once. A hub row of
   10^5 entries is thus summed by ~100 programs at once. Atomics add in whatever order they
   arrive, so the last bits of those rows can vary from run to run: the kata's tolerance allows
   any float32 summation order. (A deterministic alternative: store each program's partials in
   two arrays and have the fix-up kernel add them in program order.)
5. Empty rows have no nonzeros, so no segment ever ends on them: they must be written 0 by
   someone. A zero fill of the output first would cost a launch and a second write of every
   row (N times larger in spmm), so neither does one: each row is owned by the program where it
   starts (an empty row by the program holding its position), and the owner writes it, empty
   ones included: spmv's segmented sum is 0 there, spmm's window accumulator too.
6. spmv is three launches: partition, product, fix-up. The partition is a chain of dependent
   loads (latency, not bandwidth), 12-15 µs on 1-4M rows, and the product's programs need its
   answer only for their rows: their values and column indices do not depend on it. On Hopper
   a kernel can be launched as a *programmatic dependent* of the one before
   (`launch_pdl=True`): it may start once every program of the previous kernel has called
   `gdc_launch_dependents()`, and `gdc_wait()` blocks until the previous kernel has finished
   and its writes are visible. So the partition lets the product start at once, and the product
   issues its value and column-index loads before it waits for the boundaries. The fix-up,
   which needs everything the product wrote, waits at its first instruction: it saves only its
   launch's latency. Together 4-11% off the whole spmv on an H100 (docs/PERFORMANCE.md).

Accumulation is float32 or wider whatever the values' dtype: the products of two float16 values
are exact in float32, of two float32 values in float64. For float32 spmm the tensor cores read
float32 operands as tf32 (10 mantissa bits, error 2**-11), far too coarse; so the products
values * B (float32 multiplies on the CUDA cores, rounded once) are split into a
tf32-representable high part and the remainder, and both go through the tensor cores: onehot is
exactly 0 or 1, so the two dots lose only the remainder's low bits, about 2**-21 of each
product.

Indices are int64 throughout: nnz may exceed 2**31, and so may R * N in spmm's output offsets.
"""

import functools
import os

import torch
import triton
import triton.language as tl

# ---- Launch configuration (the knobs a GPU sweep turns; sweeps/sparse.py) ----------------------

# Partition: boundaries searched per program of the first kernel, and pivots probed per step.
# A latency-bound kernel (6 dependent probes at 4M rows): more, smaller programs finish sooner
# (H100: 32 per program 15.4 µs, 128 per program 19.2 µs; wider K was slower).
PART_BLOCK = 32
PART_K = 16

# spmv, per dtype:
#   npp     nonzeros per program. 1024 nonzeros in 8 warps are 4 per thread: one 16-byte load of
#           float32 values, two of int64 column indices; larger chunks spread each program's
#           fixed costs (two boundary loads, the crossing rows' atomics) over more bytes.
#   rows    rows per step of the row walk (rows a program handles: ~npp / mean row length + 1;
#           more are walked in several steps).
#   warps   num_warps of the main kernel.
#   fused   True: the crossing rows are finished by the last program to add its part (a counter
#           per slot), no fix-up kernel; False: a third small kernel copies the slots into y.
#   evict   eviction policy of the values and column indices ("" or "evict_first": read once, so
#           they need not push x, which every program gathers from, out of the L2).
#   early   True: the values and column indices are loaded before the row pointers (whose
#           addresses wait on a load of first[p]), so that they do not wait behind it.
SPMV_CONFIG = {  # H100 sweep (docs/PERFORMANCE.md)
    torch.float32: {"npp": 1024, "rows": 512, "warps": 8, "fused": False, "evict": "evict_first",
                    "early": True},
    torch.float16: {"npp": 1024, "rows": 512, "warps": 8, "fused": False, "evict": "evict_first",
                    "early": True},
}
FIXUP_BLOCK = 256

# spmm, per dtype and row length (long: nnz / R >= SPMM_LONG_ROWS, the mean row):
#   npp     nonzeros per program.
#   mode    how a program sums its rows (each is a segmented sum; they differ in the waste):
#           "dot": the program's rows are walked in windows of `rb` rows, and each window's
#           nonzeros in chunks of `block`: a segmented sum on the tensor cores (a 0/1 matrix times
#           the gathered rows of b). The 0/1 matrix costs rb multiply-adds per useful product:
#           cheap in float16; float32 pays two tf32 dots, so it takes smaller windows. Good on
#           short rows (a power law), where a chunk spans many rows.
#           "row": one row at a time, its nonzeros in chunks of `block`, summed on the CUDA cores
#           (tl.sum of values * b rows): no wasted work, but one row per step, so only for long
#           rows (a row of 3 would leave most of a chunk empty).
#           "ell": windows of `rb` rows, and step t takes the t-th nonzero of every row of the
#           window at once (as if the window were stored ELLPACK-style): acc[rb, bn] += v[:, None]
#           * b[col, :], plain float32 multiply-adds with no reduction and no 0/1 matrix, `rb`
#           gathered rows of b in flight per step. A window takes as many steps as its longest
#           row (cut to the program's nonzeros), so it is for rows of similar length (a banded,
#           PDE-like matrix), not for a power law. (`block` is unused.)
#   max_bn  columns of b per program (a power of two, >= 16 for tl.dot); N / max_bn programs
#           share each chunk of nonzeros.
#   warps, stages  num_warps and num_stages of the main kernel (stages > 1: Triton pipelines the
#           chunk loop, the next chunks' gathers in flight while this one is summed).
SPMM_LONG_ROWS = 16
SPMM_CONFIG = {
    (torch.float16, False): {"npp": 512, "mode": "dot", "rb": 32, "block": 64, "max_bn": 64,
                             "warps": 4, "stages": 1},
    (torch.float32, False): {"npp": 512, "mode": "dot", "rb": 16, "block": 32, "max_bn": 64,
                             "warps": 4, "stages": 1},
    # Long rows (the banded case): plain multiply-adds over windows of rows. H100 sweep on 2^18
    # banded rows of 16-48 nonzeros, N = 128: float16 in windows of 2 rows on one warp, 2.10x
    # cuSPARSE; float32 in windows of 4 rows, 1.15x (windows of 8 on 4 warps: 1.66x, 0.95x).
    (torch.float16, True): {"npp": 512, "mode": "ell", "rb": 2, "block": 64, "max_bn": 128,
                            "warps": 1, "stages": 1},
    (torch.float32, True): {"npp": 512, "mode": "ell", "rb": 4, "block": 32, "max_bn": 128,
                            "warps": 4, "stages": 1},
}
SPMM_MODES = {"dot": 0, "row": 1, "ell": 2}
SPMM_FIXUP_BLOCK = 16


@triton.jit
def partition_kernel(crow_ptr, bound_ptr, zero_ptr, zero_cnt_ptr, R, P, steps,
                     NPP: tl.constexpr, FB: tl.constexpr, K: tl.constexpr,
                     FIRST_ROW: tl.constexpr, ZERO: tl.constexpr, PDL: tl.constexpr = False):
    """Program boundaries: for q < P, with target = q * NPP,
         FIRST_ROW=False: bound[q] = the row holding nonzero target (the last r: crow[r] <= target);
         FIRST_ROW=True:  bound[q] = the first row r with crow[r] >= target (rows from there on
                          start at or after the boundary; empty rows included);
       and bound[P] = R. With ZERO, also zeroes zero[q] and zero_cnt[q] for q < P: the crossing
       rows' slots of the next kernel (no separate memset launch)."""
    if PDL:  # the next kernel may start now: it waits for this one's answers (gdc_wait) itself
        tl.extra.cuda.gdc_launch_dependents()
    q = tl.program_id(0) * FB + tl.arange(0, FB)
    target = q.to(tl.int64) * NPP
    if FIRST_ROW:
        # Target 0 has no row starting before it (crow[0] = 0 is not < 0): the invariant below
        # would fail from the start, the count of left pivots would be 0 and lo would walk off
        # the front of crow (reads up to R / (K - 1) entries before it: an illegal address on a
        # GPU where crow begins its allocation). Its answer is row 0 (set below); search for
        # target 1 instead, which keeps every probe inside crow.
        target = tl.maximum(target, 1)
    # Invariant: crow[lo] <= target < crow[hi] (FIRST_ROW: crow[lo] < target <= crow[hi]).
    # It holds at the start for every q < P (crow[0] = 0, crow[R] = nnz); lanes q >= P (whose
    # answer is R) may break the right half, never the left: each step keeps 0 <= lo < hi <= R,
    # so every probe lo + width * j / K (j < K) lies in [0, R - 1].
    lo = tl.zeros([FB], tl.int64)
    hi = tl.zeros([FB], tl.int64) + R
    j = tl.arange(0, K).to(tl.int64)
    for _ in range(steps):
        width = hi - lo
        # K pivots lo, lo + width/K, ...: crow at them is nondecreasing, so the pivots left of
        # the target are a prefix, of length cnt >= 1 (the pivot lo itself).
        pivots = lo[:, None] + (width[:, None] * j[None, :]) // K
        c = tl.load(crow_ptr + pivots)
        if FIRST_ROW:
            left = c < target[:, None]
        else:
            left = c <= target[:, None]
        # >= 1 by the invariant; the floor makes it so whatever crow holds (a malformed crow
        # could otherwise send lo below 0, and the next probes outside crow).
        cnt = tl.maximum(tl.sum(left.to(tl.int64), axis=1), 1)
        new_lo = lo + (width * (cnt - 1)) // K
        hi = tl.where(cnt == K, hi, lo + (width * cnt) // K)
        lo = new_lo
    if FIRST_ROW:
        lo = tl.where(q == 0, 0, hi)  # target 0: row 0 (no row starts before it)
    lo = tl.where(q >= P, R, lo)
    tl.store(bound_ptr + q, lo, mask=q <= P)
    if ZERO:
        tl.store(zero_ptr + q, tl.zeros([FB], zero_ptr.dtype.element_ty), mask=q < P)
        tl.store(zero_cnt_ptr + q, tl.zeros([FB], zero_cnt_ptr.dtype.element_ty), mask=q < P)


@triton.jit
def _load_nonzeros(val_ptr, col_ptr, k, s, nnz, NPP: tl.constexpr, EVICT: tl.constexpr):
    if s + NPP <= nnz:
        v = tl.load(val_ptr + k, eviction_policy=EVICT)
        col = tl.load(col_ptr + k, eviction_policy=EVICT)
    else:
        valid = k < nnz
        v = tl.load(val_ptr + k, mask=valid, other=0.0, eviction_policy=EVICT)
        col = tl.load(col_ptr + k, mask=valid, other=0, eviction_policy=EVICT)
    return v, col


@triton.jit
def spmv_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, first_ptr, cross_ptr, count_ptr,
                nnz, x_stride, NPP: tl.constexpr, RB: tl.constexpr, FUSED: tl.constexpr,
                EVICT: tl.constexpr, EARLY: tl.constexpr, PDL: tl.constexpr = False):
    p = tl.program_id(0)
    s = p.to(tl.int64) * NPP
    e = tl.minimum(s + NPP, nnz)
    k = s + tl.arange(0, NPP)

    # The rows: first[p] .. first[p + 1] - 1 start in this program (it owns them: empty rows
    # too, so nothing else need write them); the row before them began in an earlier program
    # and may go on into this one. Each row is a range of lanes, read off the row pointers: no
    # search per nonzero. All of the program's loads are issued before any of its arithmetic,
    # so they are in flight at once (the row walk below loads the next RB rows' while it sums
    # these). The row pointers' addresses wait on a load of first[p], and a warp issues in
    # order (a load whose address is not back stalls every later instruction): EARLY issues the
    # values and column indices before that wait, so only the x gather waits behind it.
    # A full program (all but the last) loads without a mask: its loads are provably contiguous
    # and aligned, so they vectorise (a mask k < nnz would not, nnz being any number).
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if EARLY:
        v, col = _load_nonzeros(val_ptr, col_ptr, k, s, nnz, NPP, EVICT)
    if PDL:
        # Launched while the partition may still run: its boundaries (and the zeroed slots) are
        # read only after it has finished.
        tl.extra.cuda.gdc_wait()
    r_lo = tl.load(first_ptr + p) - (p > 0).to(tl.int64)
    r_hi = tl.load(first_ptr + p + 1)
    rows = r_lo + tl.arange(0, RB)
    start = tl.load(crow_ptr + rows, mask=rows < r_hi, other=0)
    end = tl.load(crow_ptr + rows + 1, mask=rows < r_hi, other=0)
    if not EARLY:
        v, col = _load_nonzeros(val_ptr, col_ptr, k, s, nnz, NPP, EVICT)
    # A gather, never vectorised: its mask costs nothing.
    xv = tl.load(x_ptr + col * x_stride, mask=k < nnz, other=0.0)
    # Segmented sum: a row's part in this program is prefix[its last lane] - prefix[the lane
    # before its first]. The prefix is float64: a difference of two prefixes keeps an error of
    # ~1e-16 of the block's summed magnitude, not of the row's (in float32 it would be ~1e-7 of
    # the whole block's, far above a short row's tolerance). The products are exact in float64
    # (24-bit x 24-bit significands fit in 53).
    prefix = tl.cumsum(v.to(tl.float64) * xv.to(tl.float64), 0)

    for r0 in range(r_lo, r_hi, RB):
        inside = rows < r_hi
        a = tl.minimum(tl.maximum(start - s, 0), NPP)  # the row's lanes here: [a, b)
        b = tl.minimum(tl.maximum(end - s, 0), NPP)
        upto = tl.gather(prefix, tl.maximum(b - 1, 0).to(tl.int32), 0)
        before = tl.gather(prefix, tl.maximum(a - 1, 0).to(tl.int32), 0)
        seg = tl.where(b > a, upto - tl.where(a > 0, before, 0.0), 0.0).to(tl.float32)
        # A row that starts and ends here is complete: store it (0 for an empty row).
        whole = inside & (start >= s) & (end <= e)
        tl.store(y_ptr + rows, seg.to(y_ptr.dtype.element_ty), mask=whole)
        # A row that crosses a boundary (began earlier and reaches into this program, or goes on
        # past e) gets parts from several programs: each adds its part, in float32, to the row's
        # slot, the index of the program where the row starts.
        crossing = inside & (((start < s) & (end > s)) | ((start >= s) & (end > e)))
        slot = start // NPP
        tl.atomic_add(cross_ptr + slot, seg, mask=crossing, sem="relaxed")
        if FUSED:
            # The last program to add its part stores the row: the counter's acq_rel makes the
            # other programs' adds (released by their own counter increments) visible here.
            parts = (end - 1) // NPP - slot + 1
            arrived = tl.atomic_add(count_ptr + slot, 1, mask=crossing, sem="acq_rel")
            last = crossing & (arrived == parts - 1)
            total = tl.atomic_add(cross_ptr + slot, 0.0, mask=last, sem="acq_rel")
            tl.store(y_ptr + rows, total.to(y_ptr.dtype.element_ty), mask=last)
        # The next RB rows (a program of short rows or many empty ones has more than RB).
        rows += RB
        start = tl.load(crow_ptr + rows, mask=rows < r_hi, other=0)
        end = tl.load(crow_ptr + rows + 1, mask=rows < r_hi, other=0)


@triton.jit
def spmv_fixup_kernel(crow_ptr, first_ptr, cross_ptr, y_ptr, P,
                      NPP: tl.constexpr, FB: tl.constexpr, PDL: tl.constexpr = False):
    if PDL:
        tl.extra.cuda.gdc_wait()  # the product's parts are all added
    # Boundary q (1 <= q < P): the row before first[q] crosses it if it goes on past q * NPP;
    # its slot is q - 1 if it starts in program q - 1 (else an earlier boundary handles it).
    q = tl.program_id(0) * FB + tl.arange(0, FB)
    inside = (q >= 1) & (q < P)
    row = tl.load(first_ptr + q, mask=inside, other=1) - 1
    start = tl.load(crow_ptr + row, mask=inside, other=0)
    end = tl.load(crow_ptr + row + 1, mask=inside, other=0)
    mine = inside & (start >= (q - 1).to(tl.int64) * NPP) & (end > q.to(tl.int64) * NPP)
    total = tl.load(cross_ptr + q - 1, mask=mine, other=0.0)
    tl.store(y_ptr + row, total.to(y_ptr.dtype.element_ty), mask=mine)


@functools.cache
def _pdl_capable(device: torch.device) -> bool:
    # Programmatic dependent launch needs Hopper (compute capability 9.0) or later; the
    # interpreter (CPU tensors, or TRITON_INTERPRET=1 for debugging) has no such thing.
    return (device.type == "cuda" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
            and torch.cuda.get_device_capability(device)[0] >= 9)


def _partition(crow_indices, R, nnz, npp, first_row=False, zero=None, pdl=False):
    """bound (int64, P + 1) as partition_kernel defines it; zero: tensors to zero (P entries);
    pdl: let the next kernel, launched as its programmatic dependent, start at once."""
    P = max(1, triton.cdiv(nnz, npp))
    bound = torch.empty(P + 1, dtype=torch.int64, device=crow_indices.device)
    steps, width = 0, R
    while width > 1:  # K-ary search: width -> ceil(width / K) per step (shapes only, no data)
        width = -(-width // PART_K)
        steps += 1
    grid = (triton.cdiv(P + 1, PART_BLOCK),)
    z0, z1 = zero if zero is not None else (bound, bound)
    partition_kernel[grid](crow_indices, bound, z0, z1, R, P, steps,
                           NPP=npp, FB=PART_BLOCK, K=PART_K, FIRST_ROW=first_row,
                           ZERO=zero is not None, PDL=pdl, num_warps=4)
    return bound, P


def spmv(crow_indices: torch.Tensor, col_indices: torch.Tensor, values: torch.Tensor,
         x: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    cfg = {**SPMV_CONFIG[values.dtype], **(config or {})}
    npp = cfg["npp"]
    R = crow_indices.shape[0] - 1
    nnz = values.shape[0]
    # Not zero-filled: every row is stored by the program where it starts, or by the fix-up.
    # (With nnz = 0 the one program owns every row, and stores zeros.)
    y = torch.empty(R, dtype=values.dtype, device=values.device)
    P = max(1, triton.cdiv(nnz, npp))
    cross = torch.empty(P, dtype=torch.float32, device=values.device)
    count = torch.empty(P, dtype=torch.int32, device=values.device)
    # Each launch after the first starts early and waits inside (point 6 above) where it can.
    pdl = cfg.get("pdl", True) and _pdl_capable(values.device)
    first, P = _partition(crow_indices, R, nnz, npp, first_row=True, zero=(cross, count), pdl=pdl)
    spmv_kernel[(P,)](crow_indices, col_indices, values, x, y, first, cross, count,
                      nnz, x.stride(0), NPP=npp, RB=cfg["rows"], FUSED=cfg["fused"],
                      EVICT=cfg["evict"], EARLY=cfg["early"], PDL=pdl,
                      num_warps=cfg["warps"], num_stages=1, launch_pdl=pdl)
    if P > 1 and not cfg["fused"]:
        spmv_fixup_kernel[(triton.cdiv(P, FIXUP_BLOCK),)](
            crow_indices, first, cross, y, P, NPP=npp, FB=FIXUP_BLOCK, PDL=pdl,
            num_warps=4, launch_pdl=pdl)
    return y


@triton.jit
def _tf32_high(x):
    # x rounded to tf32 (10 mantissa bits): add half of the dropped part, then clear it.
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x1000) & 0xFFFFE000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _store_window(out_ptr, cross_ptr, acc, rows, starts, row_ok, own_lo, own_hi, s, e, cols, col_ok,
                  N, NPP: tl.constexpr):
    # A window's rows: whole rows (and empty ones) this program owns are stored; a row crossing a
    # boundary (the first, begun before s, or the one going on past e) adds its part to its slot.
    own = (rows >= own_lo) & (rows < own_hi) & (starts >= s)
    out_offs = rows.to(tl.int64)[:, None] * N + cols[None, :]
    tl.store(out_ptr + out_offs, acc.to(out_ptr.dtype.element_ty),
             mask=own[:, None] & col_ok[None, :])
    head = (rows == own_lo) & (starts < s) & (rows < own_hi)
    tail = (rows == own_hi) & row_ok & (starts < e)
    slot = starts // NPP + 1
    tl.atomic_add(cross_ptr + slot[:, None] * N + cols[None, :], acc,
                  mask=(head | tail)[:, None] & col_ok[None, :], sem="relaxed")


@triton.jit
def spmm_kernel(crow_ptr, col_ptr, val_ptr, b_ptr, out_ptr, bound_ptr, cross_ptr,
                nnz, R, N, stride_bk, stride_bn, n_tiles,
                NPP: tl.constexpr, RB: tl.constexpr, BLOCK: tl.constexpr, BN: tl.constexpr,
                SPLIT_FP32: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    p = pid // n_tiles  # the column tiles of one chunk of nonzeros run side by side
    nt = pid % n_tiles
    s = p.to(tl.int64) * NPP
    e = tl.minimum(s + NPP, nnz)
    # Rows this program writes: [own_lo, own_hi), all but a first row that began before s.
    # Program 0 also owns the empty rows before the first nonzero; the last, those after the last.
    own_lo = tl.where(p == 0, 0, tl.load(bound_ptr + p))
    own_hi = tl.load(bound_ptr + p + 1)
    touch_hi = tl.minimum(own_hi + 1, R)  # + the row going on into the next program

    cols = nt * BN + tl.arange(0, BN)
    col_ok = cols < N
    lane = tl.arange(0, BLOCK)
    if MODE == 1:
        # One row at a time: its nonzeros here, [max(start, s), min(end, e)), in chunks.
        for r in range(own_lo, touch_hi):
            start = tl.load(crow_ptr + r)
            end = tl.load(crow_ptr + r + 1)
            c1 = tl.minimum(end, e)
            acc = tl.zeros([BN], tl.float32)
            for k0 in range(tl.maximum(start, s), c1, BLOCK):
                k = k0 + lane
                kmask = k < c1
                v = tl.load(val_ptr + k, mask=kmask, other=0.0)
                col = tl.load(col_ptr + k, mask=kmask, other=0)
                bg = tl.load(b_ptr + col[:, None] * stride_bk + cols[None, :] * stride_bn,
                             mask=kmask[:, None] & col_ok[None, :], other=0.0)
                acc += tl.sum(v.to(tl.float32)[:, None] * bg.to(tl.float32), axis=0)
            out_offs = r * N + cols  # r is int64 (the row bounds are)
            if (r >= own_lo) & (r < own_hi) & (start >= s):
                tl.store(out_ptr + out_offs, acc.to(out_ptr.dtype.element_ty), mask=col_ok)
            elif start < e:  # crossing: a part, into the slot of the first boundary it crosses
                slot = start // NPP + 1
                tl.atomic_add(cross_ptr + slot * N + cols, acc, mask=col_ok, sem="relaxed")
    elif MODE == 2:
        # Windows of RB rows; step t adds the t-th nonzero (within [s, e)) of every row.
        j = tl.arange(0, RB)
        for wr in range(own_lo, touch_hi, RB):
            rows = wr + j
            row_ok = rows < R
            starts = tl.load(crow_ptr + rows, mask=row_ok, other=0)
            ends = tl.load(crow_ptr + rows + 1, mask=row_ok, other=0)
            lo = tl.maximum(starts, s)
            hi = tl.minimum(ends, e)
            steps = tl.max(hi - lo, axis=0)  # the window's longest row here
            acc = tl.zeros([RB, BN], tl.float32)
            for t in range(0, steps):
                k = lo + t
                kmask = k < hi
                v = tl.load(val_ptr + k, mask=kmask, other=0.0)
                col = tl.load(col_ptr + k, mask=kmask, other=0)
                bg = tl.load(b_ptr + col[:, None] * stride_bk + cols[None, :] * stride_bn,
                             mask=kmask[:, None] & col_ok[None, :], other=0.0)
                acc += v.to(tl.float32)[:, None] * bg.to(tl.float32)
            _store_window(out_ptr, cross_ptr, acc, rows, starts, row_ok, own_lo, own_hi, s, e,
                          cols, col_ok, N, NPP)
    else:
        j = tl.arange(0, RB)
        for wr in range(own_lo, touch_hi, RB):
            rows = wr + j
            row_ok = rows < R
            starts = tl.load(crow_ptr + rows, mask=row_ok, other=0)
            ends = tl.load(crow_ptr + rows + 1, mask=row_ok, other=0x7FFFFFFFFFFFFFFF)
            c0 = tl.maximum(tl.load(crow_ptr + wr), s)
            c1 = tl.minimum(tl.load(crow_ptr + tl.minimum(wr + RB, R)), e)
            acc = tl.zeros([RB, BN], tl.float32)
            for k0 in range(c0, c1, BLOCK):
                k = k0 + lane
                kmask = k < c1
                v = tl.load(val_ptr + k, mask=kmask, other=0.0)
                col = tl.load(col_ptr + k, mask=kmask, other=0)
                bg = tl.load(b_ptr + col[:, None] * stride_bk + cols[None, :] * stride_bn,
                             mask=kmask[:, None] & col_ok[None, :], other=0.0)
                # Row of each nonzero within the window: how many of the window's rows end at
                # or before it. onehot[j, i]: nonzero i is in row j.
                local = tl.sum((ends[None, :] <= k[:, None]).to(tl.int32), axis=1)
                onehot = local[None, :] == j[:, None]
                if SPLIT_FP32:
                    prod = v.to(tl.float32)[:, None] * bg
                    high = _tf32_high(prod)
                    sel = onehot.to(tl.float32)
                    acc = tl.dot(sel, high, acc, input_precision="tf32")
                    acc = tl.dot(sel, prod - high, acc, input_precision="tf32")
                else:
                    # float16: the values go in the 0/1 matrix (exact), products and sums in
                    # float32.
                    a = tl.where(onehot, v[None, :], 0.0).to(bg.dtype)
                    acc = tl.dot(a, bg, acc)
            _store_window(out_ptr, cross_ptr, acc, rows, starts, row_ok, own_lo, own_hi, s, e,
                          cols, col_ok, N, NPP)


@triton.jit
def spmm_fixup_kernel(crow_ptr, bound_ptr, cross_ptr, out_ptr, P, N,
                      NPP: tl.constexpr, FB: tl.constexpr, BN: tl.constexpr):
    q = tl.program_id(0) * FB + tl.arange(0, FB)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    inside = (q >= 1) & (q < P)
    row = tl.load(bound_ptr + q, mask=inside, other=0)
    start = tl.load(crow_ptr + row, mask=inside, other=0)
    first = inside & (start < q.to(tl.int64) * NPP) & (start >= (q - 1).to(tl.int64) * NPP)
    mask = first[:, None] & (cols < N)[None, :]
    total = tl.load(cross_ptr + q.to(tl.int64)[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + row[:, None] * N + cols[None, :], total.to(out_ptr.dtype.element_ty),
             mask=mask)


def spmm(crow_indices: torch.Tensor, col_indices: torch.Tensor, values: torch.Tensor,
         b: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    R = crow_indices.shape[0] - 1
    nnz = values.shape[0]
    N = b.shape[1]
    long_rows = R > 0 and nnz >= SPMM_LONG_ROWS * R
    cfg = {**SPMM_CONFIG[(values.dtype, long_rows)], **(config or {})}
    npp = cfg["npp"]
    # Not zero-filled: every row is written once, by the program that owns it or by the fix-up.
    out = torch.empty((R, N), dtype=values.dtype, device=values.device)
    if R == 0 or N == 0:
        return out
    bound, P = _partition(crow_indices, R, nnz, npp)
    cross = torch.zeros((P + 1, N), dtype=torch.float32, device=values.device)
    bn = min(max(triton.next_power_of_2(N), 16), cfg["max_bn"])  # tl.dot needs >= 16 columns
    n_tiles = triton.cdiv(N, bn)
    spmm_kernel[(P * n_tiles,)](
        crow_indices, col_indices, values, b, out, bound, cross,
        nnz, R, N, b.stride(0), b.stride(1), n_tiles,
        NPP=npp, RB=cfg["rb"], BLOCK=cfg["block"], BN=bn,
        SPLIT_FP32=values.dtype == torch.float32, MODE=SPMM_MODES[cfg["mode"]],
        num_warps=cfg["warps"], num_stages=cfg["stages"])
    if P > 1:
        spmm_fixup_kernel[(triton.cdiv(P, SPMM_FIXUP_BLOCK), n_tiles)](
            crow_indices, bound, cross, out, P, N,
            NPP=npp, FB=SPMM_FIXUP_BLOCK, BN=bn, num_warps=4)
    return out
