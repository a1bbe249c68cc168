"""paged_decode: inputs, float64 ground truth and baseline for decode attention over a paged KV cache.

A decode step attends one new query token per sequence to everything the sequence has cached.
The cache is paged, as in vLLM: K and V live in fixed-size blocks of 16 tokens, the blocks of one
sequence are scattered over the cache, and `block_table[b, j]` names the physical block that
holds tokens 16j .. 16j + 15 of sequence b.

Case parameters (kata.yaml):
  B             sequences in the batch
  H, Hkv        query heads and kv heads (H a multiple of Hkv; query head h reads kv head
                h // (H // Hkv))
  seq_lens      a list cycled over the batch: sequence b holds seq_lens[b % len(seq_lens)] tokens
  tokens        the total of those lengths over the batch (for the cost model; checked here)
  max_blocks    optional: the block table's width (default: just enough for the longest sequence)
  spare_blocks  optional: cache blocks no sequence owns (default: about an eighth more)
  q_scale       optional: q is drawn as q_scale * randn (default 1): large values make the
                softmax peaky, so an exp without the running max overflows
  sm_scale      optional: the softmax scale (default 1 / sqrt(128))
  layout        optional: "contiguous" (default); "kv_interleaved": k_cache and v_cache are the
                two halves of one (num_blocks, 2, 16, Hkv, 128) tensor, so their block stride is
                twice their block size (vLLM and FlashInfer store the cache so); "q_strided": q is
                the query slice of a fused qkv projection, q.stride(0) = (H + 2 * Hkv) * 128;
                "table_strided": block_table is a column slice of a wider table, its
                stride(0) > max_blocks

Every cache slot no sequence owns holds garbage, as a real cache does (blocks are reused, never
cleared): the slots past seq_len in a sequence's last block, the spare blocks, and the blocks
that block_table entries past a sequence's last block point at. The garbage is K = 0 (a score
of 0, as likely as any real token's) and V = +-10000: one garbage slot let into the softmax
shifts the output by far more than the tolerance. The physical blocks are shuffled, so a block
read through the wrong table entry belongs to another sequence or is garbage.
"""

import math

import torch
import torch.nn.functional as F

D = 128
BLOCK_SIZE = 16
GARBAGE_V = 1.0e4


def _lens(case):
    B, pattern = case["B"], case["seq_lens"]
    lens = [int(pattern[b % len(pattern)]) for b in range(B)]
    assert all(n >= 1 for n in lens), "every sequence holds at least its own token"
    assert sum(lens) == case["tokens"], f"the case's tokens should be {sum(lens)}"
    return lens


def make_inputs(case, dtype, device, generator):
    B, H, Hkv = case["B"], case["H"], case["Hkv"]
    assert H % Hkv == 0
    lens = _lens(case)
    owned = [-(-n // BLOCK_SIZE) for n in lens]
    max_blocks = case.get("max_blocks", max(owned))
    assert max_blocks >= max(owned)
    used = sum(owned)
    spare = case.get("spare_blocks", max(4, used // 8))
    num_blocks = used + spare
    layout = case.get("layout", "contiguous")

    # Physical blocks in a random order: sequence b owns the next owned[b] of them, the rest are
    # spare. Table entries past a sequence's last block point at random spare blocks.
    perm = torch.randperm(num_blocks, device=device, generator=generator).to(torch.int32)
    spare_ids = perm[used:]
    pick = torch.randint(0, spare, (B, max_blocks), device=device, generator=generator)
    table = spare_ids[pick]
    start = 0
    for b, n in enumerate(owned):
        table[b, :n] = perm[start:start + n]
        start += n
    if layout == "table_strided":
        wide = torch.zeros((B, max_blocks + 7), dtype=torch.int32, device=device)
        wide[:, :max_blocks] = table
        table = wide[:, :max_blocks]

    shape = (num_blocks, BLOCK_SIZE, Hkv, D)
    if layout == "kv_interleaved":
        kv = torch.randn((num_blocks, 2, BLOCK_SIZE, Hkv, D), dtype=dtype, device=device, generator=generator)
        k_cache, v_cache = kv[:, 0], kv[:, 1]
    else:
        k_cache = torch.randn(shape, dtype=dtype, device=device, generator=generator)
        v_cache = torch.randn(shape, dtype=dtype, device=device, generator=generator)

    # Garbage in every slot no sequence owns.
    # (A sign per block and column, broadcast over the block: the 4 GB case stays 4 GB.)
    sign = torch.randint(0, 2, (spare, 1, 1, D), device=device, generator=generator)
    spare_long = spare_ids.long()
    k_cache[spare_long] = 0
    v_cache[spare_long] = ((sign * 2 - 1) * GARBAGE_V).to(dtype)
    for b, n in enumerate(lens):
        tail = n % BLOCK_SIZE
        if tail:
            last = int(table[b, owned[b] - 1])
            k_cache[last, tail:] = 0
            v_cache[last, tail:] = GARBAGE_V * (1 - 2 * (b % 2))

    q_scale = case.get("q_scale", 1.0)
    if layout == "q_strided":
        qkv = torch.randn((B, H + 2 * Hkv, D), dtype=torch.float32, device=device, generator=generator)
        q = (qkv * q_scale).to(dtype)[:, :H]
    else:
        q = (torch.randn((B, H, D), dtype=torch.float32, device=device, generator=generator) * q_scale).to(dtype)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    return {"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_table": table,
            "seq_lens": seq_lens, "sm_scale": case.get("sm_scale", 1.0 / math.sqrt(D))}


def _attend(q, k_cache, v_cache, block_table, seq_lens, sm_scale, magnitude=False):
    """Float64 attention of each sequence's query over its own tokens, one sequence at a time
    (a float64 gather of a whole GPU batch would take gigabytes). With magnitude=True, the
    softmax-weighted mean of |v| instead of v: the size of the terms each output is a weighted
    average of (see output_magnitude)."""
    B, H, _ = q.shape
    _, bs, Hkv, _ = k_cache.shape
    G = H // Hkv
    out = torch.empty((B, H, D), dtype=torch.float64, device=q.device)
    for b, n in enumerate(seq_lens.tolist()):
        blocks = block_table[b, :-(-n // bs)].long()
        k = k_cache[blocks].reshape(-1, Hkv, D)[:n].double()  # (n, Hkv, D)
        v = v_cache[blocks].reshape(-1, Hkv, D)[:n].double()
        qb = q[b].double().reshape(Hkv, G, D)
        s = torch.einsum("kgd,nkd->kgn", qb, k) * sm_scale
        p = torch.softmax(s, dim=-1)
        if magnitude:
            v = v.abs()
        out[b] = torch.einsum("kgn,nkd->kgd", p, v).reshape(H, D)
    return out


def reference(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    return _attend(q, k_cache, v_cache, block_table, seq_lens, sm_scale)


def output_magnitude(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    """sum_j p_j |v_j|: what rounding error is relative to. The output is a weighted average of
    the v rows, sum_j p_j v_j, with p_j >= 0 summing to 1. Rounding each p_j (a kernel feeds
    p to the P @ V product in the input dtype, as every fast kernel does) and rounding the result
    err by a few units of the dtype's precision times sum_j p_j |v_j|, whatever the order of the
    sum; the output itself can be far smaller than that (random v rows average out)."""
    return _attend(q, k_cache, v_cache, block_table, seq_lens, sm_scale, magnitude=True)


def baseline(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    """What one writes in PyTorch: gather every sequence's blocks into a dense (B, Hkv, L, D)
    tensor, padded to the table's width, and let SDPA attend with a mask of the valid tokens.
    The G = H // Hkv query heads of one kv head ride as G query positions of that head (the
    standard decode trick), so K and V are read once per kv head."""
    B, H, _ = q.shape
    _, bs, Hkv, _ = k_cache.shape
    L = block_table.shape[1] * bs
    k = k_cache[block_table].reshape(B, L, Hkv, D).transpose(1, 2)
    v = v_cache[block_table].reshape(B, L, Hkv, D).transpose(1, 2)
    valid = torch.arange(L, device=q.device)[None, :] < seq_lens[:, None]
    out = F.scaled_dot_product_attention(q.reshape(B, Hkv, H // Hkv, D), k, v,
                                         attn_mask=valid[:, None, None, :], scale=sm_scale)
    return out.reshape(B, H, D)
