"""Honest variant: everything in base 2, as fast kernels write it: y = x * log2(e), a running
max and sum of exp2(y - m2), lse2 = m2 + log2(d), p = exp2(x * log2(e) - lse2) (the product and
the offset rounded separately), loss = lse2 * ln(2) - x[t]. Per-row losses go to a buffer and a
second kernel sums them in one block loop (another order than an atomic sum)."""
# panel-cases: large_negative, large_logits, peaked, all_ignored

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _row(x_ptr, t_ptr, g_ptr, row_loss_ptr, valid_ptr, V, stride, ignore_index, B,
         BLOCK: tl.constexpr, CBLOCK: tl.constexpr):
    row = tl.program_id(0)
    # Every program counts n itself: B is small next to V * B reads.
    acc = tl.zeros([CBLOCK], tl.float32)
    for start in range(0, B, CBLOCK):
        offs = start + tl.arange(0, CBLOCK)
        tt = tl.load(t_ptr + offs, mask=offs < B, other=ignore_index)
        acc += tl.where(tt != ignore_index, 1.0, 0.0)
    n = tl.maximum(tl.sum(acc, axis=0), 1.0)
    t = tl.load(t_ptr + row)
    valid = t != ignore_index
    m2 = float("-inf")
    d = 0.0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        y = tl.load(x_ptr + row * stride + cols, mask=cols < V, other=float("-inf")).to(tl.float32) * 1.4426950408889634
        new_m = tl.maximum(m2, tl.max(y, axis=0))
        d = d * tl.exp2(m2 - new_m) + tl.sum(tl.exp2(y - new_m), axis=0)
        m2 = new_m
    lse2 = m2 + tl.log2(d)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp2(x * 1.4426950408889634 - lse2)
        g = tl.where(valid, (p - tl.where(cols == t, 1.0, 0.0)) / n, 0.0)
        tl.store(g_ptr + row * V + cols, g.to(g_ptr.dtype.element_ty), mask=mask)
    x_t = tl.load(x_ptr + row * stride + tl.where(valid, t, 0)).to(tl.float32)
    tl.store(row_loss_ptr + row, tl.where(valid, lse2 * 0.6931471805599453 - x_t, 0.0))
    tl.store(valid_ptr + row, tl.where(valid, 1.0, 0.0))


@triton.jit
def _mean(row_loss_ptr, valid_ptr, loss_ptr, B, BLOCK: tl.constexpr):
    total = 0.0
    count = 0.0
    for start in range(0, B, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        total += tl.sum(tl.load(row_loss_ptr + offs, mask=offs < B, other=0.0), axis=0)
        count += tl.sum(tl.load(valid_ptr + offs, mask=offs < B, other=0.0), axis=0)
    tl.store(loss_ptr, tl.where(count > 0, total / tl.maximum(count, 1.0), 0.0))


def cross_entropy(logits, target, ignore_index):
    B, V = logits.shape
    grad = torch.empty((B, V), dtype=logits.dtype, device=logits.device)
    loss = torch.empty((), dtype=torch.float32, device=logits.device)
    row_loss = torch.zeros(max(B, 1), dtype=torch.float32, device=logits.device)
    valid = torch.zeros(max(B, 1), dtype=torch.float32, device=logits.device)
    if B and V:
        _row[(B,)](logits, target, grad, row_loss, valid, V, logits.stride(0), ignore_index, B,
                   BLOCK=min(2048, triton.next_power_of_2(V)), CBLOCK=256)
    _mean[(1,)](row_loss, valid, loss, B, BLOCK=256)
    return loss, grad
