"""Reference solution for the activations kata.

What it teaches: element-wise kernels whose cost is not only bytes. relu, gelu, silu and swiglu
read every input element once and write every output element once, so they are memory bound in
principle: on an H100 or H200 the whole budget is the time to stream the bytes. But at 4 TB/s
each SM must finish a bf16 element (2 bytes in, 2 out) about every quarter of a clock cycle;
an SM issues 128 thread-instructions a cycle, so that leaves about 30 instructions per element
before the arithmetic, not the memory, sets the pace. That is the lesson of this kata:

1. One flat kernel shape for all of them. The inputs are contiguous (M, N) tensors, so the
   kernel treats them as one vector of M * N elements: one program per block of BLOCK
   elements, and the vector_add trick of an unmasked fast path for every full block (a mask
   built from an odd element count would stop the compiler from emitting 16-byte vector
   loads), with the mask only in the last block. Offsets are int32 where every offset fits,
   int64 beyond 2^31 elements: the launcher, which knows the size, picks (a constexpr, so each
   choice is its own compiled kernel and the int32 one carries no 64-bit arithmetic).
2. Math in float32, stably. Load the storage dtype, upcast, compute, round once on the store.
   Never form exp(x) where x can be large: sigmoid(x) = 1 / (1 + exp(-x)) is 0 or 1 at the
   extremes, while exp(x) / (1 + exp(x)) is inf / inf = NaN for x > 88 in float32 (and its
   products overflow float16 from x = 9 if they are rounded to float16 on the way).
3. Cheap transcendental functions, because at these speeds they are the bottleneck.
   - gelu, tanh form: 0.5 * (1 + tanh(u)) is exactly sigmoid(2 * u), so
     gelu(x) = x * sigmoid(2u), u = sqrt(2/pi) * (x + 0.044715 x^3): one exp and one divide,
     and no tanh at all (tanh from exp as (e^2u - 1) / (e^2u + 1) overflows to NaN).
   - gelu, erf form: a gelu built on tl.math.erf (libdevice's erff) compiles to about 34
     instructions per element on sm_90, many of them selecting between two polynomials'
     coefficients: enough to hold a bf16 gelu near 70% of the copy bandwidth, as PyTorch's
     eager and compiled gelu are. Instead this kernel evaluates Phi(x) = erfc(-x/sqrt2)/2
     with Abramowitz & Stegun 7.1.26, erfc(z) = t * P(t) * exp(-z^2), t = 1 / (1 + p z),
     z >= 0: one exp, one divide, five FMAs (about 23 instructions per element in all),
     absolute error below 1.4e-7, and no cancellation for negative x (1 + erf(x) loses every
     digit there; erfc(|z|) does not). tl.math.erf would be right too, only slower.
4. The backward of swiglu. out = silu(g) * u, so d out / d u = silu(g) and
   d out / d g = u * silu'(g), with silu'(g) = s + g * s * (1 - s) = s * (1 + g * (1 - s)),
   s = sigmoid(g): the product rule on g * sigmoid(g), not sigmoid's own derivative s(1 - s).
   (The kernel evaluates s + silu(g) * (1 - s): silu(g) = g * s is needed for grad_up anyway.)
   One kernel reads g, u and grad_out once and writes both gradients: 5 streams of bytes,
   where PyTorch's autograd runs four kernels and moves 11.
5. The launch configuration. Once the arithmetic is cheap, what is left is how the bytes move:
   how many elements each thread handles (a multiple of one 16-byte vector), how many warps a
   program has, and whether the loads and stores carry L2 eviction hints. Those are the
   constants at the top of the file, one fixed choice per kernel and element size (no
   autotuning: every grade would compile every candidate).
"""

import torch
import triton
import triton.language as tl

# ---- Launch configuration ------------------------------------------------------------------
# (BLOCK, num_warps) by kernel and by element size in bytes (2: float16 and bfloat16,
# 4: float32). An elementwise kernel only has to keep enough bytes in flight to saturate HBM;
# torch.compile's own pointwise kernels use 1024 elements and 4 warps.
# One 16-byte vector per thread on 8 warps: the best of 11 configs in an H100 sweep, within
# 0.5% of torch.compile everywhere and at the speed of a plain copy (docs/PERFORMANCE.md).
CONFIG = {
    "unary": {2: (2048, 8), 4: (1024, 8)},
    "swiglu": {2: (2048, 8), 4: (1024, 8)},
    "swiglu_backward": {2: (2048, 8), 4: (1024, 8)},
}
# L2 eviction priority of the loads and of the stores, by kernel: "" (none), "evict_first"
# (this line is not read again: evict it before others) or "evict_last" (keep it: the output
# is what the next kernel reads). Every byte here is touched once.
EVICTION = {  # kernel: (loads, stores)
    "unary": ("", ""),
    "swiglu": ("", ""),
    "swiglu_backward": ("", ""),
}
# int32 offsets while the last block's offsets fit in them; int64 past that.
INT32_LIMIT = 2**31 - 1

# Constants a kernel reads must be tl.constexpr (a plain module-level float is refused).
LOG2E = tl.constexpr(1.4426950408889634)
# Abramowitz & Stegun 7.1.26 for erfc(z), z >= 0, with z = |x| / sqrt(2) folded in:
# t = 1 / (1 + AS_P * |x|), erfc(z) = t * (a1 + t * (a2 + ... + t * a5)) * exp(-x^2 / 2).
# The constants below carry the 1/sqrt(2) (in AS_P) and Phi's factor 1/2 (in A1..A5).
AS_P = tl.constexpr(0.3275911 * 0.7071067811865476)
AS_A1 = tl.constexpr(0.5 * 0.254829592)
AS_A2 = tl.constexpr(0.5 * -0.284496736)
AS_A3 = tl.constexpr(0.5 * 1.421413741)
AS_A4 = tl.constexpr(0.5 * -1.453152027)
AS_A5 = tl.constexpr(0.5 * 1.061405429)
# exp(v) = exp2(v * log2 e); folding log2 e into a constant saves a multiply.
NEG_HALF_LOG2E = tl.constexpr(-0.5 * 1.4426950408889634)
# gelu, tanh form: exp(-2u) = exp2(x * (C1 + C3 * x^2)), u = sqrt(2/pi) * (x + 0.044715 x^3).
GELU_TANH_C1 = tl.constexpr(-2.0 * 0.7978845608028654 * 1.4426950408889634)
GELU_TANH_C3 = tl.constexpr(-2.0 * 0.7978845608028654 * 1.4426950408889634 * 0.044715)


@triton.jit
def _exp_neg(x):
    # exp(-x), written as exp2 (one MUFU.EX2 on the GPU, and what tl.exp lowers to anyway).
    return tl.exp2(x * -LOG2E)


@triton.jit
def _sigmoid(x):
    # 1 / (1 + exp(-x)), stable at both ends: exp(-x) = inf gives 0, exp(-x) = 0 gives 1.
    return 1.0 / (1.0 + _exp_neg(x))


@triton.jit
def _silu(x):
    # x * sigmoid(x) as one division, x / (1 + exp(-x)): a multiply fewer, and as stable
    # (x / inf = 0 for very negative x, x / 1 = x for very positive x).
    return x / (1.0 + _exp_neg(x))


@triton.jit
def _gelu_erf(x):
    # x * Phi(x). q = Phi(-|x|) = erfc(|x| / sqrt 2) / 2 is small and accurate for every x;
    # Phi(x) is q for x < 0 and 1 - q for x >= 0.
    t = 1.0 / (1.0 + AS_P * tl.abs(x))
    poly = t * (AS_A1 + t * (AS_A2 + t * (AS_A3 + t * (AS_A4 + t * AS_A5))))
    q = poly * tl.exp2(x * x * NEG_HALF_LOG2E)
    return x * tl.where(x >= 0, 1.0 - q, q)


@triton.jit
def _gelu_tanh(x):
    # 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u) == x / (1 + exp(-2u)): the same function,
    # with no tanh to compute. exp(-2u) = inf (x very negative) gives -0, not NaN.
    return x / (1.0 + tl.exp2(x * (GELU_TANH_C1 + GELU_TANH_C3 * x * x)))


@triton.jit
def _activation(x, ACT: tl.constexpr):
    # ACT is a compile-time constant: each activation gets its own specialised kernel, and the
    # branches below cost nothing at run time.
    if ACT == "relu":
        y = tl.maximum(x, 0.0)
    elif ACT == "gelu_erf":
        y = _gelu_erf(x)
    elif ACT == "gelu_tanh":
        y = _gelu_tanh(x)
    else:  # "silu"
        y = _silu(x)
    return y


@triton.jit
def _block_offsets(BLOCK: tl.constexpr, INT64: tl.constexpr):
    # This program's block of the flat vector. With INT64 the block start is computed in int64
    # (pid * BLOCK wraps around in int32 past 2^31 elements); the launcher sets it only then.
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    start = pid * BLOCK
    return start, start + tl.arange(0, BLOCK)


@triton.jit
def unary_kernel(x_ptr, out_ptr, n_elements, ACT: tl.constexpr, BLOCK: tl.constexpr,
                 INT64: tl.constexpr, LOAD_EVICT: tl.constexpr, STORE_EVICT: tl.constexpr):
    start, offsets = _block_offsets(BLOCK, INT64)
    out_ty = out_ptr.dtype.element_ty
    if start + BLOCK <= n_elements:
        # Every block but the last is full: no mask, so the loads and stores vectorise.
        x = tl.load(x_ptr + offsets, eviction_policy=LOAD_EVICT).to(tl.float32)
        tl.store(out_ptr + offsets, _activation(x, ACT).to(out_ty), eviction_policy=STORE_EVICT)
    else:
        # The last block: lanes past the end neither load nor store.
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offsets, _activation(x, ACT).to(out_ty), mask=mask)


@triton.jit
def swiglu_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK: tl.constexpr,
                  INT64: tl.constexpr, LOAD_EVICT: tl.constexpr, STORE_EVICT: tl.constexpr):
    start, offsets = _block_offsets(BLOCK, INT64)
    out_ty = out_ptr.dtype.element_ty
    if start + BLOCK <= n_elements:
        g = tl.load(gate_ptr + offsets, eviction_policy=LOAD_EVICT).to(tl.float32)
        u = tl.load(up_ptr + offsets, eviction_policy=LOAD_EVICT).to(tl.float32)
        tl.store(out_ptr + offsets, (_silu(g) * u).to(out_ty), eviction_policy=STORE_EVICT)
    else:
        mask = offsets < n_elements
        g = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offsets, (_silu(g) * u).to(out_ty), mask=mask)


@triton.jit
def _swiglu_grads(g, u, dy):
    s = _sigmoid(g)
    silu = g * s
    grad_up = dy * silu
    # silu'(g) = s + g * s * (1 - s): the product rule on g * sigmoid(g).
    grad_gate = dy * u * (s + silu * (1.0 - s))
    return grad_gate, grad_up


@triton.jit
def swiglu_backward_kernel(gate_ptr, up_ptr, grad_out_ptr, grad_gate_ptr, grad_up_ptr,
                           n_elements, BLOCK: tl.constexpr, INT64: tl.constexpr,
                           LOAD_EVICT: tl.constexpr, STORE_EVICT: tl.constexpr):
    start, offsets = _block_offsets(BLOCK, INT64)
    out_ty = grad_gate_ptr.dtype.element_ty
    if start + BLOCK <= n_elements:
        g = tl.load(gate_ptr + offsets, eviction_policy=LOAD_EVICT).to(tl.float32)
        u = tl.load(up_ptr + offsets, eviction_policy=LOAD_EVICT).to(tl.float32)
        dy = tl.load(grad_out_ptr + offsets, eviction_policy=LOAD_EVICT).to(tl.float32)
        grad_gate, grad_up = _swiglu_grads(g, u, dy)
        tl.store(grad_gate_ptr + offsets, grad_gate.to(out_ty), eviction_policy=STORE_EVICT)
        tl.store(grad_up_ptr + offsets, grad_up.to(out_ty), eviction_policy=STORE_EVICT)
    else:
        mask = offsets < n_elements
        g = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(grad_out_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        grad_gate, grad_up = _swiglu_grads(g, u, dy)
        tl.store(grad_gate_ptr + offsets, grad_gate.to(out_ty), mask=mask)
        tl.store(grad_up_ptr + offsets, grad_up.to(out_ty), mask=mask)


def _launch(kernel_name, x, cfg=None):
    """Grid and launch options for one call: CONFIG's choice for x's element size, or cfg's
    (a dict with BLOCK, num_warps and optionally LOAD_EVICT, STORE_EVICT, INT64: the sweep's
    variants)."""
    if cfg is None:
        block, warps = CONFIG[kernel_name][x.element_size()]
        load_evict, store_evict = EVICTION[kernel_name]
        cfg = {"BLOCK": block, "num_warps": warps, "LOAD_EVICT": load_evict,
               "STORE_EVICT": store_evict}
    n = x.numel()
    block = cfg["BLOCK"]
    options = {
        "BLOCK": block,
        "num_warps": cfg["num_warps"],
        # The largest offset formed is that of the last block's last lane, n - 1 + BLOCK.
        "INT64": cfg.get("INT64", n - 1 + block > INT32_LIMIT),
        "LOAD_EVICT": cfg.get("LOAD_EVICT", ""),
        "STORE_EVICT": cfg.get("STORE_EVICT", ""),
    }
    return (triton.cdiv(n, block),), options


def _unary(x: torch.Tensor, act: str, cfg=None) -> torch.Tensor:
    # The kata promises contiguous inputs; the kernel walks them as one flat vector.
    assert x.is_contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        grid, options = _launch("unary", x, cfg)
        unary_kernel[grid](x, out, n, ACT=act, **options)
    return out


def relu(x: torch.Tensor) -> torch.Tensor:
    return _unary(x, "relu")


def gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    # torch's spelling: "none" is the exact (erf) form, "tanh" the approximation. Beware of
    # `if approximate:`: "none" is a non-empty string, so it is true.
    if approximate == "none":
        return _unary(x, "gelu_erf")
    if approximate == "tanh":
        return _unary(x, "gelu_tanh")
    raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x: torch.Tensor) -> torch.Tensor:
    return _unary(x, "silu")


def _swiglu(gate: torch.Tensor, up: torch.Tensor, cfg=None) -> torch.Tensor:
    assert gate.shape == up.shape and gate.is_contiguous() and up.is_contiguous()
    out = torch.empty_like(gate)
    n = gate.numel()
    if n:
        grid, options = _launch("swiglu", gate, cfg)
        swiglu_kernel[grid](gate, up, out, n, **options)
    return out


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return _swiglu(gate, up)


def _swiglu_backward(gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor, cfg=None):
    assert gate.shape == up.shape == grad_out.shape
    assert gate.is_contiguous() and up.is_contiguous() and grad_out.is_contiguous()
    grad_gate = torch.empty_like(gate)
    grad_up = torch.empty_like(gate)
    n = gate.numel()
    if n:
        grid, options = _launch("swiglu_backward", gate, cfg)
        swiglu_backward_kernel[grid](gate, up, grad_out, grad_gate, grad_up, n, **options)
    return grad_gate, grad_up


def swiglu_backward(gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor):
    return _swiglu_backward(gate, up, grad_out)
