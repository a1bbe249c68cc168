"""cross_entropy: the mean cross-entropy loss and its gradient w.r.t. the logits, fused.

Run `kata grade` in this folder to check your work; `kata hint cross_entropy` if you are stuck.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_kernel(
    logits_ptr, target_ptr, grad_ptr, row_loss_ptr, count_ptr,
    n_cols, logits_row_stride, grad_row_stride, ignore_index,
    BLOCK: tl.constexpr,
):
    # TODO: one program per row (or more).
    # - row i of the logits starts at logits_ptr + i * logits_row_stride (int64: B * V is huge)
    # - a row is far longer than one block: find its logsumexp block by block without ever
    #   computing exp of a large number, then go over the row again to write the gradient
    # - the gradient divides by n, the number of non-ignored rows of the whole batch
    # - an ignored row (target == ignore_index) gets a zero gradient and adds nothing to the loss
    pass


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int):
    """(loss, grad_logits): the mean cross-entropy over the rows whose target is not
    ignore_index (a float32 tensor of shape ()), and its gradient with respect to logits (a new
    contiguous tensor of logits' shape and dtype). Every row ignored: loss 0, gradient 0.
    """
    raise NotImplementedError("cross_entropy: count the non-ignored rows, launch the fused kernel, "
                              "reduce the per-row losses")
