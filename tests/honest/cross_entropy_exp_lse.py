"""Honest variant: normalise with exp(x - lse) (the flash-attention / Unsloth form): one online
pass for lse = m + log(d), a second pass writes p = exp(x - lse). The loss is summed across rows
with tl.atomic_add into a float32 scalar, divided by n in a last tiny kernel."""
# panel-cases: large_negative, large_logits, peaked, all_ignored

import torch
import triton
import triton.language as tl


@triton.jit
def _count(target_ptr, n_ptr, B, ignore_index, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, B, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        t = tl.load(target_ptr + offs, mask=offs < B, other=ignore_index)
        acc += tl.where(t != ignore_index, 1.0, 0.0)
    tl.store(n_ptr, tl.sum(acc, axis=0))


@triton.jit
def _row(x_ptr, t_ptr, g_ptr, loss_ptr, n_ptr, V, stride, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    t = tl.load(t_ptr + row)
    n = tl.maximum(tl.load(n_ptr), 1.0)
    valid = t != ignore_index
    m = float("-inf")
    d = 0.0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), axis=0)
        m = new_m
    lse = m + tl.log(d)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        g = (tl.exp(x - lse) - tl.where(cols == t, 1.0, 0.0)) / n
        g = tl.where(valid, g, 0.0)
        tl.store(g_ptr + row * V + cols, g.to(g_ptr.dtype.element_ty), mask=mask)
    if valid:
        x_t = tl.load(x_ptr + row * stride + t).to(tl.float32)
        tl.atomic_add(loss_ptr, (lse - x_t) / n)


def cross_entropy(logits, target, ignore_index):
    B, V = logits.shape
    grad = torch.empty((B, V), dtype=logits.dtype, device=logits.device)
    loss = torch.zeros((), dtype=torch.float32, device=logits.device)
    n = torch.empty(1, dtype=torch.float32, device=logits.device)
    _count[(1,)](target, n, B, ignore_index, BLOCK=1024)
    if B and V:
        _row[(B,)](logits, target, grad, loss, n, V, logits.stride(0), ignore_index,
                   BLOCK=min(4096, triton.next_power_of_2(V)))
    return loss, grad
