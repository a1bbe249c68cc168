"""Reference solution for the paged_decode kata.

What it teaches: decode attention over a paged KV cache, the kernel at the heart of every LLM
server, and the split-K ("flash-decoding") reduction that makes it fast.

- Decode is one query token per sequence attending to every token the sequence has cached. There
  is almost no arithmetic (4 FLOPs per cached K/V element) and a lot of memory: the whole cache of
  the batch, gigabytes, is read once per step. The kernel is a streaming read of K and V, and its
  goal is the memory bandwidth.

- The cache is paged. Tokens live in blocks of 16, a sequence's blocks are anywhere in the cache,
  and block_table[b, j] names the block holding tokens 16j .. 16j + 15 of sequence b. So token t
  of sequence b is at block_table[b, t // 16], slot t % 16. The last block is usually partial:
  its slots past seq_len hold whatever an earlier sequence left there, and must never reach the
  softmax.

- Online softmax, as in flash attention: walk the tokens in tiles, keep a running max m, a
  running sum l of exp(s - m) and an accumulator acc of exp(s - m) * v; when the max grows,
  rescale l and acc by exp(m_old - m_new). Scores are kept in base 2 (scaled by log2(e)) so that
  every exponential is one exp2.

- Split-K. One program per (sequence, head) walking the whole sequence leaves the GPU idle: 32
  sequences x 8 kv heads is 256 programs for 132 SMs, each streaming 8192 tokens at the speed one
  SM can pull, and a batch of one long sequence uses a handful of SMs. Flash-decoding cuts each
  sequence into splits of SPLIT tokens, one program per split, each producing a partial result:
  its normalised output o_i = acc_i / l_i and its logsumexp lse_i = m_i + log2(l_i). A second,
  tiny kernel merges them: with M = max_i lse_i, out = sum_i 2^(lse_i - M) o_i / sum_i
  2^(lse_i - M). Each partial is a softmax over its own tokens, weighted by how much mass those
  tokens hold: that is exactly the softmax over all tokens. Forgetting the 2^(lse_i - M) weights
  (or using each split's max without rescaling to a common one) is the classic bug.

- The number of splits is chosen from shapes only (the table's width, the batch, the heads),
  never from the values of seq_lens: reading seq_lens on the host would be a device-to-host copy
  and a synchronisation every decode step. Splits past a sequence's end find nothing to do and
  write nothing; the merge counts a sequence's splits from its own seq_len, inside the kernel.

- Grouped-query attention: H query heads share Hkv kv heads, query head h reading kv head
  h // (H // Hkv). One program serves all G = H // Hkv query heads of its kv head, so each K and
  V tile is read once and used G times. The G query rows are padded to 16 so that Q @ K^T and
  P @ V run on the tensor cores (tl.dot needs 16 rows); the padding rows load zeros and are
  never stored. Decode is memory bound, so the wasted multiply-adds cost nothing.
"""

import torch
import triton
import triton.language as tl

# Tokens per loop iteration: 64 tokens = 4 cache blocks, a 64 x 128 tile of K and of V (16 KB each
# in 16-bit) in flight per iteration.
BLOCK_N = 64
# Tokens per split: at most 512 (8 iterations; the partials written and merged are then ~1.6% of
# the K/V bytes), fewer when the batch is too small to give the GPU ~TARGET_PROGRAMS programs of
# work, never fewer than one tile.
MAX_SPLIT = 512
TARGET_PROGRAMS = 1024
# The merge kernel holds a (heads x splits x D) float32 tile of MERGE_TILE heads x splits, i.e.
# 16 splits at a time for GQA 4:1: 64 x 128 floats, 32 registers a thread at 8 warps.
MERGE_TILE = 64

LOG2E = 1.4426950408889634


@triton.jit
def paged_decode_split_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, part_o_ptr, part_lse_ptr,
    qk_scale,  # sm_scale * log2(e): scores in base 2
    stride_qb, stride_qh,
    stride_kblk, stride_kslot, stride_khead,
    stride_vblk, stride_vslot, stride_vhead,
    stride_table,
    H, num_splits,
    G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    SPLIT: tl.constexpr, BLOCK_N: tl.constexpr,
):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)

    seq_len = tl.load(lens_ptr + b)
    start = split * SPLIT
    # A short sequence in a batch of long ones: most of its splits are empty. They write nothing;
    # the merge kernel knows, from seq_len, not to read them.
    if start < seq_len:
        end = tl.minimum(start + SPLIT, seq_len)

        # The G query heads of this kv head, padded to BLOCK_G rows (the padding loads zeros).
        g = tl.arange(0, BLOCK_G)
        heads = kv_head * G + g
        head_ok = g < G
        d = tl.arange(0, D)
        q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + d[None, :],
                    mask=head_ok[:, None], other=0.0)

        m = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
        l = tl.zeros([BLOCK_G], dtype=tl.float32)
        acc = tl.zeros([BLOCK_G, D], dtype=tl.float32)
        table_row = table_ptr + b * stride_table
        for t0 in range(start, end, BLOCK_N):
            tok = t0 + tl.arange(0, BLOCK_N)
            valid = tok < end  # never past seq_len: the last block's tail is garbage
            # Token t lives in block table[b, t // 16], slot t % 16. Each table entry is loaded
            # by the 16 lanes of its block (one cached read). Block offsets in int64: a cache
            # of more than 2**31 elements is ordinary.
            block = tl.load(table_row + tok // BLOCK_SIZE, mask=valid, other=0).to(tl.int64)
            slot = tok % BLOCK_SIZE
            k = tl.load(k_ptr + block[:, None] * stride_kblk + slot[:, None] * stride_kslot
                        + kv_head * stride_khead + d[None, :], mask=valid[:, None], other=0.0)
            v = tl.load(v_ptr + block[:, None] * stride_vblk + slot[:, None] * stride_vslot
                        + kv_head * stride_vhead + d[None, :], mask=valid[:, None], other=0.0)

            s = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_G, BLOCK_N), float32, base 2
            s = tl.where(valid[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            alpha = tl.exp2(m - m_new)  # rescales what was summed under the old max
            p = tl.exp2(s - m_new[:, None])
            l = l * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new

        # The partial result of this split: its normalised output and its logsumexp (base 2).
        row = (b * H + heads) * num_splits + split
        tl.store(part_o_ptr + row[:, None] * D + d[None, :], acc / l[:, None], mask=head_ok[:, None])
        tl.store(part_lse_ptr + row, m + tl.log2(l), mask=head_ok)


@triton.jit
def paged_decode_merge_kernel(
    part_o_ptr, part_lse_ptr, lens_ptr, out_ptr,
    H, num_splits,
    G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, SPLIT: tl.constexpr,
    CHUNK: tl.constexpr,
):
    # One program per (sequence, kv head), as in the split kernel: it merges the partials of the
    # G query heads of that kv head, CHUNK splits at a time.
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    # Only the splits that held tokens wrote a partial: ceil(seq_len / SPLIT) of them.
    n = (tl.load(lens_ptr + b) + SPLIT - 1) // SPLIT
    g = tl.arange(0, BLOCK_G)
    head_ok = g < G
    # Padding rows (G not a power of 2) re-read the group's last head, and are never stored.
    heads = kv_head * G + tl.minimum(g, G - 1)
    rows = (b * H + heads) * num_splits  # partial (b, head, split 0)

    # Pass 1: each head's largest logsumexp, the common reference its partials are rescaled to.
    best = tl.full([BLOCK_G, CHUNK], float("-inf"), dtype=tl.float32)
    for s0 in range(0, n, CHUNK):
        s = s0 + tl.arange(0, CHUNK)
        ok = (s < n)[None, :]
        lse = tl.load(part_lse_ptr + rows[:, None] + s[None, :], mask=ok, other=float("-inf"))
        best = tl.maximum(best, lse)
    top = tl.max(best, axis=1)

    # Pass 2: out = sum_i w_i o_i / sum_i w_i with w_i = 2^(lse_i - top): split i's share of the
    # softmax mass. Padding lanes get w = 2^-inf = 0 and o = 0. The sums over splits are taken
    # once, after the loop.
    d = tl.arange(0, D)
    acc = tl.zeros([BLOCK_G, CHUNK, D], dtype=tl.float32)
    total = tl.zeros([BLOCK_G, CHUNK], dtype=tl.float32)
    for s0 in range(0, n, CHUNK):
        s = s0 + tl.arange(0, CHUNK)
        ok = (s < n)[None, :]
        part = rows[:, None] + s[None, :]
        w = tl.exp2(tl.load(part_lse_ptr + part, mask=ok, other=float("-inf")) - top[:, None])
        o = tl.load(part_o_ptr + part[:, :, None] * D + d[None, None, :], mask=ok[:, :, None], other=0.0)
        acc += w[:, :, None] * o
        total += w
    out = tl.sum(acc, axis=1) / tl.sum(total, axis=1)[:, None]
    tl.store(out_ptr + (b * H + heads)[:, None] * D + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=head_ok[:, None])


def _split_tokens(B: int, Hkv: int, max_len: int) -> int:
    """Tokens per split, from shapes alone: enough programs to fill the GPU several times over
    (so sequences of different lengths balance out), at most MAX_SPLIT tokens each."""
    want = triton.cdiv(max_len * B * Hkv, TARGET_PROGRAMS)
    return min(MAX_SPLIT, max(BLOCK_N, triton.next_power_of_2(want)))


def paged_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, H, D = q.shape
    _, block_size, Hkv, _ = k_cache.shape
    G = H // Hkv
    max_blocks = block_table.shape[1]
    # The kernels need unit stride along D (and along a table row); any other stride is fine.
    if q.stride(-1) != 1:
        q = q.contiguous()
    if k_cache.stride(-1) != 1:
        k_cache = k_cache.contiguous()
    if v_cache.stride(-1) != 1:
        v_cache = v_cache.contiguous()
    if block_table.stride(-1) != 1:
        block_table = block_table.contiguous()
    seq_lens = seq_lens.contiguous()

    split = _split_tokens(B, Hkv, max_blocks * block_size)
    num_splits = triton.cdiv(max_blocks * block_size, split)
    part_o = torch.empty((B, H, num_splits, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B, H, num_splits), dtype=torch.float32, device=q.device)
    out = torch.empty((B, H, D), dtype=q.dtype, device=q.device)

    paged_decode_split_kernel[(B, Hkv, num_splits)](
        q, k_cache, v_cache, block_table, seq_lens, part_o, part_lse,
        sm_scale * LOG2E,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0),
        H, num_splits,
        G=G, BLOCK_G=max(16, triton.next_power_of_2(G)), D=D, BLOCK_SIZE=block_size,
        SPLIT=split, BLOCK_N=BLOCK_N, num_warps=4, num_stages=2,
    )
    merge_g = triton.next_power_of_2(G)
    paged_decode_merge_kernel[(B, Hkv)](
        part_o, part_lse, seq_lens, out, H, num_splits,
        G=G, BLOCK_G=merge_g, D=D, SPLIT=split, CHUNK=max(1, MERGE_TILE // merge_g), num_warps=8,
    )
    return out
