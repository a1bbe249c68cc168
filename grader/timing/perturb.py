"""The change made to the timed inputs before every call, replayable from a seed.

Before each timed call of the submission, every floating-point input of the call's set is changed
densely: a random half of its elements is halved, the elements halved before the previous call
are doubled back first, so every element is always its drawn value or half of it (finite, same
sign: valid wherever the input was). A kata with no float input (an INT8 GEMM) has its integer
inputs changed the same way, halved toward zero (sign and range kept, so a valid index stays
valid).

Why dense: no call sees the contents of an earlier one, so a cache keyed on the contents misses;
and a kernel that keeps its previous inputs and result cannot patch that result cheaply. A change
confined to a short span would let a compute-bound submission diff its inputs and correct its
last result (a rank-k update of a GEMM, the changed rows of an attention) far faster than doing
the work, padded above the physical floor where no correctness check can see it. With half of
every input changed, the correction costs what the work costs.

The masks come from a `random.Random` seeded per case, consumed by the submission's calls alone,
and from torch generators seeded by it on the inputs' device, so the trusted checker, drawing the
same sets on the same device, can replay them and rebuild the exact inputs of any timed call.
"""

from __future__ import annotations

import random

import torch

PIECE = 1 << 24  # elements changed per step: bounds the masks' memory on a large input

# Bound here, before the submission is imported (grader.sandbox.integrity watches the public
# names): a submission that patched them to make the changes vanish changes nothing.
_Generator = torch.Generator
_randint = torch.randint
_exp2 = torch.exp2
_sub = torch.sub
_neg = torch.neg
_mul_ = torch.Tensor.mul_
_copy_ = torch.Tensor.copy_


def tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


def changed_tensors(args) -> list[torch.Tensor]:
    """The tensors of a call's arguments the timing changes: the floating-point ones, or the
    integer ones where there is no float input."""
    floats = [t for t in tensors(args) if t.is_floating_point() and t.numel()]
    if floats:
        return floats
    return [t for t in tensors(args) if t.dtype != torch.bool and t.numel()]


class Perturber:
    """perturb(args) changes, in place, every tensor of changed_tensors(args): before, each
    element is its drawn value times 2**-m_prev (m_prev: the mask of args' previous change, 0
    before the first); after, times 2**-m_new, with m_new a fresh random mask."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self._last: dict[int, tuple[object, int]] = {}  # id(args) -> (args, key of its last change)

    def __call__(self, args) -> None:
        key = self.rng.getrandbits(63)  # drawn even where nothing changes: replay stays in step
        held = self._last.get(id(args))
        previous = held[1] if held is not None and held[0] is args else None
        self._last[id(args)] = (args, key)
        targets = changed_tensors(args)
        if not targets:
            return
        new_masks = _Masks(key, targets[0].device)
        old_masks = _Masks(previous, targets[0].device) if previous is not None else None
        for t in targets:
            for piece in _pieces(t):
                new = new_masks.next(piece)
                old = old_masks.next(piece) if old_masks is not None else None
                _rescale(piece, new if old is None else _sub(new, old))


class _Masks:
    """Masks of 0 and 1 (int8), one per piece, in order, from a generator seeded with `key`."""

    def __init__(self, key: int, device: torch.device):
        self.generator = _Generator(device=device)
        self.generator.manual_seed(key)
        self.device = device

    def next(self, piece: torch.Tensor) -> torch.Tensor:
        return _randint(0, 2, piece.shape, generator=self.generator, device=self.device,
                        dtype=torch.int8)


def _pieces(t: torch.Tensor):
    """Views of t, together all of it, of at most PIECE elements (a 1-D run where one row is
    larger)."""
    if t.numel() <= PIECE or t.dim() == 0:
        yield t
    elif t.dim() == 1:
        for start in range(0, t.shape[0], PIECE):
            yield t[start:start + PIECE]
    else:
        rows = max(1, PIECE // (t.numel() // t.shape[0]))
        for start in range(0, t.shape[0], rows):
            piece = t[start:start + rows]
            if piece.numel() > PIECE:  # one row of it is larger than a piece
                yield from _pieces(piece[0])
            else:
                yield piece


# Float dtypes torch has no arithmetic kernels for (mul_ raises "not implemented" on the CPU and
# on CUDA): they are rescaled through float32.
_NO_ARITHMETIC = {getattr(torch, name) for name in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)}


def _rescale(piece: torch.Tensor, halvings: torch.Tensor) -> None:
    """piece *= 2**-halvings (halvings in {-1, 0, 1}). Multiplying by a power of two is exact in
    every float format but where a halved value is subnormal, which rounds to nearest even, the
    same on every device; integers are halved toward zero."""
    factor = _exp2(_neg(halvings))  # float32
    if not piece.is_floating_point():
        _copy_(piece, _mul_(piece.double(), factor).trunc_())
    elif piece.dtype in _NO_ARITHMETIC:
        _copy_(piece, _mul_(piece.float(), factor))
    else:
        _mul_(piece, factor)


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

    def advance(self, call: int) -> None:
        if call < self.applied:
            raise ValueError(f"the sets already hold the changes up to call {self.applied}: "
                             f"draw them again to rebuild call {call}")
        for c in range(self.applied + 1, call + 1):
            for i in (range(len(self.sets)) if self._all_sets else (c % len(self.sets),)):
                self._perturb(self.sets[i])
        self.applied = max(self.applied, call)


def replay(sets: list, seed: int, calls: int, per_call_all_sets: bool) -> None:
    """Apply, in place, the changes made before the first `calls` + 1 submission calls."""
    Replay(sets, seed, per_call_all_sets).advance(calls)
