"""Wrong gather_scatter: the backward adds with a plain load + add + store instead of an atomic.

Two positions of the same program that name the same row both load the old value, both add
their own gradient and both store: one of the two additions is lost. (Across programs the same
race exists on a GPU; the interpreter runs programs one by one, but a single block's duplicate
addresses already lose updates.) Every repeated index comes back too small.
"""
# expect-fail: repeated
# expect-fail: hot_row_heavy

import torch
import triton
import triton.language as tl


@triton.jit
def embedding_kernel(idx_ptr, w_ptr, out_ptr, B, D, w_row_stride,
                     BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    row_ok = rows < B
    mask = row_ok[:, None] & (cols < D)[None, :]
    idx = tl.load(idx_ptr + rows, mask=row_ok, other=0)
    w = tl.load(w_ptr + idx[:, None] * w_row_stride + cols[None, :], mask=mask)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * D + cols[None, :], w, mask=mask)


def embedding(indices, weight):
    B, D = indices.shape[0], weight.shape[1]
    out = torch.empty((B, D), dtype=weight.dtype, device=weight.device)
    block_d = min(triton.next_power_of_2(D), 1024)
    block_b = min(max(1, 4096 // block_d), triton.next_power_of_2(B))
    grid = (triton.cdiv(B, block_b), triton.cdiv(D, block_d))
    embedding_kernel[grid](indices, weight, out, B, D, weight.stride(0),
                           BLOCK_B=block_b, BLOCK_D=block_d)
    return out


@triton.jit
def embedding_backward_kernel(idx_ptr, g_ptr, out_ptr, B, D, g_row_stride,
                              BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    row_ok = rows < B
    mask = row_ok[:, None] & (cols < D)[None, :]
    idx = tl.load(idx_ptr + rows, mask=row_ok, other=0)
    g = tl.load(g_ptr + rows.to(tl.int64)[:, None] * g_row_stride + cols[None, :], mask=mask, other=0.0)
    ptrs = out_ptr + idx[:, None] * D + cols[None, :]
    # BUG: not atomic. Equal indices in the block (or in concurrent programs) race.
    tl.store(ptrs, tl.load(ptrs, mask=mask, other=0.0) + g.to(tl.float32), mask=mask)


def embedding_backward(indices, grad_out, num_embeddings):
    B, D = grad_out.shape
    out = torch.zeros((num_embeddings, D), dtype=torch.float32, device=grad_out.device)
    block_d = min(triton.next_power_of_2(D), 256)
    block_b = min(max(1, 4096 // block_d), triton.next_power_of_2(B))
    grid = (triton.cdiv(B, block_b), triton.cdiv(D, block_d))
    embedding_backward_kernel[grid](indices, grad_out, out, B, D, grad_out.stride(0),
                                    BLOCK_B=block_b, BLOCK_D=block_d)
    return out
