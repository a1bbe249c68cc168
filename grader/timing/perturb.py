"""The change made to a timed input before every call, replayable from a seed.

Before each timed call of the submission, a short run of elements of one floating-point input is
halved (stays finite, keeps its sign: valid wherever the input was); a kata with no float input
(an INT8 GEMM) has an integer one halved toward zero instead (it keeps its sign and its range, so
a valid index stays valid). So no call sees the
contents of an earlier one and a cache keyed on the contents misses. The changes come from a
`random.Random` seeded per case, consumed by the submission's calls alone, so the trusted
checker can replay them and rebuild the exact inputs of any timed call it is asked to verify.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

SPAN = 64  # elements halved per change: enough to move a GEMM's row past its tolerance


def tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


@dataclass(frozen=True, eq=False)
class Change:
    """One change: elements index[:-1] + [start, stop) of `tensor` (a 0-d tensor: all of it)."""
    tensor: torch.Tensor
    index: tuple[int, ...]
    start: int
    stop: int

    def positions(self, dim: int) -> range | None:
        """The positions along `dim` the change touched; None when the tensor has no such dim."""
        if dim >= self.tensor.dim():
            return None
        if dim == self.tensor.dim() - 1:
            return range(self.start, self.stop)
        return range(self.index[dim], self.index[dim] + 1)


class Perturber:
    """perturb(args) changes one span of one floating-point tensor in args, in place, and
    returns the Change (None when args hold nothing to change)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def __call__(self, args) -> Change | None:
        floats = [t for t in tensors(args) if t.is_floating_point() and t.numel()]
        if not floats:  # integers only: halving toward zero keeps them valid
            floats = [t for t in tensors(args) if t.dtype != torch.bool and t.numel()]
        if not floats:
            return None
        t = floats[self.rng.randrange(len(floats))]
        index = [self.rng.randrange(size) for size in t.shape]
        if t.dim():
            last = t.shape[-1]
            start = index[-1]
            stop = min(last, start + 1 + self.rng.randrange(SPAN))
            _halve(t[tuple(index[:-1])][start:stop])
            return Change(t, tuple(index), start, stop)
        _halve(t)
        return Change(t, (), 0, 1)


# Float dtypes torch has no arithmetic kernels for (mul_ raises "not implemented" on the CPU and
# on CUDA): their span is halved through float32. Halving is exact there but for subnormals,
# which round to nearest even, the same on every device.
_NO_ARITHMETIC = {getattr(torch, name) for name in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)}


def _halve(span: torch.Tensor) -> None:
    if not span.is_floating_point():
        span.div_(2, rounding_mode="trunc")
    elif span.dtype in _NO_ARITHMETIC:
        span.copy_((span.float() * 0.5).to(span.dtype))
    else:
        span.mul_(0.5)


class Replay:
    """Input sets brought forward call by call: advance(call) applies the changes made before
    every submission call up to `call`, so the inputs of several timed calls, visited in
    ascending order, are rebuilt from one draw of the sets.

    per_call_all_sets: graph timing changes every set before each replay; call-by-call timing
    changes only the set the call uses (set `call % len(sets)`).
    """

    def __init__(self, sets: list, seed: int, per_call_all_sets: bool):
        self.sets = sets
        self._perturb = Perturber(seed)
        self._all_sets = per_call_all_sets
        self.applied = -1  # the last call whose change the sets hold
        self.changes: list[list[Change]] = [[] for _ in sets]  # per set, every change since the draw

    def advance(self, call: int) -> None:
        if call < self.applied:
            raise ValueError(f"the sets already hold the changes up to call {self.applied}: "
                             f"draw them again to rebuild call {call}")
        for c in range(self.applied + 1, call + 1):
            for i in (range(len(self.sets)) if self._all_sets else (c % len(self.sets),)):
                change = self._perturb(self.sets[i])
                if change is not None:
                    self.changes[i].append(change)
        self.applied = max(self.applied, call)


def replay(sets: list, seed: int, calls: int, per_call_all_sets: bool) -> None:
    """Apply, in place, the changes made before the first `calls` + 1 submission calls."""
    Replay(sets, seed, per_call_all_sets).advance(calls)
