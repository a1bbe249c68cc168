"""Wrong paged_decode: splits past a sequence's end are computed and merged.

The split kernel has no `if start < seq_len` guard: a split that starts past the end of a short
sequence (in a batch padded for a long one) runs no iteration and stores acc / l = 0 / 0 = NaN
with lse = -inf. The merge then loops over every split of the grid, not the ceil(seq_len / SPLIT)
that hold tokens: its weight is 2^-inf = 0, but 0 * NaN is NaN.
"""
# expect-fail: mixed_small

import torch
import triton
import triton.language as tl

BLOCK_N = 64
SPLIT = 128


@triton.jit
def split_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, po_ptr, plse_ptr, qk_scale,
                 sqb, sqh, skb, sks, skh, svb, svs, svh, stb, H, NS,
                 G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                 SPLIT: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    sp = tl.program_id(2)
    seq_len = tl.load(lens_ptr + b)
    start = sp * SPLIT
    if True:  # BUG: empty splits too
        end = tl.minimum(start + SPLIT, seq_len)
        g = tl.arange(0, BG)
        heads = kvh * G + g
        d = tl.arange(0, D)
        q = tl.load(q_ptr + b * sqb + heads[:, None] * sqh + d[None, :], mask=(g < G)[:, None], other=0.0)
        m = tl.full([BG], float("-inf"), tl.float32)
        l = tl.zeros([BG], tl.float32)
        acc = tl.zeros([BG, D], tl.float32)
        for t0 in range(start, end, BLOCK_N):
            tok = t0 + tl.arange(0, BLOCK_N)
            valid = tok < end
            blk = tl.load(table_ptr + b * stb + tok // BS, mask=valid, other=0).to(tl.int64)
            slot = tok % BS
            k = tl.load(k_ptr + blk[:, None] * skb + slot[:, None] * sks + kvh * skh + d[None, :],
                        mask=valid[:, None], other=0.0)
            v = tl.load(v_ptr + blk[:, None] * svb + slot[:, None] * svs + kvh * svh + d[None, :],
                        mask=valid[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k)) * qk_scale
            s = tl.where(valid[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            alpha = tl.exp2(m - m_new)
            p = tl.exp2(s - m_new[:, None])
            l = l * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        row = (b * H + heads) * NS + sp
        tl.store(po_ptr + row[:, None] * D + d[None, :], acc / l[:, None], mask=(g < G)[:, None])
        tl.store(plse_ptr + row, m + tl.log2(l), mask=g < G)


@triton.jit
def merge_kernel(po_ptr, plse_ptr, lens_ptr, out_ptr, H, NS,
                 D: tl.constexpr, SPLIT: tl.constexpr, BNS: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    n = NS  # BUG: every split, empty ones included
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
    G = H // Hkv
    NS = triton.cdiv(block_table.shape[1] * BS, SPLIT)
    po = torch.empty((B, H, NS, D), dtype=torch.float32, device=q.device)
    plse = torch.empty((B, H, NS), dtype=torch.float32, device=q.device)
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    split_kernel[(B, Hkv, NS)](
        q, k_cache, v_cache, block_table, seq_lens, po, plse, sm_scale * 1.4426950408889634,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), H, NS,
        G=G, BG=max(16, triton.next_power_of_2(G)), D=D, BS=BS, SPLIT=SPLIT, BLOCK_N=BLOCK_N)
    merge_kernel[(B, H)](po, plse, seq_lens, out, H, NS, D=D, SPLIT=SPLIT, BNS=triton.next_power_of_2(NS))
    return out
