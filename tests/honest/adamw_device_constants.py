"""Honest variant: one launch per tensor, every constant computed in the kernel from the raw
hyperparameters (which Triton passes as float32): 1 - beta1, 1 - beta2, the bias corrections
through exp(step * log(beta)), the decay 1 - lr * wd. Many real Triton optimizers do this."""
# panel-cases: first_step, large_weight_decay, one_element, two_elements_late, tiny_grads, extreme_values

import torch
import triton
import triton.language as tl


@triton.jit
def _adamw(p_ptr, g_ptr, m_ptr, v_ptr, n, step, lr, beta1, beta2, eps, wd, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    t = step * 1.0  # (a step of 1 arrives as a constexpr: no .to on it)
    bias1 = 1.0 - tl.exp(t * tl.log(beta1))
    bias2 = 1.0 - tl.exp(t * tl.log(beta2))
    p = p * (1.0 - lr * wd)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    m_hat = m / bias1
    v_hat = v / bias2
    p = p - lr * m_hat / (tl.sqrt(v_hat) + eps)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    BLOCK = 1024
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        n = p.numel()
        _adamw[(triton.cdiv(n, BLOCK),)](p, g, m, v, n, step, lr, beta1, beta2, eps, weight_decay,
                                         BLOCK=BLOCK)
