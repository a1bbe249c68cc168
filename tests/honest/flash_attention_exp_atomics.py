"""Honest variant: base e with the running max subtracted (exp(s - m), s = sm_scale * q.k in
float32), the output multiplied by the reciprocal of the sum, lse = m + log(l). The backward is
one kernel per key block and query head: it recomputes delta per query block, keeps that head's
dK and dV in registers and writes them to float32 per-query-head buffers, and adds each block's
dQ into a float32 buffer with tl.atomic_add. A last kernel sums dK and dV over each group of
query heads and casts all three to the input dtype."""
# panel-cases: peaked, bwd_tail_130_mqa, bwd_small_causal_gqa
# On the interpreter bfloat16 is skipped (no bf16 tl.dot there): tests/gpu/test_gpu_honest_panel.py
# grades both dtypes.

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, sqb, sqh, sqs, skb, skh, sks, svb, svh, svs,
         H, GROUP, S, sm_scale, CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr,
         BN: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + h * sqh + rm[:, None] * sqs + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m = tl.full([BM], -1.0e30, tl.float32)
    l = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    end = S
    if CAUSAL:
        end = tl.minimum(S, pid * BM + BM)
    for n0 in range(0, end, BN):
        rn = n0 + tl.arange(0, BN)
        k = tl.load(k_ptr + b * skb + hk * skh + rn[:, None] * sks + rd[None, :], mask=rn[:, None] < S, other=0.0)
        v = tl.load(v_ptr + b * svb + hk * svh + rn[:, None] * svs + rd[None, :], mask=rn[:, None] < S, other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        keep = rn[None, :] < S
        if CAUSAL:
            keep = keep & (rm[:, None] >= rn[None, :])
        s = tl.where(keep, s, -1.0e30)
        m_blk = tl.maximum(m, tl.max(s, axis=1))
        p = tl.where(keep, tl.exp(s - m_blk[:, None]), 0.0)
        corr = tl.exp(m - m_blk)
        l = corr * l + tl.sum(p, axis=1)
        acc = corr[:, None] * acc + tl.dot(p.to(v.dtype), v)
        m = m_blk
    inv = 1.0 / l
    o = acc * inv[:, None]
    tl.store(o_ptr + bh * S * D + rm[:, None] * D + rd[None, :], o.to(o_ptr.dtype.element_ty), mask=rm[:, None] < S)
    tl.store(lse_ptr + bh * S + rm, m + tl.log(l), mask=rm < S)


def attention(q, k, v, causal, sm_scale):
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    o = torch.empty((B, H, S, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    BM, BN = 32, 16
    _fwd[(triton.cdiv(S, BM), B * H)](q, k, v, o, lse, q.stride(0), q.stride(1), q.stride(2),
                                      k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                                      H, H // Hkv, S, sm_scale, CAUSAL=causal, D=D, BM=BM, BN=BN)
    return o, lse


@triton.jit
def _bwd(q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr, dq_ptr, dkh_ptr, dvh_ptr,
         sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sob, soh, sos, sdb, sdh, sds,
         H, GROUP, S, sm_scale, CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr,
         BN: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    rn = pid * BN + tl.arange(0, BN)
    rd = tl.arange(0, D)
    k = tl.load(k_ptr + b * skb + hk * skh + rn[:, None] * sks + rd[None, :], mask=rn[:, None] < S, other=0.0)
    v = tl.load(v_ptr + b * svb + hk * svh + rn[:, None] * svs + rd[None, :], mask=rn[:, None] < S, other=0.0)
    dk = tl.zeros([BN, D], tl.float32)
    dv = tl.zeros([BN, D], tl.float32)
    start = 0
    if CAUSAL:
        start = (pid * BN) // BM * BM
    for m0 in range(start, S, BM):
        rm = m0 + tl.arange(0, BM)
        rows = rm[:, None] < S
        q = tl.load(q_ptr + b * sqb + h * sqh + rm[:, None] * sqs + rd[None, :], mask=rows, other=0.0)
        o = tl.load(o_ptr + b * sob + h * soh + rm[:, None] * sos + rd[None, :], mask=rows, other=0.0)
        do = tl.load(do_ptr + b * sdb + h * sdh + rm[:, None] * sds + rd[None, :], mask=rows, other=0.0)
        lse = tl.load(lse_ptr + bh * S + rm, mask=rm < S, other=0.0)
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        keep = rows & (rn[None, :] < S)
        if CAUSAL:
            keep = keep & (rm[:, None] >= rn[None, :])
        p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
        dv = tl.dot(tl.trans(p.to(do.dtype)), do, dv)
        dp = tl.dot(do, tl.trans(v))
        ds = (p * (dp - delta[:, None])).to(q.dtype)
        dk = tl.dot(tl.trans(ds), q, dk)
        dq_blk = tl.dot(ds, k) * sm_scale
        tl.atomic_add(dq_ptr + bh * S * D + rm[:, None] * D + rd[None, :], dq_blk, mask=rows)
    out = bh * S * D + rn[:, None] * D + rd[None, :]
    tl.store(dkh_ptr + out, dk * sm_scale, mask=rn[:, None] < S)
    tl.store(dvh_ptr + out, dv, mask=rn[:, None] < S)


@triton.jit
def _finish(dq32_ptr, dkh_ptr, dvh_ptr, dq_ptr, dk_ptr, dv_ptr, H, Hkv, GROUP, S,
            D: tl.constexpr, BM: tl.constexpr):
    # One program per (row block, kv head): dq of the group's heads cast, dk and dv summed.
    pid = tl.program_id(0)
    bhk = tl.program_id(1)
    b = bhk // Hkv
    hk = bhk % Hkv
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    tile = rm[:, None] * D + rd[None, :]
    mask = rm[:, None] < S
    dk = tl.zeros([BM, D], tl.float32)
    dv = tl.zeros([BM, D], tl.float32)
    for g in range(0, GROUP):
        base = (b * H + hk * GROUP + g) * S * D
        dk += tl.load(dkh_ptr + base + tile, mask=mask, other=0.0)
        dv += tl.load(dvh_ptr + base + tile, mask=mask, other=0.0)
        dq = tl.load(dq32_ptr + base + tile, mask=mask, other=0.0)
        tl.store(dq_ptr + base + tile, dq.to(dq_ptr.dtype.element_ty), mask=mask)
    tl.store(dk_ptr + bhk * S * D + tile, dk.to(dk_ptr.dtype.element_ty), mask=mask)
    tl.store(dv_ptr + bhk * S * D + tile, dv.to(dv_ptr.dtype.element_ty), mask=mask)


def attention_backward(q, k, v, o, lse, do, causal, sm_scale):
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    dev = q.device
    BM, BN = 16, 32
    dq32 = torch.zeros((B, H, S, D), dtype=torch.float32, device=dev)
    dkh = torch.empty((B, H, S, D), dtype=torch.float32, device=dev)
    dvh = torch.empty((B, H, S, D), dtype=torch.float32, device=dev)
    _bwd[(triton.cdiv(S, BN), B * H)](q, k, v, o, do, lse, dq32, dkh, dvh,
                                      q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                                      v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                                      do.stride(0), do.stride(1), do.stride(2),
                                      H, H // Hkv, S, sm_scale, CAUSAL=causal, D=D, BM=BM, BN=BN)
    dq = torch.empty((B, H, S, D), dtype=q.dtype, device=dev)
    dk = torch.empty((B, Hkv, S, D), dtype=k.dtype, device=dev)
    dv = torch.empty((B, Hkv, S, D), dtype=v.dtype, device=dev)
    _finish[(triton.cdiv(S, 32), B * Hkv)](dq32, dkh, dvh, dq, dk, dv, H, Hkv, H // Hkv, S, D=D, BM=32)
    return dq, dk, dv
