# cheat: forbidden_op
"""Cheat: calls PyTorch's own torch.softmax instead of launching a kernel.

The numbers are right (computed in float32, cast back); the grader must reject it because the
kata forbids torch.softmax (and aten._softmax underneath it).
"""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)  # BUG: forbidden
