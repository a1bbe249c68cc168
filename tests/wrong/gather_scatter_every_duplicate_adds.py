"""Wrong gather_scatter: the backward combines repeated indices, then lets every repeat add the sum.

Each program sums the rows of its chunk that share an index (a 0/1 matrix product), which is
the right idea: one atomic per distinct index instead of one per occurrence. But the atomic is
issued by every position, not only by the first occurrence of each index, so an index that
appears k times in a chunk adds its chunk sum k times.
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
                              CHUNK: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    pos = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    valid = pos < B
    col_ok = cols < D
    idx = tl.load(idx_ptr + pos, mask=valid, other=-1)
    g = tl.load(g_ptr + pos.to(tl.int64)[:, None] * g_row_stride + cols[None, :],
                mask=valid[:, None] & col_ok[None, :], other=0.0)
    same = idx[:, None] == idx[None, :]
    combined = tl.dot(same.to(g.dtype), g, input_precision=PRECISION)
    # BUG: every position adds its index's chunk sum; only the first occurrence should.
    tl.atomic_add(out_ptr + idx[:, None] * D + cols[None, :], combined,
                  mask=valid[:, None] & col_ok[None, :])


def embedding_backward(indices, grad_out, num_embeddings):
    B, D = grad_out.shape
    out = torch.zeros((num_embeddings, D), dtype=torch.float32, device=grad_out.device)
    chunk = 64
    precision = "tf32x3" if grad_out.dtype == torch.float32 else "tf32"
    block_d = min(max(triton.next_power_of_2(D), 16), 64)
    grid = (triton.cdiv(B, chunk), triton.cdiv(D, block_d))
    embedding_backward_kernel[grid](indices, grad_out, out, B, D, grad_out.stride(0),
                                    CHUNK=chunk, BLOCK_D=block_d, PRECISION=precision)
    return out
