"""quantize: row-wise FP8 and INT8 quantization (one float32 scale per row), and INT8
dequantization, computed by Triton kernels.

Run `kata grade` in this folder to check your work; `kata hint quantize` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def quantize_kernel(
    x_ptr, q_ptr, scale_ptr, n_rows, n_cols, x_row_stride, q_row_stride,
    QMAX: tl.constexpr, INTEGER: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # TODO: quantize one row (or a few).
    # - scale = max(max |x| over the WHOLE row / QMAX, 1e-12); rows can be longer than a block
    # - q = x / scale, saturated to [-QMAX, QMAX], rounded to nearest (ties to even)
    # - INTEGER: int8 (a float-to-int cast truncates: round first); else tl.float8e4nv
    # - row i of x starts at x_ptr + i * x_row_stride; compute in float32
    pass


@triton.jit
def dequantize_kernel(q_ptr, scale_ptr, out_ptr, n_rows, n_cols, q_row_stride, out_row_stride,
                      BLOCK_N: tl.constexpr):
    # TODO: out[i, j] = q[i, j] * scale[i], in float32, stored in out's dtype.
    pass


def quantize_fp8_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q: float8_e4m3fn (M, N), scale: float32 (M, 1)) for a 2-D x; scale = max|row| / 448."""
    raise NotImplementedError(
        "quantize_fp8_rowwise: allocate q and scale, launch quantize_kernel, return (q, scale)")


def quantize_int8_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q: int8 (M, N), scale: float32 (M, 1)) for a 2-D x; scale = max|row| / 127."""
    raise NotImplementedError(
        "quantize_int8_rowwise: allocate q and scale, launch quantize_kernel, return (q, scale)")


def dequantize_int8_rowwise(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """q * scale as a new (M, N) tensor of the given dtype."""
    raise NotImplementedError(
        "dequantize_int8_rowwise: allocate the output, launch dequantize_kernel, return it")
