"""Reference solution for the matmul_lowp kata.

What it teaches: a low-precision GEMM is an ordinary tiled GEMM whose operands are one byte wide
and whose tensor cores run at twice the bf16 rate; what changes is everything around the dot.

1. Accumulate wide, scale late. FP8 products are exact in float32 and the tensor core adds them
   into a float32 accumulator; INT8 products are exact integers and `tl.dot` on int8 tiles
   returns int32, exactly. The quantization scales are per row of a (a_scale, (M, 1)) and per
   column of b (b_scale, (1, N)), so they factor out of the sum over K:

       sum_k (a[i,k] * sa[i]) * (b[k,j] * sb[j]) = sa[i] * sb[j] * sum_k a[i,k] * b[k,j]

   The K loop therefore runs on the raw fp8 codes, at full tensor-core speed, and the scales
   are applied once per output element in the epilogue: acc * sa[:, None] * sb[None, :], then
   one rounding to bf16. Scaling the tiles before the dot would cost a multiply per operand
   element in every K step, leave the fp8 tensor cores (the scaled values are no longer fp8)
   or, re-quantized to fp8, lose precision a second time.
2. Both operands K-major. Hopper's 8-bit wgmma reads A and B from shared memory with K as the
   contiguous dimension (only 16-bit types may be transposed there). matmul_fp8's b is given
   column-major, the layout cuBLAS and this kernel want. matmul_int8's b is a plain row-major
   (K, N) tensor: the launcher makes one K-major copy of it (N * K bytes, ~40 us at 8192^2,
   against ~1 ms of math) so the kernel streams both operands with wide, asynchronous copies;
   in a real model the weight would be stored that way once. The kernel itself honours any
   strides.
3. Tails, wherever they are. K need not be a multiple of BLOCK_K (or of 32): the last K step
   loads with a mask and other=0, and zeros add nothing. M and N tails: the row and column
   indices are wrapped (% M, % N) so every load is in bounds, and the store is masked. M can be
   1: tl.dot needs tiles of at least 16 rows, so small M gets a 16-row tile whose extra rows
   repeat real ones and are never stored.
4. Offsets in int64: row * row_stride passes 2**31 once a has more than 2**31 elements (an
   int8 a of 65600 x 32768 is 2.1 GB), so the row offsets are widened before multiplying.
5. Speed: a grouped program order (GROUP_M row-tiles share each column tile while it is in L2),
   big tiles with 8 warps (two warpgroups) and 3-4 stages of software pipelining for large
   shapes, smaller tiles when M is small. Large FP8 products load through TMA descriptors (the
   copy engine computes the addresses, not the threads that also add the promotions) on a
   persistent grid of 2 programs per SM walking the tiles; optionally a TMA store of the output
   and warp specialization (below). The configurations are the tables below.

About FP8 accumulation on Hopper (and why the FP8 loop keeps two accumulators). `tl.dot(a, b,
acc)` chains the wgmma instructions through the accumulator, and the fp8 tensor cores add each
32-deep step into it with reduced precision ("fast accumulation": every addend is aligned to the
running sum and truncated to ~13 bits below its leading bit). The error grows with the length of
the chain: measured on an H100, a whole K = 4096 chain is 7% low on all-positive sums, far
outside the tolerance. The cure, as in CUTLASS, DeepGEMM and torch._scaled_mm: two-level
accumulation. The tensor cores chain only a short run of K steps into a partial accumulator
`part`, which is then added to the float32 total `acc` with ordinary float32 adds ("promotion")
and restarted from zero. A run of 128 (4 wgmma steps, _scaled_mm's choice) leaves the bf16
output's rounding as the main error; 256 roughly doubles the accumulation part and still fits
the tolerance at every K; 512 does not at K ~ 512.

Both accumulators live in registers: a 128 x 256 tile and its partial would need 256 registers
per thread and spill. Hence the pieces: the FP8 tile is 128 x 128 on 8 warps; or 128 x 192 made
of two dots (BLOCK_N2 = 64 columns beside); or 128 x 128 made of two 64-row dots on 4 warps
(BLOCK_M2 = 64 rows below), whose 255 registers and 96 KiB let two programs share an SM, so one
program's promotion adds run while the other's tensor-core work goes on.

PROMOTE sets the run: 1 adds a fresh product every BLOCK_K (`acc += tl.dot(a, b)`; Triton
must wait for each dot before adding it, so the tensor cores idle once per BLOCK_K); P >= 2
chains P BLOCK_K steps (`part = tl.dot(a, b, part)`, pipelined like any GEMM) and promotes
under an `if`, so the pipeline drains once per P steps. Two details the compiler cares about:
the partial is restarted as `part * 0` inside the `if` (after the wait), because a constant
zero would be hoisted into a select on the still-running accumulator; and with two pieces each
piece is promoted in its own `if` (same steps, written differently), because one block waiting
on both dots makes ptxas serialize every wgmma of the loop (its note C7515).

Warp specialization (WS, optional) is the other way to hide the promotion, the one CUTLASS uses:
with TMA descriptors made inside the kernel (TMA=2), Triton's Hopper warp specialization splits
the K loop into a producer warpgroup that only issues TMA loads and two consumer warpgroups that
each own half of the tile's rows. A consumer runs its wgmmas, releases the stage, and promotes
its own partial while the other consumer's wgmmas keep the tensor cores busy; each holds only
its rows' two accumulators (64 + 64 registers per thread for 64 x 128), so a 128 x 128 tile
needs no pieces, and a 256 x 128 one (two 128-row dots) fits too.
"""

import torch
import triton
import triton.language as tl

try:  # host-side TMA descriptors (triton >= 3.3); used only where a config asks for TMA
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton
    TensorDescriptor = None

GROUP_M = 8

# ---- configurations: what the launcher picks, by task and shape -------------------------------
#   BLOCK_M, BLOCK_N   the tile, or its first piece
#   BLOCK_M2/BLOCK_N2  a second piece below it (BLOCK_M2 more rows) or beside it (BLOCK_N2 more
#                      columns), with its own dot and accumulators; 0: none (at most one is set)
#   BLOCK_K            the K step
#   PROMOTE            0: chain every step into acc (exact for int8; fp8 fast accumulation);
#                      1: acc += a fresh dot per BLOCK_K; P >= 2: promote a chained partial
#                      every P BLOCK_K steps; -1: let Triton promote inside each dot
#                      (max_num_imprecise_acc=BLOCK_K; ptxas then waits on every wgmma)
#   TMA                load a and b through TMA descriptors (needs 16-byte aligned rows): 0/False
#                      none (pointers); 1/True descriptors made on the host (TensorDescriptor);
#                      2 descriptors made in the kernel (tl.make_tensor_descriptor), the form
#                      Triton's warp specialization (WS) can split between its consumer warps
#   CHAIN_K_DIV        optional, with PROMOTE >= 1: lengthen the chained run with K, up to
#                      K / CHAIN_K_DIV elements (PROMOTE * BLOCK_K never shrinks). The tolerance
#                      grows with K (6e-6 * K) and a run's error with its length, so long sums
#                      can afford longer runs; 0 or absent: a fixed run. With CHAIN_IN_BLOCK_K
#                      (and PROMOTE=1) the run grows as a deeper BLOCK_K (up to 256) instead.
#   PERSISTENT         optional: 0 or absent, one program per tile; P >= 1, P programs per SM,
#                      each walking the tiles (in the same grouped order) until none are left:
#                      no tail of half-empty waves, and no program launch per tile
#   FLATTEN            optional, with PERSISTENT: let Triton fuse the tile loop and the K loop
#                      into one pipelined loop, so the next tile's first loads are issued while
#                      this tile's epilogue runs (tl.range(..., flatten=True))
#   WS                 optional: ask Triton for warp specialization (tl.range(...,
#                      warp_specialize=True)): a producer warpgroup issues the TMA loads, consumer
#                      warpgroups the MMAs, each owning part of the tile's rows. 1/True: of the K
#                      loop; 2: of a persistent grid's tile loop (the producer runs ahead into the
#                      next tile while the consumers finish this one). Where the compiler cannot,
#                      the loop is unchanged
#   GROUP_M            optional: row-tiles per group of the grouped order (default GROUP_M above)
#   C_TMA              optional: store the output tile through a TMA descriptor (bf16 rows must
#                      be 16-byte aligned, N % 8 == 0; otherwise the masked tl.store)
#   num_warps, num_stages
# 128x128 as two 64-row dots on 4 warps: 255 registers and 96 KiB of shared memory, so two
# programs share an SM and one's fp32 promotion overlaps the other's tensor-core work (H100
# sweep: 0.81x _scaled_mm at 8192^3, 0.87x at 4096^3; the one-dot 128x128 on 8 warps: 0.71x).
# With TMA loads (no address math in the threads that also add the promotions), a persistent
# grid of 2 programs per SM, groups of 16 row-tiles (the b tiles a group shares stay in the L2)
# and the output written by one TMA store: 0.92x _scaled_mm at 8192^3 and 0.94x at 4096^3 (H100,
# triton 3.6; TMA alone 0.89x; docs/PERFORMANCE.md). The TMA store's staging tile takes 112 KiB
# of shared memory in all, which still lets two programs share an SM.
FP8_LARGE = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_M2=64, BLOCK_N2=0, BLOCK_K=128, PROMOTE=1,
                 TMA=True, PERSISTENT=2, GROUP_M=16, C_TMA=True, num_warps=4, num_stages=3)
INT8_LARGE = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_M2=0, BLOCK_N2=0, BLOCK_K=128, PROMOTE=0,
                  TMA=False, num_warps=8, num_stages=3)
# M <= 64 (decode-like): the work is reading b, so narrower tiles give more programs to stream
# it, and 4 warps suffice.
FP8_SMALL_M = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_M2=0, BLOCK_N2=0, BLOCK_K=128, PROMOTE=1,
                   TMA=False, num_warps=4, num_stages=4)
INT8_SMALL_M = dict(FP8_SMALL_M, PROMOTE=0)
# Where a configuration asks for TMA but the rows of a or b are not 16-byte aligned (K % 16 != 0,
# e.g. K = 4097), the fp8 launcher uses this pointer-based one instead (warp specialization
# needs TMA loads too).
FP8_NO_TMA = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_M2=64, BLOCK_N2=0, BLOCK_K=128, PROMOTE=1,
                  TMA=False, num_warps=4, num_stages=3)


# ---- kernel -----------------------------------------------------------------------------------

@triton.jit
def _dot_step(a, b, acc, part, k, PROMOTE: tl.constexpr, BLOCK_K: tl.constexpr,
              SECOND: tl.constexpr):
    """One BLOCK_K step of one piece of the tile: returns (acc, part)."""
    if PROMOTE == 0:
        # Chained: int8 (int32 adds are exact), or fp8 with fast accumulation.
        acc = tl.dot(a, b, acc, out_dtype=acc.dtype)
    elif PROMOTE == -1:
        # Triton's own promotion: a partial per wgmma tile, added into acc every BLOCK_K.
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K, out_dtype=acc.dtype)
    elif PROMOTE == 1:
        # A fresh product per BLOCK_K, added in full float32 precision.
        acc += tl.dot(a, b, out_dtype=acc.dtype)
    else:
        # Chained for PROMOTE steps (fast), then promoted into acc (exact float32 adds).
        part = tl.dot(a, b, part, out_dtype=part.dtype)
        if SECOND:  # the second piece: the same steps, a separate `if` (see the docstring)
            promote = (k + 1) % PROMOTE == 0
        else:
            promote = k % PROMOTE == PROMOTE - 1
        if promote:
            acc += part
            part = part * 0
    return acc, part


@triton.jit
def _epilogue(acc, part, c_ptr, c_desc, a_scale_ptr, b_scale_ptr, r0, c0, rows, cols, M, N,
              stride_cm, stride_cn, stride_sa, stride_sb,
              SCALED: tl.constexpr, PROMOTE: tl.constexpr, C_TMA: tl.constexpr):
    if PROMOTE >= 2:
        acc += part  # the last, partial run
    row_ok = rows < M
    col_ok = cols < N
    if SCALED:
        # The scales factor out of the K sum: one multiply per output element, in float32.
        sa = tl.load(a_scale_ptr + rows * stride_sa, mask=row_ok, other=0.0)
        sb = tl.load(b_scale_ptr + cols * stride_sb, mask=col_ok, other=0.0)
        acc = acc * sa[:, None] * sb[None, :]
    if C_TMA:
        # The tile goes to shared memory, then one bulk copy writes it (rows and columns past
        # the end are dropped by the copy engine): no masks, no per-thread address math.
        c_desc.store([r0, c0], acc.to(c_desc.dtype))
    else:
        c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _tile(
    tile, a_ptr, b_ptr, x2_desc, c_ptr, c_desc, a_scale_ptr, b_scale_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_sa, stride_sb,
    SCALED: tl.constexpr, ZERO: tl.constexpr, EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M2: tl.constexpr,
    BLOCK_N2: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROMOTE: tl.constexpr, TMA: tl.constexpr, WS: tl.constexpr, C_TMA: tl.constexpr,
):
    """One output tile, number `tile` in the grouped order: the K loop, then the epilogue."""
    # With TMA, a_ptr and b_ptr are descriptors of a (M, K) and of b.t() (N, K), and x2_desc
    # the descriptor the second piece loads (rows of a, or rows of b.t()); otherwise pointers.
    TILE_M: tl.constexpr = BLOCK_M + BLOCK_M2  # the whole tile
    TILE_N: tl.constexpr = BLOCK_N + BLOCK_N2
    SPLIT: tl.constexpr = BLOCK_M2 + BLOCK_N2 > 0  # a second piece, below or beside
    # Grouped ordering: consecutive programs walk down GROUP_M row-tiles of one column band, so
    # the b tiles they share (and the a tiles of the group) are read from L2, not from DRAM.
    num_pid_m = tl.cdiv(M, TILE_M)
    num_pid_n = tl.cdiv(N, TILE_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile % num_pid_in_group) % group_size_m)
    pid_n = (tile % num_pid_in_group) // group_size_m
    row0 = pid_m * TILE_M
    col0 = pid_n * TILE_N

    if not TMA:
        # Rows and columns past the end wrap onto real ones: every load stays in bounds without
        # a mask in the K loop; the store below drops them.
        offs_k = tl.arange(0, BLOCK_K)
        offs_m = (row0 + tl.arange(0, BLOCK_M)) % M
        offs_n = (col0 + tl.arange(0, BLOCK_N)) % N
        # int64 row/column offsets: M * stride_am can pass 2**31.
        a_ptrs = a_ptr + offs_m.to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n.to(tl.int64)[None, :] * stride_bn
        if BLOCK_M2 > 0:
            offs_m2 = (row0 + BLOCK_M + tl.arange(0, BLOCK_M2)) % M
            x2_ptrs = a_ptr + offs_m2.to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
        if BLOCK_N2 > 0:
            offs_n2 = (col0 + BLOCK_N + tl.arange(0, BLOCK_N2)) % N
            x2_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n2.to(tl.int64)[None, :] * stride_bn

    # float32 for fp8 operands, int32 for int8 (exact); `part` is the partial run (PROMOTE >= 2).
    if SCALED:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    if BLOCK_M2 > 0:
        acc2 = tl.zeros((BLOCK_M2, BLOCK_N), dtype=acc.dtype)
    if BLOCK_N2 > 0:
        acc2 = tl.zeros((BLOCK_M, BLOCK_N2), dtype=acc.dtype)
    part = acc
    if SPLIT:
        part2 = acc2

    for k in tl.range(0, tl.cdiv(K, BLOCK_K), warp_specialize=WS == 1):
        if TMA:
            # Out-of-bounds rows, columns and K lanes arrive as zeros.
            a = a_ptr.load([row0, k * BLOCK_K])
            b = b_ptr.load([col0, k * BLOCK_K]).T
            if BLOCK_M2 > 0:
                x2 = x2_desc.load([row0 + BLOCK_M, k * BLOCK_K])
            if BLOCK_N2 > 0:
                x2 = x2_desc.load([col0 + BLOCK_N, k * BLOCK_K]).T
        elif EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
            if SPLIT:
                x2 = tl.load(x2_ptrs)
        else:
            # The K tail: lanes past K load 0 (0.0 for fp8, 0 for int8) and add nothing.
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=ZERO)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=ZERO)
            if BLOCK_M2 > 0:
                x2 = tl.load(x2_ptrs, mask=offs_k[None, :] < k_left, other=ZERO)
            if BLOCK_N2 > 0:
                x2 = tl.load(x2_ptrs, mask=offs_k[:, None] < k_left, other=ZERO)
        acc, part = _dot_step(a, b, acc, part, k, PROMOTE, BLOCK_K, False)
        if BLOCK_M2 > 0:  # the rows below: x2 times the same b
            acc2, part2 = _dot_step(x2, b, acc2, part2, k, PROMOTE, BLOCK_K, True)
        if BLOCK_N2 > 0:  # the columns beside: the same a times x2
            acc2, part2 = _dot_step(a, x2, acc2, part2, k, PROMOTE, BLOCK_K, True)
        if not TMA:
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
            if BLOCK_M2 > 0:
                x2_ptrs += BLOCK_K * stride_ak
            if BLOCK_N2 > 0:
                x2_ptrs += BLOCK_K * stride_bk

    # Epilogue: the real rows and columns of this tile, one piece at a time.
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = col0 + tl.arange(0, BLOCK_N)
    _epilogue(acc, part, c_ptr, c_desc, a_scale_ptr, b_scale_ptr, row0, col0, rows, cols, M, N,
              stride_cm, stride_cn, stride_sa, stride_sb, SCALED, PROMOTE, C_TMA)
    if BLOCK_M2 > 0:
        rows2 = row0 + BLOCK_M + tl.arange(0, BLOCK_M2)
        _epilogue(acc2, part2, c_ptr, c_desc, a_scale_ptr, b_scale_ptr, row0 + BLOCK_M, col0,
                  rows2, cols, M, N, stride_cm, stride_cn, stride_sa, stride_sb, SCALED,
                  PROMOTE, C_TMA)
    if BLOCK_N2 > 0:
        cols2 = col0 + BLOCK_N + tl.arange(0, BLOCK_N2)
        _epilogue(acc2, part2, c_ptr, c_desc, a_scale_ptr, b_scale_ptr, row0, col0 + BLOCK_N,
                  rows, cols2, M, N, stride_cm, stride_cn, stride_sa, stride_sb, SCALED,
                  PROMOTE, C_TMA)


@triton.jit
def lowp_matmul_kernel(
    a_ptr, b_ptr, x2_desc, c_ptr, c_desc, a_scale_ptr, b_scale_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_sa, stride_sb,
    SCALED: tl.constexpr, ZERO: tl.constexpr, EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M2: tl.constexpr,
    BLOCK_N2: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROMOTE: tl.constexpr, TMA: tl.constexpr, WS: tl.constexpr,
    PERSISTENT: tl.constexpr, FLATTEN: tl.constexpr, C_TMA: tl.constexpr,
):
    # c_desc: with C_TMA, a descriptor of c (blocks of BLOCK_M x BLOCK_N, the pieces' shape);
    # otherwise unused (c_ptr is stored through).
    if TMA == 2:  # pointers in, descriptors made here, once (the rows are 16-byte aligned)
        if BLOCK_M2 > 0:
            x2_desc = tl.make_tensor_descriptor(x2_desc, [M, K], [stride_am, 1],
                                                [BLOCK_M2, BLOCK_K])
        if BLOCK_N2 > 0:
            x2_desc = tl.make_tensor_descriptor(x2_desc, [N, K], [stride_bn, 1],
                                                [BLOCK_N2, BLOCK_K])
        a_ptr = tl.make_tensor_descriptor(a_ptr, [M, K], [stride_am, 1], [BLOCK_M, BLOCK_K])
        b_ptr = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_bn, 1], [BLOCK_N, BLOCK_K])
    if PERSISTENT:
        # A fixed number of programs (a few per SM), each taking every num_programs-th tile.
        num_tiles = tl.cdiv(M, BLOCK_M + BLOCK_M2) * tl.cdiv(N, BLOCK_N + BLOCK_N2)
        for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=FLATTEN,
                             warp_specialize=WS == 2):
            _tile(tile, a_ptr, b_ptr, x2_desc, c_ptr, c_desc, a_scale_ptr, b_scale_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  stride_sa, stride_sb, SCALED, ZERO, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_M2,
                  BLOCK_N2, BLOCK_K, GROUP_M, PROMOTE, TMA, WS, C_TMA)
    else:  # one tile per program
        _tile(tl.program_id(0), a_ptr, b_ptr, x2_desc, c_ptr, c_desc, a_scale_ptr, b_scale_ptr,
              M, N, K,
              stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
              stride_sa, stride_sb, SCALED, ZERO, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_M2, BLOCK_N2,
              BLOCK_K, GROUP_M, PROMOTE, TMA, WS, C_TMA)


# ---- launcher ---------------------------------------------------------------------------------

def _config(M: int, N: int, K: int, scaled: bool = False) -> dict:
    """The configuration for this shape (a copy of one of the tables above, fitted to it).

    Tiles never exceed the problem by more than needed, but stay at least 16 rows/columns
    (tl.dot's minimum) and 32 deep (an 8-bit MMA's K step).
    """
    if M <= 64:
        cfg = dict(FP8_SMALL_M if scaled else INT8_SMALL_M)
    elif not scaled:
        cfg = dict(INT8_LARGE)
    else:
        cfg = dict(FP8_LARGE)
    return _fit(cfg, M, N, K)


def _fit(cfg: dict, M: int, N: int, K: int) -> dict:
    cfg = dict(cfg)
    if cfg["BLOCK_M2"] and M <= cfg["BLOCK_M"]:
        cfg["BLOCK_M2"] = 0  # one piece covers M
    if cfg["BLOCK_N2"] and N <= cfg["BLOCK_N"]:
        cfg["BLOCK_N2"] = 0  # one piece covers N
    cfg["BLOCK_M"] = min(cfg["BLOCK_M"], max(16, triton.next_power_of_2(M)))
    cfg["BLOCK_N"] = min(cfg["BLOCK_N"], max(16, triton.next_power_of_2(N)))
    cfg["BLOCK_K"] = min(cfg["BLOCK_K"], max(32, triton.next_power_of_2(K)))
    if cfg.get("CHAIN_K_DIV") and cfg["PROMOTE"] >= 1:
        longest = K // (cfg["CHAIN_K_DIV"] * cfg["BLOCK_K"])  # in BLOCK_K steps
        steps = 1 << max(0, longest.bit_length() - 1)  # a power of 2
        if cfg.get("CHAIN_IN_BLOCK_K"):  # a deeper K step (one longer dot), at most 256
            cfg["BLOCK_K"] = min(256, cfg["BLOCK_K"] * steps)
        else:  # more chained K steps per promotion
            cfg["PROMOTE"] = max(cfg["PROMOTE"], steps)
    if (cfg["BLOCK_M2"] and cfg["BLOCK_M2"] != cfg["BLOCK_M"]) or \
            (cfg["BLOCK_N2"] and cfg["BLOCK_N2"] != cfg["BLOCK_N"]):
        cfg["C_TMA"] = False  # one output descriptor: every piece must have the same shape
    assert not (cfg["BLOCK_M2"] and cfg["BLOCK_N2"]), "the second piece goes below or beside"
    return cfg


_SMS: dict = {}
_SCRATCH = []


def _descriptor_scratch():
    """Triton allocates in-kernel TMA descriptors from a buffer the launcher asks torch for."""
    if not _SCRATCH:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                    device=device))
        _SCRATCH.append(True)


def _num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of this GPU (4 for the CPU interpreter), cached."""
    key = str(device)
    if key not in _SMS:
        _SMS[key] = (torch.cuda.get_device_properties(device).multi_processor_count
                     if device.type == "cuda" else 4)
    return _SMS[key]


def _k_major(a: torch.Tensor, b: torch.Tensor):
    """a with unit stride along K (rows may be strided), b with unit stride along K (b.t() of a
    contiguous (N, K) tensor). A copy only where the layout is not that already."""
    if a.stride(1) != 1:
        a = a.contiguous()
    if b.stride(0) != 1:
        b = b.t().contiguous().t()
    return a, b


def _tma_ok(a: torch.Tensor, b: torch.Tensor) -> bool:
    """TMA needs 16-byte aligned bases and row strides (a and b K-major, one byte per element)."""
    return (TensorDescriptor is not None and a.stride(1) == 1 and b.stride(0) == 1
            and a.stride(0) % 16 == 0 and b.stride(1) % 16 == 0
            and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0)


def _launch(a, b, c, a_scale, b_scale, scaled: bool, cfg: dict | None = None):
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return c
    cfg = _config(M, N, K, scaled) if cfg is None else _fit(cfg, M, N, K)
    if cfg["TMA"] and not _tma_ok(a, b):  # no TMA here: a configuration made for pointers
        cfg = _fit(FP8_NO_TMA if scaled else dict(cfg, TMA=False, WS=False), M, N, K)
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    bm2, bn2 = cfg["BLOCK_M2"], cfg["BLOCK_N2"]
    tma = int(cfg["TMA"])
    a_arg, b_arg, x2_arg = a, b, b  # x2_arg: unused without TMA (the kernel offsets a_ptr/b_ptr)
    if tma == 2:
        _descriptor_scratch()  # in-kernel descriptors live in a global scratch buffer
        x2_arg = a if bm2 else b
    elif tma:
        bt = b.t()  # (N, K), K contiguous

        def desc(t, rows):
            return TensorDescriptor(t, list(t.shape), list(t.stride()), [rows, bk])

        a_arg, b_arg = desc(a, bm), desc(bt, bn)
        x2_arg = desc(a, bm2) if bm2 else desc(bt, bn2) if bn2 else b_arg
    c_arg = c  # c_desc: unused unless the output is stored through TMA
    if cfg.get("C_TMA") and TensorDescriptor is not None and c.stride(1) == 1 \
            and (c.stride(0) * c.element_size()) % 16 == 0 and c.data_ptr() % 16 == 0:
        c_arg = TensorDescriptor(c, list(c.shape), list(c.stride()), [bm, bn])
    tiles = triton.cdiv(M, bm + bm2) * triton.cdiv(N, bn + bn2)
    persistent = cfg.get("PERSISTENT", 0)
    grid = (min(tiles, persistent * _num_sms(a.device)) if persistent else tiles,)
    lowp_matmul_kernel[grid](
        a_arg, b_arg, x2_arg, c, c_arg, a_scale, b_scale, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        a_scale.stride(0), b_scale.stride(1),
        SCALED=scaled, ZERO=0.0 if scaled else 0,
        EVEN_K=K % bk == 0,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_M2=bm2, BLOCK_N2=bn2, BLOCK_K=bk,
        GROUP_M=cfg.get("GROUP_M", GROUP_M),
        PROMOTE=cfg["PROMOTE"], TMA=tma, WS=cfg.get("WS", False),
        PERSISTENT=bool(persistent), FLATTEN=cfg.get("FLATTEN", False),
        C_TMA=c_arg is not c,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    return c


def _matmul_fp8(a, b, a_scale, b_scale, cfg=None):
    a, b = _k_major(a, b)
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    return _launch(a, b, c, a_scale, b_scale, scaled=True, cfg=cfg)


def _matmul_int8(a, b, cfg=None):
    a, b = _k_major(a, b)
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    # No scales: a and b stand in for the unused scale pointers.
    return _launch(a, b, c, a, b, scaled=False, cfg=cfg)


def matmul_fp8(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor,
               b_scale: torch.Tensor) -> torch.Tensor:
    """(a * a_scale) @ (b * b_scale) as bf16 (M, N): a float8_e4m3fn (M, K), b float8_e4m3fn
    (K, N) column-major, a_scale float32 (M, 1), b_scale float32 (1, N)."""
    return _matmul_fp8(a, b, a_scale, b_scale)


def matmul_int8(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b as int32 (M, N), exactly: a int8 (M, K), b int8 (K, N)."""
    return _matmul_int8(a, b)
