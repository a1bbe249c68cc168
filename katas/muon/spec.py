"""muon: inputs, ground truth and baseline of Newton-Schulz orthogonalization.

Case parameters (kata.yaml):
  M, N        the shape of g
  steps       the number of Newton-Schulz iterations (a scalar argument)
  scale       optional: g = scale * randn (default 1.0): the normalisation must remove it
  layout      optional: "t" makes g a transposed view, g = base.t() of a contiguous (N, M)
              tensor (g.stride() == (1, M)); "slice" makes g a column slice base[:, :N] of a
              wider (M, row_stride) tensor
  row_stride  with layout "slice": the distance between rows, in elements
  zeros       optional: g is all zeros (the output is all zeros: the 1e-7 keeps 0 / 0 away)

The inputs are always full rank (a Gaussian matrix). A rank-deficient g has zero singular values
that the float64 ground truth keeps at exactly zero, while any bf16 run turns its rounding noise
into tiny singular values that the iteration then blows up toward 1 (that is what it is for): the
normwise comparison against float64 would then measure the noise, not the kernel.
"""

import torch

# Muon's quintic: X <- a X + (b A + c A^2) X with A = X X^T.
A_COEF, B_COEF, C_COEF = 3.4445, -4.7750, 2.0315
EPS = 1e-7


def make_inputs(case, dtype, device, generator):
    M, N = case["M"], case["N"]
    layout = case.get("layout", "contiguous")
    if layout == "t":
        shape = (N, M)
    elif layout == "slice":
        shape = (M, case["row_stride"])
    else:
        shape = (M, N)
    base = case.get("scale", 1.0) * torch.randn(shape, dtype=torch.float32, device=device,
                                                generator=generator)
    if case.get("zeros"):
        base.zero_()
    base = base.to(dtype)
    if layout == "t":
        g = base.t()  # (M, N), g.stride() == (1, M): columns are contiguous, rows are not
    elif layout == "slice":
        g = base[:, :N]  # (M, N), g.stride() == (row_stride, 1)
    else:
        g = base
    return {"g": g, "steps": case["steps"]}


def reference(g, steps):
    # The same iteration as Muon's, in float64 from the very values the kernel sees (g as given,
    # bf16 or fp32). No intermediate is rounded, so this is the iteration's exact result up to
    # float64 rounding; a bf16 run lands a few percent away, normwise (kata.yaml says how far).
    X = g.double()
    X = X / (torch.linalg.matrix_norm(X) + EPS)
    tall = g.shape[0] > g.shape[1]
    if tall:
        X = X.T
    for _ in range(steps):
        A = X @ X.T
        B = B_COEF * A + C_COEF * (A @ A)
        X = A_COEF * X + B @ X
    return X.T if tall else X


def baseline(g, steps):
    # Muon's own implementation (eager PyTorch, bf16 matmuls on cuBLAS): the X X^T product is
    # computed whole, and b*A + c*A@A and a*X + B@X each take a matmul plus elementwise kernels.
    X = g.bfloat16()
    X = X / (X.norm() + EPS)
    tall = g.size(0) > g.size(1)
    if tall:
        X = X.mT
    for _ in range(steps):
        A = X @ X.mT
        B = B_COEF * A + C_COEF * A @ A
        X = A_COEF * X + B @ X
    return X.mT if tall else X
