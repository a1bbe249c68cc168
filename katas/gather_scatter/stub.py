"""gather_scatter: an embedding's forward (gather rows) and backward (scatter-add rows), in Triton.

    embedding(indices, weight)[b, :] = weight[indices[b], :]
    embedding_backward(indices, grad_out, V)[v, :] = sum of grad_out[b, :] with indices[b] == v

Run `kata grade` in this folder to check your work; `kata hint gather_scatter` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def embedding_kernel(idx_ptr, w_ptr, out_ptr, B, D, w_row_stride,
                     BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr):
    # TODO: copy a tile of BLOCK_B output rows x BLOCK_D columns.
    # - output row b is weight row idx[b]; weight rows may be strided (w_row_stride >= D)
    # - the table can hold more than 2**31 elements: keep element offsets in int64
    # - mask the tail of B and the tail of D
    pass


@triton.jit
def embedding_backward_kernel(idx_ptr, g_ptr, out_ptr, B, D, g_row_stride,
                              CHUNK: tl.constexpr, BLOCK_D: tl.constexpr):
    # TODO: add a chunk of CHUNK gradient rows x BLOCK_D columns into the float32 output rows
    # their indices name.
    # - several positions can name the same row, in this program and in others: the adds race
    # - accumulate in float32, whatever grad_out's dtype
    # - on skewed indices, thousands of atomics on the same row serialise: can a program combine
    #   its repeated indices before it writes?
    pass


def embedding(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Return weight[indices] as a new contiguous (B, D) tensor of weight's dtype."""
    raise NotImplementedError("embedding: allocate the output, launch embedding_kernel, return it")


def embedding_backward(indices: torch.Tensor, grad_out: torch.Tensor, num_embeddings: int) -> torch.Tensor:
    """Return the float32 (num_embeddings, D) gradient of the weight: rows of grad_out summed
    into the rows their indices name; rows never named are 0."""
    raise NotImplementedError(
        "embedding_backward: allocate a zeroed float32 output, launch embedding_backward_kernel, return it"
    )
