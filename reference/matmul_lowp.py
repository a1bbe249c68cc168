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
   128 x 256 x 128 tiles with 8 warps (two warpgroups of 64 x 256) and 3 stages of
   software pipelining for large shapes (48 KiB of operands per stage), smaller tiles when M or
   N is small.

About FP8 accumulation on Hopper: `tl.dot(a, b, acc)` chains the wgmma instructions through the
accumulator, and the fp8 tensor cores add each 32-wide step into it with reduced alignment
precision ("fast accumulation", ~14 bits). `acc += tl.dot(a, b)` instead promotes every BLOCK_K
into a true float32 add (torch._scaled_mm's default), at the cost of a second accumulator's
registers. Measured on an H100, the fast form is off by up to 8% on long all-positive sums
(K = 4096): far more than the bf16 output's rounding. This reference takes the exact one, as
the baseline does.
"""

import torch
import triton
import triton.language as tl

GROUP_M = 8


@triton.jit
def lowp_matmul_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_sa, stride_sb,
    SCALED: tl.constexpr, ZERO: tl.constexpr, EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    # Grouped ordering: consecutive programs walk down GROUP_M row-tiles of one column band, so
    # the b tiles they share (and the a tiles of the group) are read from L2, not from DRAM.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows and columns past the end wrap onto real ones: every load stays in bounds without a
    # mask in the K loop; the store below drops them.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    # int64 row/column offsets: M * stride_am can pass 2**31.
    a_ptrs = a_ptr + offs_m.to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n.to(tl.int64)[None, :] * stride_bn

    # float32 for fp8 operands, int32 for int8 (exact).
    if SCALED:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            # The K tail: lanes past K load 0 (0.0 for fp8, 0 for int8) and add nothing.
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=ZERO)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=ZERO)
        # A fresh product per BLOCK_K, added in full precision (see "About FP8 accumulation").
        acc += tl.dot(a, b, out_dtype=acc.dtype)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # Epilogue: the real rows and columns of this tile.
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    if SCALED:
        # The scales factor out of the K sum: one multiply per output element, in float32.
        sa = tl.load(a_scale_ptr + rows * stride_sa, mask=row_ok, other=0.0)
        sb = tl.load(b_scale_ptr + cols * stride_sb, mask=col_ok, other=0.0)
        acc = acc * sa[:, None] * sb[None, :]
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


def _config(M: int, N: int, K: int, scaled: bool = False):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for this shape: a few fixed choices.

    Large: 128 x 256 x 128, 8 warps, 3 stages (48 KiB of operands per stage, 144 KiB of shared
    memory). M <= 64 (decode-like): the work is reading b, so narrower tiles give more programs
    to stream it, and 4 warps suffice. Tiles never exceed the problem by more than needed, but
    stay at least 16 rows/columns (tl.dot's minimum) and 32 deep (an 8-bit MMA's K step).
    """
    if M <= 64:
        block_m, block_n, block_k, warps, stages = 64, 128, 128, 4, 4
    elif scaled:
        # FP8 keeps a second float32 tile (the fresh product of each BLOCK_K, added in full
        # precision): at 128 x 256 the two no longer fit the registers and spill (0.32x of
        # _scaled_mm on an H100); at 128 x 128 they fit (0.69x).
        block_m, block_n, block_k, warps, stages = 128, 128, 128, 8, 4
    else:
        block_m, block_n, block_k, warps, stages = 128, 256, 128, 8, 3
    block_m = min(block_m, max(16, triton.next_power_of_2(M)))
    block_n = min(block_n, max(16, triton.next_power_of_2(N)))
    block_k = min(block_k, max(32, triton.next_power_of_2(K)))
    return block_m, block_n, block_k, warps, stages


def _k_major(a: torch.Tensor, b: torch.Tensor):
    """a with unit stride along K (rows may be strided), b with unit stride along K (b.t() of a
    contiguous (N, K) tensor). A copy only where the layout is not that already."""
    if a.stride(1) != 1:
        a = a.contiguous()
    if b.stride(0) != 1:
        b = b.t().contiguous().t()
    return a, b


def _launch(a, b, c, a_scale, b_scale, scaled: bool):
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return c
    block_m, block_n, block_k, warps, stages = _config(M, N, K, scaled)
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    lowp_matmul_kernel[grid](
        a, b, c, a_scale, b_scale, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        a_scale.stride(0), b_scale.stride(1),
        SCALED=scaled, ZERO=0.0 if scaled else 0,
        EVEN_K=K % block_k == 0,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=GROUP_M,
        num_warps=warps, num_stages=stages,
    )
    return c


def matmul_fp8(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor,
               b_scale: torch.Tensor) -> torch.Tensor:
    """(a * a_scale) @ (b * b_scale) as bf16 (M, N): a float8_e4m3fn (M, K), b float8_e4m3fn
    (K, N) column-major, a_scale float32 (M, 1), b_scale float32 (1, N)."""
    a, b = _k_major(a, b)
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    return _launch(a, b, c, a_scale, b_scale, scaled=True)


def matmul_int8(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b as int32 (M, N), exactly: a int8 (M, K), b int8 (K, N)."""
    a, b = _k_major(a, b)
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    # No scales: a and b stand in for the unused scale pointers.
    return _launch(a, b, c, a, b, scaled=False)
