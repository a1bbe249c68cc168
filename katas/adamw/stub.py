"""adamw: one AdamW step over lists of tensors, in place, computed by Triton kernels.

    p = p * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
    p = p - lr / (1 - beta1 ** step) * m / (sqrt(v) / sqrt(1 - beta2 ** step) + eps)

Run `kata grade` in this folder to check your work; `kata hint adamw` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n_elements,
                 decay, beta1, beta2, step_size, inv_sqrt_bc2, eps,
                 BLOCK: tl.constexpr):
    # TODO: update one block of p, m, v in place from g.
    # - compute in float32 (params and grads may be bfloat16; the moments are float32)
    # - the update uses the *new* moments; eps goes outside the square root
    # - mask the tail of the tensor
    # - once it is right: can one launch cover every tensor of the lists?
    pass


def adamw_step(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list, step: int,
               lr: float, beta1: float, beta2: float, eps: float, weight_decay: float) -> None:
    """Update params, exp_avgs and exp_avg_sqs in place, as torch.optim.AdamW does at `step`
    (counted from 1); leave grads unchanged."""
    raise NotImplementedError("adamw_step: launch adamw_kernel over every tensor of the lists")
