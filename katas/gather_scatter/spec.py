"""gather_scatter: inputs, ground truth and baselines for embedding and embedding_backward.

Case parameters (kata.yaml):
  V             rows of the table (num_embeddings)
  D             columns (the embedding dimension)
  B             number of indices
  hot           optional: this many hot rows (drawn at random) ...
  hot_fraction  ... take this fraction of the indices (default 0.5); the rest are uniform in [0, V)
  last_rows     optional: the last `last_rows` rows (V - 1, V - 2, ...) are named at random positions
  row_stride    optional: distance between rows of the weight (forward) or of grad_out (backward),
                in elements (>= D); the tensor is then a column slice base[:, :D] of a wider one
  extreme       optional (forward): the weight holds +-max, subnormals and -0.0, which a kernel
                that copies values through arithmetic (or through another dtype) changes
"""

import torch
import torch.nn.functional as F


def _indices(case, device, generator):
    V, B = case["V"], case["B"]
    idx = torch.randint(0, V, (B,), device=device, generator=generator)
    hot = case.get("hot", 0)
    if hot:
        rows = torch.randint(0, V, (hot,), device=device, generator=generator)
        pick = torch.rand(B, device=device, generator=generator) < case.get("hot_fraction", 0.5)
        which = torch.randint(0, hot, (B,), device=device, generator=generator)
        idx = torch.where(pick, rows[which], idx)
    last = min(case.get("last_rows", 0), B, V)
    if last:
        where = torch.randperm(B, device=device, generator=generator)[:last]
        idx[where] = V - 1 - torch.arange(last, device=device)
    return idx


def make_inputs(case, dtype, device, generator):
    V, D = case["V"], case["D"]
    row_stride = case.get("row_stride", D)
    # Drawn directly in the target dtype: the int32-overflow case is a 4 GB bf16 table, and a
    # float32 draw of it would need twice that.
    base = torch.randn(V, row_stride, dtype=dtype, device=device, generator=generator)
    if case.get("extreme"):
        info = torch.finfo(dtype)
        specials = torch.tensor([info.max, -info.max, info.tiny, info.tiny / 4, -info.tiny / 2,
                                 -0.0, 0.0, info.eps], dtype=dtype, device=device)
        pick = torch.randint(0, specials.numel(), base.shape, device=device, generator=generator)
        use = torch.rand(base.shape, device=device, generator=generator) < 0.5
        base = torch.where(use, specials[pick], base)
    weight = base[:, :D]
    return {"indices": _indices(case, device, generator), "weight": weight}


def reference(indices, weight):
    # A gather is a copy: the ground truth is the rows themselves, bit for bit. Index first and
    # widen after, so the 4 GB table is never copied.
    return weight.index_select(0, indices)


def baseline(indices, weight):
    return F.embedding(indices, weight)


def make_backward_inputs(case, dtype, device, generator):
    V, D, B = case["V"], case["D"], case["B"]
    row_stride = case.get("row_stride", D)
    indices = _indices(case, device, generator)
    # Scale so every row sum is O(1) however skewed the indices are: with R_max the most
    # repeats of one index, each value is ~ N(0, 1 / R_max). The float32 tolerance can then be
    # absolute (see kata.yaml), and the same for a row named 3 times and one named 250 000 times.
    r_max = int(torch.bincount(indices, minlength=V).max()) if B else 1
    g = torch.randn(B, row_stride, dtype=torch.float32, device=device, generator=generator)
    g = (g * (1.0 / max(r_max, 1) ** 0.5)).to(dtype)
    return {"indices": indices, "grad_out": g[:, :D], "num_embeddings": V}


def backward_reference(indices, grad_out, num_embeddings):
    # Float64 sums of the (already rounded) gradients: what is left in a correct kernel is the
    # float32 rounding of the additions, in whatever order its atomics land.
    out = torch.zeros(num_embeddings, grad_out.shape[1], dtype=torch.float64, device=grad_out.device)
    return out.index_add_(0, indices, grad_out.double())


def backward_baseline(indices, grad_out, num_embeddings):
    # index_add_ wants the source in the output's dtype: float32.
    out = torch.zeros(num_embeddings, grad_out.shape[1], dtype=torch.float32, device=grad_out.device)
    return out.index_add_(0, indices, grad_out.float())
