"""Honest variant: split-K over tokens. Each (sequence, query head) is split into SPLITS ranges
of cache blocks; each program writes its partial max, sum and unnormalised output to scratch
(an empty range writes m = -inf, l = 0), and a second kernel merges the partials with their max
rescale."""
# panel-cases: large_scores, block_edges, custom_scale, gqa_8, one_token, table_strided

import torch
import triton
import triton.language as tl

SPLITS = 4


@triton.jit
def _partial(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, pm_ptr, pl_ptr, pacc_ptr, sm_scale, H, GROUP,
             qs0, qs1, ks0, ks1, ks2, vs0, vs1, vs2, ts0, ts1,
             D: tl.constexpr, BS: tl.constexpr, SPLITS: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    sp = tl.program_id(2)
    kvh = h // GROUP
    seq = tl.load(lens_ptr + b)
    n_blocks = tl.cdiv(seq, BS)
    per = tl.cdiv(n_blocks, SPLITS)
    d = tl.arange(0, D)
    slot = tl.arange(0, BS)
    q = tl.load(q_ptr + b * qs0 + h * qs1 + d).to(tl.float32)
    m = float("-inf")
    l = 0.0
    acc = tl.zeros([D], tl.float32)
    for j in range(sp * per, tl.minimum(sp * per + per, n_blocks)):
        blk = tl.load(table_ptr + b * ts0 + j * ts1).to(tl.int64)
        valid = j * BS + slot < seq
        k = tl.load(k_ptr + blk * ks0 + slot[:, None] * ks1 + kvh * ks2 + d[None, :],
                    mask=valid[:, None], other=0.0).to(tl.float32)
        s = tl.where(valid, tl.sum(k * q[None, :], axis=1) * sm_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_ptr + blk * vs0 + slot[:, None] * vs1 + kvh * vs2 + d[None, :],
                    mask=valid[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new
    i = (b * H + h) * SPLITS + sp
    tl.store(pm_ptr + i, m)
    tl.store(pl_ptr + i, l)
    tl.store(pacc_ptr + i * D + d, acc)


@triton.jit
def _merge(pm_ptr, pl_ptr, pacc_ptr, out_ptr, H, D: tl.constexpr, SPLITS: tl.constexpr):
    bh = tl.program_id(0)
    d = tl.arange(0, D)
    sp = tl.arange(0, SPLITS)
    ms = tl.load(pm_ptr + bh * SPLITS + sp)
    ls = tl.load(pl_ptr + bh * SPLITS + sp)
    m = tl.max(ms, axis=0)
    w = tl.where(ls > 0, tl.exp(ms - m), 0.0)
    accs = tl.load(pacc_ptr + (bh * SPLITS + sp)[:, None] * D + d[None, :])
    num = tl.sum(w[:, None] * accs, axis=0)
    den = tl.sum(w * ls, axis=0)
    tl.store(out_ptr + bh * D + d, (num / den).to(out_ptr.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, H, D = q.shape
    Hkv = k_cache.shape[2]
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    pm = torch.empty((B, H, SPLITS), dtype=torch.float32, device=q.device)
    pl = torch.empty((B, H, SPLITS), dtype=torch.float32, device=q.device)
    pacc = torch.empty((B, H, SPLITS, D), dtype=torch.float32, device=q.device)
    _partial[(B, H, SPLITS)](q, k_cache, v_cache, block_table, seq_lens, pm, pl, pacc, sm_scale, H, H // Hkv,
                             q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                             v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
                             block_table.stride(0), block_table.stride(1),
                             D=D, BS=k_cache.shape[1], SPLITS=SPLITS)
    _merge[(B * H,)](pm, pl, pacc, out, H, D=D, SPLITS=SPLITS)
    return out
