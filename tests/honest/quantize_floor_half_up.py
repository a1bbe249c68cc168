"""Honest variant: the scale as amax * (1 / QMAX) (a reciprocal multiply), q = x / scale by a
true division, and int8 rounding by floor(v + 0.5) (half up, not half to even: the two differ
only on an exact .5, where the kata accepts either neighbour). Two passes over the row in
blocks: the max, then the quotient."""
# panel-cases: huge_values, tiny_rows, strided_small
# On the interpreter only the int8 tasks run (its float32 -> fp8 conversion is not the GPU's):
# tests/gpu/test_gpu_honest_panel.py grades the fp8 task of this file, and bfloat16 inputs.

import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, N, sx, sq, INV_QMAX: tl.constexpr, QMAX: tl.constexpr,
           INT8: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        x = tl.load(x_ptr + row * sx + start + offs, mask=start + offs < N, other=0.0)
        m = tl.maximum(m, tl.abs(x.to(tl.float32)))
    scale = tl.maximum(tl.max(m, axis=0) * INV_QMAX, 1e-12)
    for start in range(0, N, BLOCK):
        mask = start + offs < N
        x = tl.load(x_ptr + row * sx + start + offs, mask=mask, other=0.0).to(tl.float32)
        v = x / scale
        v = tl.minimum(tl.maximum(v, -QMAX), QMAX)
        if INT8:
            q = tl.floor(v + 0.5).to(tl.int8)
        else:
            q = v.to(tl.float8e4nv)
        tl.store(q_ptr + row * sq + start + offs, q, mask=mask)
    tl.store(s_ptr + row, scale)


@triton.jit
def _dequant(q_ptr, s_ptr, o_ptr, N, sq, so, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.load(s_ptr + row)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        q = tl.load(q_ptr + row * sq + cols, mask=cols < N, other=0).to(tl.float32)
        tl.store(o_ptr + row * so + cols, (q * s).to(o_ptr.dtype.element_ty), mask=cols < N)


def _run(x, dtype, qmax, int8):
    M, N = x.shape
    q = torch.empty((M, N), dtype=dtype, device=x.device)
    s = torch.empty((M, 1), dtype=torch.float32, device=x.device)
    _quant[(M,)](x, q, s, N, x.stride(0), q.stride(0), INV_QMAX=1.0 / qmax, QMAX=qmax,
                 INT8=int8, BLOCK=min(4096, triton.next_power_of_2(N)))
    return q, s


def quantize_fp8_rowwise(x):
    return _run(x, torch.float8_e4m3fn, 448.0, False)


def quantize_int8_rowwise(x):
    return _run(x, torch.int8, 127.0, True)


def dequantize_int8_rowwise(q, scale, dtype):
    M, N = q.shape
    out = torch.empty((M, N), dtype=dtype, device=q.device)
    _dequant[(M,)](q, scale, out, N, q.stride(0), out.stride(0), BLOCK=min(4096, triton.next_power_of_2(N)))
    return out
