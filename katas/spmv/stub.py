"""spmv: a CSR sparse matrix times a dense vector (spmv) and times a dense matrix (spmm), in Triton.

    spmv(crow_indices, col_indices, values, x)[r]    = sum over row r's nonzeros i of values[i] * x[col_indices[i]]
    spmm(crow_indices, col_indices, values, b)[r, :] = sum over row r's nonzeros i of values[i] * b[col_indices[i], :]

Row r's nonzeros are i = crow_indices[r] .. crow_indices[r + 1] - 1.
Run `kata grade` in this folder to check your work; `kata hint spmv` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def spmv_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, nnz, R, x_stride,
                BLOCK: tl.constexpr):
    # TODO: compute rows of y.
    # - accumulate in float32 whatever the values' dtype; round once, on the store
    # - empty rows must be written too (0)
    # - keep offsets in int64: nnz may exceed 2**31
    # - power-law rows: one program per row leaves the GPU waiting on the longest rows. Can every
    #   program take the same number of nonzeros instead?
    pass


@triton.jit
def spmm_kernel(crow_ptr, col_ptr, val_ptr, b_ptr, out_ptr, nnz, R, N, stride_bk, stride_bn,
                BLOCK: tl.constexpr, BN: tl.constexpr):
    # TODO: compute a tile of rows x BN columns of out.
    # - b's rows may be strided (stride_bk >= N); out is contiguous: row r starts at r * N,
    #   which can pass 2**31 (int64)
    # - the same load-balancing question as spmv
    pass


def spmv(crow_indices: torch.Tensor, col_indices: torch.Tensor, values: torch.Tensor,
         x: torch.Tensor) -> torch.Tensor:
    """Return A @ x as a new (R,) tensor of values' dtype, A the CSR matrix (crow, col, values)."""
    raise NotImplementedError("spmv: allocate y, launch your kernel(s), return y")


def spmm(crow_indices: torch.Tensor, col_indices: torch.Tensor, values: torch.Tensor,
         b: torch.Tensor) -> torch.Tensor:
    """Return A @ b as a new contiguous (R, N) tensor of values' dtype."""
    raise NotImplementedError("spmm: allocate out, launch your kernel(s), return out")
