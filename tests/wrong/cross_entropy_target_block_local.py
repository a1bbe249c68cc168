"""Wrong cross_entropy: the -1 / n at the target column is placed with the block-local column index.

In the gradient loop `cols` counts from 0 in every block; the target's column in the row is
start + cols. Comparing cols == target puts -1 / n at column target of every block when the
target is in the first block, and nowhere when it is not. Rows of one block (V <= 4096) are
right, which is why short tests pass.
"""
# expect-fail: long_vocab

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
            g = tl.where(cols == t, g - inv_n, g)  # BUG: block-local column, not start + cols
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
    grad = torch.empty((B, V), dtype=logits.dtype, device=logits.device)
    loss = torch.empty((), dtype=torch.float32, device=logits.device)
    row_loss = torch.empty(B, dtype=torch.float32, device=logits.device)
    count = torch.empty(1, dtype=torch.int32, device=logits.device)
    count_kernel[(1,)](target, count, B, ignore_index, BLOCK=1024)
    block = min(MAX_BLOCK, triton.next_power_of_2(V))
    ce_kernel[(B,)](logits, target, grad, row_loss, count, V, logits.stride(0), ignore_index,
                    BLOCK=block, num_warps=8)
    loss_kernel[(1,)](row_loss, count, loss, B, BLOCK=1024)
    return loss, grad
