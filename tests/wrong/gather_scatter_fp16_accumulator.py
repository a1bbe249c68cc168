"""Wrong gather_scatter: the backward accumulates in grad_out's dtype, then widens to float32.

The sums are built with atomics in a (V, D) buffer of grad_out's dtype, and a second kernel
copies that buffer into the float32 result. For float32 gradients that is right; for float16
(and bfloat16) every partial sum is rounded to 11 (8) significant bits, so a row named
thousands of times drifts by far more than float32 reordering could explain.
"""
# expect-fail: hot_row_heavy
# expect-fail: one_row_table
# expect-diagnosis: low_precision

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
def scatter_add_kernel(idx_ptr, g_ptr, acc_ptr, B, D, g_row_stride,
                       BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    row_ok = rows < B
    mask = row_ok[:, None] & (cols < D)[None, :]
    idx = tl.load(idx_ptr + rows, mask=row_ok, other=0)
    g = tl.load(g_ptr + rows.to(tl.int64)[:, None] * g_row_stride + cols[None, :], mask=mask, other=0.0)
    # BUG: acc_ptr has grad_out's dtype: the running sums are rounded to float16 at every add.
    tl.atomic_add(acc_ptr + idx[:, None] * D + cols[None, :], g, mask=mask)


@triton.jit
def widen_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(tl.float32), mask=mask)


def embedding_backward(indices, grad_out, num_embeddings):
    B, D = grad_out.shape
    # BUG: the accumulator is allocated in grad_out's dtype instead of float32.
    acc = torch.zeros((num_embeddings, D), dtype=grad_out.dtype, device=grad_out.device)
    block_d = min(triton.next_power_of_2(D), 256)
    block_b = min(max(1, 4096 // block_d), triton.next_power_of_2(B))
    grid = (triton.cdiv(B, block_b), triton.cdiv(D, block_d))
    scatter_add_kernel[grid](indices, grad_out, acc, B, D, grad_out.stride(0),
                             BLOCK_B=block_b, BLOCK_D=block_d)
    out = torch.empty((num_embeddings, D), dtype=torch.float32, device=grad_out.device)
    n = acc.numel()
    widen_kernel[(triton.cdiv(n, 1024),)](acc, out, n, BLOCK=1024)
    return out
