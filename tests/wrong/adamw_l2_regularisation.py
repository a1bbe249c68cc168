"""Wrong adamw: L2 regularisation (Adam) instead of decoupled weight decay (AdamW).

The decay is added to the gradient, g + weight_decay * p, so it goes through the moments and
is divided by sqrt(v) like the gradient. AdamW decays the weight itself, p * (1 - lr * wd),
before the Adam update, and the moments never see it.
"""
# expect-fail: large_weight_decay
# expect-fail: first_step

import triton
import triton.language as tl


@triton.jit
def adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n_elements,
                 decay, beta1, beta2, step_size, inv_sqrt_bc2, eps, weight_decay,
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    # BUG: L2 regularisation: the decay term joins the gradient (torch.optim.Adam's
    # weight_decay), instead of scaling p by (1 - lr * weight_decay).
    g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p - step_size * m / (tl.sqrt(v) * inv_sqrt_bc2 + eps)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    decay = 1.0 - lr * weight_decay
    step_size = lr / (1.0 - beta1 ** step)
    inv_sqrt_bc2 = 1.0 / (1.0 - beta2 ** step) ** 0.5
    # One launch per tensor: correct, if slow on many small tensors.
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        n = p.numel()
        adamw_kernel[(triton.cdiv(n, 1024),)](p, g, m, v, n, decay, beta1, beta2, step_size,
                                              inv_sqrt_bc2, eps, weight_decay, BLOCK=1024)
