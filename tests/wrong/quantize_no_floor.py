"""Wrong quantize: scale = amax / QMAX with no 1e-12 floor.

Right for every row with a nonzero value, but an all-zero row gets scale 0, so q = 0 / 0 = NaN
(cast to int8: garbage) and the returned scale is 0 instead of the 1e-12 floor.
"""
# expect-fail: zero_rows
# expect-fail: all_zero

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def quantize_kernel(x_ptr, q_ptr, scale_ptr, n_cols, x_row_stride, q_row_stride,
                    QMAX: tl.constexpr, INTEGER: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    cols = tl.arange(0, BLOCK_N)
    amax = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.max(amax, axis=0) / QMAX  # BUG: no floor: an all-zero row divides 0 by 0
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        v = tl.minimum(tl.maximum(x / scale, -QMAX), QMAX)
        if INTEGER:
            q = ((v + 12582912.0) - 12582912.0).to(tl.int8)  # round half to even, then cast
        else:
            q = v.to(tl.float8e4nv)
        tl.store(q_ptr + row * q_row_stride + offs, q, mask=mask)
    tl.store(scale_ptr + row, scale)


@triton.jit
def dequantize_kernel(q_ptr, scale_ptr, out_ptr, n_cols, q_row_stride, out_row_stride,
                      BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    scale = tl.load(scale_ptr + row)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < n_cols
        q = tl.load(q_ptr + row * q_row_stride + offs, mask=mask, other=0)
        out = q.to(tl.float32) * scale
        tl.store(out_ptr + row * out_row_stride + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def _quantize(x, qdtype, qmax, integer):
    M, N = x.shape
    q = torch.empty((M, N), dtype=qdtype, device=x.device)
    scale = torch.empty((M, 1), dtype=torch.float32, device=x.device)
    quantize_kernel[(M,)](x, q, scale, N, x.stride(0), q.stride(0),
                          QMAX=qmax, INTEGER=integer, BLOCK_N=BLOCK)
    return q, scale


def quantize_fp8_rowwise(x):
    return _quantize(x, torch.float8_e4m3fn, 448.0, False)


def quantize_int8_rowwise(x):
    return _quantize(x, torch.int8, 127.0, True)


def dequantize_int8_rowwise(q, scale, dtype):
    M, N = q.shape
    out = torch.empty((M, N), dtype=dtype, device=q.device)
    dequantize_kernel[(M,)](q, scale, out, N, q.stride(0), out.stride(0), BLOCK_N=BLOCK)
    return out
