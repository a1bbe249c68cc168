"""Wrong flash_attention: the backward's dq loop stops at the last whole key block.

The dq kernel walks the keys in blocks of BLOCK_N, and the loop bound is written as a number of
whole blocks, (end // BLOCK_N) * BLOCK_N: when S is not a multiple of BLOCK_N, the keys of the
last, partial block never add their ds * k to dq. dk and dv (another kernel, which loops over
queries with masks) are right.
"""
# expect-fail: bwd_small

import torch
import triton
import triton.language as tl


@triton.jit
def fwd_kernel(Q, K, V, O, LSE, sm_scale, sqb, sqh, sqs, skb, skh, sks, svb, svh, svs,
               sob, soh, sos, H, GROUP, S,
               D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :],
                mask=(rows < S)[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    if CAUSAL:
        end = tl.minimum((pid_m + 1) * BLOCK_M, S)
    else:
        end = S
    for start in range(0, end, BLOCK_N):
        keys = start + cols
        kmask = (keys < S)[:, None]
        k = tl.load(K + b * skb + hk * skh + keys[:, None] * sks + dims[None, :], mask=kmask,
                    other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        keep = keys[None, :] < S
        if CAUSAL:
            keep = keep & (keys[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + b * svb + hk * svh + keys[:, None] * svs + dims[None, :], mask=kmask,
                    other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(O + b * sob + h * soh + rows[:, None] * sos + dims[None, :],
             o.to(O.dtype.element_ty), mask=(rows < S)[:, None])
    tl.store(LSE + bh * S + rows, m_i + tl.log(l_i), mask=rows < S)


@triton.jit
def delta_kernel(O, DO, DELTA, sob, soh, sos, sdb, sdh, sds, H, S,
                 D: tl.constexpr, BLOCK_M: tl.constexpr):
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    mask = (rows < S)[:, None]
    o = tl.load(O + b * sob + h * soh + rows[:, None] * sos + dims[None, :], mask=mask,
                other=0.0).to(tl.float32)
    do = tl.load(DO + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :], mask=mask,
                 other=0.0).to(tl.float32)
    tl.store(DELTA + bh * S + rows, tl.sum(o * do, axis=1), mask=rows < S)


@triton.jit
def dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale,
                sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sdb, sdh, sds,
                H, HKV, GROUP, S,
                D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr):
    # One program: BLOCK_N keys of one (batch, kv head), summed over the heads of its group.
    bk = tl.program_id(1)
    b = bk // HKV
    hk = bk % HKV
    keys = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    kmask = (keys < S)[:, None]
    k = tl.load(K + b * skb + hk * skh + keys[:, None] * sks + dims[None, :], mask=kmask, other=0.0)
    v = tl.load(V + b * svb + hk * svh + keys[:, None] * svs + dims[None, :], mask=kmask, other=0.0)
    dk = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    for g in range(GROUP):
        h = hk * GROUP + g
        for start in range(0, S, BLOCK_M):
            rows = start + cols
            rmask = rows < S
            q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :],
                        mask=rmask[:, None], other=0.0)
            do = tl.load(DO + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :],
                         mask=rmask[:, None], other=0.0)
            lse = tl.load(LSE + (b * H + h) * S + rows, mask=rmask, other=float("inf"))
            delta = tl.load(DELTA + (b * H + h) * S + rows, mask=rmask, other=0.0)
            sT = tl.dot(k, tl.trans(q)) * sm_scale
            pT = tl.exp(sT - lse[None, :])
            if CAUSAL:
                pT = tl.where(rows[None, :] >= keys[:, None], pT, 0.0)
            dv += tl.dot(pT.to(do.dtype), do)
            dpT = tl.dot(v, tl.trans(do))
            dsT = pT * (dpT - delta[None, :])
            dk += tl.dot(dsT.to(q.dtype), q)
    tl.store(DK + b * skb + hk * skh + keys[:, None] * sks + dims[None, :],
             (dk * sm_scale).to(DK.dtype.element_ty), mask=kmask)
    tl.store(DV + b * svb + hk * svh + keys[:, None] * svs + dims[None, :],
             dv.to(DV.dtype.element_ty), mask=kmask)


@triton.jit
def dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, sm_scale,
              sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sdb, sdh, sds,
              H, GROUP, S,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    rmask = rows < S
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :],
                mask=rmask[:, None], other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + rows[:, None] * sds + dims[None, :],
                 mask=rmask[:, None], other=0.0)
    lse = tl.load(LSE + bh * S + rows, mask=rmask, other=float("inf"))
    delta = tl.load(DELTA + bh * S + rows, mask=rmask, other=0.0)
    dq = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    if CAUSAL:
        end = tl.minimum((pid_m + 1) * BLOCK_M, S)
    else:
        end = S
    for start in range(0, (end // BLOCK_N) * BLOCK_N, BLOCK_N):  # BUG: the partial block is skipped
        keys = start + cols
        kmask = (keys < S)[:, None]
        k = tl.load(K + b * skb + hk * skh + keys[:, None] * sks + dims[None, :], mask=kmask,
                    other=0.0)
        v = tl.load(V + b * svb + hk * svh + keys[:, None] * svs + dims[None, :], mask=kmask,
                    other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        p = tl.exp(s - lse[:, None])
        keep = keys[None, :] < S
        if CAUSAL:
            keep = keep & (keys[None, :] <= rows[:, None])
        p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(DQ + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :],
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=rmask[:, None])


BLOCK_M, BLOCK_N = 64, 64


def _strides(t):
    return t.stride(0), t.stride(1), t.stride(2)


def attention(q, k, v, causal, sm_scale):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, H, S, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    fwd_kernel[(triton.cdiv(S, BLOCK_M), B * H)](
        q, k, v, o, lse, sm_scale, *_strides(q), *_strides(k), *_strides(v), *_strides(o),
        H, H // k.shape[1], S, D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal)
    return o, lse


def attention_backward(q, k, v, o, lse, do, causal, sm_scale):
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.contiguous()
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    delta = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    delta_kernel[(triton.cdiv(S, BLOCK_M), B * H)](o, do, delta, *_strides(o), *_strides(do), H, S,
                                                   D=D, BLOCK_M=BLOCK_M)
    dkdv_kernel[(triton.cdiv(S, BLOCK_N), B * Hkv)](
        q, k, v, do, lse, delta, dk, dv, sm_scale, *_strides(q), *_strides(k), *_strides(v),
        *_strides(do), H, Hkv, H // Hkv, S, D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal)
    dq_kernel[(triton.cdiv(S, BLOCK_M), B * H)](
        q, k, v, do, lse, delta, dq, sm_scale, *_strides(q), *_strides(k), *_strides(v),
        *_strides(do), H, H // Hkv, S, D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal)
    return dq, dk, dv
