"""Wrong adamw: one launch over the list, but each tensor gets numel // CHUNK programs.

The single-launch design is right (a device table of first programs and addresses), but the
chunk count of a tensor is rounded down: a tensor's partial last chunk gets no program, and a
tensor smaller than one chunk (a bias, a LayerNorm weight) is never updated at all. Count
chunks with triton.cdiv(numel, CHUNK), and mask the last block with offs < numel.
"""
# expect-fail: first_step

import itertools

import torch
import triton
import triton.language as tl

BLOCK = 1024
CHUNK = 1024


@triton.jit
def adamw_kernel(table_ptr, n_tensors, decay, beta1, beta2, step_size, inv_sqrt_bc2, eps,
                 PARAM_DTYPE: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr,
                 SEARCH: tl.constexpr):
    pid = tl.program_id(0)
    idx = tl.arange(0, SEARCH)
    first = tl.load(table_ptr + idx, mask=idx < n_tensors, other=2**62)
    t = tl.sum((first <= pid).to(tl.int32), axis=0) - 1
    numel = tl.load(table_ptr + n_tensors + t)
    p_ptr = tl.load(table_ptr + 2 * n_tensors + t).to(tl.pointer_type(PARAM_DTYPE))
    g_ptr = tl.load(table_ptr + 3 * n_tensors + t).to(tl.pointer_type(PARAM_DTYPE))
    m_ptr = tl.load(table_ptr + 4 * n_tensors + t).to(tl.pointer_type(tl.float32))
    v_ptr = tl.load(table_ptr + 5 * n_tensors + t).to(tl.pointer_type(tl.float32))
    start = (pid - tl.load(table_ptr + t)) * CHUNK
    for i in range(0, CHUNK, BLOCK):
        offs = start + i + tl.arange(0, BLOCK)
        mask = offs < numel
        p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
        g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
        m = tl.load(m_ptr + offs, mask=mask)
        v = tl.load(v_ptr + offs, mask=mask)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p * decay - step_size * m / (tl.sqrt(v) * inv_sqrt_bc2 + eps)
        tl.store(m_ptr + offs, m, mask=mask)
        tl.store(v_ptr + offs, v, mask=mask)
        tl.store(p_ptr + offs, p.to(PARAM_DTYPE), mask=mask)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    n = len(params)
    numels = [p.numel() for p in params]
    # BUG: rounded down: a partial last chunk, and any tensor smaller than CHUNK, gets no program.
    firsts = list(itertools.accumulate((k // CHUNK for k in numels), initial=0))
    n_programs = firsts.pop()
    table = torch.tensor(firsts + numels + [p.data_ptr() for p in params] + [g.data_ptr() for g in grads]
                         + [m.data_ptr() for m in exp_avgs] + [v.data_ptr() for v in exp_avg_sqs],
                         dtype=torch.int64, device=params[0].device)
    dtype = tl.bfloat16 if params[0].dtype == torch.bfloat16 else tl.float32
    adamw_kernel[(n_programs,)](table, n, 1.0 - lr * weight_decay, beta1, beta2,
                                lr / (1.0 - beta1 ** step), 1.0 / (1.0 - beta2 ** step) ** 0.5, eps,
                                PARAM_DTYPE=dtype, BLOCK=BLOCK, CHUNK=CHUNK,
                                SEARCH=triton.next_power_of_2(n))
