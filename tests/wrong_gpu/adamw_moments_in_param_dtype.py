"""Wrong adamw: every result is stored in the params' dtype, the moments included.

Correct in float32 (the cast does nothing), so the interpreter, which skips bfloat16, passes it.
In the mixed-precision regime the moments are rounded to bfloat16 (8 bits of precision) before
they are stored into their float32 buffers: exp_avg_sq loses the small increments
(1 - beta2) * g * g that it exists to accumulate, and the states drift from step to step.
Keeping float32 states is the point of the regime: round only the param.

A GPU-only bug: tests/gpu/test_gpu_wrong.py checks that the bfloat16 case catches it.
"""
# expect-fail: gpu_first_step_gpt2

import triton
import triton.language as tl


@triton.jit
def adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n_elements,
                 decay, beta1, beta2, step_size, inv_sqrt_bc2, eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p * decay - step_size * m / (tl.sqrt(v) * inv_sqrt_bc2 + eps)
    # BUG: "store in the params' dtype": the float32 moments go through bfloat16.
    out_dtype = p_ptr.dtype.element_ty
    tl.store(m_ptr + offs, m.to(out_dtype).to(tl.float32), mask=mask)
    tl.store(v_ptr + offs, v.to(out_dtype).to(tl.float32), mask=mask)
    tl.store(p_ptr + offs, p.to(out_dtype), mask=mask)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    decay = 1.0 - lr * weight_decay
    step_size = lr / (1.0 - beta1 ** step)
    inv_sqrt_bc2 = 1.0 / (1.0 - beta2 ** step) ** 0.5
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        n = p.numel()
        adamw_kernel[(triton.cdiv(n, 1024),)](p, g, m, v, n, decay, beta1, beta2, step_size,
                                              inv_sqrt_bc2, eps, BLOCK=1024)
