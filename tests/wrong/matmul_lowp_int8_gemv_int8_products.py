"""Wrong matmul_lowp: a GEMV path for decode shapes (M < 16, where tl.dot's 16-row minimum
wastes most of a tile) that multiplies the int8 values in int8.

Triton keeps the operands' type: int8 * int8 is an int8 product, which wraps (100 * 100 = 10000
becomes 16). The products must be widened first, a.to(tl.int32) * b.to(tl.int32), or left to
tl.dot, whose int8 products accumulate in int32. The tl.dot path for M >= 16 is correct.
"""
# expect-fail: m_small

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  SCALED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm.to(tl.int64)[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn.to(tl.int64)[None, :] * stride_bn
    if SCALED:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & (rk[None, :] < K - k)
        b_mask = (rk[:, None] < K - k) & (rn[None, :] < N)
        if SCALED:
            a = tl.load(a_ptrs, mask=a_mask, other=0.0)
            b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        else:
            a = tl.load(a_ptrs, mask=a_mask, other=0)
            b = tl.load(b_ptrs, mask=b_mask, other=0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if SCALED:
        sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
        sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
        acc = acc * sa[:, None] * sb[None, :]
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def gemv_kernel(a_ptr, b_ptr, c_ptr, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One row of a times b: a dot product per output column, on the CUDA cores.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.int32)
    for k in range(0, K, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + row * stride_am + ks * stride_ak, mask=ks < K, other=0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0)
        # BUG: int8 * int8 is an int8 product in Triton: it wraps before the sum.
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + row * stride_cm + cols, acc, mask=cols < N)


def _matmul(a, b, c, a_scale, b_scale, scaled):
    M, K = a.shape
    N = b.shape[1]
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](a, b, c, a_scale, b_scale, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        SCALED=scaled, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def matmul_fp8(a, b, a_scale, b_scale):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    return _matmul(a, b, c, a_scale, b_scale, True)


def matmul_int8(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.int32, device=a.device)
    if M < 16:
        BLOCK_N, BLOCK_K = 64, 64
        gemv_kernel[(M, triton.cdiv(N, BLOCK_N))](a, b, c, N, K, a.stride(0), a.stride(1),
                                                  b.stride(0), b.stride(1), c.stride(0),
                                                  BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        return c
    return _matmul(a, b, c, a, b, False)
