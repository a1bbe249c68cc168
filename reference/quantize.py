"""Reference solution for the quantize kata.

What it teaches: quantization is a row-wise reduction followed by an element-wise epilogue, the
same shape as RMSNorm. Each row gets one float32 scale, chosen so that its largest magnitude
maps onto the largest code of the target format (448 for FP8 e4m3, 127 for INT8); every element
is then divided by that scale and rounded into the narrow format. A matmul on the quantized
operands multiplies the scales back in.

Three ideas carry the kernels:

1. The row must be reduced before any output is written: max |x| over the whole row gives the
   scale, and only then can q be computed. Rows that fit in registers are loaded once, reduced
   and quantized in place (one read, one write: bandwidth bound). Longer rows are streamed
   twice: a first pass for the max, a second that re-reads the row (mostly from L2) to quantize.
   Padding lanes load 0, which never wins a max of magnitudes.
2. The edges of the number line. An all-zero row has amax = 0: without the 1e-12 floor on the
   scale, q = 0 / 0 = NaN. The reciprocal is taken of the *floored* scale, so it is at most
   1e12 and never inf. The quotient is formed as x * (1 / scale), never (x * QMAX) / amax,
   whose product overflows float32 for |x| above ~2.7e36.
3. Rounding. A float-to-int cast truncates toward zero (2.7 -> 2), so q is rounded first, to
   nearest with ties to even like torch.round: adding and subtracting 1.5 * 2**23 in float32
   pushes the fraction bits out of the mantissa, and the hardware's own round-to-nearest-even
   does the work (valid for |v| <= 2**22; v is clamped to 127 first). It runs the same on the
   GPU and on the CPU interpreter, where libdevice's rint is not available. FP8 needs no trick:
   the float32 -> e4m3 conversion itself rounds to nearest even; clamping to +-448 first makes
   it saturate instead of overflowing to NaN (e4m3fn has no inf).
"""

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0
INT8_MAX = 127.0
SCALE_FLOOR = 1e-12
# Largest row (rounded up to a power of two) held whole in registers. At 32768 elements a
# program of 16 warps holds 64 float32 values per thread: no spills (as in the softmax kata).
MAX_FUSED_BLOCK = 32768
# Short rows: several share a program, so each program still moves ~4096 elements.
TILE_ELEMENTS = 4096
# Block of the two-pass kernel for rows longer than MAX_FUSED_BLOCK.
STREAM_BLOCK = 8192


@triton.jit
def _encode(v, QMAX: tl.constexpr, INTEGER: tl.constexpr):
    """float32 values already divided by the scale -> the narrow format, saturated."""
    v = tl.minimum(tl.maximum(v, -QMAX), QMAX)
    if INTEGER:
        # Round to nearest, ties to even: 12582912.0 = 1.5 * 2**23. After the add, the result's
        # last mantissa bit is worth 1, so the float32 addition rounds v to an integer; the
        # subtraction is exact. The cast then only converts an integer-valued float.
        q = ((v + 12582912.0) - 12582912.0).to(tl.int8)
    else:
        q = v.to(tl.float8e4nv)
    return q


@triton.jit
def _row_scale(amax, QMAX: tl.constexpr):
    # The floor keeps all-zero (and tiny) rows finite: scale >= 1e-12, so 1 / scale <= 1e12.
    return tl.maximum(amax / QMAX, 1e-12)


@triton.jit
def quantize_rows_kernel(
    x_ptr, q_ptr, scale_ptr, n_rows, n_cols, x_row_stride, q_row_stride,
    QMAX: tl.constexpr, INTEGER: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # Each program owns BLOCK_M consecutive rows, each held whole: BLOCK_N >= n_cols.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    # int64 row offsets: M * stride can pass 2**31. Rows may be strided; columns are not.
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    # Padding (and rows past the end) load 0: it never wins a max of magnitudes.
    scale = _row_scale(tl.max(tl.abs(x), axis=1), QMAX)
    # One division per row, then a multiply per element.
    q = _encode(x * (1.0 / scale)[:, None], QMAX, INTEGER)
    tl.store(q_ptr + rows64[:, None] * q_row_stride + cols[None, :], q, mask=mask)
    tl.store(scale_ptr + rows, scale, mask=row_ok)


@triton.jit
def quantize_long_rows_kernel(
    x_ptr, q_ptr, scale_ptr, n_cols, x_row_stride, q_row_stride,
    QMAX: tl.constexpr, INTEGER: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # One program per row; the row is longer than a block, so it is streamed twice.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    q_row = q_ptr + row * q_row_stride
    cols = tl.arange(0, BLOCK_N)

    # Pass 1: the max |x| of the *whole* row. Every lane keeps its own running max; the lanes
    # are reduced once at the end, not in every iteration.
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, tl.abs(x))
    scale = _row_scale(tl.max(acc, axis=0), QMAX)
    inv_scale = 1.0 / scale

    # Pass 2: the scale is known; read the row again (this row was just read: mostly L2 hits).
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(q_row + offs, _encode(x * inv_scale, QMAX, INTEGER), mask=mask)
    tl.store(scale_ptr + row, scale)


@triton.jit
def dequantize_kernel(
    q_ptr, scale_ptr, out_ptr, n_rows, n_cols, q_row_stride, out_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # Element-wise: a 2-D grid of tiles, each BLOCK_M rows by BLOCK_N columns.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)
    scale = tl.load(scale_ptr + rows, mask=row_ok, other=0.0)
    q = tl.load(q_ptr + rows64[:, None] * q_row_stride + cols[None, :], mask=mask, other=0)
    # int8 -> float32 is exact; one float32 product, one rounding to the output dtype.
    out = q.to(tl.float32) * scale[:, None]
    tl.store(out_ptr + rows64[:, None] * out_row_stride + cols[None, :],
             out.to(out_ptr.dtype.element_ty), mask=mask)


def _quantize_rowwise(x: torch.Tensor, qdtype: torch.dtype, qmax: float, integer: bool):
    assert x.ndim == 2, "expects a 2-D tensor"
    if x.stride(1) != 1:
        # The kernels read rows with unit stride (coalesced); the rows themselves may be strided.
        x = x.contiguous()
    n_rows, n_cols = x.shape
    q = torch.empty((n_rows, n_cols), dtype=qdtype, device=x.device)
    scale = torch.empty((n_rows, 1), dtype=torch.float32, device=x.device)
    if n_rows == 0:
        return q, scale

    block_n = triton.next_power_of_2(max(n_cols, 1))
    if block_n <= MAX_FUSED_BLOCK:
        block_m = min(max(1, TILE_ELEMENTS // block_n), triton.next_power_of_2(n_rows))
        # About 32 values per thread, 4 to 16 warps: 8 warps for an 8192-element row.
        num_warps = min(16, max(4, block_m * block_n // 1024))
        quantize_rows_kernel[(triton.cdiv(n_rows, block_m),)](
            x, q, scale, n_rows, n_cols, x.stride(0), q.stride(0),
            QMAX=qmax, INTEGER=integer, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
        )
    else:
        quantize_long_rows_kernel[(n_rows,)](
            x, q, scale, n_cols, x.stride(0), q.stride(0),
            QMAX=qmax, INTEGER=integer, BLOCK_N=STREAM_BLOCK, num_warps=16,
        )
    return q, scale


def quantize_fp8_rowwise(x: torch.Tensor):
    return _quantize_rowwise(x, torch.float8_e4m3fn, FP8_MAX, False)


def quantize_int8_rowwise(x: torch.Tensor):
    return _quantize_rowwise(x, torch.int8, INT8_MAX, True)


def dequantize_int8_rowwise(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype):
    assert q.ndim == 2 and scale.shape == (q.shape[0], 1)
    if q.stride(1) != 1:
        q = q.contiguous()
    n_rows, n_cols = q.shape
    out = torch.empty((n_rows, n_cols), dtype=dtype, device=q.device)
    if n_rows == 0 or n_cols == 0:
        return out
    # Tiles of ~8192 elements: up to 2048 columns wide, as many rows as make up the rest.
    block_n = min(triton.next_power_of_2(n_cols), 2048)
    block_m = min(max(1, 8192 // block_n), triton.next_power_of_2(n_rows))
    grid = (triton.cdiv(n_rows, block_m), triton.cdiv(n_cols, block_n))
    dequantize_kernel[grid](
        q, scale, out, n_rows, n_cols, q.stride(0), out.stride(0),
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8,
    )
    return out
