"""paged_decode: attention of one decode step over a paged KV cache, in Triton.

    out[b, h, :] = softmax(sm_scale * q[b, h] . K_b^T) @ V_b

where K_b, V_b are the seq_lens[b] tokens of sequence b, kv head h // (H // Hkv); token t lives in
slot t % 16 of cache block block_table[b, t // 16].

Run `kata grade` in this folder to check your work; `kata hint paged_decode` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, sm_scale,
                        stride_qb, stride_qh, stride_kblk, stride_kslot, stride_khead,
                        stride_vblk, stride_vslot, stride_vhead, stride_table,
                        G: tl.constexpr, D: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    # TODO: attention of one sequence's query heads over its cached tokens.
    # - token t of sequence b is slot t % BLOCK_SIZE of block table[b, t // BLOCK_SIZE]
    # - slots past seq_lens[b] hold garbage: they must not reach the softmax
    # - online softmax: a running max and sum, the accumulator rescaled when the max grows
    # - one program per sequence walking 32768 tokens is correct but leaves the GPU idle: can
    #   several programs share a sequence, each writing a partial result that a second kernel
    #   merges?
    pass


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 block_table: torch.Tensor, seq_lens: torch.Tensor, sm_scale: float) -> torch.Tensor:
    """Return the (B, H, 128) attention output in q's dtype."""
    raise NotImplementedError("paged_decode: allocate the output, launch your kernel(s), return it")
