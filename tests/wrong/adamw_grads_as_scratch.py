"""Wrong adamw: grads used as scratch space between two kernels.

A two-pass design: the first kernel updates the moments and writes the update direction
m_hat / (sqrt(v_hat) + eps) into grads ("the gradient is not needed any more"); the second
applies it to the params. params, exp_avgs and exp_avg_sqs come out right, but grads belong
to the caller (gradient clipping, logging, accumulation read them after the step) and must be
left unchanged. Besides, the round trip through memory costs two extra passes.
"""
# expect-fail: first_step
# expect-diagnosis: input_mutated

import triton
import triton.language as tl


@triton.jit
def moments_kernel(g_ptr, m_ptr, v_ptr, n_elements, beta1, beta2, inv_bc1, inv_sqrt_bc2, eps,
                   BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    # BUG: the update direction is parked in grads, an input the step must not modify.
    direction = m * inv_bc1 / (tl.sqrt(v) * inv_sqrt_bc2 + eps)
    tl.store(g_ptr + offs, direction.to(g_ptr.dtype.element_ty), mask=mask)


@triton.jit
def apply_kernel(p_ptr, d_ptr, n_elements, decay, lr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    d = tl.load(d_ptr + offs, mask=mask).to(tl.float32)
    p = p * decay - lr * d
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    inv_bc1 = 1.0 / (1.0 - beta1 ** step)
    inv_sqrt_bc2 = 1.0 / (1.0 - beta2 ** step) ** 0.5
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        n = p.numel()
        grid = (triton.cdiv(n, 1024),)
        moments_kernel[grid](g, m, v, n, beta1, beta2, inv_bc1, inv_sqrt_bc2, eps, BLOCK=1024)
        apply_kernel[grid](p, g, n, 1.0 - lr * weight_decay, lr, BLOCK=1024)
