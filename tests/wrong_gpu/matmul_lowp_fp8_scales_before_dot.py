"""Wrong matmul_lowp: applies the scales before the dot, to the fp8 tiles, and re-quantizes the
scaled values to fp8 so the dot still runs on the fp8 tensor cores. Slow (a multiply and a
conversion per operand element in every K step) and less exact: every operand is rounded to
fp8 a second time, with 3 mantissa bits, and rows with small scales fall into fp8's subnormals
(below 2**-6) where even fewer bits remain. The scales factor out of the K sum: apply
a_scale[i] * b_scale[j] once, in the epilogue, on the float32 accumulator.

A GPU-only bug: the interpreter skips the FP8 task, and the INT8 path here is correct, so it
passes there (tests/test_wrong_solutions.py checks that); tests/gpu/test_gpu_wrong.py checks
that gpu_small_k_wide_scales catches it (simulated in float64: errors of 0.3-0.5 of the summed
magnitude there, against a tolerance of 5.6e-3; 1-6% at K <= 512 on ordinary scales).
"""
# expect-fail: gpu_small_k_wide_scales

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
    if SCALED:
        sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
        sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
    for k in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & (rk[None, :] < K - k)
        b_mask = (rk[:, None] < K - k) & (rn[None, :] < N)
        if SCALED:
            a = tl.load(a_ptrs, mask=a_mask, other=0.0)
            b = tl.load(b_ptrs, mask=b_mask, other=0.0)
            # BUG: scaled in the K loop and rounded back to fp8 for the dot.
            a = (a.to(tl.float32) * sa[:, None]).to(tl.float8e4nv)
            b = (b.to(tl.float32) * sb[None, :]).to(tl.float8e4nv)
        else:
            a = tl.load(a_ptrs, mask=a_mask, other=0)
            b = tl.load(b_ptrs, mask=b_mask, other=0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


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
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    return _matmul(a, b, c, a, b, False)
