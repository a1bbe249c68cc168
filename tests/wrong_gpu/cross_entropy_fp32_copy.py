"""Wrong cross_entropy (GPU only): right values, but over the memory budget.

The launcher starts with x = logits.float(), "to compute in float32", and the kernels read that
copy: every value is right, but for bf16 or fp16 logits the copy is a (B, V) float32 tensor,
twice the logits' bytes (4.2 GB at B = 8192, V = 128256), where the kata allows 2% of them.
Computing in float32 belongs inside the kernel (.to(tl.float32) after the load), not in a copy.

A GPU-only bug: the interpreter has no peak-memory counter, so it passes every case there
(tests/test_wrong_solutions.py checks that); on a GPU the worker measures each checked call's
peak and fails the half-precision cases with the diagnosis memory_budget
(tests/gpu/test_gpu_wrong.py).
"""
# expect-fail: gpu_padded_vocab
# expect-fail: gpu_vocab_262144
# expect-fail: bench_8192x128256

import torch
import triton
import triton.language as tl

MAX_BLOCK = 4096


@triton.jit
def count_kernel(target_ptr, count_ptr, n_rows, ignore_index, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.int32)
    for start in range(0, n_rows, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        t = tl.load(target_ptr + offs, mask=offs < n_rows, other=ignore_index)
        acc += (t != ignore_index).to(tl.int32)
    tl.store(count_ptr, tl.sum(acc, axis=0))


@triton.jit
def ce_kernel(x_ptr, target_ptr, grad_ptr, row_loss_ptr, count_ptr, V, x_stride, ignore_index,
              BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    g_row = grad_ptr + row * V
    cols = tl.arange(0, BLOCK)
    t = tl.load(target_ptr + row)
    if t == ignore_index:
        for start in range(0, V, BLOCK):
            offs = start + cols
            tl.store(g_row + offs, tl.zeros([BLOCK], tl.float32).to(grad_ptr.dtype.element_ty),
                     mask=offs < V)
        tl.store(row_loss_ptr + row, 0.0)
    else:
        m = -float("inf")
        d = 0.0
        for start in range(0, V, BLOCK):
            offs = start + cols
            x = tl.load(x_row + offs, mask=offs < V, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
        x_t = tl.load(x_row + t).to(tl.float32)
        tl.store(row_loss_ptr + row, m + tl.log(d) - x_t)
        inv_n = 1.0 / tl.load(count_ptr).to(tl.float32)
        for start in range(0, V, BLOCK):
            offs = start + cols
            mask = offs < V
            x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
            g = tl.exp(x - m) / d * inv_n
            g = tl.where(offs == t, g - inv_n, g)
            tl.store(g_row + offs, g.to(grad_ptr.dtype.element_ty), mask=mask)


@triton.jit
def loss_kernel(row_loss_ptr, count_ptr, loss_ptr, n_rows, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(row_loss_ptr + offs, mask=offs < n_rows, other=0.0)
    n = tl.load(count_ptr)
    tl.store(loss_ptr, tl.sum(acc, axis=0) / tl.maximum(n, 1).to(tl.float32))


def cross_entropy(logits, target, ignore_index):
    B, V = logits.shape
    x = logits.float()  # BUG: a float32 copy of the whole (B, V) logits: 2x their bytes
    grad = torch.empty((B, V), dtype=logits.dtype, device=logits.device)
    loss = torch.empty((), dtype=torch.float32, device=logits.device)
    row_loss = torch.empty(B, dtype=torch.float32, device=logits.device)
    count = torch.empty(1, dtype=torch.int32, device=logits.device)
    count_kernel[(1,)](target, count, B, ignore_index, BLOCK=1024)
    block = min(MAX_BLOCK, triton.next_power_of_2(V))
    ce_kernel[(B,)](x, target, grad, row_loss, count, V, x.stride(0), ignore_index,
                    BLOCK=block, num_warps=8)
    loss_kernel[(1,)](row_loss, count, loss, B, BLOCK=1024)
    return loss, grad
