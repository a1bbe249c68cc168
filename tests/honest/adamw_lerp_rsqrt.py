"""Honest variant: the moments in lerp form (m += (1 - beta1) * (g - m), as torch's foreach path
writes it), v_hat's root through a host-computed 1 / sqrt(bias2), decay applied as a separate
subtraction (p - lr * wd * p), and the whole list flattened into one launch by a host table of
offsets (one launch per tensor). Constants in float64 on the host."""
# panel-cases: first_step, large_weight_decay, one_element, two_elements_late, tiny_grads, extreme_values

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _adamw(p_ptr, g_ptr, m_ptr, v_ptr, n, lr_wd, one_m_b1, one_m_b2, step_size, inv_root_bias2,
           eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    m = m + one_m_b1 * (g - m)
    v = v + one_m_b2 * (g * g - v)
    p = p - lr_wd * p
    p = p - step_size * (m / (tl.sqrt(v) * inv_root_bias2 + eps))
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    BLOCK = 512
    step_size = lr / (1.0 - beta1 ** step)
    inv_root = 1.0 / math.sqrt(1.0 - beta2 ** step)
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        n = p.numel()
        _adamw[(triton.cdiv(n, BLOCK),)](p, g, m, v, n, lr * weight_decay, 1.0 - beta1, 1.0 - beta2,
                                         step_size, inv_root, eps, BLOCK=BLOCK)
