"""Reference solution for the muon kata: Muon's Newton-Schulz orthogonalization.

What it teaches: how to beat cuBLAS at its own game by doing less work, not faster work. Muon
replaces a gradient G by the nearest semi-orthogonal matrix (U V^T from G's SVD, singular values
pushed to about 1) with a fixed number of steps of an odd quintic polynomial iteration:

    X = G / (||G||_F + 1e-7)           Frobenius norm >= spectral norm: every singular value <= 1
    repeat `steps` times:
        A = X X^T
        B = b A + c A A
        X = a X + B X                   = a X + b (X X^T) X + c (X X^T)^2 X

with (a, b, c) = (3.4445, -4.7750, 2.0315). Every step is three matrix products, so the whole
thing is compute bound; eager PyTorch runs it as three cuBLAS GEMMs plus elementwise kernels.
Two observations make it faster:

1. A = X X^T is symmetric, and so is B = b A + c A A (a polynomial in a symmetric matrix; A A is
   also A A^T). A kernel that computes only the tiles on and above the diagonal and writes each
   one twice (as itself, and transposed into its mirror position) does about half the FLOPs of
   those two products. Per step that is X X^T: m^2 n instead of 2 m^2 n, A A: m^3 instead of
   2 m^3, B X: 2 m^2 n as before: 4 m^3 instead of 6 m^3 for a square matrix, at best 1.5x.
2. The elementwise parts fuse into the GEMM epilogues: b A + c (A A) is computed while the A A
   tile is still in registers (A's tile is one extra load), and a X + B X likewise. No extra
   passes over memory and no extra launches.

Two more details of Muon's definition:
- A tall G (M > N) is processed transposed, so that the Gram matrix X X^T is the small (N x N)
  one: p(X X^T) X = X p(X^T X), the same values, but far fewer FLOPs. The transposition is free
  here: the normalising kernel reads G through its strides as G^T, and the last step's epilogue
  writes its result back through transposed strides.
- Everything between the kernels is bf16 (X, A, B), with fp32 accumulation inside every tile:
  that is what Muon does and what the tensor cores are fastest at.

The kernels:
- `sum_squares_kernel`: each program sums x^2 (fp32) over a band of rows, one partial per program.
- `normalize_kernel`: X = G / (sqrt(sum of partials) + eps) in bf16, reading G through any strides
  (a transposed view for a tall G); each program re-adds the few hundred partials itself, which
  is cheaper than a third launch.
- `gram_kernel`: out = alpha X X^T + beta C for a symmetric C, upper-triangle tiles only, mirrored.
- `update_kernel`: out = alpha X + B X, a plain tiled GEMM with the axpy in its epilogue.

Both GEMM kernels use the classic Triton recipe: a 2-D output tile per program, a K loop of
tl.dot with an fp32 accumulator, pipelined over num_stages buffers, and grouped program order
(GROUP_M row-tiles side by side) so that concurrently running programs share operand tiles in L2.

The Triton interpreter (CPU tensors) cannot multiply bf16 tiles with tl.dot (it works on raw bit
patterns there). On the CPU the kernels widen the bf16 tiles to fp32 before tl.dot (DOT_F32):
products of bf16 values are exact in fp32, so this computes what the tensor cores compute.
"""

import torch
import triton
import triton.language as tl

NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315
EPS = 1e-7

# Gram tiles are square, so that a tile and its mirror image have the same shape. 128 x 128 x 64
# bf16 with 8 warps (two warpgroups of wgmma on Hopper) and 4 pipeline stages (4 x 32 KiB of
# shared memory). Matrices smaller than a tile get smaller tiles (`_tile`).
GRAM_BLOCK, GRAM_BLOCK_K, GRAM_WARPS, GRAM_STAGES = 128, 64, 8, 4
# a X + B X: the Triton matmul tutorial's best Hopper tile for 16-bit inputs.
MM_BLOCK_M, MM_BLOCK_N, MM_BLOCK_K, MM_WARPS, MM_STAGES = 128, 256, 64, 8, 3
GROUP_M = 8
# The norm: bands of SQ_ROWS rows per program; the normalising copy: square tiles.
SQ_ROWS, SQ_COLS = 32, 128
NORM_BLOCK = 64


@triton.jit
def sum_squares_kernel(g_ptr, partial_ptr, R, C, stride_r, stride_c,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # One band of BLOCK_R rows per program, walked in BLOCK_C-column steps; one fp32 partial.
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    row_off = rows.to(tl.int64)[:, None] * stride_r
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for start in range(0, C, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        x = tl.load(g_ptr + row_off + cols[None, :] * stride_c, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(partial_ptr + pid, tl.sum(tl.sum(acc, axis=1), axis=0))


@triton.jit
def normalize_kernel(g_ptr, partial_ptr, n_partials, x_ptr, R, C,
                     g_stride_r, g_stride_c, x_stride_r, x_stride_c, eps,
                     BLOCK: tl.constexpr, BLOCK_P: tl.constexpr):
    # X[r, c] = G'[r, c] / (||G||_F + eps), G' the (R, C) view of G the launcher hands in (G^T for
    # a tall G): the strides say where each element lives, so the transposition costs nothing.
    p = tl.arange(0, BLOCK_P)
    total = tl.sum(tl.load(partial_ptr + p, mask=p < n_partials, other=0.0), axis=0)
    inv = 1.0 / (tl.sqrt(total) + eps)
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    rows64, cols64 = rows.to(tl.int64), cols.to(tl.int64)
    g = tl.load(g_ptr + rows64[:, None] * g_stride_r + cols64[None, :] * g_stride_c, mask=mask, other=0.0)
    x = g.to(tl.float32) * inv
    tl.store(x_ptr + rows64[:, None] * x_stride_r + cols64[None, :] * x_stride_c,
             x.to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _grouped_tile(pid, n_tiles_m, n_tiles_n, GROUP: tl.constexpr):
    # Programs run in pid order. Walking GROUP tile-rows down one tile-column at a time (instead
    # of a whole tile-row) keeps the operand tiles the running programs share in L2.
    per_group = GROUP * n_tiles_n
    first_m = (pid // per_group) * GROUP
    group_size = tl.minimum(n_tiles_m - first_m, GROUP)
    tile_m = first_m + (pid % per_group) % group_size
    tile_n = (pid % per_group) // group_size
    return tile_m, tile_n


@triton.jit
def gram_kernel(x_ptr, c_ptr, out_ptr, R, K, stride_x, stride_c, stride_out, alpha, beta,
                HAS_C: tl.constexpr, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr):
    # out = alpha * X X^T + beta * C, X (R, K) with contiguous rows, C and out (R, R) symmetric.
    n_tiles = tl.cdiv(R, BLOCK)
    tile_m, tile_n = _grouped_tile(tl.program_id(0), n_tiles, n_tiles, GROUP)
    if tile_n < tile_m:
        return  # below the diagonal: the program owning (tile_n, tile_m) writes it as a mirror
    offs = tl.arange(0, BLOCK)
    rm = tile_m * BLOCK + offs
    rn = tile_n * BLOCK + offs
    rk = tl.arange(0, BLOCK_K)
    # Rows past R wrap around to real rows, so the loads need no row mask; those results are
    # never stored. The second operand is X^T: the same rows of X, read as columns.
    a_ptrs = x_ptr + (rm % R)[:, None] * stride_x + rk[None, :]
    b_ptrs = x_ptr + (rn % R)[None, :] * stride_x + rk[:, None]
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k, other=0.0)
        if DOT_F32:  # the interpreter: bf16 values widened exactly (see the top of the file)
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    acc = acc * alpha
    in_m = rm < R
    in_n = rn < R
    if HAS_C:
        c = tl.load(c_ptr + rm[:, None] * stride_c + rn[None, :], mask=in_m[:, None] & in_n[None, :], other=0.0)
        acc += beta * c.to(tl.float32)
    out = acc.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + rm[:, None] * stride_out + rn[None, :], out, mask=in_m[:, None] & in_n[None, :])
    if tile_n != tile_m:
        # The mirror tile (tile_n, tile_m) is this one transposed.
        tl.store(out_ptr + rn[:, None] * stride_out + rm[None, :], tl.trans(out),
                 mask=in_n[:, None] & in_m[None, :])


@triton.jit
def update_kernel(b_ptr, x_ptr, out_ptr, R, C, stride_b, stride_x, out_stride_r, out_stride_c, alpha,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr):
    # out = alpha * X + B X, B (R, R), X (R, C), both with contiguous rows; out through its strides
    # (the last step writes G's (M, N) output transposed for a tall G).
    tile_m, tile_n = _grouped_tile(tl.program_id(0), tl.cdiv(R, BLOCK_M), tl.cdiv(C, BLOCK_N), GROUP)
    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mask = (rm[:, None] < R) & (rn[None, :] < C)
    # The accumulator starts as alpha * X's own tile: the axpy costs nothing in the epilogue, and
    # no second 128 x 256 tile competes with the accumulator for registers after the loop.
    x_tile = tl.load(x_ptr + rm[:, None] * stride_x + rn[None, :], mask=mask, other=0.0)
    acc = alpha * x_tile.to(tl.float32)
    b_ptrs = b_ptr + (rm % R)[:, None] * stride_b + rk[None, :]
    x_ptrs = x_ptr + rk[:, None] * stride_x + (rn % C)[None, :]
    for k in range(0, R, BLOCK_K):
        if EVEN_K:
            b = tl.load(b_ptrs)
            x = tl.load(x_ptrs)
        else:
            b = tl.load(b_ptrs, mask=rk[None, :] < R - k, other=0.0)
            x = tl.load(x_ptrs, mask=rk[:, None] < R - k, other=0.0)
        if DOT_F32:
            b = b.to(tl.float32)
            x = x.to(tl.float32)
        acc = tl.dot(b, x, acc)
        b_ptrs += BLOCK_K
        x_ptrs += BLOCK_K * stride_x
    tl.store(out_ptr + rm[:, None] * out_stride_r + rn[None, :] * out_stride_c,
             acc.to(out_ptr.dtype.element_ty), mask=mask)


def _tile(n, cap):
    # The largest tile the matrix can fill (at least 16, tl.dot's minimum): small matrices get
    # small tiles, every size that matters for speed gets the full-size Hopper tile.
    return min(cap, max(16, triton.next_power_of_2(n)))


def _gram(x, out, alpha=1.0, beta=0.0, c=None, dot_f32=False):
    R, K = x.shape
    block, block_k = _tile(R, GRAM_BLOCK), _tile(K, GRAM_BLOCK_K)
    n_tiles = triton.cdiv(R, block)
    gram_kernel[(n_tiles * n_tiles,)](
        x, c if c is not None else x, out, R, K, x.stride(0),
        c.stride(0) if c is not None else 0, out.stride(0), alpha, beta,
        HAS_C=c is not None, BLOCK=block, BLOCK_K=block_k, GROUP=GROUP_M,
        EVEN_K=K % block_k == 0, DOT_F32=dot_f32,
        num_warps=GRAM_WARPS if block == GRAM_BLOCK else 4, num_stages=GRAM_STAGES)


def _update(b, x, out, alpha, dot_f32=False):
    R, C = x.shape
    block_m, block_n, block_k = _tile(R, MM_BLOCK_M), _tile(C, MM_BLOCK_N), _tile(R, MM_BLOCK_K)
    grid = (triton.cdiv(R, block_m) * triton.cdiv(C, block_n),)
    update_kernel[grid](
        b, x, out, R, C, b.stride(0), x.stride(0), out.stride(0), out.stride(1), alpha,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP=GROUP_M,
        EVEN_K=R % block_k == 0, DOT_F32=dot_f32,
        num_warps=MM_WARPS if block_m * block_n >= 128 * 128 else 4, num_stages=MM_STAGES)


def newton_schulz(g: torch.Tensor, steps: int) -> torch.Tensor:
    M, N = g.shape
    tall = M > N
    # Work on the wide orientation (R <= C): for a tall G, G^T, as a view (no copy).
    src = g.t() if tall else g
    R, C = src.shape
    out = torch.empty((M, N), dtype=torch.bfloat16, device=g.device)
    out_rc = out.t() if tall else out  # the output seen as (R, C): where the last step writes
    dot_f32 = g.device.type != "cuda"

    # ||G||_F: bands of rows along G's contiguous direction (any orientation has the same norm).
    band = g if g.stride(1) <= g.stride(0) else g.t()
    n_partials = triton.cdiv(band.shape[0], SQ_ROWS)
    partials = torch.empty(n_partials, dtype=torch.float32, device=g.device)
    sum_squares_kernel[(n_partials,)](band, partials, band.shape[0], band.shape[1],
                                      band.stride(0), band.stride(1),
                                      BLOCK_R=SQ_ROWS, BLOCK_C=SQ_COLS, num_warps=4)

    # X0 in bf16, straight into the output when there is no step to take.
    x = out_rc if steps == 0 else torch.empty((R, C), dtype=torch.bfloat16, device=g.device)
    normalize_kernel[(triton.cdiv(R, NORM_BLOCK), triton.cdiv(C, NORM_BLOCK))](
        src, partials, n_partials, x, R, C, src.stride(0), src.stride(1), x.stride(0), x.stride(1),
        EPS, BLOCK=NORM_BLOCK, BLOCK_P=triton.next_power_of_2(n_partials), num_warps=4)
    if steps == 0:
        return out

    a_buf = torch.empty((R, R), dtype=torch.bfloat16, device=g.device)
    b_buf = torch.empty((R, R), dtype=torch.bfloat16, device=g.device)
    spare = torch.empty((R, C), dtype=torch.bfloat16, device=g.device) if steps > 1 else None
    for step in range(steps):
        _gram(x, a_buf, dot_f32=dot_f32)                                    # A = X X^T
        _gram(a_buf, b_buf, alpha=NS_C, beta=NS_B, c=a_buf, dot_f32=dot_f32)  # B = b A + c A A
        dst = out_rc if step == steps - 1 else spare                     # X = a X + B X
        _update(b_buf, x, dst, NS_A, dot_f32=dot_f32)
        x, spare = dst, x
    return out
