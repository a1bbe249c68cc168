"""Honest variant: the scales applied before the dot. FP8: each tile of a and b is widened to
float32 and multiplied by its row / column scales, then multiplied with a float32 tl.dot (tf32
on the GPU's tensor cores, the default), the sum accumulated in float32: slower than an fp8 dot
and a little less exact (tf32 keeps 10 bits of each scaled operand), well inside the tolerance.
INT8: the programs walk the tiles column by column (N-tile fastest is the other order), int32
accumulator, b read through its two strides whatever its layout."""
# panel-cases: m_small, positive_k4096, b_col_major, wide_scales, k_tail
# On the interpreter only matmul_int8 runs (its fp8 support is not the GPU's):
# tests/gpu/test_gpu_honest_panel.py grades matmul_fp8 (positive_k4096, wide_scales, k_tail).

import torch
import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn,
        SCALED: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    pid = tl.program_id(0)
    pm = pid % tiles_m   # consecutive programs go down a column of tiles
    pn = pid // tiles_m
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    a_base = a_ptr + rm[:, None].to(tl.int64) * sam
    b_base = b_ptr + rn[None, :].to(tl.int64) * sbn
    if SCALED:
        sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
        sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
        acc = tl.zeros([BM, BN], tl.float32)
    else:
        acc = tl.zeros([BM, BN], tl.int32)
    for k0 in range(0, K, BK):
        kk = k0 + tl.arange(0, BK)
        a = tl.load(a_base + kk[None, :] * sak, mask=(rm < M)[:, None] & (kk < K)[None, :], other=0.0)
        b = tl.load(b_base + kk[:, None] * sbk, mask=(kk < K)[:, None] & (rn < N)[None, :], other=0.0)
        if SCALED:
            acc += tl.dot(a.to(tl.float32) * sa[:, None], b.to(tl.float32) * sb[None, :])
        else:
            acc += tl.dot(a, b)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    if SCALED:
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=mask)
    else:
        tl.store(c_ptrs, acc, mask=mask)


def _launch(a, b, sa, sb, c, scaled):
    M, K = a.shape
    N = b.shape[1]
    BM, BN, BK = 32, 64, 32
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _mm[grid](a, b, sa, sb, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
              SCALED=scaled, BM=BM, BN=BN, BK=BK)
    return c


def matmul_int8(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    return _launch(a, b, c, c, c, False)


def matmul_fp8(a, b, a_scale, b_scale):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    return _launch(a, b, a_scale, b_scale, c, True)
