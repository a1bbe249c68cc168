"""flash_attention: FlashAttention-2 forward and backward, computed by Triton kernels.

Forward:   s = sm_scale * q k^T (causal: keys j <= i only); o = softmax(s) v;
           lse = logsumexp(s) per row (natural log, float32). GQA: query head h reads kv head
           h // (H // Hkv).
Backward:  P = exp(s - lse); dv = P^T do; delta = rowsum(o * do); ds = P * (do v^T - delta);
           dq = sm_scale * ds k; dk = sm_scale * ds^T q (dk, dv summed over each kv head's group).

Run `kata grade` in this folder to check your work; `kata hint flash_attention` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(Q, K, V, O, LSE, qk_scale,
                    sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
                    sob, soh, sos, sod, H, GROUP, S,
                    D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr):
    # TODO: one program = BLOCK_M query rows of one (batch, head). Walk the key blocks with an
    # online softmax (running max, running sum, float32 accumulator, rescaled when the max
    # grows); mask keys past S and, when causal, keys after the row. Store o and lse.
    pass


@triton.jit
def attn_bwd_preprocess_kernel(O, DO, DELTA, sob, soh, sos, sod, sdb, sdh, sds, sdd, H, S,
                               D: tl.constexpr, BLOCK_M: tl.constexpr):
    # TODO: delta[b, h, i] = sum_d o[i, d] * do[i, d] (float32).
    pass


@triton.jit
def attn_bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, qk_scale,
                         sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
                         sdob, sdoh, sdos, sdod, sdkb, sdkh, sdks, sdkd, sdvb, sdvh, sdvs, sdvd,
                         H, HKV, GROUP, S,
                         D: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
                         CAUSAL: tl.constexpr):
    # TODO: one program = BLOCK_N keys of one (batch, kv head). For every query head of its
    # group and every query block: recompute P from q, k and lse; dv += P^T do;
    # ds = P * (do v^T - delta); dk += ds^T q. Store dk * sm_scale and dv.
    pass


@triton.jit
def attn_bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, sm_scale, qk_scale,
                       sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd,
                       sdob, sdoh, sdos, sdod, sdqb, sdqh, sdqs, sdqd, H, GROUP, S,
                       D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       CAUSAL: tl.constexpr):
    # TODO: one program = BLOCK_M query rows of one (batch, head): dq += ds k over the keys
    # they see (mind the last, partial key block). Store dq * sm_scale.
    pass


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float):
    """(o, lse): o (B, H, S, D) in q's dtype, lse (B, H, S) float32 (natural log)."""
    raise NotImplementedError("attention: allocate o and lse, launch the forward kernel")


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                       lse: torch.Tensor, do: torch.Tensor, causal: bool, sm_scale: float):
    """(dq, dk, dv): dq like q, dk and dv like k (summed over each kv head's query heads)."""
    raise NotImplementedError(
        "attention_backward: launch the preprocess (delta), the dk/dv kernel and the dq kernel")
