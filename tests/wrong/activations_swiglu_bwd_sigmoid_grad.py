"""Wrong activations: swiglu_backward uses sigmoid's derivative s * (1 - s) for silu's.

silu(g) = g * sigmoid(g), so by the product rule silu'(g) = s + g * s * (1 - s)
= s * (1 + g * (1 - s)). grad_gate is wrong almost everywhere; grad_up is right.
"""
# expect-fail: small
# expect-fail: many_blocks_odd

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if TANH:
        z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        cdf = 1.0 / (1.0 + tl.exp(-2.0 * z))  # 0.5 * (1 + tanh(z)) == sigmoid(2z)
    else:
        cdf = 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, (x * cdf).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def silu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x / (1.0 + tl.exp(-x))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_kernel(g_ptr, u_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def swiglu_backward_kernel(g_ptr, u_ptr, dy_ptr, dg_ptr, du_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = 1.0 / (1.0 + tl.exp(-g))
    dsilu = s * (1.0 - s)  # BUG: that is sigmoid's derivative, not silu's
    tl.store(dg_ptr + offs, (dy * u * dsilu).to(dg_ptr.dtype.element_ty), mask=mask)
    tl.store(du_ptr + offs, (dy * g * s).to(du_ptr.dtype.element_ty), mask=mask)


def _grid(n):
    return (triton.cdiv(n, BLOCK),)


def relu(x):
    out = torch.empty_like(x)
    relu_kernel[_grid(x.numel())](x, out, x.numel(), BLOCK=BLOCK)
    return out


def gelu(x, approximate):
    out = torch.empty_like(x)
    gelu_kernel[_grid(x.numel())](x, out, x.numel(), TANH=approximate == "tanh", BLOCK=BLOCK)
    return out


def silu(x):
    out = torch.empty_like(x)
    silu_kernel[_grid(x.numel())](x, out, x.numel(), BLOCK=BLOCK)
    return out


def swiglu(gate, up):
    out = torch.empty_like(gate)
    swiglu_kernel[_grid(gate.numel())](gate, up, out, gate.numel(), BLOCK=BLOCK)
    return out


def swiglu_backward(gate, up, grad_out):
    grad_gate = torch.empty_like(gate)
    grad_up = torch.empty_like(up)
    swiglu_backward_kernel[_grid(gate.numel())](gate, up, grad_out, grad_gate, grad_up,
                                                gate.numel(), BLOCK=BLOCK)
    return grad_gate, grad_up
