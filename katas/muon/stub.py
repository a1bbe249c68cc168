"""muon: Muon's Newton-Schulz orthogonalization, computed by Triton kernels.

    a, b, c = 3.4445, -4.7750, 2.0315
    X = g / (||g||_F + 1e-7) in bf16;  X = X^T if M > N
    steps times:  A = X X^T;  B = b A + c A A;  X = a X + B X
    return X (transposed back if M > N), bf16, shape (M, N)

Run `kata grade` in this folder to check your work; `kata hint muon` if you are stuck.
"""

import torch
import triton
import triton.language as tl

NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315
EPS = 1e-7


@triton.jit
def sum_squares_kernel(g_ptr, partial_ptr, R, C, stride_r, stride_c,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # TODO: this program's share of sum(g ** 2), in float32, into partial_ptr[pid]. g may be
    # strided (a transposed view, a column slice): use both strides.
    pass


@triton.jit
def normalize_kernel(g_ptr, partial_ptr, n_partials, x_ptr, R, C, g_stride_r, g_stride_c,
                     x_stride_r, x_stride_c, eps, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr):
    # TODO: X = g / (sqrt(sum of the partials) + eps), stored in bf16. For a tall g, hand in g^T
    # (the same pointer with its strides swapped).
    pass


@triton.jit
def gram_kernel(x_ptr, c_ptr, out_ptr, R, K, stride_x, stride_c, stride_out, alpha, beta,
                HAS_C: tl.constexpr, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP: tl.constexpr, DOT_F32: tl.constexpr):
    # TODO: out = alpha * X X^T + beta * C, a symmetric (R, R) result: compute only the tiles on
    # and above the diagonal and store each one at (m, n) and, transposed, at (n, m).
    # Accumulate in float32. DOT_F32 (the CPU interpreter): widen the bf16 tiles to float32
    # before tl.dot, which cannot multiply bf16 there.
    pass


@triton.jit
def update_kernel(b_ptr, x_ptr, out_ptr, R, C, stride_b, stride_x, out_stride_r, out_stride_c,
                  alpha, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP: tl.constexpr, DOT_F32: tl.constexpr):
    # TODO: out = alpha * X + B @ X, the axpy fused into the GEMM's epilogue.
    pass


def newton_schulz(g: torch.Tensor, steps: int) -> torch.Tensor:
    """Muon's orthogonalization of g (M, N), float32 or bf16, possibly strided: a new bf16 (M, N)
    tensor. X, A and B are bf16 between kernels; every product accumulates in float32."""
    raise NotImplementedError(
        "newton_schulz: reduce ||g||_F, write X in bf16, then per step two Gram products and an "
        "update, all in your kernels")
