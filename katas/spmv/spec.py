"""spmv: inputs, float64 ground truth, error scales and baselines of spmv and spmm.

A CSR matrix A of shape (R, C) arrives as three tensors: crow_indices (R + 1, int64),
col_indices (nnz, int64, sorted and distinct within each row) and values (nnz, the case's dtype).

Case parameters (kata.yaml):
  R, C        the matrix's shape
  nnz         its number of nonzeros. The row lengths are a fixed profile (below), only their
              order, the columns and the values are random, so nnz is exact; it is written in
              the case for the cost model, and make_inputs checks it
  max_row     the longest row (an upper bound, checked): the tolerance grows with it
  N           spmm: the columns of b
row lengths (the profile, then shuffled over the rows):
  row_len     [lo, hi]: lengths lo, lo + 1, ..., hi, lo, ... cycled over the rows
  alpha       instead of row_len: a power law. The i-th longest row (i = 1, 2, ...) has
              floor((R / i) ** (1 / (alpha - 1))) entries, at most `cap`: with alpha = 2.5 about
              3% of the rows have 10 or more, and half of them 1
  long_rows   optional: this many rows have `long_len` entries (the hubs of a power law)
  dense_rows  optional: this many rows have all C entries
  empty_frac  optional: this fraction of the rows (the shortest) is empty
  empty_head, empty_tail  optional: the first / last this many rows are empty (not shuffled)
columns and values:
  band        optional: each row's columns lie in a window of `band` columns around the
              diagonal (a banded, PDE-like matrix); default: spread over all C columns
  positive    optional: values, x and b uniform in [0, 1) instead of standard normal: every
              product positive, so sums grow with the row and a float16 accumulator stalls
  log_range   optional [lo, hi]: values and x = +-10**u, u uniform in [lo, hi]: magnitudes
              spread over several decades
  x_stride    spmv, optional: x is x_base[::x_stride], a strided view
  b_row_stride  spmm, optional: b is a column slice base[:, :N] of a (C, b_row_stride) tensor

The ground truth is float64, computed from the very (already rounded) values the kernel sees; a
correct kernel is left with its float32 summation order and one rounding to the output dtype.
"""

import warnings

import torch

# Row lengths and columns are built this many nonzeros at a time (bounded temporaries).
CHUNK = 1 << 24
# spmm's float64 truth is built this many products at a time.
PRODUCTS = 1 << 25


# ----------------------------------------------------------------------------------------------
# The matrix


def row_lengths(case) -> torch.Tensor:
    """The case's row lengths (int64, R), before shuffling: a pure function of the case."""
    R, C = case["R"], case["C"]
    head, tail = case.get("empty_head", 0), case.get("empty_tail", 0)
    n = R - head - tail
    if "alpha" in case:
        rank = torch.arange(1, n + 1, dtype=torch.float64)
        lens = torch.floor((n / rank) ** (1.0 / (case["alpha"] - 1.0))).to(torch.int64)
        lens = lens.clamp(1, case.get("cap", C))
    else:
        lo, hi = case["row_len"]
        lens = lo + torch.arange(n, dtype=torch.int64) % (hi - lo + 1)
    lens = lens.clamp(max=min(case.get("band", C), C))
    at = 0
    for key, length in (("dense_rows", C), ("long_rows", case.get("long_len", 0))):
        k = case.get(key, 0)
        lens[at:at + k] = length
        at += k
    empty = int(case.get("empty_frac", 0.0) * n)
    if empty:
        order = torch.argsort(lens, stable=True)  # the shortest rows become empty
        lens[order[:empty]] = 0
    return lens


def _crow_and_columns(case, device, generator):
    R, C = case["R"], case["C"]
    head = case.get("empty_head", 0)
    lens_mid = row_lengths(case).to(device)
    perm = torch.randperm(lens_mid.numel(), device=device, generator=generator)
    lens = torch.zeros(R, dtype=torch.int64, device=device)
    lens[head:head + lens_mid.numel()] = lens_mid[perm]
    crow = torch.zeros(R + 1, dtype=torch.int64, device=device)
    torch.cumsum(lens, 0, out=crow[1:])
    nnz = int(crow[-1])
    if nnz != case["nnz"]:
        raise ValueError(f"kata.yaml says nnz = {case['nnz']}, the profile gives {nnz}")
    longest = int(lens.max()) if R else 0
    if longest > case["max_row"]:
        raise ValueError(f"kata.yaml says max_row = {case['max_row']}, the profile gives {longest}")

    # Columns: row r's L entries are sorted and distinct, the j-th drawn from the j-th of L equal
    # strata of the row's window (all C columns, or a band around the diagonal).
    width = min(case.get("band", C), C)
    col = torch.empty(nnz, dtype=torch.int64, device=device)
    for start in range(0, nnz, CHUNK):
        k = torch.arange(start, min(start + CHUNK, nnz), device=device)
        row = torch.searchsorted(crow, k, right=True) - 1
        L = lens[row]
        j = k - crow[row]
        center = (row * C) // max(R, 1)
        w0 = (center - width // 2).clamp(0, C - width)
        lo = (j * width) // L
        hi = ((j + 1) * width) // L
        u = torch.rand(k.numel(), device=device, generator=generator, dtype=torch.float64)
        col[start:start + k.numel()] = w0 + lo + torch.floor(u * (hi - lo)).to(torch.int64)
    return crow, col


def _draw(case, n, dtype, device, generator):
    if case.get("positive"):
        v = torch.rand(n, device=device, generator=generator)
    elif "log_range" in case:
        lo, hi = case["log_range"]
        u = lo + (hi - lo) * torch.rand(n, device=device, generator=generator)
        sign = torch.randint(0, 2, (n,), device=device, generator=generator) * 2 - 1
        v = sign * 10.0 ** u
    else:
        v = torch.randn(n, device=device, generator=generator)
    return v.to(dtype)


def make_inputs(case, dtype, device, generator):
    crow, col = _crow_and_columns(case, device, generator)
    values = _draw(case, col.numel(), dtype, device, generator)
    stride = case.get("x_stride", 1)
    x_base = _draw(case, case["C"] * stride, dtype, device, generator)
    return {"crow_indices": crow, "col_indices": col, "values": values, "x": x_base[::stride]}


def make_spmm_inputs(case, dtype, device, generator):
    crow, col = _crow_and_columns(case, device, generator)
    values = _draw(case, col.numel(), dtype, device, generator)
    C, N = case["C"], case["N"]
    row_stride = case.get("b_row_stride", N)
    b_base = _draw(case, C * row_stride, dtype, device, generator).view(C, row_stride)
    return {"crow_indices": crow, "col_indices": col, "values": values, "b": b_base[:, :N]}


# ----------------------------------------------------------------------------------------------
# Ground truth and error scales (float64)


def _rows(crow):
    R = crow.numel() - 1
    return torch.repeat_interleave(torch.arange(R, device=crow.device), crow[1:] - crow[:-1])


def _spmv64(crow, col, values, x, absolute=False):
    v, xv = values.double(), x.double()[col]
    terms = (v * xv).abs() if absolute else v * xv
    y = torch.zeros(crow.numel() - 1, dtype=torch.float64, device=values.device)
    return y.index_add_(0, _rows(crow), terms)


def reference(crow_indices, col_indices, values, x):
    return _spmv64(crow_indices, col_indices, values, x)


def summed_magnitude(crow_indices, col_indices, values, x):
    # |A| @ |x|: the sum of the terms' magnitudes per row, the bound on any summation order's error.
    return _spmv64(crow_indices, col_indices, values, x, absolute=True)


def _spmm64(crow, col, values, b, absolute=False):
    R, N = crow.numel() - 1, b.shape[1]
    out = torch.zeros((R, N), dtype=torch.float64, device=values.device)
    rows = _rows(crow)
    step = max(1, PRODUCTS // max(N, 1))
    for start in range(0, values.numel(), step):
        sl = slice(start, start + step)
        terms = values[sl].double()[:, None] * b[col[sl]].double()
        out.index_add_(0, rows[sl], terms.abs() if absolute else terms)
    return out


def spmm_reference(crow_indices, col_indices, values, b):
    return _spmm64(crow_indices, col_indices, values, b)


def spmm_summed_magnitude(crow_indices, col_indices, values, b):
    return _spmm64(crow_indices, col_indices, values, b, absolute=True)


# ----------------------------------------------------------------------------------------------
# Baselines: torch's CSR tensor, i.e. cuSPARSE's SpMV and SpMM on a GPU.

# Whether torch computes CSR products in a dtype on a device type; found once per (op, device
# type, dtype). Where it cannot (float16 on some builds), the baseline computes in float32 and
# casts back, and the report's baseline time includes those two casts.
_NATIVE = {}


def _csr(crow, col, values, C):
    with warnings.catch_warnings():  # "sparse CSR support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, size=(crow.numel() - 1, C),
                                       check_invariants=False)


def _csr_product(op, crow, col, values, dense):
    key = (op, dense.device.type, values.dtype)
    if _NATIVE.get(key, True):
        try:
            out = _csr(crow, col, values, dense.shape[0]) @ dense
            _NATIVE[key] = True
            return out
        except (RuntimeError, NotImplementedError):
            _NATIVE[key] = False
    out = _csr(crow, col, values.float(), dense.shape[0]) @ dense.float()
    return out.to(values.dtype)


def baseline(crow_indices, col_indices, values, x):
    return _csr_product("mv", crow_indices, col_indices, values, x)


def spmm_baseline(crow_indices, col_indices, values, b):
    return _csr_product("mm", crow_indices, col_indices, values, b)
