"""Reference solution for the gather_scatter kata.

What it teaches: indirect memory access, in both directions.

- embedding (gather): out[b, :] = weight[indices[b], :]. Every output row is a copy of one weight
  row chosen by an index the kernel reads from memory. There is no arithmetic at all, so the only
  goal is to move bytes at full bandwidth: wide tiles, 16-byte vector accesses along a row, and
  64-bit address arithmetic. A weight of V * D > 2**31 elements (a 4 GB bf16 table) is ordinary
  today, and `index * D` computed in int32 wraps around and reads some other row, or faults.

- embedding_backward (scatter-add): grad_weight[v, :] = sum of grad_out[b, :] over every b with
  indices[b] == v, and 0 for rows never named. Many b's write the same row, so the writes race:
  a plain load-add-store loses updates, and tl.atomic_add is the tool. But atomics on one address
  serialise in the L2 cache, and real index streams are skewed (padding tokens, popular items):
  when half the lookups hit a handful of rows, thousands of atomics queue up on those rows while
  the rest of the GPU idles. That is what makes `zeros().index_add_()` slow on skewed indices.

  The cure is to combine repeats locally before touching memory. Each program owns a chunk of
  CHUNK consecutive indices and a tile of BLOCK_D columns. Inside the chunk it sums the rows whose
  indices are equal, and only the first occurrence of each distinct index issues an atomic, with
  the sum. A hot row that appears k times in a chunk costs one atomic instead of k.

  How do you "sum the rows with equal indices" in registers, without sorting? With a matrix
  product: S[i, j] = (idx[i] == idx[j]) is a CHUNK x CHUNK matrix of zeros and ones, and
  (S @ G)[i, :] = sum of G[j, :] over all j with idx[j] == idx[i]. tl.dot runs it on the tensor
  cores, which a memory-bound kernel leaves idle anyway. The ones and zeros are exact in every
  dtype and the products accumulate in float32, so nothing is lost: for fp16/bf16 gradients the
  result is the float32 sum; for float32 gradients we ask for input_precision="tf32x3" (three
  tf32 products that recover about 22 bits of each value) because plain tf32 keeps only 10.

  Accumulation is always float32, in the output itself: an fp16 accumulator loses everything
  below 1/1000 of a running sum, and a hot row sums thousands of terms. The output must start at
  zero (torch.zeros: rows never named stay 0), and the float32 atomics make the order of the
  additions, and so the last bits of the result, vary from run to run: the kata's tolerance allows
  for that reordering.
"""

import torch
import triton
import triton.language as tl

# Forward: elements of the output each program copies (a tile of BLOCK_B rows x BLOCK_D columns).
# 8192 elements is 16 KB of bf16 or 32 KB of float32 in flight per program: enough to keep the
# memory system busy, small enough that many programs fit on one SM.
GATHER_TILE = 8192
GATHER_MAX_BLOCK_D = 1024

# Backward: indices combined per program, and the column tile. tl.dot needs every dimension
# >= 16. A larger chunk merges more repeats of a hot row (fewer atomics) but costs CHUNK
# multiply-adds per gradient element on the tensor cores; 128 (64 for float32, whose tf32x3
# product costs three) keeps that well below the memory time.
SCATTER_CHUNK_16BIT = 128
SCATTER_CHUNK_FP32 = 64
SCATTER_MAX_BLOCK_D = 64


@triton.jit
def embedding_kernel(
    idx_ptr, w_ptr, out_ptr,
    B, D, w_row_stride,
    BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_b = tl.program_id(0)
    pid_d = tl.program_id(1)
    rows = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    row_ok = rows < B
    mask = row_ok[:, None] & (cols < D)[None, :]
    # The indices are int64 in memory, and stay int64: idx * w_row_stride can pass 2**31.
    idx = tl.load(idx_ptr + rows, mask=row_ok, other=0)
    w = tl.load(w_ptr + idx[:, None] * w_row_stride + cols[None, :], mask=mask)
    # Output rows are contiguous; widen before multiplying so B * D may pass 2**31 too.
    out_rows = rows.to(tl.int64)
    tl.store(out_ptr + out_rows[:, None] * D + cols[None, :], w, mask=mask)


@triton.jit
def embedding_backward_kernel(
    idx_ptr, g_ptr, out_ptr,
    B, D, g_row_stride,
    CHUNK: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
):
    pid_c = tl.program_id(0)
    pid_d = tl.program_id(1)
    pos = pid_c * CHUNK + tl.arange(0, CHUNK)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    valid = pos < B
    col_ok = cols < D

    # Positions past B get index -1: never equal to a real index, and never written.
    idx = tl.load(idx_ptr + pos, mask=valid, other=-1)
    g = tl.load(
        g_ptr + pos.to(tl.int64)[:, None] * g_row_stride + cols[None, :],
        mask=valid[:, None] & col_ok[None, :], other=0.0,
    )

    # same[i, j]: do positions i and j of the chunk name the same row?
    same = idx[:, None] == idx[None, :]
    # combined[i, :] = sum over j with idx[j] == idx[i] of g[j, :], in float32.
    combined = tl.dot(same.to(g.dtype), g, input_precision=PRECISION)

    # Only the first occurrence of each index in the chunk writes; the others are already in
    # its sum. "First" = no earlier position j < i holds the same index.
    lane = tl.arange(0, CHUNK)
    earlier = lane[None, :] < lane[:, None]
    n_earlier = tl.sum((same & earlier).to(tl.int32), axis=1)
    first = valid & (n_earlier == 0)

    # Other chunks add into the same rows concurrently: atomics. Relaxed ordering is enough
    # (nothing reads the output until the kernel is over) and avoids a fence per atomic.
    tl.atomic_add(
        out_ptr + idx[:, None] * D + cols[None, :], combined,
        mask=first[:, None] & col_ok[None, :], sem="relaxed",
    )


def embedding(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    assert indices.dim() == 1 and weight.dim() == 2
    B = indices.shape[0]
    V, D = weight.shape
    # The kernels walk rows with unit stride; rows of the weight may be strided.
    if weight.stride(1) != 1:
        weight = weight.contiguous()
    indices = indices.contiguous()
    out = torch.empty((B, D), dtype=weight.dtype, device=weight.device)
    if B == 0 or D == 0:
        return out
    block_d = min(triton.next_power_of_2(D), GATHER_MAX_BLOCK_D)
    block_b = min(max(1, GATHER_TILE // block_d), triton.next_power_of_2(B))
    # Axis 0 holds the many row tiles (up to 2**31 - 1 programs); axis 1 the few column tiles.
    grid = (triton.cdiv(B, block_b), triton.cdiv(D, block_d))
    embedding_kernel[grid](
        indices, weight, out, B, D, weight.stride(0),
        BLOCK_B=block_b, BLOCK_D=block_d, num_warps=4,
    )
    return out


def embedding_backward(indices: torch.Tensor, grad_out: torch.Tensor, num_embeddings: int) -> torch.Tensor:
    assert indices.dim() == 1 and grad_out.dim() == 2 and grad_out.shape[0] == indices.shape[0]
    B, D = grad_out.shape
    if grad_out.stride(1) != 1:
        grad_out = grad_out.contiguous()
    indices = indices.contiguous()
    # Zero-filled: rows never named must read 0, and the atomics add into it.
    grad_weight = torch.zeros((num_embeddings, D), dtype=torch.float32, device=grad_out.device)
    if B == 0 or D == 0:
        return grad_weight
    if grad_out.dtype == torch.float32:
        chunk, precision = SCATTER_CHUNK_FP32, "tf32x3"
    else:
        chunk, precision = SCATTER_CHUNK_16BIT, "tf32"  # ignored for 16-bit operands
    # tl.dot needs at least 16 columns; narrower rows (D = 1, 3) just mask the rest.
    block_d = min(max(triton.next_power_of_2(D), 16), SCATTER_MAX_BLOCK_D)
    grid = (triton.cdiv(B, chunk), triton.cdiv(D, block_d))
    embedding_backward_kernel[grid](
        indices, grad_out, grad_weight, B, D, grad_out.stride(0),
        CHUNK=chunk, BLOCK_D=block_d, PRECISION=precision, num_warps=8,
    )
    return grad_weight
