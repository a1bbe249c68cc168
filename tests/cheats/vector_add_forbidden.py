# cheat: forbidden_op
"""Cheat: lets PyTorch do the work through an alias (the kata forbids torch's add)."""

import torch

plus = torch.Tensor.add


def vector_add(x, y):
    return plus(x, y)
