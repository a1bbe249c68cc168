"""matmul_lowp: FP8 (row-wise scales, bf16 out) and INT8 (exact int32 out) GEMMs, in Triton.

    matmul_fp8(a, b, a_scale, b_scale) = (a * a_scale) @ (b * b_scale)   -> bfloat16 (M, N)
    matmul_int8(a, b)                  = a @ b, exactly                  -> int32 (M, N)

Run `kata grade` in this folder to check your work; `kata hint matmul_lowp` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def lowp_matmul_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    SCALED: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # TODO: one BLOCK_M x BLOCK_N tile of c, walking K in BLOCK_K steps with tl.dot.
    # - the accumulator: float32 for fp8 tiles; for int8 tiles, what does tl.dot return?
    # - K need not be a multiple of BLOCK_K (or 32): what must the lanes past K load?
    # - M can be 1 (tl.dot needs at least 16 rows per tile); mask the M and N tails
    # - honour every stride (b is column-major for fp8, either layout for int8)
    # - a can hold more than 2**31 elements: widen row offsets to int64
    # - SCALED (fp8): apply a_scale[i] * b_scale[j] in the epilogue, not in the K loop
    pass


def matmul_fp8(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor,
               b_scale: torch.Tensor) -> torch.Tensor:
    """(a * a_scale) @ (b * b_scale) as a new bfloat16 (M, N) tensor.

    a: float8_e4m3fn (M, K); b: float8_e4m3fn (K, N), column-major (b.stride() == (1, K));
    a_scale: float32 (M, 1); b_scale: float32 (1, N).
    """
    raise NotImplementedError(
        "matmul_fp8: allocate a bfloat16 output, launch lowp_matmul_kernel, return it")


def matmul_int8(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b as a new int32 (M, N) tensor, exactly. a: int8 (M, K); b: int8 (K, N)."""
    raise NotImplementedError(
        "matmul_int8: allocate an int32 output, launch lowp_matmul_kernel, return it")
