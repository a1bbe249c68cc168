"""Honest variant: grouped program order (GROUP_M row tiles share a column tile), the int8 b
first copied K-major (b.t().contiguous(): a layout change, allowed) so both operands stream
along K, and the K loop chaining tl.dot into a partial accumulator for two BLOCK_K steps before
promoting it into the float32 total (CUTLASS-style two-level accumulation for FP8; exact for
int8). Epilogue: acc * (a_scale * b_scale), the scales multiplied together first."""
# panel-cases: extremes, positive_k4096, a_strided, k16, zero_rows
# On the interpreter only matmul_int8 runs (its fp8 support is not the GPU's):
# tests/gpu/test_gpu_honest_panel.py grades matmul_fp8 (positive_k4096, k16, zero_rows).

import torch
import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, w_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K, sam, swn,
        FP8: tl.constexpr, GROUP_M: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # w is (N, K) K-major: b[k, n] = w[n, k].
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pm = first_m + (pid % per_group) % group_rows
    pn = (pid % per_group) // group_rows
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * sam + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * swn + rk[:, None]
    if FP8:
        total = tl.zeros([BM, BN], tl.float32)
        part = tl.zeros([BM, BN], tl.float32)
    else:
        total = tl.zeros([BM, BN], tl.int32)
        part = tl.zeros([BM, BN], tl.int32)
    n_steps = tl.cdiv(K, BK)
    for step in range(0, n_steps):
        k0 = step * BK
        a = tl.load(a_ptrs + k0, mask=(rm < M)[:, None] & (rk[None, :] < K - k0), other=0.0)
        b = tl.load(w_ptrs + k0, mask=(rn < N)[None, :] & (rk[:, None] < K - k0), other=0.0)
        if FP8:
            part = tl.dot(a, b, part)
        else:  # triton 3.6 takes an int32 accumulator only when told (out_dtype defaults to fp32)
            part = tl.dot(a, b, part, out_dtype=tl.int32)
        if step % 2 == 1:
            total += part
            part = tl.zeros_like(part)
    total += part
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    if FP8:
        sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
        sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
        out = total * (sa[:, None] * sb[None, :])
        tl.store(c_ptrs, out.to(tl.bfloat16), mask=mask)
    else:
        tl.store(c_ptrs, total, mask=mask)


def _launch(a, w, sa, sb, c, fp8):
    M, K = a.shape
    N = w.shape[0]
    BM, BN, BK = 32, 32, 64
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _mm[grid](a, w, sa, sb, c, M, N, K, a.stride(0), w.stride(0),
              FP8=fp8, GROUP_M=4, BM=BM, BN=BN, BK=BK)
    return c


def _k_major(b):
    w = b.t()  # (N, K)
    return w if w.stride(1) == 1 else w.contiguous()


def matmul_int8(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    return _launch(a, _k_major(b), c, c, c, False)


def matmul_fp8(a, b, a_scale, b_scale):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    return _launch(a, _k_major(b), a_scale, b_scale, c, True)
