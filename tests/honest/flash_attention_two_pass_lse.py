"""Honest variant: a two-pass forward in the exp(s - lse) form. The first pass over the keys
finds each row's max and sum (no V), hence lse = m + log(l); the second recomputes the scores
and accumulates exp(s - lse) V, already normalised (no rescaling, no final division). The
backward runs one program per query block: it computes delta, accumulates dQ in registers and
adds each key block's dK and dV into float32 buffers of the key/value heads with
tl.atomic_add (the GQA group sum happens there), cast to the input dtype by a last kernel."""
# panel-cases: huge_scores, bwd_one_token, rising, bwd_peaked
# On the interpreter bfloat16 is skipped (no bf16 tl.dot there): tests/gpu/test_gpu_honest_panel.py
# grades both dtypes.

import torch
import triton
import triton.language as tl


@triton.jit
def _scores(q, k_ptr, skb_off, sks, rm, n0, S, sm_scale, CAUSAL: tl.constexpr, D: tl.constexpr,
            BN: tl.constexpr):
    rn = n0 + tl.arange(0, BN)
    rd = tl.arange(0, D)
    k = tl.load(k_ptr + skb_off + rn[:, None] * sks + rd[None, :], mask=rn[:, None] < S, other=0.0)
    s = tl.dot(q, tl.trans(k)) * sm_scale
    ok = rn[None, :] < S
    if CAUSAL:
        ok = ok & (rn[None, :] <= rm[:, None])
    return tl.where(ok, s, float("-inf")), rn


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
    k_off = b * skb + hk * skh
    stop = S
    if CAUSAL:
        stop = tl.minimum(S, (pid + 1) * BM)
    m = tl.full([BM], float("-inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    for n0 in range(0, stop, BN):
        s, rn = _scores(q, k_ptr, k_off, sks, rm, n0, S, sm_scale, CAUSAL, D, BN)
        m_new = tl.maximum(m, tl.max(s, axis=1))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
        m = m_new
    lse = m + tl.log(l)
    acc = tl.zeros([BM, D], tl.float32)
    for n0 in range(0, stop, BN):
        s, rn = _scores(q, k_ptr, k_off, sks, rm, n0, S, sm_scale, CAUSAL, D, BN)
        p = tl.exp(s - lse[:, None])
        v = tl.load(v_ptr + b * svb + hk * svh + rn[:, None] * svs + rd[None, :], mask=rn[:, None] < S, other=0.0)
        acc += tl.dot(p.to(v.dtype), v)
    tl.store(o_ptr + bh * S * D + rm[:, None] * D + rd[None, :], acc.to(o_ptr.dtype.element_ty), mask=rm[:, None] < S)
    tl.store(lse_ptr + bh * S + rm, lse, mask=rm < S)


def attention(q, k, v, causal, sm_scale):
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    o = torch.empty((B, H, S, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    BM, BN = 16, 32
    _fwd[(triton.cdiv(S, BM), B * H)](q, k, v, o, lse, q.stride(0), q.stride(1), q.stride(2),
                                      k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                                      H, H // Hkv, S, sm_scale, CAUSAL=causal, D=D, BM=BM, BN=BN)
    return o, lse


@triton.jit
def _bwd(q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr, dq_ptr, dk32_ptr, dv32_ptr,
         sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sob, soh, sos, sdb, sdh, sds,
         H, Hkv, GROUP, S, sm_scale, CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr,
         BN: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    rows = rm[:, None] < S
    q = tl.load(q_ptr + b * sqb + h * sqh + rm[:, None] * sqs + rd[None, :], mask=rows, other=0.0)
    o = tl.load(o_ptr + b * sob + h * soh + rm[:, None] * sos + rd[None, :], mask=rows, other=0.0)
    do = tl.load(do_ptr + b * sdb + h * sdh + rm[:, None] * sds + rd[None, :], mask=rows, other=0.0)
    lse = tl.load(lse_ptr + bh * S + rm, mask=rm < S, other=float("inf"))
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    dq = tl.zeros([BM, D], tl.float32)
    kv_off = (b * Hkv + hk) * S * D
    stop = S
    if CAUSAL:
        stop = tl.minimum(S, (pid + 1) * BM)
    for n0 in range(0, stop, BN):
        s, rn = _scores(q, k_ptr, b * skb + hk * skh, sks, rm, n0, S, sm_scale, CAUSAL, D, BN)
        k = tl.load(k_ptr + b * skb + hk * skh + rn[:, None] * sks + rd[None, :], mask=rn[:, None] < S, other=0.0)
        v = tl.load(v_ptr + b * svb + hk * svh + rn[:, None] * svs + rd[None, :], mask=rn[:, None] < S, other=0.0)
        p = tl.exp(s - lse[:, None])  # -inf scores and padding rows (lse = inf) give 0
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
        dv_blk = tl.dot(tl.trans(p.to(do.dtype)), do)
        dk_blk = tl.dot(tl.trans(ds.to(q.dtype)), q) * sm_scale
        cols = kv_off + rn[:, None] * D + rd[None, :]
        tl.atomic_add(dv32_ptr + cols, dv_blk, mask=rn[:, None] < S)
        tl.atomic_add(dk32_ptr + cols, dk_blk, mask=rn[:, None] < S)
    tl.store(dq_ptr + bh * S * D + rm[:, None] * D + rd[None, :], (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=rows)


@triton.jit
def _cast(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n).to(dst_ptr.dtype.element_ty), mask=i < n)


def attention_backward(q, k, v, o, lse, do, causal, sm_scale):
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    dev = q.device
    BM, BN = 32, 16
    dq = torch.empty((B, H, S, D), dtype=q.dtype, device=dev)
    dk32 = torch.zeros((B, Hkv, S, D), dtype=torch.float32, device=dev)
    dv32 = torch.zeros((B, Hkv, S, D), dtype=torch.float32, device=dev)
    _bwd[(triton.cdiv(S, BM), B * H)](q, k, v, o, do, lse, dq, dk32, dv32,
                                      q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                                      v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                                      do.stride(0), do.stride(1), do.stride(2),
                                      H, Hkv, H // Hkv, S, sm_scale, CAUSAL=causal, D=D, BM=BM, BN=BN)
    dk = torch.empty((B, Hkv, S, D), dtype=k.dtype, device=dev)
    dv = torch.empty((B, Hkv, S, D), dtype=v.dtype, device=dev)
    n = dk.numel()
    _cast[(triton.cdiv(n, 1024),)](dk32, dk, n, BLOCK=1024)
    _cast[(triton.cdiv(n, 1024),)](dv32, dv, n, BLOCK=1024)
    return dq, dk, dv
