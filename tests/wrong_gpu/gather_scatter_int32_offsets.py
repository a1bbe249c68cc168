"""Wrong gather_scatter: the forward narrows the indices to int32, so index * row_stride wraps.

"Indices fit in int32, and int32 math is cheaper" - true of the indices, false of the offsets:
for a table of more than 2**31 elements (a 4.3 GB bf16 table, 524 200 x 4097), the offset of
the last rows, index * 4097, passes 2**31 and wraps to a negative number. The load then reads
far before the table: a CUDA illegal-address fault, or some other row.

A GPU-only bug: the interpreter's cases are far too small to overflow, and it passes them all
(tests/test_wrong_solutions.py checks that); tests/gpu/test_gpu_wrong.py checks that the
gpu_int32_overflow case catches it.
"""
# expect-fail: gpu_int32_overflow

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
    # BUG: int32 indices make idx * w_row_stride an int32 product, which wraps past 2**31.
    idx = tl.load(idx_ptr + rows, mask=row_ok, other=0).to(tl.int32)
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
    tl.atomic_add(out_ptr + idx[:, None] * D + cols[None, :], g.to(tl.float32), mask=mask)


def embedding_backward(indices, grad_out, num_embeddings):
    B, D = grad_out.shape
    out = torch.zeros((num_embeddings, D), dtype=torch.float32, device=grad_out.device)
    block_d = min(triton.next_power_of_2(D), 256)
    block_b = min(max(1, 4096 // block_d), triton.next_power_of_2(B))
    grid = (triton.cdiv(B, block_b), triton.cdiv(D, block_d))
    embedding_backward_kernel[grid](indices, grad_out, out, B, D, grad_out.stride(0),
                                    BLOCK_B=block_b, BLOCK_D=block_d)
    return out
