"""matmul: a tiled GEMM, and the same with a fused bias + activation epilogue, in Triton.

Run `kata grade` in this folder to check your work; `kata hint matmul` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    # TODO: one BLOCK_M x BLOCK_N tile of c per program. Walk K in BLOCK_K steps, loading a
    # tile of a and a tile of b (through both of each one's strides: b may be a transposed
    # view), and accumulate tl.dot(a_tile, b_tile, acc) in float32. Lanes past M, N or K must
    # load 0. Then, on the float32 accumulator: + bias (if HAS_BIAS), the activation ("none",
    # "relu" or "gelu_tanh"), one cast to c's dtype, one masked store.
    pass


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ b (K, N), float16 or bfloat16, accumulated in float32, returned in a's dtype."""
    raise NotImplementedError("matmul: allocate the (M, N) output, launch your kernel")


def matmul_bias_act(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation: str) -> torch.Tensor:
    """activation(a @ b + bias), activation in {"none", "relu", "gelu_tanh"}, in one kernel."""
    raise NotImplementedError("matmul_bias_act: the same kernel, with the epilogue fused")
