"""Honest variant: several short rows per program (a ROWS x BLOCK tile), the statistic through
tl.sum over axis 1 of a 2-D tile, rstd = 1 / sqrt(...) computed once per row."""
# panel-cases: large_magnitude, tiny_rows, small, strided_rows

import torch
import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, M, N, x_stride, y_stride, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < M
    rows64 = rows.to(tl.int64)
    ss = tl.zeros([ROWS], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = rmask[:, None] & (cols[None, :] < N)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        ss += tl.sum(x * x, axis=1)
    rstd = 1.0 / tl.sqrt(ss / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = rmask[:, None] & (cols[None, :] < N)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows64[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK = min(1024, triton.next_power_of_2(N))
    ROWS = max(1, min(8, 1024 // BLOCK))
    _rms[(triton.cdiv(M, ROWS),)](x, weight, y, M, N, x.stride(0), y.stride(0), eps, ROWS=ROWS, BLOCK=BLOCK)
    return y
