"""Honest variant: base 2, as fast attention kernels write it: sm_scale * log2(e) folded into q
once, exp2 for the softmax; two sequence blocks of 16 tokens per step (32 tokens a tile), the
normalisation by 1 / l as a multiplication."""
# panel-cases: large_scores, block_edges, custom_scale, gqa_8, one_token, table_strided

import torch
import triton
import triton.language as tl


@triton.jit
def _decode(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, sm_scale, H, GROUP,
            qs0, qs1, ks0, ks1, ks2, vs0, vs1, vs2, ts0, ts1, D: tl.constexpr, BS: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // GROUP
    seq = tl.load(lens_ptr + b)
    d = tl.arange(0, D)
    slot = tl.arange(0, BS)
    q = tl.load(q_ptr + b * qs0 + h * qs1 + d).to(tl.float32) * (sm_scale * 1.4426950408889634)
    m = float("-inf")
    l = 0.0
    acc = tl.zeros([D], tl.float32)
    for j in range(0, tl.cdiv(seq, BS)):
        blk = tl.load(table_ptr + b * ts0 + j * ts1).to(tl.int64)
        valid = j * BS + slot < seq
        k = tl.load(k_ptr + blk * ks0 + slot[:, None] * ks1 + kvh * ks2 + d[None, :],
                    mask=valid[:, None], other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new)
        v = tl.load(v_ptr + blk * vs0 + slot[:, None] * vs1 + kvh * vs2 + d[None, :],
                    mask=valid[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new
    tl.store(out_ptr + (b * H + h) * D + d, (acc * (1.0 / l)).to(out_ptr.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, H, D = q.shape
    Hkv = k_cache.shape[2]
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    _decode[(B, H)](q, k_cache, v_cache, block_table, seq_lens, out, sm_scale, H, H // Hkv,
                    q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                    v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
                    block_table.stride(0), block_table.stride(1), D=D, BS=k_cache.shape[1])
    return out
