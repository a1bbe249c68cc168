"""Out-of-bounds writes, caught by guard bands: every tensor the grader hands out, and every tensor the submission creates while
checked, sits between two bands of a known byte pattern. A kernel that stores past either end of
a tensor (an unmasked tail, a wrong offset) overwrites a band, which is checked after the call.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from grader.sandbox.forbidden_ops import GraderDispatchMode, grader_machinery

GUARD_BYTES = 1024  # a multiple of every element size, so alignment is kept
PATTERN = 0xA5

aten = torch.ops.aten
# Tensor factories whose results are relocated into guarded storage (by overload packet).
_FACTORIES = {str(op) for op in (
    aten.empty, aten.empty_strided, aten.empty_like, aten.zeros, aten.zeros_like, aten.ones,
    aten.ones_like, aten.full, aten.full_like, aten.new_empty, aten.new_empty_strided,
    aten.new_zeros, aten.new_ones, aten.new_full,
)}


class Guarded:
    """A tensor's guarded storage: the bytes before and after it must keep the pattern."""

    def __init__(self, buffer: torch.Tensor, nbytes: int, label: str):
        self.buffer, self.nbytes, self.label = buffer, nbytes, label

    def damage(self) -> tuple[int, int]:
        """(bytes overwritten before the tensor, bytes overwritten after it)."""
        before = self.buffer[:GUARD_BYTES]
        after = self.buffer[GUARD_BYTES + self.nbytes:]
        return int((before != PATTERN).sum()), int((after != PATTERN).sum())


def guarded_copy(t: torch.Tensor, label: str = "") -> tuple[torch.Tensor, Guarded]:
    """A copy of t (same sizes, strides and storage offset) inside guarded storage."""
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    buffer = torch.empty(GUARD_BYTES * 2 + nbytes, dtype=torch.uint8, device=t.device)
    buffer[:GUARD_BYTES].fill_(PATTERN)
    buffer[GUARD_BYTES + nbytes:].fill_(PATTERN)
    body = buffer[GUARD_BYTES:GUARD_BYTES + nbytes]
    if nbytes:
        body.copy_(torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage))
    offset = GUARD_BYTES // t.element_size() + t.storage_offset()
    copy = buffer.view(t.dtype).as_strided(t.size(), t.stride(), offset)
    return copy, Guarded(buffer, nbytes, label)


class GuardedFactories(GraderDispatchMode):
    """While active, tensors made by the factories above come back inside guarded storage."""

    def __init__(self, pause=nullcontext):
        super().__init__()
        self.made: list[Guarded] = []
        # Entered around each relocation: a memory meter pauses there (grader.kata.memory_budget),
        # since for that instant the new tensor exists twice, by the grader's doing.
        self.pause = pause

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if (str(func.overloadpacket) in _FACTORIES and isinstance(result, torch.Tensor)
                and type(result) is torch.Tensor and result.layout == torch.strided
                and not result.is_quantized and result.device.type in ("cpu", "cuda")):
            with grader_machinery(), self.pause():  # the grader's copy, whatever the kata forbids
                result, guard = guarded_copy(result, "a tensor it allocated")
            self.made.append(guard)
        return result
