"""Wrong muon: a tall g's X^T handed to the kernels as a transposed view.

The candidate normalises g in its own (M, N) orientation and, for a tall g, takes
x = x0.t(), a view whose stride(0) is 1 and stride(1) is M. The Gram and update kernels assume
contiguous rows (element [r, k] at r * stride(0) + k), so they read the wrong elements of X:
every tall case comes out wrong, the wide ones are right.
"""
# expect-fail: small_tall
# expect-fail: past_one_tile_tall
# expect-diagnosis: wrong_values

import torch
import triton
import triton.language as tl

NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315
EPS = 1e-7
BLOCK, BLOCK_K = 32, 32  # Gram tiles (square)
BLOCK_M, BLOCK_N = 32, 64  # update tiles


@triton.jit
def sum_squares_kernel(g_ptr, partial_ptr, R, C, stride_r, stride_c,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for start in range(0, C, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        x = tl.load(g_ptr + rows[:, None] * stride_r + cols[None, :] * stride_c, mask=mask, other=0.0)
        x = x.to(tl.float32)
        acc += x * x
    tl.store(partial_ptr + pid, tl.sum(tl.sum(acc, axis=1), axis=0))


@triton.jit
def normalize_kernel(g_ptr, partial_ptr, n_partials, x_ptr, R, C, g_stride_r, g_stride_c,
                     x_stride_r, x_stride_c, eps, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr):
    p = tl.arange(0, BLOCK_P)
    total = tl.sum(tl.load(partial_ptr + p, mask=p < n_partials, other=0.0), axis=0)
    inv = 1.0 / (tl.sqrt(total) + eps)
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    g = tl.load(g_ptr + rows[:, None] * g_stride_r + cols[None, :] * g_stride_c, mask=mask, other=0.0)
    x = g.to(tl.float32) * inv
    tl.store(x_ptr + rows[:, None] * x_stride_r + cols[None, :] * x_stride_c,
             x.to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gram_kernel(x_ptr, c_ptr, out_ptr, R, K, stride_x, stride_c, stride_out, alpha, beta,
                HAS_C: tl.constexpr, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr,
                DOT_F32: tl.constexpr):
    # out = alpha * X X^T + beta * C; upper-triangle tiles only, each stored twice.
    tile_m = tl.program_id(0)
    tile_n = tl.program_id(1)
    if tile_n < tile_m:
        return
    rm = tile_m * BLOCK + tl.arange(0, BLOCK)
    rn = tile_n * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        kk = k + rk
        a = tl.load(x_ptr + rm[:, None] * stride_x + kk[None, :],
                    mask=(rm[:, None] < R) & (kk[None, :] < K), other=0.0)
        b = tl.load(x_ptr + rn[None, :] * stride_x + kk[:, None],
                    mask=(rn[None, :] < R) & (kk[:, None] < K), other=0.0)
        if DOT_F32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    acc = acc * alpha
    mask = (rm[:, None] < R) & (rn[None, :] < R)
    if HAS_C:
        c = tl.load(c_ptr + rm[:, None] * stride_c + rn[None, :], mask=mask, other=0.0)
        acc += beta * c.to(tl.float32)
    out = acc.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + rm[:, None] * stride_out + rn[None, :], out, mask=mask)
    if tile_n != tile_m:
        tl.store(out_ptr + rn[:, None] * stride_out + rm[None, :], tl.trans(out),
                 mask=(rn[:, None] < R) & (rm[None, :] < R))


@triton.jit
def update_kernel(b_ptr, x_ptr, out_ptr, R, C, stride_b, stride_x, out_stride_r, out_stride_c,
                  alpha, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  DOT_F32: tl.constexpr):
    # out = alpha * X + B @ X
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, R, BLOCK_K):
        kk = k + rk
        b = tl.load(b_ptr + rm[:, None] * stride_b + kk[None, :],
                    mask=(rm[:, None] < R) & (kk[None, :] < R), other=0.0)
        x = tl.load(x_ptr + kk[:, None] * stride_x + rn[None, :],
                    mask=(kk[:, None] < R) & (rn[None, :] < C), other=0.0)
        if DOT_F32:
            b = b.to(tl.float32)
            x = x.to(tl.float32)
        acc = tl.dot(b, x, acc)
    mask = (rm[:, None] < R) & (rn[None, :] < C)
    x_tile = tl.load(x_ptr + rm[:, None] * stride_x + rn[None, :], mask=mask, other=0.0)
    acc += alpha * x_tile.to(tl.float32)
    tl.store(out_ptr + rm[:, None] * out_stride_r + rn[None, :] * out_stride_c,
             acc.to(out_ptr.dtype.element_ty), mask=mask)


def newton_schulz(g: torch.Tensor, steps: int) -> torch.Tensor:
    M, N = g.shape
    tall = M > N
    R, C = (N, M) if tall else (M, N)
    out = torch.empty((M, N), dtype=torch.bfloat16, device=g.device)
    out_rc = out.t() if tall else out
    dot_f32 = g.device.type != "cuda"

    n_partials = triton.cdiv(M, 16)
    partials = torch.empty(n_partials, dtype=torch.float32, device=g.device)
    sum_squares_kernel[(n_partials,)](g, partials, M, N, g.stride(0), g.stride(1),
                                      BLOCK_R=16, BLOCK_C=64)
    x0 = torch.empty((M, N), dtype=torch.bfloat16, device=g.device)
    normalize_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
        g, partials, n_partials, x0, M, N, g.stride(0), g.stride(1), x0.stride(0), x0.stride(1),
        EPS, BLOCK=32, BLOCK_P=triton.next_power_of_2(n_partials))
    # BUG: a transposed view; the kernels below read rows at r * x.stride(0) + k, which assumes
    # x.stride(1) == 1 (x.t().contiguous(), or strides handed to the kernels, would be right).
    x = x0.t() if tall else x0

    a_buf = torch.empty((R, R), dtype=torch.bfloat16, device=g.device)
    b_buf = torch.empty((R, R), dtype=torch.bfloat16, device=g.device)
    tiles = triton.cdiv(R, BLOCK)
    for _ in range(steps):
        gram_kernel[(tiles, tiles)](x, x, a_buf, R, C, x.stride(0), 0, a_buf.stride(0), 1.0, 0.0,
                                    HAS_C=False, BLOCK=BLOCK, BLOCK_K=BLOCK_K, DOT_F32=dot_f32)
        gram_kernel[(tiles, tiles)](a_buf, a_buf, b_buf, R, R, a_buf.stride(0), a_buf.stride(0),
                                    b_buf.stride(0), NS_C, NS_B,
                                    HAS_C=True, BLOCK=BLOCK, BLOCK_K=BLOCK_K, DOT_F32=dot_f32)
        x_new = torch.empty((R, C), dtype=torch.bfloat16, device=g.device)
        update_kernel[(triton.cdiv(R, BLOCK_M), triton.cdiv(C, BLOCK_N))](
            b_buf, x, x_new, R, C, b_buf.stride(0), x.stride(0), x_new.stride(0), x_new.stride(1),
            NS_A, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, DOT_F32=dot_f32)
        x = x_new
    # Copy X (R, C) into the (M, N) output: a layout copy (transposed for a tall g).
    out_rc.copy_(x)
    return out
