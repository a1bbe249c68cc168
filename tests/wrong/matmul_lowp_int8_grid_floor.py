"""Wrong matmul_lowp: the grid has M // BLOCK_M programs along M ("BLOCK_M = 16, tl.dot's
minimum, divides M"). With M < 16 (decode: M = 1 to 8) that is no program at all and nothing is
written; with M = 33 the last row is never written. The grid must cover every row:
triton.cdiv(M, BLOCK_M), with the tail rows masked.
"""
# expect-fail: k_tail
# expect-fail: m_small
# expect-diagnosis: rows_wrong

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


def _matmul(a, b, c, a_scale, b_scale, scaled):
    M, K = a.shape
    N = b.shape[1]
    BLOCK_M, BLOCK_N, BLOCK_K = 16, 64, 64
    # BUG: floor division: the rows past the last full block (all of them when M < 16) get no program.
    grid = (M // BLOCK_M, triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](a, b, c, a_scale, b_scale, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        SCALED=scaled, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c


def matmul_fp8(a, b, a_scale, b_scale):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    return _matmul(a, b, c, a_scale, b_scale, True)


def matmul_int8(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    return _matmul(a, b, c, a, b, False)
