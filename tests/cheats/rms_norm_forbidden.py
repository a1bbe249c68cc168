# cheat: forbidden_op
"""Cheat: calls PyTorch's own torch.nn.functional.rms_norm instead of a kernel.

The numbers are right; the grader must reject it because the kata forbids F.rms_norm.
"""

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps).contiguous()
