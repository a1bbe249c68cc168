"""Wrong paged_decode: query head h reads kv head h % Hkv instead of h // (H // Hkv).

A per-query-head design (grid (B, H, num_splits), scores as a row-times-tile product instead of
tl.dot) that maps heads to kv heads round-robin. With H = 4 and Hkv = 2, query heads 0..3 must
read kv heads 0, 0, 1, 1 (consecutive query heads share a kv head, as torch's
repeat_interleave and every GQA model lay them out); h % Hkv reads 0, 1, 0, 1. Right only when
Hkv == 1 or H == Hkv, which is why it survives tests on MHA or MQA alone.
"""
# expect-fail: small
# expect-fail: mixed_small

import torch
import triton
import triton.language as tl

BLOCK_N = 64
SPLIT = 128


@triton.jit
def split_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, po_ptr, plse_ptr, qk_scale,
                 sqb, sqh, skb, sks, skh, svb, svs, svh, stb, H, Hkv, NS,
                 D: tl.constexpr, BS: tl.constexpr, SPLIT: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    sp = tl.program_id(2)
    kvh = h % Hkv  # BUG: should be h // (H // Hkv)
    seq_len = tl.load(lens_ptr + b)
    start = sp * SPLIT
    if start < seq_len:
        end = tl.minimum(start + SPLIT, seq_len)
        d = tl.arange(0, D)
        q = tl.load(q_ptr + b * sqb + h * sqh + d).to(tl.float32)
        m = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
        l = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
        acc = tl.zeros([D], tl.float32)
        for t0 in range(start, end, BLOCK_N):
            tok = t0 + tl.arange(0, BLOCK_N)
            valid = tok < end
            blk = tl.load(table_ptr + b * stb + tok // BS, mask=valid, other=0).to(tl.int64)
            slot = tok % BS
            k = tl.load(k_ptr + blk[:, None] * skb + slot[:, None] * sks + kvh * skh + d[None, :],
                        mask=valid[:, None], other=0.0).to(tl.float32)
            v = tl.load(v_ptr + blk[:, None] * svb + slot[:, None] * svs + kvh * svh + d[None, :],
                        mask=valid[:, None], other=0.0).to(tl.float32)
            s = tl.sum(q[None, :] * k, 1) * qk_scale
            s = tl.where(valid, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 0))
            alpha = tl.exp2(m - m_new)
            p = tl.exp2(s - m_new)
            l = l * alpha + tl.sum(p, 0)
            acc = acc * alpha + tl.sum(p[:, None] * v, 0)
            m = m_new
        row = (b * H + h) * NS + sp
        tl.store(po_ptr + row * D + d, acc / l)
        tl.store(plse_ptr + row, m + tl.log2(l))


@triton.jit
def merge_kernel(po_ptr, plse_ptr, lens_ptr, out_ptr, H, NS,
                 D: tl.constexpr, SPLIT: tl.constexpr, BNS: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    n = (tl.load(lens_ptr + b) + SPLIT - 1) // SPLIT
    sp = tl.arange(0, BNS)
    ok = sp < n
    row = (b * H + h) * NS + sp
    lse = tl.load(plse_ptr + row, mask=ok, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, 0))
    d = tl.arange(0, D)
    o = tl.load(po_ptr + row[:, None] * D + d[None, :], mask=ok[:, None], other=0.0)
    out = tl.sum(w[:, None] * o, 0) / tl.sum(w, 0)
    tl.store(out_ptr + (b * H + h) * D + d, out.to(out_ptr.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, H, D = q.shape
    _, BS, Hkv, _ = k_cache.shape
    NS = triton.cdiv(block_table.shape[1] * BS, SPLIT)
    po = torch.empty((B, H, NS, D), dtype=torch.float32, device=q.device)
    plse = torch.empty((B, H, NS), dtype=torch.float32, device=q.device)
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    split_kernel[(B, H, NS)](
        q, k_cache, v_cache, block_table, seq_lens, po, plse, sm_scale * 1.4426950408889634,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), H, Hkv, NS,
        D=D, BS=BS, SPLIT=SPLIT, BLOCK_N=BLOCK_N)
    merge_kernel[(B, H)](po, plse, seq_lens, out, H, NS, D=D, SPLIT=SPLIT, BNS=triton.next_power_of_2(NS))
    return out
