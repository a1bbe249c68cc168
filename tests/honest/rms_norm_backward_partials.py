"""Honest variant: each program takes ROWS consecutive rows (2-D tiles), writes its rows' dx and
one float32 row of dweight partials; a second kernel sums the partials column by column (a
tree order across programs, sequential within one)."""
# panel-cases: large_magnitude, small, tiny_rows

import torch
import triton
import triton.language as tl


@triton.jit
def _bwd(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, part_ptr, M, N, dy_stride, x_stride,
         ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    rmask = rows < M
    rows64 = rows.to(tl.int64)
    r = tl.load(rstd_ptr + rows, mask=rmask, other=0.0)
    acc = tl.zeros([ROWS], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = rmask[:, None] & (cols[None, :] < N)
        dy = tl.load(dy_ptr + rows64[:, None] * dy_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += tl.sum(dy * w[None, :] * x, axis=1)
    c = acc / N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = rmask[:, None] & (cols[None, :] < N)
        dy = tl.load(dy_ptr + rows64[:, None] * dy_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        rr = r[:, None]
        dx = rr * dy * w[None, :] - x * (rr * rr * rr) * c[:, None]
        tl.store(dx_ptr + rows64[:, None] * N + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        tl.store(part_ptr + pid * N + cols, tl.sum(dy * x * rr, axis=0), mask=cols < N)


@triton.jit
def _sum_partials(part_ptr, dw_ptr, P, N, BLOCK: tl.constexpr, PB: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, P, PB):
        ps = start + tl.arange(0, PB)
        mask = (ps[:, None] < P) & (cols[None, :] < N)
        acc += tl.sum(tl.load(part_ptr + ps[:, None] * N + cols[None, :], mask=mask, other=0.0), axis=0)
    tl.store(dw_ptr + cols, acc, mask=cols < N)


def rms_norm_backward(dy, x, weight, rstd):
    M, N = x.shape
    BLOCK = min(512, triton.next_power_of_2(N))
    ROWS = 4 if M >= 64 else 1
    P = triton.cdiv(M, ROWS)
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    part = torch.empty((P, N), dtype=torch.float32, device=x.device)
    dw = torch.empty(N, dtype=torch.float32, device=x.device)
    _bwd[(P,)](dy, x, weight, rstd, dx, part, M, N, dy.stride(0), x.stride(0), ROWS=ROWS, BLOCK=BLOCK)
    _sum_partials[(triton.cdiv(N, 128),)](part, dw, P, N, BLOCK=128, PB=16)
    return dx, dw
