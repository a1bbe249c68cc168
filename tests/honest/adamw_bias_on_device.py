"""Honest variant: 1 - beta1 and 1 - beta2 on the host, but the bias corrections computed in the
kernel with a loop of multiplications (beta ** step by repeated products, as a learner who avoids
pow writes it), the update as m / bias1 divided by (sqrt(v) / sqrt(bias2) + eps),
weight decay folded after the update: p_new = p - lr * (m_hat / denom + wd * p)."""
# panel-cases: first_step, large_weight_decay, one_element, two_elements_late, tiny_grads, extreme_values

import torch
import triton
import triton.language as tl


@triton.jit
def _adamw(p_ptr, g_ptr, m_ptr, v_ptr, n, step, lr, beta1, beta2, c1, c2, eps, wd,
           BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    pow1 = 1.0
    pow2 = 1.0
    for _ in range(step):
        pow1 = pow1 * beta1
        pow2 = pow2 * beta2
    m = beta1 * m + c1 * g
    v = beta2 * v + c2 * (g * g)
    denom = tl.sqrt(v) / tl.sqrt(1.0 - pow2) + eps
    p = p - lr * (m / (1.0 - pow1) / denom + wd * p)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    BLOCK = 256
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        n = p.numel()
        _adamw[(triton.cdiv(n, BLOCK),)](p, g, m, v, n, step, lr, beta1, beta2, 1.0 - beta1,
                                         1.0 - beta2, eps, weight_decay, BLOCK=BLOCK)
